// bench_network - the trunk of the models header's ResNet-50 (stem, max pool, 16 bottlenecks; no
// global pool / fc) in forward inference, NCHW vs NHWC vs the format planner's plan, through
// memfmt::onednn::backend (CPU). What is run and fused: resnet_executor.hpp.
//
// Benchmark names: BM_network/resnet50/<f32|bf16>/fwd/<variant>
//   nchw              every layer channels_first
//   nhwc              every layer channels_last; the NCHW image is converted once at the start
//   planned           memfmt::graph::solve() with the default cost_model (its priors)
//   planned_measured  solve() with each conv's cost overridden by its time in both formats,
//                     measured in this process (median of 3 runs after a warm-up)
// Counters: ms_per_batch, images_per_s, conversions (executed per pass), conversion_ms (time in
// memfmt::convert per pass, measured around each call). Label: convs run channels_last, fused
// BN groups.
// Correctness (cannot be skipped): before the first timing of a dtype every variant runs once on the
// same logical image and weights and its output is compared, in logical order, with the nchw
// variant's; a normalized max error (max |a - b| / max |nchw|) above 1e-4 (f32) / 3e-2 (bf16)
// turns every benchmark of that dtype into an error naming the variant and the error.
//
// Quick mode (default): batch 2, 224x224, min time 0.5 s.
// Environment: MEMFMT_BENCH_BATCH, MEMFMT_BENCH_RESOLUTION, MEMFMT_BENCH_MIN_TIME,
// MEMFMT_BENCH_EXPLAIN=1 (print the plans).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <memfmt/backends/dnnl/backend.hpp>
#include <memfmt/graph/cost_model.hpp>
#include <memfmt/graph/explain.hpp>
#include <memfmt/graph/plan.hpp>
#include <memfmt/graph/solve.hpp>

#include "resnet_executor.hpp"

namespace {

using namespace memfmt;
using namespace memfmt_network;

using memfmt_bench::env_double;
using memfmt_bench::env_int;

const std::int64_t batch = env_int("MEMFMT_BENCH_BATCH", 2);
const std::int64_t resolution = env_int("MEMFMT_BENCH_RESOLUTION", 224);
// A pass takes 20-250 ms: the default gives every variant a few passes (the per-layer suites use 0.05).
const double min_time = env_double("MEMFMT_BENCH_MIN_TIME", 0.5);
const bool print_plans = env_int("MEMFMT_BENCH_EXPLAIN", 0) != 0;

onednn::backend& shared_backend() {
  static onednn::backend b;
  return b;
}

enum class variant { nchw, nhwc, planned, planned_measured };
constexpr variant all_variants[] = {variant::nchw, variant::nhwc, variant::planned, variant::planned_measured};

const char* variant_name(variant v) {
  switch (v) {
    case variant::nchw: return "nchw";
    case variant::nhwc: return "nhwc";
    case variant::planned: return "planned";
    case variant::planned_measured: return "planned_measured";
  }
  return "?";
}

template <class T>
const char* dtype_name() {
  return std::is_same_v<T, float> ? "f32" : "bf16";
}

// Seconds of one call, median of `reps` after a warm-up.
template <class Fn>
double median_seconds(int reps, Fn&& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

// Per dtype: the model (built once; its weights are shared by every variant), the plans, the check.
template <class T>
struct dtype_state {
  resnet_model<T> model;
  std::optional<graph::plan> planned, measured;  // solved once, for the check and the timed run
  std::optional<std::string> check_error;  // set once the check ran; empty: the variants agree

  dtype_state() : model(config()) {}

  static resnet_config config() {
    resnet_config c;
    c.batch = batch;
    c.resolution = resolution;
    return c;
  }

  // Every conv timed alone in both formats (same shapes, same weights), as the cost_model's costs (ns).
  graph::cost_model measured_model() {
    graph::cost_model cm;
    auto& b = shared_backend();
    for (const auto& n : model.net.nodes()) {
      if (n.kind != graph::node_kind::conv || n.id > model.output) continue;
      const auto& xe = model.net.at(n.inputs[0]).extents;
      const auto& l = model.convs[n.id];
      const conv_params params = n.template get<graph::conv_attrs>().params;
      double ns[2] = {0, 0};
      for (family f : {family::channels_first, family::channels_last})
        with_format(f, [&](auto tag) {
          using F = decltype(tag);
          host_tensor<T, F> x({xe[0], xe[1], xe[2], xe[3]}), y({n.extents[0], n.extents[1], n.extents[2], n.extents[3]});
          fill_logical(x.view(), 7u);
          ns[graph::index(f)] = 1e9 * median_seconds(3, [&] {
            b.conv_forward(x.const_view(), l.weight.const_view(), static_cast<const T*>(nullptr), y.view(), params);
          });
        });
      cm.override_node(model.net, n.id, static_cast<graph::cost_t>(ns[0]), static_cast<graph::cost_t>(ns[1]),
                       "measured in this process (median of 3)");
    }
    return cm;
  }

  graph::plan plan_for(variant v) {
    const graph::cost_model priors;
    switch (v) {
      case variant::nchw: return graph::make_plan(model.net, priors, uniform_assignment(model.net, family::channels_first));
      case variant::nhwc: return graph::make_plan(model.net, priors, uniform_assignment(model.net, family::channels_last));
      case variant::planned:
        if (!planned) planned = graph::solve(model.net, priors);
        return *planned;
      case variant::planned_measured:
        if (!measured) {
          const graph::cost_model cm = measured_model();
          measured = graph::solve(model.net, cm);
          if (print_plans)
            std::fprintf(stderr, "=== %s planned_measured ===\n%s\n", dtype_name<T>(),
                         graph::explain(model.net, cm, *measured).c_str());
        }
        return *measured;
    }
    return graph::solve(model.net, priors);
  }

  // Runs every variant once and compares its output with the nchw variant's (logical order).
  const std::string& check() {
    if (check_error) return *check_error;
    check_error = std::string();
    std::optional<host_tensor<T, nchw>> ref;
    for (variant v : all_variants) {
      const graph::plan p = plan_for(v);
      if (print_plans && v == variant::planned)
        std::fprintf(stderr, "=== %s planned ===\n%s\n", dtype_name<T>(),
                     graph::explain(model.net, graph::cost_model{}, p).c_str());
      executor<T, onednn::backend> ex(shared_backend(), model, p);
      ex.run();
      host_tensor<T, nchw> out = ex.output_nchw();
      if (!ref) {
        ref = std::move(out);
        continue;
      }
      const double err = normalized_max_error(out, *ref);
      if (!(err <= network_tolerance<T>())) {
        check_error = std::string("output of ") + variant_name(v) + " differs from nchw: normalized max error " +
                      std::to_string(err) + " > " + std::to_string(network_tolerance<T>());
        break;
      }
    }
    return *check_error;
  }
};

template <class T>
dtype_state<T>& state_of() {
  static dtype_state<T> s;
  return s;
}

template <class T>
void bm_network(benchmark::State& state, variant v) {
  try {
    auto& st = state_of<T>();
    const std::string& err = st.check();
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      return;
    }
    const graph::plan p = st.plan_for(v);
    executor<T, onednn::backend> ex(shared_backend(), st.model, p);
    ex.run();  // warm-up: primitives, weight reorders
    double conversion_s = 0;
    std::int64_t iters = 0, conversions = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (auto _ : state) {
      const pass_stats s = ex.run();
      conversion_s += s.conversion_seconds;
      conversions = s.conversions;
      ++iters;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (iters == 0 || s <= 0) return;
    state.counters["ms_per_batch"] = s / static_cast<double>(iters) * 1e3;
    state.counters["images_per_s"] = static_cast<double>(batch * iters) / s;
    state.counters["conversions"] = static_cast<double>(conversions);
    state.counters["conversion_ms"] = conversion_s / static_cast<double>(iters) * 1e3;
    std::int64_t convs_last = 0;
    for (const auto& n : st.model.net.nodes())
      convs_last += n.kind == graph::node_kind::conv && n.id <= st.model.output && p.format(n.id) == family::channels_last;
    state.SetLabel(std::to_string(convs_last) + "/" + std::to_string(st.model.conv_count()) +
                   " convs channels_last, " + std::to_string(ex.fused_groups()) + " fused BN groups, batch " +
                   std::to_string(batch) + ", " + std::to_string(resolution) + "x" + std::to_string(resolution));
  } catch (const std::exception& e) {  // memfmt::error, oneDNN's errors arrive as memfmt::error too
    state.SkipWithError(e.what());
  }
}

template <class T>
void register_network() {
  for (variant v : all_variants) {
    const std::string name = std::string("BM_network/resnet50/") + dtype_name<T>() + "/fwd/" + variant_name(v);
    benchmark::RegisterBenchmark(name.c_str(), [v](benchmark::State& s) { bm_network<T>(s, v); })
        ->MinTime(min_time)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_network<float>();
  register_network<bfloat16>();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
