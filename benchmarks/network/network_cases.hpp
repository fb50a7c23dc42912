// network_cases.hpp - what bench_network (oneDNN, CPU) and bench_network_cudnn (cuDNN, GPU) share:
// the models and their sizes, the plans per policy (calibrated ones included), the correctness
// checks that gate every row, the counters, the row names and their registration. What differs per
// backend (the backend object, which dtypes it refuses, waiting for its queued work, tolerances,
// extra counters) comes in a binding: a struct with
//   using backend_type = ...;                          the memfmt backend the executor runs on
//   static constexpr const char* prefix;               "BM_network" (row names <prefix>/<model>/...)
//   static backend_type& backend();                    the process's backend (may throw: no device)
//   static std::string refuses(dtype);                 why the backend cannot run a dtype, else ""
//   static void finish(backend_type&);                 waits for queued work (a pass's clock stops after)
//   static check_tolerances tolerances();              of the correctness checks
//   static void forward_extras(benchmark::State&, case_state<backend_type>&, const graph::plan&);
// Environment (read by read_settings): MEMFMT_BENCH_BATCH, MEMFMT_BENCH_RESOLUTION,
// MEMFMT_BENCH_MIN_TIME, MEMFMT_BENCH_EXPLAIN, MEMFMT_BENCH_CALIBRATED, MEMFMT_BENCH_TRAIN,
// MEMFMT_BENCH_TIMING_CACHE, MEMFMT_BENCH_ONNX_DIR (bench_network.cpp's comment says what each does).
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <memfmt/graph/cost_model.hpp>
#include <memfmt/graph/explain.hpp>
#include <memfmt/graph/models.hpp>
#include <memfmt/graph/policy.hpp>
#include <memfmt/runtime/backend_support.hpp>
#include <memfmt/runtime/calibrate.hpp>
#include <memfmt/runtime/executor.hpp>
#include <memfmt/runtime/precision.hpp>
#include <memfmt/runtime/random_parameters.hpp>
#include <memfmt/runtime/select_plan.hpp>
#include <memfmt/runtime/training.hpp>
#if MEMFMT_BENCH_HAVE_GRAPH_IO
#include <memfmt/io/network_json.hpp>
#include <memfmt/io/timing_cache_json.hpp>
#endif
#if MEMFMT_BENCH_HAVE_ONNX
#include <memfmt/onnx/import.hpp>
#endif

#include "../common/bench_util.hpp"

namespace memfmt_bench::networks {

using namespace memfmt;
namespace models = graph::models;

inline std::string env_string(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The run's settings from the environment; read_settings fills them before any row is registered.
struct bench_settings {
  std::int64_t batch = 2;
  std::int64_t resolution_override = 0;
  double min_time = 0.5;
  bool print_plans = false;
  std::string timing_cache_path, onnx_dir;
};
inline bench_settings& settings() {
  static bench_settings s;
  return s;
}
// `default_batch`: MEMFMT_BENCH_BATCH's value when it is unset.
inline void read_settings(std::int64_t default_batch) {
  bench_settings& s = settings();
  s.batch = env_int("MEMFMT_BENCH_BATCH", default_batch);
  s.resolution_override = env_int("MEMFMT_BENCH_RESOLUTION", 0);
  s.min_time = env_double("MEMFMT_BENCH_MIN_TIME", 0.5);
  s.print_plans = env_int("MEMFMT_BENCH_EXPLAIN", 0) != 0;
  s.timing_cache_path = env_string("MEMFMT_BENCH_TIMING_CACHE");
  s.onnx_dir = env_string("MEMFMT_BENCH_ONNX_DIR");
}

// Whether `model` is in the comma-separated list of environment variable `name` ("all" or unset:
// every model; "none": none).
inline bool selected(const char* name, const std::string& model) {
  const std::string v = env_string(name);
  if (v.empty() || v == "all") return true;
  std::stringstream in(v);
  for (std::string m; std::getline(in, m, ',');)
    if (m == model) return true;
  return false;
}

// A plan to run: a policy with the priors, or optimal with calibrated costs.
struct variant {
  graph::policy policy;
  bool calibrated = false;
  std::string name() const { return calibrated ? "optimal_calibrated" : graph::to_string(policy); }
};

inline constexpr graph::policy policies[] = {graph::policy::all_channels_first, graph::policy::all_channels_last,
                                             graph::policy::pytorch_eager, graph::policy::optimal};

struct model_case {
  const char* name;
  graph::network (*build)(const models::options&);
  std::int64_t resolution;  // a pass of a few tens to hundreds of ms on a few cores
  std::int64_t frames = 16;

  std::int64_t run_resolution() const {
    const std::int64_t r = settings().resolution_override;
    return r > 0 && frames == 16 ? r : resolution;
  }
  // "batch <b>, <size>": the label of a row that did not run, so that it still names its case.
  std::string size_label() const {
    const std::string r = std::to_string(run_resolution());
    return "batch " + std::to_string(settings().batch) + ", " + (frames == 16 ? "" : std::to_string(frames) + "x") + r +
           "x" + r;
  }
  // tools/export_onnx.py's file of this model at this run's input size (bench_peers.py names it so).
  std::string onnx_file() const {
    const std::string r = std::to_string(run_resolution());
    return settings().onnx_dir + "/" + name + "_" + (frames == 16 ? "" : std::to_string(frames) + "x") + r + "x" + r +
           ".onnx";
  }
};

inline const model_case model_cases[] = {
    {"resnet50", models::resnet50, 160},
    {"mobilenet_v2", models::mobilenet_v2, 224},
    {"unet", models::unet, 96},
    {"resnext50_32x4d", models::resnext50_32x4d, 160},
    {"vgg16_bn", models::vgg16_bn, 224},  // 32 or a multiple of 224 (its classifier pools to 7x7)
    {"r3d_18", models::r3d_18, 56, 8},
    {"shufflenet_v2_x1_0", models::shufflenet_v2_x1_0, 224},
    {"convnext_tiny", models::convnext_tiny, 224},
};

inline const char* dtype_name(dtype t) { return t == dtype::float32 ? "f32" : t == dtype::float16 ? "f16" : "bf16"; }

inline std::vector<double> as_doubles(const std::byte* p, std::size_t bytes, dtype t) {
  std::vector<double> v(bytes / size_of(t));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = t == dtype::float32   ? reinterpret_cast<const float*>(p)[i]
           : t == dtype::float16 ? static_cast<float>(reinterpret_cast<const half*>(p)[i])
                                 : static_cast<float>(reinterpret_cast<const bfloat16*>(p)[i]);
  return v;
}

// max |out - ref| / max |ref|; infinite where out has a NaN.
inline double normalized_error(const std::vector<double>& ref, const std::vector<double>& out) {
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, std::fabs(ref[i]));
    err = std::max(err, std::isnan(out[i]) ? INFINITY : std::fabs(out[i] - ref[i]));
  }
  return err / std::max(scale, 1e-30);
}

// ||out - ref||_2 / max(||ref||_2, floor); infinite where out has a NaN.
inline double norm_error(const std::vector<double>& ref, const std::vector<double>& out, double floor) {
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    scale += ref[i] * ref[i];
    err += std::isnan(out[i]) ? INFINITY : (out[i] - ref[i]) * (out[i] - ref[i]);
  }
  return std::sqrt(err) / std::max({std::sqrt(scale), floor, 1e-30});
}

inline std::string exceeds(const std::string& what, const char* measure, double err, double tolerance) {
  return what + " differs from all_channels_first's: " + measure + " " + std::to_string(err) + " > " +
         std::to_string(tolerance);
}

// How far a policy's output (and, in float32, its gradients) may be from all_channels_first's:
// normalized max error of the forward output (float32; float16 and bfloat16), of one training
// step's output, and the gradients' relative norm error.
struct check_tolerances {
  double forward_f32, forward_16, train_f32, train_16, gradient;
};

// The timing cache of this process: the file's measurements (MEMFMT_BENCH_TIMING_CACHE) plus every
// calibration since; each calibration writes it back, so a later run times only what is new.
inline std::optional<graph::timing_cache>& process_timing_cache() {
  static std::optional<graph::timing_cache> cache;
  return cache;
}

// Costs measured on `backend` for `net`: what the cache lacks is timed, the rest reused. The cache
// key (calibration_key, found by argument-dependent lookup) names the device, so another
// machine's file is refused.
template <class Backend>
graph::timing_cache measured_costs(const graph::network& net, Backend& backend, double& seconds) {
  std::optional<graph::timing_cache>& known = process_timing_cache();
  const std::string& path = settings().timing_cache_path;
#if MEMFMT_BENCH_HAVE_GRAPH_IO
  if (!known && !path.empty() && std::filesystem::exists(path))
    known = io::read_timing_cache_file(path, calibration_key(backend));  // another device's file is an error
#else
  if (!path.empty())
    memfmt::detail::fail(errc::unsupported,
                         "MEMFMT_BENCH_TIMING_CACHE: this build has no memfmt::graph_io "
                         "(nlohmann-json) to read and write timing cache files");
#endif
  runtime::calibrate_options o;
  o.known = known ? &*known : nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  graph::timing_cache cache = runtime::calibrate(net, backend, o);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  known = cache;
#if MEMFMT_BENCH_HAVE_GRAPH_IO
  if (!path.empty()) io::write_timing_cache_file(path, cache);
#endif
  return cache;
}

// The plan's copies (relabels share bytes) timed one by one with the executor's conversion on
// `backend`, at their extents (calibrate's conversion timer): ms per pass. `and_back` adds the
// reverse conversion of each, as a training step converts the gradient back.
template <class Backend>
double conversion_ms(Backend& backend, const graph::network& net, const graph::plan& plan, bool and_back) {
  runtime::calibrate_options o;
  o.repetitions = 3;
  double ns = 0;
  for (const graph::conversion& c : plan.conversions) {
    if (c.relabel) continue;
    const graph::node& n = net.at(c.value);
    ns += static_cast<double>(runtime::detail::time_conversion_bytes(backend, n.extents, n.type, c.from, o));
    if (and_back)
      ns += static_cast<double>(runtime::detail::time_conversion_bytes(backend, n.extents, n.type, c.to, o));
  }
  return ns * 1e-6;
}

// One network in one dtype on one backend: its parameters and input, the plans, the checks.
template <class Backend>
struct case_state {
  Backend& backend;
  check_tolerances tolerances;
  std::string model;  // the benchmark name's model component
  graph::network net;
  graph::parameter_store params;
  std::string input_name, output_name;
  std::vector<std::byte> input, output, output_grad;  // in the network's dtype, channels_first
  std::map<std::string, graph::plan> plans;
  std::optional<std::string> check_error, train_check_error;  // set once a check ran; empty: they agree
  double calibration_s = 0;
  std::string calibrated_choice;  // which candidate select_plan kept for optimal_calibrated

  case_state(Backend& b, check_tolerances tol, std::string model_name, graph::network network,
             graph::parameter_store parameters, std::string in_name, std::string out_name)
      : backend(b),
        tolerances(tol),
        model(std::move(model_name)),
        net(std::move(network)),
        params(std::move(parameters)),
        input_name(std::move(in_name)),
        output_name(std::move(out_name)) {
    const graph::node& in = net.at(*net.find(input_name));
    const graph::node& out = net.at(*net.find(output_name));
    input.resize(static_cast<std::size_t>(in.numel()) * size_of(type()));
    output.resize(static_cast<std::size_t>(out.numel()) * size_of(type()));
    output_grad.resize(output.size());
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (std::int64_t i = 0; i < in.numel(); ++i) set(input, i, d(rng));
    // The gradient of the mean of the output, the loss bench_peers.py's training step uses.
    for (std::int64_t i = 0; i < out.numel(); ++i) set(output_grad, i, 1.f / static_cast<float>(out.numel()));
  }

  dtype type() const { return net.at(*net.find(input_name)).type; }
  void set(std::vector<std::byte>& v, std::int64_t i, float x) const {
    if (type() == dtype::float32) reinterpret_cast<float*>(v.data())[i] = x;
    else if (type() == dtype::float16) reinterpret_cast<half*>(v.data())[i] = half(x);
    else reinterpret_cast<bfloat16*>(v.data())[i] = bfloat16(x);
  }

  const graph::plan& plan_for(const variant& v) {
    auto it = plans.find(v.name());
    if (it != plans.end()) return it->second;
    graph::cost_model cm;
    cm.set_support_query(runtime::support_query_for(backend));
    if (v.calibrated) cm.set_timing_cache(measured_costs(net, backend, calibration_s));
    graph::plan plan = graph::plan_with(net, cm, v.policy);
    if (v.calibrated) {  // as runtime::channels_last returns it: the fastest of three, each run whole
      std::vector<runtime::plan_candidate> c{{"optimal_calibrated", std::move(plan)},
                                             {"optimal_priors", plan_for({graph::policy::optimal})},
                                             {"all_channels_last", plan_for({graph::policy::all_channels_last})}};
      const auto picked = runtime::select_plan(net, backend, params, c);
      calibrated_choice = c[picked.chosen].name;
      plan = std::move(c[picked.chosen].plan);
    }
    if (settings().print_plans && v.policy == graph::policy::optimal)
      std::fprintf(stderr, "=== %s %s %s ===\n%s\n", model.c_str(), dtype_name(type()), v.name().c_str(),
                   graph::explain(net, cm, plan).c_str());
    return plans.emplace(v.name(), std::move(plan)).first->second;
  }

  std::map<std::string, runtime::tensor_ref> ref(const std::string& name, std::vector<std::byte>& data) const {
    const graph::node& n = net.at(*net.find(name));
    return {{n.name, runtime::tensor_ref{n.type, n.extents, format_family::channels_first, data.data()}}};
  }

  template <class B>
  void forward(runtime::executor<B>& ex) {
    ex.forward(ref(input_name, input), ref(output_name, output));
  }
  graph::parameter_store train_step(runtime::trainer<Backend>& tr) {
    return tr.train_step(ref(input_name, input), ref(output_name, output), ref(output_name, output_grad));
  }

  std::vector<double> output_values() const { return as_doubles(output.data(), output.size(), type()); }

  // Runs every policy once and compares its output with all_channels_first's.
  const std::string& check() {
    if (check_error) return *check_error;
    check_error = std::string();
    const double tolerance = type() == dtype::float32 ? tolerances.forward_f32 : tolerances.forward_16;
    std::vector<double> reference;
    for (graph::policy p : policies) {
      runtime::executor<Backend> ex(net, plan_for({p}), backend, params);
      forward(ex);
      std::vector<double> out = output_values();
      if (reference.empty()) {
        reference = std::move(out);
        continue;
      }
      if (const double err = normalized_error(reference, out); !(err <= tolerance)) {
        check_error = exceeds(std::string("output of ") + graph::to_string(p), "normalized max error", err, tolerance);
        break;
      }
    }
    return *check_error;
  }

  // One training step per policy: its output and every gradient against all_channels_first's.
  const std::string& train_check() {
    if (train_check_error) return *train_check_error;
    train_check_error = std::string();
    const double tolerance = type() == dtype::float32 ? tolerances.train_f32 : tolerances.train_16;
    const double gradient_tolerance = tolerances.gradient;
    const bool compare_gradients = type() == dtype::float32;
    std::vector<double> reference;
    graph::parameter_store reference_grads;
    double mean_square = 0;  // of every reference gradient entry: the floor's magnitude
    for (graph::policy p : policies) {
      runtime::trainer<Backend> tr(net, plan_for({p}), backend, params);
      graph::parameter_store grads = train_step(tr);
      std::vector<double> out = output_values();
      if (reference.empty()) {
        reference = std::move(out);
        reference_grads = std::move(grads);
        double squares = 0, count = 0;
        for (const std::string& name : reference_grads.names()) {
          const graph::parameter& r = reference_grads.at(name);
          for (double v : as_doubles(r.bytes.data(), r.bytes.size(), r.type)) squares += v * v, count += 1;
        }
        mean_square = count > 0 ? squares / count : 0;
        continue;
      }
      const std::string who = std::string("training step of ") + graph::to_string(p) + ": ";
      if (const double err = normalized_error(reference, out); !(err <= tolerance)) {
        train_check_error = exceeds(who + "output", "normalized max error", err, tolerance);
        break;
      }
      if (!compare_gradients) continue;
      for (const std::string& name : reference_grads.names()) {
        const graph::parameter& r = reference_grads.at(name);
        const graph::parameter& g = grads.at(name);
        const std::vector<double> want = as_doubles(r.bytes.data(), r.bytes.size(), r.type);
        const std::vector<double> got = as_doubles(g.bytes.data(), g.bytes.size(), g.type);
        const double err = norm_error(want, got, std::sqrt(mean_square * static_cast<double>(want.size())));
        if (!(err <= gradient_tolerance)) {
          const auto norm = [](const std::vector<double>& v) {
            double q = 0;
            for (double e : v) q += e * e;
            return std::to_string(std::sqrt(q));
          };
          train_check_error = exceeds(who + "gradient of " + name, "relative norm error", err, gradient_tolerance) +
                              " (norms " + norm(got) + " and all_channels_first's " + norm(want) + ")";
          return *train_check_error;
        }
      }
    }
    return *train_check_error;
  }

  // "<k>/<n> convs channels_last, batch <b>, <size>": the label summarize.py and bench_peers.py read.
  std::string label(const graph::plan& plan) const {
    std::int64_t convs = 0, convs_last = 0;
    for (const auto& n : net.nodes())
      if (n.kind == layer_kind::conv) {
        ++convs;
        convs_last += plan.format(n.id) == format_family::channels_last;
      }
    const auto& in = net.at(*net.find(input_name)).extents;
    std::string size;
    for (std::size_t d = 2; d < in.size(); ++d) size += (d > 2 ? "x" : "") + std::to_string(in[d]);
    return std::to_string(convs_last) + "/" + std::to_string(convs) + " convs channels_last, batch " +
           std::to_string(in[0]) + ", " + size;
  }
};

// What a case runs: the graph/models.hpp network (for training with its dropout at p 0), or the
// ONNX file of the same model and size.
enum class source { model, model_for_training, onnx };

// The network with every dropout at p 0. The trainer refuses p > 0 (it draws no random mask);
// MobileNetV2's and VGG's masks cover only the classifier's features, a negligible part of a step.
inline graph::network without_dropout(graph::network net) {
  bool any = false;
  for (const graph::node& n : net.nodes())
    any = any || (n.kind == layer_kind::dropout && n.get<graph::dropout_attrs>().p > 0);
  if (!any) return net;
#if MEMFMT_BENCH_HAVE_GRAPH_IO
  nlohmann::json j = io::network_to_json(net);  // networks are immutable: rebuilt with p 0
  for (auto& n : j["nodes"])
    if (n["kind"] == "dropout") n["attrs"]["p"] = 0.0;
  return io::network_from_json(j);
#else
  memfmt::detail::fail(errc::unsupported,
                       "a training step with dropout p > 0 needs the network rebuilt with p 0, "
                       "which takes memfmt::graph_io (nlohmann-json) in this build");
#endif
}

// The model's network in dtype t with random parameters. float16 networks are drawn in float32
// and rounded (random_parameters draws no float16), as model.half() rounds a checkpoint.
inline std::pair<graph::network, graph::parameter_store> model_network(const model_case& m, dtype t, bool training) {
  models::options o;
  o.batch = settings().batch;
  o.resolution = m.run_resolution();
  o.frames = m.frames;
  o.type = t == dtype::float16 ? dtype::float32 : t;
  graph::network net = m.build(o);
  if (training) net = without_dropout(std::move(net));
  graph::parameter_store params = runtime::random_parameters(net, 1);
  if (t == dtype::float16) {
    net = net.with_float_type(t);
    params = runtime::in_network_dtypes(net, params);
  }
  return {std::move(net), std::move(params)};
}

template <class Binding>
std::unique_ptr<case_state<typename Binding::backend_type>> make_state(const model_case& m, dtype t, source from) {
  using state = case_state<typename Binding::backend_type>;
  if (from != source::onnx) {
    auto [net, params] = model_network(m, t, from == source::model_for_training);
    return std::make_unique<state>(Binding::backend(), Binding::tolerances(), m.name, std::move(net), std::move(params),
                                   "input", "output");
  }
#if MEMFMT_BENCH_HAVE_ONNX
  memfmt::onnx::import_options o;
  o.batch = settings().batch;
  memfmt::onnx::imported_model im = memfmt::onnx::import_file(m.onnx_file(), o);
  if (!im.runnable())
    memfmt::detail::fail(errc::unsupported, m.onnx_file() + ": op " + im.unsupported[0].op + " (node '" +
                                                im.unsupported[0].onnx_node + "'): " + im.unsupported[0].reason);
  if (im.inputs.size() != 1 || im.outputs.size() != 1)
    memfmt::detail::fail(errc::invalid_argument, m.onnx_file() + ": " + std::to_string(im.inputs.size()) +
                                                     " inputs and " + std::to_string(im.outputs.size()) +
                                                     " outputs, the benchmark feeds one and reads one");
  return std::make_unique<state>(Binding::backend(), Binding::tolerances(), std::string("onnx:") + m.name,
                                 std::move(im.network), std::move(im.parameters), im.inputs[0].name,
                                 im.outputs[0].name);
#else
  (void)t;
  memfmt::detail::fail(errc::unsupported, "this build has no memfmt::onnx (libonnx-dev) to import " + m.onnx_file());
#endif
}

template <class Binding>
case_state<typename Binding::backend_type>& state_of(const model_case& m, dtype t, source from) {
  static std::map<std::tuple<std::string, dtype, source>, std::unique_ptr<case_state<typename Binding::backend_type>>>
      states;
  auto& s = states[{m.name, t, from}];
  if (!s) s = make_state<Binding>(m, t, from);
  return *s;
}

// Which plan a row ran, as a number: equal for two policies that plan the same formats and
// conversions, so summarize.py can compare their times (they differ only by the machine's noise).
inline double plan_id(const graph::plan& plan) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  const auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (std::size_t i = 0; i < plan.nodes.size(); ++i) {
    const auto f = plan.format(static_cast<graph::node_id>(i));
    mix(f ? static_cast<std::uint64_t>(*f) + 1 : 0);
  }
  for (const auto& c : plan.conversions)
    mix((static_cast<std::uint64_t>(c.value) << 2) | (c.relabel ? 2u : 0u) | static_cast<std::uint64_t>(c.to));
  return static_cast<double>(h & 0x7fffffffu);  // exact in a double counter
}

inline void set_memory_counters(benchmark::State& state, const runtime::executor_report& r) {
  state.counters["conversions"] = static_cast<double>(r.conversions);
  state.counters["arena_bytes"] = static_cast<double>(r.arena_bytes);
  state.counters["arena_ratio"] =
      r.allocate_all_bytes > 0 ? static_cast<double>(r.arena_bytes) / static_cast<double>(r.allocate_all_bytes) : 1.0;
}

// Runs `pass` until Google Benchmark has enough; returns (seconds, passes). The clock stops after
// the last pass's work has finished (Binding::finish), so an asynchronous backend is timed whole.
template <class Binding, class Fn>
std::pair<double, std::int64_t> timed_loop(benchmark::State& state, Fn&& pass) {
  std::int64_t iters = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    pass();
    Binding::finish(Binding::backend());
    ++iters;
  }
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), iters};
}

// The case a row times, or null once the row is skipped with the reason: a dtype the backend
// refuses, or a model it cannot run (forward) or train.
template <class Binding>
case_state<typename Binding::backend_type>* case_or_skip(benchmark::State& state, const model_case& m, dtype t,
                                                         source src) {
  state.SetLabel(m.size_label());
  if (const std::string why = Binding::refuses(t); !why.empty()) {
    state.SkipWithError(why.c_str());
    return nullptr;
  }
  auto& st = state_of<Binding>(m, t, src);
  const std::string& err = src == source::model_for_training ? st.train_check() : st.check();
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    return nullptr;
  }
  return &st;
}

template <class Binding>
void bm_forward(benchmark::State& state, const model_case& m, dtype t, bool onnx, variant v) {
  using Backend = typename Binding::backend_type;
  try {
    case_state<Backend>* found = case_or_skip<Binding>(state, m, t, onnx ? source::onnx : source::model);
    if (!found) return;
    case_state<Backend>& st = *found;
    const graph::plan& plan = st.plan_for(v);
    runtime::executor<Backend> ex(st.net, plan, st.backend, st.params);
    st.forward(ex);  // warm-up: primitives, weight reorders
    Binding::finish(st.backend);
    const auto [s, iters] = timed_loop<Binding>(state, [&] { st.forward(ex); });
    if (iters == 0 || s <= 0) return;
    Binding::forward_extras(state, st, plan);

    const runtime::executor_report& r = ex.report();
    const double batch = static_cast<double>(settings().batch);
    state.counters["ms_per_batch"] = s / static_cast<double>(iters) * 1e3;
    state.counters["images_per_s"] = batch * static_cast<double>(iters) / s;
    set_memory_counters(state, r);
    state.counters["conversion_ms"] = conversion_ms(st.backend, st.net, plan, false);
    state.counters["fusions"] = static_cast<double>(r.fusions.size());
    state.counters["plan_id"] = plan_id(plan);
    if (v.calibrated) state.counters["calibration_s"] = st.calibration_s;
    state.SetLabel(st.label(plan) + (v.calibrated ? ", chosen " + st.calibrated_choice : std::string()));
  } catch (const std::exception& e) {  // memfmt::error; the backends' errors arrive as memfmt::error too
    state.SkipWithError(e.what());
  }
}

template <class Binding>
void bm_train(benchmark::State& state, const model_case& m, dtype t, graph::policy p) {
  using Backend = typename Binding::backend_type;
  try {
    case_state<Backend>* found = case_or_skip<Binding>(state, m, t, source::model_for_training);
    if (!found) return;
    case_state<Backend>& st = *found;
    const graph::plan& plan = st.plan_for({p});
    runtime::trainer<Backend> tr(st.net, plan, st.backend, st.params);
    st.train_step(tr);  // warm-up
    Binding::finish(st.backend);
    const auto [s, iters] = timed_loop<Binding>(state, [&] { st.train_step(tr); });
    if (iters == 0 || s <= 0) return;
    state.counters["ms_per_step"] = s / static_cast<double>(iters) * 1e3;
    state.counters["images_per_s"] = static_cast<double>(settings().batch) * static_cast<double>(iters) / s;
    set_memory_counters(state, tr.report());
    state.counters["conversion_ms"] = conversion_ms(st.backend, st.net, plan, true);
    state.counters["plan_id"] = plan_id(plan);
    state.SetLabel(st.label(plan));
  } catch (const std::exception& e) {  // errc::unsupported where a layer has no backward on the backend
    state.SkipWithError(e.what());
  }
}

inline void add(const std::string& name, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), std::move(fn))
      ->MinTime(settings().min_time)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

// Every row of every model in `dtypes`: <prefix>/<model>/<dtype>/fwd/<policy> (optimal_calibrated
// where MEMFMT_BENCH_CALIBRATED selects the model), train/<policy> where MEMFMT_BENCH_TRAIN does,
// and <prefix>/onnx:<model>/f32/fwd/<policy> where MEMFMT_BENCH_ONNX_DIR has the model's file.
template <class Binding>
void register_networks(const std::vector<dtype>& dtypes) {
  const std::string prefix = std::string(Binding::prefix) + "/";
  for (const model_case& m : model_cases) {
    for (dtype t : dtypes) {
      const std::string base = prefix + m.name + "/" + dtype_name(t) + "/";
      std::vector<variant> fwd;
      for (graph::policy p : policies) fwd.push_back({p});
      if (selected("MEMFMT_BENCH_CALIBRATED", m.name)) fwd.push_back({graph::policy::optimal, true});
      for (const variant& v : fwd)
        add(base + "fwd/" + v.name(), [&m, t, v](benchmark::State& s) { bm_forward<Binding>(s, m, t, false, v); });
      // Calibration times forward layers, so a calibrated plan is a forward plan: train rows use the priors.
      if (selected("MEMFMT_BENCH_TRAIN", m.name))
        for (graph::policy p : policies)
          add(base + "train/" + graph::to_string(p),
              [&m, t, p](benchmark::State& s) { bm_train<Binding>(s, m, t, p); });
    }
    if (!settings().onnx_dir.empty() && std::filesystem::exists(m.onnx_file())) {
      std::vector<variant> fwd;
      for (graph::policy p : policies) fwd.push_back({p});
      if (selected("MEMFMT_BENCH_CALIBRATED", m.name)) fwd.push_back({graph::policy::optimal, true});
      for (const variant& v : fwd)
        add(prefix + "onnx:" + m.name + "/f32/fwd/" + v.name(),
            [&m, v](benchmark::State& s) { bm_forward<Binding>(s, m, dtype::float32, true, v); });
    }
  }
}

// Registers the rows, runs what the command line selects; main() of a network benchmark.
template <class Binding>
int run_main(int argc, char** argv, std::int64_t default_batch, const std::vector<dtype>& dtypes) {
  read_settings(default_batch);
  register_networks<Binding>(dtypes);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace memfmt_bench::networks
