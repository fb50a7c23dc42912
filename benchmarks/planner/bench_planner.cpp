// bench_planner - how long the format planner takes, per node, on models::bottleneck_chain networks
// of 10^2 .. 10^5 nodes (10 * blocks + 2 nodes; blocks 10, 100, 1000, 10000).
//
// Benchmark names:
//   BM_solve/<blocks>/<mixed>          solve(): the optimum plus every flip_delta and saving
//   BM_solve_explain/<blocks>/<mixed>  solve() and explain()'s full text: what a user waits for
//   BM_build/<blocks>                  building the network alone (name index, shape inference)
// mixed 0: the default priors; 1: batch norm indifferent, so the plan converts inside every block.
// Counters: nodes, time_per_node (CPU time per iteration / nodes), conversions of the plan.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>

#include "memfmt/graph/explain.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/solve.hpp"

namespace {

using namespace memfmt::graph;

models::options workload() {
  models::options o;
  o.batch = 8;
  o.resolution = 28;
  o.output_format = family::channels_last;
  return o;
}

void per_node(benchmark::State& state, std::size_t nodes) {
  state.counters["nodes"] = static_cast<double>(nodes);
  // An inverted iteration-invariant rate: seconds per node (printed with an SI prefix: 2.8u = 2.8 us).
  state.counters["time_per_node"] = benchmark::Counter(
      static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// Arg 1: 0 the default priors (batch norm's NHWC speed-up pulls every layer one way), 1 batch norm
// indifferent, so 1x1 and 3x3 convs pull apart and the plan converts inside every block.
cost_model priced(const benchmark::State& state) {
  cost_priors p;
  if (state.range(1) == 1) p.batch_norm_channels_last_speedup_fp32 = p.batch_norm_channels_last_speedup_low_precision = 1.0;
  return cost_model(p);
}

void BM_build(benchmark::State& state) {
  const auto blocks = static_cast<std::size_t>(state.range(0));
  std::size_t nodes = 0;
  for (auto _ : state) {
    network net = models::bottleneck_chain(blocks, workload());
    nodes = net.size();
    benchmark::DoNotOptimize(net);
  }
  per_node(state, nodes);
}

void BM_solve(benchmark::State& state) {
  const network net = models::bottleneck_chain(static_cast<std::size_t>(state.range(0)), workload());
  const cost_model model = priced(state);
  std::size_t conversions = 0;
  for (auto _ : state) {
    plan p = solve(net, model);
    conversions = p.copies();
    benchmark::DoNotOptimize(p);
  }
  per_node(state, net.size());
  state.counters["conversions"] = static_cast<double>(conversions);
}

void BM_solve_explain(benchmark::State& state) {
  const network net = models::bottleneck_chain(static_cast<std::size_t>(state.range(0)), workload());
  const cost_model model = priced(state);
  for (auto _ : state) {
    const plan p = solve(net, model);
    std::string text = explain(net, model, p);
    benchmark::DoNotOptimize(text);
  }
  per_node(state, net.size());
}

BENCHMARK(BM_build)->RangeMultiplier(10)->Range(10, 10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_solve)->ArgsProduct({{10, 100, 1000, 10000}, {0, 1}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_solve_explain)->ArgsProduct({{10, 100, 1000, 10000}, {0, 1}})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
