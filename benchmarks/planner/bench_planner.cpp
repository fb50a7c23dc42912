// bench_planner - how long the format planner takes, per node, on models::bottleneck_chain networks
// of 10^2 .. 10^5 nodes (10 * blocks + 2 nodes; blocks 10, 100, 1000, 10000).
//
// Benchmark names:
//   BM_solve/<blocks>/<mixed>          solve(): the optimum plus every flip_delta and saving
//   BM_solve_explain/<blocks>/<mixed>  solve() and explain()'s full text: what a user waits for
//   BM_build/<blocks>                  building the network alone (name index, shape inference)
//   BM_load_network_chain/<blocks>     `memfmt plan` on a network JSON file of a chain of 10 * blocks
//                                      activations: the file read, the network rebuilt, solve + explain
//   BM_load_onnx_chain/<blocks>        the same on an ONNX model of 10 * blocks Relu nodes (import_file)
// mixed 0: the default priors; 1: batch norm indifferent, so the plan converts inside every block.
// Counters: nodes, time_per_node (CPU time per iteration / nodes), conversions of the plan. The
// loading rows show whether reading a model grows linearly with its size (time_per_node flat).
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "memfmt/graph/explain.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/solve.hpp"
#if MEMFMT_BENCH_HAVE_GRAPH_IO
#include "memfmt/io/network_json.hpp"
#endif
#if MEMFMT_BENCH_HAVE_ONNX
#include <onnx/onnx_pb.h>

#include "memfmt/onnx/import.hpp"
#endif

namespace {

using namespace memfmt::graph;
using memfmt::format_family;

models::options workload() {
  models::options o;
  o.batch = 8;
  o.resolution = 28;
  o.output_format = format_family::channels_last;
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
  if (state.range(1) == 1)
    p.batch_norm_channels_last_speedup_fp32 = p.batch_norm_channels_last_speedup_low_precision = 1.0;
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

// ---- loading: the file read and planned, as `memfmt plan FILE` does ----

// A file in the temporary folder, removed when the benchmark ends.
struct temp_file {
  explicit temp_file(const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("memfmt_bench_" + std::to_string(::getpid()) + "_" + name))
                 .string()) {}
  ~temp_file() { std::remove(path.c_str()); }
  std::string path;
};

// Plans what was loaded, as `memfmt plan` does after reading a file.
void plan_loaded(const network& net) {
  const cost_model model;
  const plan p = solve(net, model);
  std::string text = explain(net, model, p);
  benchmark::DoNotOptimize(text);
}

#if MEMFMT_BENCH_HAVE_GRAPH_IO
void BM_load_network_chain(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0)) * 10;
  network net;
  node_id x = net.input("input", {1, 8, 4, 4}, memfmt::dtype::float32, format_family::channels_first);
  for (std::size_t i = 0; i < n; ++i) x = net.activation("act" + std::to_string(i), x, memfmt::activation::relu);
  net.output("output", x, format_family::channels_first);
  const temp_file f("chain.json");
  memfmt::io::write_network_file(f.path, net);
  for (auto _ : state) plan_loaded(memfmt::io::read_network_file(f.path));
  per_node(state, net.size());
}
BENCHMARK(BM_load_network_chain)->RangeMultiplier(10)->Range(10, 10000)->Unit(benchmark::kMillisecond);
#endif

#if MEMFMT_BENCH_HAVE_ONNX
void BM_load_onnx_chain(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0)) * 10;
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("v0");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
  for (std::int64_t d : {1, 8, 4, 4})
    in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  for (std::size_t i = 0; i < n; ++i) {
    auto* node = g->add_node();
    node->set_op_type("Relu");
    node->set_name("relu" + std::to_string(i));
    node->add_input("v" + std::to_string(i));
    node->add_output("v" + std::to_string(i + 1));
  }
  g->add_output()->set_name("v" + std::to_string(n));
  const temp_file f("chain.onnx");
  {
    std::ofstream out(f.path, std::ios::binary);
    m.SerializeToOstream(&out);
  }
  std::size_t nodes = 0;
  for (auto _ : state) {
    const memfmt::onnx::imported_model im = memfmt::onnx::import_file(f.path);
    nodes = im.network.size();
    plan_loaded(im.network);
  }
  per_node(state, nodes);
}
BENCHMARK(BM_load_onnx_chain)->RangeMultiplier(10)->Range(10, 10000)->Unit(benchmark::kMillisecond);
#endif

BENCHMARK(BM_build)->RangeMultiplier(10)->Range(10, 10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_solve)->ArgsProduct({{10, 100, 1000, 10000}, {0, 1}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_solve_explain)->ArgsProduct({{10, 100, 1000, 10000}, {0, 1}})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
