// bench_network - whole networks of graph/models.hpp in forward inference through the library's
// executor (runtime/executor.hpp) on memfmt::onednn::backend (CPU), one plan per format policy.
//
// Benchmark names: BM_network/<model>/<f32|bf16>/fwd/<policy>, policy one of graph/policy.hpp's
//   all_channels_first, all_channels_last, pytorch_eager, optimal (solve() with the priors and
//   oneDNN's capability query).
// Models (random parameters, runtime/random_parameters.hpp): resnet50, mobilenet_v2, unet,
// resnext50_32x4d, vgg16_bn, r3d_18, at sizes that keep a case short (below).
// Counters: ms_per_batch, images_per_s, conversions (per pass), arena_bytes (the activation arena,
// liveness reuse), arena_ratio (arena / one buffer per value), fusions (fused groups), and
// overhead_pct: the share of a forward pass spent outside backend calls (conversions, input and
// output copies, the executor's own work), from a few extra passes with every backend call timed.
// Correctness (cannot be skipped): before the first timing of a model and dtype every policy runs
// once and its output is compared with all_channels_first's; a normalized max error
// (max |a - b| / max |reference|) above 1e-4 (f32) / 3e-2 (bf16) turns every benchmark of that
// model and dtype into an error naming the policy and the error. bf16 where oneDNN computes in it
// on this CPU, else an error naming the ISA it needs.
//
// Environment: MEMFMT_BENCH_BATCH (2), MEMFMT_BENCH_RESOLUTION (every 2-D model's input size;
// default per model), MEMFMT_BENCH_MIN_TIME (0.5 s), MEMFMT_BENCH_EXPLAIN=1 (print the optimal plans).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <memfmt/backends/dnnl/backend.hpp>
#include <memfmt/graph/cost_model.hpp>
#include <memfmt/graph/explain.hpp>
#include <memfmt/graph/models.hpp>
#include <memfmt/graph/policy.hpp>
#include <memfmt/runtime/backend_support.hpp>
#include <memfmt/runtime/executor.hpp>
#include <memfmt/runtime/random_parameters.hpp>

#include "../common/bench_util.hpp"

namespace {

using namespace memfmt;
namespace models = graph::models;

using memfmt_bench::env_double;
using memfmt_bench::env_int;

const std::int64_t batch = env_int("MEMFMT_BENCH_BATCH", 2);
const std::int64_t resolution_override = env_int("MEMFMT_BENCH_RESOLUTION", 0);
const double min_time = env_double("MEMFMT_BENCH_MIN_TIME", 0.5);
const bool print_plans = env_int("MEMFMT_BENCH_EXPLAIN", 0) != 0;

constexpr graph::policy policies[] = {graph::policy::all_channels_first, graph::policy::all_channels_last,
                                      graph::policy::pytorch_eager, graph::policy::optimal};

struct model_case {
  const char* name;
  graph::network (*build)(const models::options&);
  std::int64_t resolution;  // a pass of a few tens to hundreds of ms on a few cores
  std::int64_t frames = 16;
};

const model_case model_cases[] = {
    {"resnet50", models::resnet50, 160},
    {"mobilenet_v2", models::mobilenet_v2, 224},
    {"unet", models::unet, 96},
    {"resnext50_32x4d", models::resnext50_32x4d, 160},
    {"vgg16_bn", models::vgg16_bn, 224},  // 32 or a multiple of 224 (its classifier pools to 7x7)
    {"r3d_18", models::r3d_18, 56, 8},
};

onednn::backend& shared_backend() {
  static onednn::backend b;
  return b;
}

// The oneDNN backend with every call timed: the time spent inside the backend during a pass.
struct timed_backend {
  static constexpr const char* name = "onednn";
  onednn::backend& b;
  double seconds = 0;

  op_support support(const op_query& q) const { return b.support(q); }
  void invalidate_weights(const void* w) { b.invalidate_weights(w); }

  template <class Fn>
  void timed(Fn&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // clang-format off
  template <class... A> void conv_forward(A&&... a) { timed([&] { b.conv_forward(std::forward<A>(a)...); }); }
  template <class... A> void conv_backward_data(A&&... a) { timed([&] { b.conv_backward_data(std::forward<A>(a)...); }); }
  template <class... A> void batch_norm_forward_inference(A&&... a) { timed([&] { b.batch_norm_forward_inference(std::forward<A>(a)...); }); }
  template <class... A> void group_norm_forward(A&&... a) { timed([&] { b.group_norm_forward(std::forward<A>(a)...); }); }
  template <class... A> void activation_forward(A&&... a) { timed([&] { b.activation_forward(std::forward<A>(a)...); }); }
  template <class... A> void binary_forward(A&&... a) { timed([&] { b.binary_forward(std::forward<A>(a)...); }); }
  template <class... A> void pool_forward(A&&... a) { timed([&] { b.pool_forward(std::forward<A>(a)...); }); }
  template <class... A> void global_average_pool_forward(A&&... a) { timed([&] { b.global_average_pool_forward(std::forward<A>(a)...); }); }
  template <class... A> void upsample_forward(A&&... a) { timed([&] { b.upsample_forward(std::forward<A>(a)...); }); }
  template <class... A> void pad_forward(A&&... a) { timed([&] { b.pad_forward(std::forward<A>(a)...); }); }
  template <class... A> void softmax_forward(A&&... a) { timed([&] { b.softmax_forward(std::forward<A>(a)...); }); }
  template <class... A> void linear_forward(A&&... a) { timed([&] { b.linear_forward(std::forward<A>(a)...); }); }
  template <class... A> void concat_forward(A&&... a) { timed([&] { b.concat_forward(std::forward<A>(a)...); }); }
  template <class... A> void channel_slice_forward(A&&... a) { timed([&] { b.channel_slice_forward(std::forward<A>(a)...); }); }
  // clang-format on
};

const char* dtype_name(dtype t) { return t == dtype::float32 ? "f32" : "bf16"; }

// One model in one dtype: the network, its parameters and input, the plans, the check.
struct case_state {
  graph::network net;
  runtime::parameter_store params;
  std::vector<std::byte> input, output;  // in the network's dtype, channels_first
  std::map<graph::policy, graph::plan> plans;
  std::optional<std::string> check_error;  // set once the check ran; empty: the policies agree

  case_state(const model_case& m, dtype t) {
    models::options o;
    o.batch = batch;
    o.resolution = resolution_override > 0 && m.frames == 16 ? resolution_override : m.resolution;
    o.frames = m.frames;
    o.type = t;
    net = m.build(o);
    params = runtime::random_parameters(net, 1);
    const graph::node& in = net.at(*net.find("input"));
    const graph::node& out = net.at(*net.find("output"));
    input.resize(static_cast<std::size_t>(in.numel()) * size_of(t));
    output.resize(static_cast<std::size_t>(out.numel()) * size_of(t));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (std::int64_t i = 0; i < in.numel(); ++i) {
      if (t == dtype::float32) reinterpret_cast<float*>(input.data())[i] = d(rng);
      else reinterpret_cast<bfloat16*>(input.data())[i] = bfloat16(d(rng));
    }
  }

  const graph::plan& plan_for(graph::policy p, const char* model) {
    auto it = plans.find(p);
    if (it != plans.end()) return it->second;
    graph::cost_model cm;
    cm.set_support_query(runtime::support_query_for(shared_backend()));
    graph::plan plan = graph::plan_with(net, cm, p);
    if (print_plans && p == graph::policy::optimal)
      std::fprintf(stderr, "=== %s %s optimal ===\n%s\n", model, dtype_name(net.at(0).type),
                   graph::explain(net, cm, plan).c_str());
    return plans.emplace(p, std::move(plan)).first->second;
  }

  std::map<std::string, runtime::tensor_ref> io(graph::node_kind k) {
    const graph::node& n = net.at(*net.find(k == graph::node_kind::input ? "input" : "output"));
    void* data = k == graph::node_kind::input ? static_cast<void*>(input.data()) : static_cast<void*>(output.data());
    return {{n.name, runtime::tensor_ref{n.type, n.extents, graph::family::channels_first, data}}};
  }

  template <class Backend>
  void forward(runtime::executor<Backend>& ex) {
    ex.forward(io(graph::node_kind::input), io(graph::node_kind::output));
  }

  std::vector<double> output_values() const {
    std::vector<double> v(output.size() / size_of(net.at(0).type));
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = net.at(0).type == dtype::float32 ? reinterpret_cast<const float*>(output.data())[i]
                                               : static_cast<float>(reinterpret_cast<const bfloat16*>(output.data())[i]);
    return v;
  }

  // Runs every policy once and compares its output with all_channels_first's.
  const std::string& check(const char* model) {
    if (check_error) return *check_error;
    check_error = std::string();
    const double tolerance = net.at(0).type == dtype::float32 ? 1e-4 : 3e-2;
    std::vector<double> ref;
    for (graph::policy p : policies) {
      runtime::executor<onednn::backend> ex(net, plan_for(p, model), shared_backend(), params);
      forward(ex);
      std::vector<double> out = output_values();
      if (ref.empty()) {
        ref = std::move(out);
        continue;
      }
      double scale = 0, err = 0;
      for (std::size_t i = 0; i < ref.size(); ++i) {
        scale = std::max(scale, std::fabs(ref[i]));
        err = std::max(err, std::isnan(out[i]) ? INFINITY : std::fabs(out[i] - ref[i]));
      }
      err /= std::max(scale, 1e-30);
      if (!(err <= tolerance)) {
        check_error = std::string("output of ") + graph::to_string(p) + " differs from all_channels_first: "
                      "normalized max error " + std::to_string(err) + " > " + std::to_string(tolerance);
        break;
      }
    }
    return *check_error;
  }
};

case_state& state_of(const model_case& m, dtype t) {
  static std::map<std::pair<std::string, dtype>, std::unique_ptr<case_state>> states;
  auto& s = states[{m.name, t}];
  if (!s) s = std::make_unique<case_state>(m, t);
  return *s;
}

void bm_network(benchmark::State& state, const model_case& m, dtype t, graph::policy p) {
  try {
    if (const auto s = onednn::support_for(t); !s.supported) {
      state.SkipWithError(s.reason.c_str());
      return;
    }
    case_state& st = state_of(m, t);
    const std::string& err = st.check(m.name);
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      return;
    }
    const graph::plan& plan = st.plan_for(p, m.name);
    runtime::executor<onednn::backend> ex(st.net, plan, shared_backend(), st.params);
    st.forward(ex);  // warm-up: primitives, weight reorders
    std::int64_t iters = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (auto _ : state) {
      st.forward(ex);
      ++iters;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (iters == 0 || s <= 0) return;
    // The share outside the backend, from passes with every backend call timed.
    timed_backend tb{shared_backend()};
    runtime::executor<timed_backend> timed(st.net, plan, tb, st.params);
    st.forward(timed);
    tb.seconds = 0;
    constexpr int timed_passes = 2;
    const auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < timed_passes; ++i) st.forward(timed);
    const double whole = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();

    const runtime::executor_report& r = ex.report();
    state.counters["ms_per_batch"] = s / static_cast<double>(iters) * 1e3;
    state.counters["images_per_s"] = static_cast<double>(batch * iters) / s;
    state.counters["conversions"] = static_cast<double>(r.conversions);
    state.counters["arena_bytes"] = static_cast<double>(r.arena_bytes);
    state.counters["arena_ratio"] =
        r.allocate_all_bytes > 0 ? static_cast<double>(r.arena_bytes) / static_cast<double>(r.allocate_all_bytes) : 1.0;
    state.counters["fusions"] = static_cast<double>(r.fusions.size());
    state.counters["overhead_pct"] = whole > 0 ? 100.0 * (whole - tb.seconds) / whole : 0.0;
    std::int64_t convs = 0, convs_last = 0;
    for (const auto& n : st.net.nodes())
      if (n.kind == graph::node_kind::conv) {
        ++convs;
        convs_last += plan.format(n.id) == graph::family::channels_last;
      }
    const auto& in = st.net.at(*st.net.find("input")).extents;
    std::string size;
    for (std::size_t d = 2; d < in.size(); ++d) size += (d > 2 ? "x" : "") + std::to_string(in[d]);
    state.SetLabel(std::to_string(convs_last) + "/" + std::to_string(convs) + " convs channels_last, batch " +
                   std::to_string(batch) + ", " + size);
  } catch (const std::exception& e) {  // memfmt::error; oneDNN's errors arrive as memfmt::error too
    state.SkipWithError(e.what());
  }
}

void register_networks() {
  for (const model_case& m : model_cases)
    for (dtype t : {dtype::float32, dtype::bfloat16})
      for (graph::policy p : policies) {
        const std::string name =
            std::string("BM_network/") + m.name + "/" + dtype_name(t) + "/fwd/" + graph::to_string(p);
        benchmark::RegisterBenchmark(name.c_str(), [&m, t, p](benchmark::State& s) { bm_network(s, m, t, p); })
            ->MinTime(min_time)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
}

}  // namespace

int main(int argc, char** argv) {
  register_networks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
