#include "run_command.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <ostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/convert/convert.hpp"
#include "memfmt/error.hpp"
#include "memfmt/format/layout.hpp"
#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/runtime/backend_support.hpp"
#include "memfmt/runtime/executor.hpp"
#include "memfmt/runtime/parameter_store.hpp"
#include "memfmt/runtime/precision.hpp"
#include "memfmt/runtime/tensor_ref.hpp"
#include "calibration_headers.hpp"
#include "model_file.hpp"

#ifdef MEMFMT_CLI_HAVE_SAFETENSORS
#include "memfmt/io/safetensors.hpp"
#endif
#ifdef MEMFMT_CLI_HAVE_GRAPH_IO
#include "memfmt/runtime/channels_last.hpp"
#endif
#ifdef MEMFMT_CLI_HAVE_ONEDNN
#include "memfmt/backends/onednn/backend.hpp"
#endif
#ifdef MEMFMT_CLI_HAVE_CUDNN
#include "memfmt/backends/cudnn/backend.hpp"
#include "cudnn_kernels.hpp"
#endif

namespace memfmt_cli {

namespace {

using json = nlohmann::ordered_json;
using memfmt::format_family;
using memfmt::graph::parameter;
using memfmt::graph::parameter_store;
using tensor_refs = std::map<std::string, memfmt::runtime::tensor_ref>;

[[noreturn]] void fail(memfmt::errc code, const std::string& what) { memfmt::detail::fail(code, what); }

// ---- tensor values ----

void set_element(parameter& p, std::size_t i, double v) {
  std::byte* at = p.bytes.data() + i * memfmt::size_of(p.type);
  const auto write = [&](auto x) { std::memcpy(at, &x, sizeof x); };
  switch (p.type) {
    case memfmt::dtype::float32: return write(static_cast<float>(v));
    case memfmt::dtype::float64: return write(v);
    case memfmt::dtype::float16: return write(memfmt::half(static_cast<float>(v)));
    case memfmt::dtype::bfloat16: return write(memfmt::bfloat16(static_cast<float>(v)));
    default: break;
  }
  fail(memfmt::errc::unsupported_dtype, "element of a " + std::string(to_string(p.type)) + " tensor");
}

parameter filled(memfmt::dtype type, std::vector<std::int64_t> shape) {
  parameter p{type, std::move(shape), {}};
  p.bytes.resize(memfmt::detail::checked_bytes(p.numel(), memfmt::size_of(type), "tensor"));
  return p;
}

// ---- layouts: files hold logical (channels-first) order, the executor the planned format ----

template <class E, class From, class To>
void permute(const std::byte* src, std::byte* dst, const std::vector<std::int64_t>& e) {
  typename memfmt::layout<From>::extents_type x{};
  for (std::size_t d = 0; d < x.size(); ++d) x[d] = e[d];
  memfmt::tensor_view<const E, From> s(reinterpret_cast<const E*>(src), memfmt::layout<From>::packed(x));
  memfmt::tensor_view<E, To> t(reinterpret_cast<E*>(dst), memfmt::layout<To>::packed(x));
  memfmt::convert(s, t);
}

template <class From, class To>
void permute_by_size(const std::byte* src, std::byte* dst, const std::vector<std::int64_t>& e, std::size_t elem) {
  // A permutation moves whole elements: their type does not matter, only their size.
  switch (elem) {
    case 2: return permute<std::uint16_t, From, To>(src, dst, e);
    case 4: return permute<std::uint32_t, From, To>(src, dst, e);
    default: return permute<std::uint64_t, From, To>(src, dst, e);
  }
}

// The bytes of a rank-4/5 tensor in channels_last order from channels-first order (to_last), or
// back; other ranks and channels_first are already in place.
std::vector<std::byte> relaid(const parameter& t, format_family format, bool to_last) {
  if (format != format_family::channels_last || t.shape.size() < 4) return t.bytes;
  std::vector<std::byte> out(t.bytes.size());
  const std::size_t elem = memfmt::size_of(t.type);
  if (t.shape.size() == 4) {
    if (to_last) permute_by_size<memfmt::nchw, memfmt::nhwc>(t.bytes.data(), out.data(), t.shape, elem);
    else permute_by_size<memfmt::nhwc, memfmt::nchw>(t.bytes.data(), out.data(), t.shape, elem);
  } else {
    if (to_last) permute_by_size<memfmt::ncdhw, memfmt::ndhwc>(t.bytes.data(), out.data(), t.shape, elem);
    else permute_by_size<memfmt::ndhwc, memfmt::ncdhw>(t.bytes.data(), out.data(), t.shape, elem);
  }
  return out;
}

// ---- tensors in ----

parameter_store load_tensor_file(const std::string& path, const char* flag) {
#ifdef MEMFMT_CLI_HAVE_SAFETENSORS
  try {
    return memfmt::io::load_safetensors(path);
  } catch (const memfmt::error& e) {
    fail(e.code(), std::string(flag) + " " + path + ": " + e.what());
  }
#else
  fail(memfmt::errc::unsupported, std::string(flag) + " " + path +
                                      ": safetensors files need the memfmt::safetensors component, which this build "
                                      "of memfmt lacks (Debian: nlohmann-json3-dev, then reconfigure)");
#endif
}

// Weights for every parameter the network names, in PyTorch's default initialisation's spirit
// (uniform within 1/sqrt(fan_in)) so that activations stay finite through a deep network.
parameter_store random_weights(const memfmt::graph::network& net, std::uint32_t seed) {
  std::mt19937 rng(seed);
  parameter_store s;
  for (const auto& n : net.nodes())
    for (const auto& spec : net.parameters(n.id)) {
      parameter p = filled(spec.type, spec.extents);
      if (!memfmt::is_floating(spec.type)) {  // num_batches_tracked
        s.insert(spec.name, std::move(p));
        continue;
      }
      const auto ends = [&](const char* tail) {
        const std::string t(tail);
        return spec.name.size() >= t.size() && spec.name.compare(spec.name.size() - t.size(), t.size(), t) == 0;
      };
      double lo = -0.1, hi = 0.1;
      if (ends(".running_var") || (n.kind != memfmt::layer_kind::conv && n.kind != memfmt::layer_kind::conv_transpose &&
                                   n.kind != memfmt::layer_kind::linear && ends(".weight"))) {
        lo = 0.5, hi = 1.5;  // positive variances, scales near 1
      } else if (spec.extents.size() >= 2) {
        const double fan_in = static_cast<double>(p.numel() / std::max<std::int64_t>(spec.extents[0], 1));
        hi = 1.0 / std::sqrt(std::max(fan_in, 1.0));
        lo = -hi;
      }
      std::uniform_real_distribution<double> d(lo, hi);
      for (std::size_t i = 0; i < static_cast<std::size_t>(p.numel()); ++i) set_element(p, i, d(rng));
      s.insert(spec.name, std::move(p));
    }
  return s;
}

// ---- the report ----

std::string mib(std::int64_t bytes) {
  std::ostringstream os;
  os.precision(bytes >= (10 << 20) ? 1 : 2);
  os << std::fixed << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return os.str();
}

int threads_in_use() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// ---- the profile ----

// What a layer is, for grouping its time: convs by the shape class that decides their speed in
// each format (the prior table's classes), activations and binary ops by their function.
std::string layer_group(const memfmt::graph::network& net, const memfmt::graph::node& n) {
  using memfmt::layer_kind;
  switch (n.kind) {
    case layer_kind::conv: return std::string("conv ") + to_string(memfmt::graph::conv_class_of(net, n));
    case layer_kind::activation: return std::string("activation ") + to_string(n.get<memfmt::activation_params>().kind);
    case layer_kind::binary: {
      static const char* const names[] = {"add", "sub", "mul", "div"};
      return std::string("binary ") + names[static_cast<int>(n.get<memfmt::binary_op>())];
    }
    case layer_kind::pool:
      return n.get<memfmt::pool_params>().kind == memfmt::pool_kind::max ? "max pool" : "average pool";
    default: return to_string(n.kind);
  }
}

double ms(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

// The mean of `passes` profiles: by layer kind (a fused layer's time is its conv's), conversions,
// and the `top` slowest layers.
json profile_json(const memfmt::graph::network& net, const memfmt::graph::plan& plan,
                  const std::vector<memfmt::runtime::forward_profile>& passes, std::size_t top) {
  const double n = static_cast<double>(passes.size());
  std::vector<double> layer(net.size()), conversion(net.size());
  double io = 0, total = 0;
  for (const auto& p : passes) {
    for (const auto& t : p.nodes) {
      layer[t.node] += ms(t.layer_ns) / n;
      conversion[t.node] += ms(t.conversion_ns) / n;
    }
    io += ms(p.inputs_ns + p.outputs_ns) / n;
    total += ms(p.total_ns) / n;
  }
  std::map<std::string, std::pair<std::size_t, double>> kinds;  // kind -> (layers, ms)
  double converting = 0;
  std::size_t copies = 0;
  std::vector<std::size_t> order;
  for (const auto& node : net.nodes()) {
    converting += conversion[node.id];
    if (conversion[node.id] > 0) ++copies;
    const auto& t = passes.front().nodes[node.id];
    if (t.fused_into || layer[node.id] <= 0) continue;
    auto& k = kinds[layer_group(net, node)];
    ++k.first;
    k.second += layer[node.id];
    order.push_back(node.id);
  }
  std::vector<std::pair<std::string, std::pair<std::size_t, double>>> by_kind(kinds.begin(), kinds.end());
  std::sort(by_kind.begin(), by_kind.end(),
            [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  json kinds_json = json::array();
  for (const auto& [k, v] : by_kind)
    kinds_json.push_back(
        {{"kind", k}, {"layers", v.first}, {"ms", v.second}, {"share", total > 0 ? v.second / total : 0.0}});
  kinds_json.push_back({{"kind", "conversions"},
                        {"layers", copies},
                        {"ms", converting},
                        {"share", total > 0 ? converting / total : 0.0}});
  kinds_json.push_back(
      {{"kind", "inputs and outputs"}, {"layers", 0}, {"ms", io}, {"share", total > 0 ? io / total : 0.0}});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return layer[a] > layer[b]; });
  if (order.size() > top) order.resize(top);
  json slowest = json::array();
  for (std::size_t id : order) {
    const auto& node = net.at(id);
    std::vector<std::string> fused;
    for (const auto& t : passes.front().nodes)
      if (t.fused_into && *t.fused_into == id) fused.push_back(net.at(t.node).name);
    slowest.push_back({{"layer", node.name},
                       {"kind", layer_group(net, node)},
                       // Rank-2 values have no layout: null, as in the plan's JSON.
                       {"format", plan.format(id) ? json(to_string(*plan.format(id))) : json(nullptr)},
                       {"extents", node.extents},
                       {"ms", layer[id]},
                       {"fused", fused}});
  }
  return {{"passes", passes.size()}, {"ms_per_pass", total}, {"by_kind", kinds_json}, {"slowest", slowest}};
}

}  // namespace

run_command::run_command(CLI::App& app) {
  cmd_ = app.add_subcommand("run", "run a model in its planned formats and time it");
  cmd_->add_option("model", model_path_, "MODEL.onnx or NETWORK.json (memfmt.network)")->required();
  cmd_->add_option("--weights", weights_,
                   "safetensors file of the parameters (a network JSON has none; an ONNX "
                   "model's initializers are replaced by the tensors of the same name)");
  auto* input = cmd_->add_option("--input", input_,
                                 "safetensors file, one tensor per graph input, by name, "
                                 "channels-first");
  cmd_->add_flag("--random", random_, "random inputs of the model's shapes (the default without --input)")
      ->excludes(input);
  cmd_->add_option("--output", output_, "write the graph outputs (channels-first) to this safetensors file");
  cmd_->add_option("--backend", backend_, "reference, onednn or cudnn (default reference)")
      ->check(CLI::IsMember({"reference", "onednn", "cudnn"}));
  auto* policy = cmd_->add_option("--policy", policy_,
                                  "the format plan: all_channels_first, all_channels_last, "
                                  "pytorch_eager, greedy or optimal (default)");
  auto* calibrate = cmd_->add_flag("--calibrate", calibrate_,
                                   "also time whole networks: the calibrated plan, the "
                                   "priors' plan and all channels-last, and run the "
                                   "fastest")
                        ->excludes(policy);
  auto* priors_only = cmd_->add_flag("--priors-only", priors_only_,
                                     "plan from the prior cost table alone, timing "
                                     "nothing (the optimal policy on onednn and cudnn "
                                     "otherwise times the layers first)")
                          ->excludes(calibrate);
  cmd_->add_option("--cache", cache_,
                   "timing cache file for the layer timings: loaded when present (it must be "
                   "this device's and backend's), updated with what is measured")
      ->excludes(priors_only);
  cmd_->add_option("--dtype", dtype_, "float32 (default), bfloat16 or float16: weights and inputs are rounded to it")
      ->check(CLI::IsMember({"float32", "bfloat16", "float16"}));
  batch_opt_ = cmd_->add_option("--batch", batch_,
                                "batch size (an ONNX model's symbolic batch; default 1, a "
                                "network JSON its own)")
                   ->check(positive_integer<std::int64_t>());
  cmd_->add_option("--threads", threads_, "OpenMP threads (default: OpenMP's)")->check(positive_integer<int>());
  cmd_->add_option("--repeat", repeat_, "timed forward passes after one warm-up (default 10)")
      ->check(positive_integer<int>());
  cmd_->add_flag("--profile", profile_,
                 "after the timed passes, time every layer in --repeat more passes and "
                 "report where the time goes: by layer kind, and the slowest layers");
  cmd_->add_flag("--json", json_, "print JSON");
}

int run_command::run(std::ostream& out, std::ostream& err) const {
  return exit_code_of(*cmd_, err, [&] {
    const memfmt::graph::policy which = parse_policy_argument(policy_);
    const memfmt::dtype type = parse_float_dtype(dtype_);
#ifdef MEMFMT_CLI_HAVE_CUDNN
    if (backend_ == "cudnn") memfmt::cudnn::require_device("--backend cudnn");
#else
    if (backend_ == "cudnn")
      fail(memfmt::errc::unsupported,
           "--backend cudnn: this memfmt was built without cuDNN (the memfmt::cudnn component, CUDA and cuDNN 9)");
#endif
#ifndef MEMFMT_CLI_HAVE_ONEDNN
    if (backend_ == "onednn")
      fail(memfmt::errc::unsupported,
           "--backend onednn: this memfmt was built without oneDNN (the memfmt::onednn component, Debian libdnnl-dev)");
#endif
    if (threads_ > 0) {
#ifdef _OPENMP
      omp_set_num_threads(threads_);
#else
      if (threads_ > 1) err << "memfmt run: this build has no OpenMP; running on one thread\n";
#endif
    }

    // The output file must not be one the command reads: writing it would destroy its own input.
    if (!output_.empty())
      for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{"the model", model_path_},
                                       {"--input", input_},
                                       {"--weights", weights_}})
        if (!path.empty() && same_file(output_, path))
          throw usage_error{"--output " + output_ + " is " + flag + " (" + path + "): writing it would overwrite it"};
    const std::optional<std::int64_t> batch = *batch_opt_ ? std::optional<std::int64_t>(batch_) : std::nullopt;
    model_file m = load_model(model_path_, batch);
    if (!m.unsupported.empty()) {
      std::string what = model_path_ + ": cannot run " + std::to_string(m.unsupported.size()) +
                         " ONNX node(s) the executor has no layer for (memfmt plan still plans around them):\n";
      what += unsupported_lines(m, "  ");
      what.pop_back();
      fail(memfmt::errc::unsupported, what);
    }
    const memfmt::graph::network net = m.network.with_float_type(type);

    // Weights: the file's, else the ONNX model's, else random.
    std::string weights_from = m.parameters ? "the ONNX initializers" : "random (seed 1)";
    parameter_store weights;
    if (!weights_.empty()) {
      const parameter_store file = load_tensor_file(weights_, "--weights");
      if (file.size() == 0)
        fail(memfmt::errc::invalid_argument, "--weights " + weights_ + ": the file holds no tensors");
      if (m.parameters) {
        weights = std::move(*m.parameters);
        for (const auto& [name, p] : file) weights.assign(name, p);
      } else {
        weights = file;
      }
      weights_from = weights_;
    } else if (m.parameters) {
      weights = std::move(*m.parameters);
    } else {
      weights = random_weights(net, 1);
    }
    weights = memfmt::runtime::in_network_dtypes(net, weights);
    // The inputs are read before any layer is timed or built: a bad file fails fast.
    std::optional<parameter_store> given;
    if (!input_.empty()) {
      given = load_tensor_file(input_, "--input");
      if (given->size() == 0) fail(memfmt::errc::invalid_argument, "--input " + input_ + ": the file holds no tensors");
    }

    // The backend --backend names; the planner asks it which formats each layer can run in, and
    // the executor is built on it (refusing, before any work, a layer or dtype it cannot run).
    memfmt::reference::backend reference;
#ifdef MEMFMT_CLI_HAVE_ONEDNN
    std::optional<memfmt::onednn::backend> onednn;
    if (backend_ == "onednn") onednn.emplace();
#endif
#ifdef MEMFMT_CLI_HAVE_CUDNN
    // Its executor keeps the tensors in device memory; inputs and outputs stay host tensors, copied
    // in and out by the executor around each pass.
    std::optional<memfmt::cudnn::backend> cudnn;
    if (backend_ == "cudnn") cudnn.emplace(memfmt_cli::cudnn_options());
#endif
    memfmt::graph::cost_model model;
    memfmt::graph::plan plan;
    std::string plan_name = to_string(which);
    // The optimal plan on a backend that is a speed target is solved over this machine's layer
    // timings: they take a second or two, and the prior table can be wrong for the CPU at hand (a
    // 1x1 conv is faster channels-first on some, channels-last on others). The reference backend is
    // the truth, not a speed target: its plans come from the priors.
    const bool measure =
        calibrate_ || (which == memfmt::graph::policy::optimal && backend_ != "reference" && !priors_only_);
    if (!cache_.empty() && !measure)
      throw usage_error{"--cache: nothing is timed " +
                        std::string(which != memfmt::graph::policy::optimal
                                        ? "for --policy " + policy_ + " (only optimal's costs are timed)"
                                        : "on --backend reference without --calibrate")};
    const bool weighs_costs = which == memfmt::graph::policy::optimal || which == memfmt::graph::policy::greedy;
    json costs = {{"source", measure ? "measured" : weighs_costs ? "priors" : "none"}};
    json calibration;  // with --calibrate: which plan won
    std::function<void(const tensor_refs&, const tensor_refs&)> forward;
    std::function<memfmt::runtime::executor_report()> report;
    std::function<memfmt::runtime::forward_profile(const tensor_refs&, const tensor_refs&)> profiled;
    const auto build = [&](auto& backend) {
      using backend_type = std::remove_reference_t<decltype(backend)>;
      std::shared_ptr<memfmt::runtime::executor<backend_type>> ex;
      if (measure) {
#ifdef MEMFMT_CLI_HAVE_GRAPH_IO
        err << "memfmt run: timing the layers on " << backend_
            << (cache_.empty() ? "" : " (timing cache " + cache_ + ")")
            << (calibrate_ ? ", then three plans as whole networks\n" : "\n");
        memfmt::runtime::channels_last_options o;
        std::optional<memfmt::graph::timing_cache> known;
        if (!cache_.empty()) known = memfmt::io::read_timing_cache_file_if_exists(cache_);
        o.calibration.known = known ? &*known : nullptr;
        o.select_by_timing = calibrate_;
        const auto t0 = std::chrono::steady_clock::now();
        auto planned = memfmt::runtime::channels_last(net, backend, weights, o);
        if (!cache_.empty()) memfmt::io::write_timing_cache_file(cache_, planned.cache);
        costs = {{"source", "measured"},
                 {"backend", backend_},
                 {"cache", cache_},
                 {"layer_signatures", planned.cache.layers().size()},
                 {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
        if (calibrate_) {
          json candidates = json::array();
          for (const auto& c : planned.candidates)
            candidates.push_back({{"plan", c.name},
                                  {"ms_per_batch", c.ms},
                                  {"conversions", c.conversions},
                                  {"same_as", c.same_as},
                                  {"error", c.error}});
          calibration = {{"backend", backend_},
                         {"cache", cache_},
                         {"layer_signatures", costs.at("layer_signatures")},
                         {"seconds", costs.at("seconds")},
                         {"chosen", planned.chosen},
                         {"candidates", std::move(candidates)}};
          plan_name = planned.chosen;
        }
        plan = std::move(planned.plan);
        ex = std::move(planned.run);
#else
        fail(memfmt::errc::unsupported, std::string(calibrate_ ? "--calibrate" : "--policy optimal on " + backend_) +
                                            " times the layers, which needs the memfmt::graph_io component (timing "
                                            "cache JSON) that this build of memfmt lacks; --priors-only plans "
                                            "without it");
#endif
      } else {
        model.set_support_query(memfmt::runtime::support_query_for(backend));
        plan = memfmt::graph::plan_with(net, model, which);
        ex = std::make_shared<memfmt::runtime::executor<backend_type>>(net, plan, backend, weights);
      }
      forward = [ex](const tensor_refs& in, const tensor_refs& out) { ex->forward(in, out); };
      report = [ex] { return ex->report(); };
      profiled = [ex](const tensor_refs& in, const tensor_refs& out) { return ex->forward_profiled(in, out); };
    };
    bool built = false;
#ifdef MEMFMT_CLI_HAVE_ONEDNN
    if (onednn) {
      build(*onednn);
      built = true;
    }
#endif
#ifdef MEMFMT_CLI_HAVE_CUDNN
    if (cudnn) {
      build(*cudnn);
      built = true;
    }
#endif
    if (!built) build(reference);

    // Inputs in logical order, then in the planned format.
    std::vector<memfmt::graph::node_id> inputs, outputs;
    for (const auto& n : net.nodes()) {
      if (n.kind == memfmt::layer_kind::input) inputs.push_back(n.id);
      if (n.kind == memfmt::layer_kind::output) outputs.push_back(n.id);
    }
    std::map<std::string, std::vector<std::byte>> in_bytes, out_bytes;
    tensor_refs in_refs, out_refs;
    std::mt19937 rng(2);
    for (auto id : inputs) {
      const auto& n = net.at(id);
      parameter logical = filled(n.type, n.extents);
      if (given) {
        const parameter* t = given->find(n.name);
        if (!t)
          fail(memfmt::errc::invalid_argument, "--input " + input_ + ": no tensor named '" + n.name +
                                                   "' (the graph input, " + memfmt::graph::describe(n.type, n.extents) +
                                                   ")");
        if (t->shape != n.extents || !memfmt::is_floating(t->type))
          fail(memfmt::errc::shape_mismatch, "--input " + input_ + ": tensor '" + n.name + "' is " +
                                                 memfmt::graph::describe(t->type, t->shape) + ", the graph input is " +
                                                 memfmt::graph::describe(n.type, n.extents) +
                                                 (batch ? "" : " (--batch sets the batch)"));
        logical = memfmt::runtime::cast_parameter(*t, n.type, n.name);
      } else {
        std::uniform_real_distribution<double> d(-1.0, 1.0);
        for (std::size_t i = 0; i < static_cast<std::size_t>(logical.numel()); ++i) set_element(logical, i, d(rng));
      }
      const format_family f = plan.format(id).value_or(format_family::channels_first);
      in_bytes[n.name] = relaid(logical, f, true);
      in_refs[n.name] = memfmt::runtime::tensor_ref{n.type, n.extents, f, in_bytes[n.name].data()};
    }
    // A recording may hold the expected outputs beside the inputs; a tensor naming neither is
    // usually a misspelt input, which would otherwise be left random.
    if (given)
      for (const auto& [name, t] : *given) {
        const auto id = net.find(name);
        if (!id || (net.at(*id).kind != memfmt::layer_kind::input && net.at(*id).kind != memfmt::layer_kind::output))
          fail(memfmt::errc::invalid_argument,
               "--input " + input_ + ": tensor '" + name + "' names no graph input (or output) of " + model_path_);
      }
    for (auto id : outputs) {
      const auto& n = net.at(id);
      const format_family f = plan.format(id).value_or(format_family::channels_first);
      out_bytes[n.name] = filled(n.type, n.extents).bytes;
      out_refs[n.name] = memfmt::runtime::tensor_ref{n.type, n.extents, f, out_bytes[n.name].data()};
    }

    // One warm-up pass, then the timed ones; a progress line each second on long runs.
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    auto last_progress = start;
    forward(in_refs, out_refs);
    std::vector<double> ms;
    for (int r = 0; r < repeat_; ++r) {
      const auto t0 = clock::now();
      forward(in_refs, out_refs);
      const auto t1 = clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      if (t1 - last_progress > std::chrono::seconds(1) && r + 1 < repeat_) {
        last_progress = t1;
        err << "memfmt run: " << r + 1 << "/" << repeat_ << " passes, last " << ms.back() << " ms\n";
      }
    }
    json profile;
    if (profile_) {
      std::vector<memfmt::runtime::forward_profile> passes;
      for (int r = 0; r < repeat_; ++r) passes.push_back(profiled(in_refs, out_refs));
      profile = profile_json(net, plan, passes, 10);
    }
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const double median =
        sorted.size() % 2 ? sorted[sorted.size() / 2] : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
    double mean = 0;
    for (double v : ms) mean += v / static_cast<double>(ms.size());
    const std::int64_t images = inputs.empty() ? 0 : net.at(inputs.front()).extents.at(0);
    const double images_per_s = median > 0 ? static_cast<double>(images) * 1000.0 / median : 0.0;

    if (!output_.empty()) {
#ifdef MEMFMT_CLI_HAVE_SAFETENSORS
      parameter_store out;
      for (auto id : outputs) {
        const auto& n = net.at(id);
        parameter planned{n.type, n.extents, out_bytes[n.name]};
        parameter logical{n.type, n.extents,
                          relaid(planned, plan.format(id).value_or(format_family::channels_first), false)};
        out.insert(n.name, std::move(logical));
      }
      out.metadata["memfmt.policy"] = plan_name;
      memfmt::io::save_safetensors(out, output_);
#else
      load_tensor_file(output_, "--output");  // says which component is missing
#endif
    }

    const memfmt::runtime::executor_report rep = report();
    std::int64_t bytes_moved = 0;
    for (const auto& c : plan.conversions) bytes_moved += c.relabel ? 0 : c.bytes;
    if (json_) {
      json j{{"model", model_path_},
             {"kind", m.kind},
             {"layers", net.size()},
             {"batch", images},
             {"dtype", std::string(to_string(type))},
             {"backend", backend_},
             {"threads", threads_in_use()},
             {"policy", plan_name},
             {"costs", costs},
             {"weights", weights_from},
             {"plan",
              {{"conversions", plan.copies()},
               {"relabels", plan.relabels()},
               {"bytes_moved", bytes_moved},
               {"estimated_ns", plan.total()}}},
             {"repeat", repeat_},
             {"ms_per_batch", median},
             {"ms_min", sorted.front()},
             {"ms_mean", mean},
             {"images_per_second", images_per_s},
             {"conversions_run", rep.conversions},
             {"relabels_run", rep.relabels},
             {"fusions", rep.fusions},
             {"peak_activation_bytes", rep.arena_bytes},
             {"allocate_all_bytes", rep.allocate_all_bytes}};
      if (calibrate_) j["calibration"] = calibration;
      if (profile_) j["profile"] = profile;
      if (!output_.empty()) j["output"] = output_;
      out << j.dump(1) << '\n';
      return 0;
    }
    out << "model    " << model_path_ << " (" << m.kind << ", " << net.size() << " layers), batch " << images << ", "
        << to_string(type) << ", backend " << backend_ << ", " << threads_in_use() << " thread(s)\n"
        << "weights  " << weights_from << "; inputs " << (given ? input_ : std::string("random (seed 2)")) << '\n'
        << "plan     " << plan_name << ": " << plan.copies() << " conversions + " << plan.relabels() << " relabels, "
        << bytes_moved << " bytes moved, estimated " << memfmt::graph::cost_string(plan.total()) << '\n'
        << "time     " << median << " ms per batch (median of " << repeat_ << "; min " << sorted.front() << ", mean "
        << mean << "), " << images_per_s << " images/s\n"
        << "ran      " << rep.conversions << " conversions + " << rep.relabels << " relabels per pass, "
        << rep.fusions.size() << " fusions\n"
        << "memory   peak activations " << mib(rep.arena_bytes) << " (" << mib(rep.allocate_all_bytes)
        << " with one buffer per value)\n";
    if (measure)
      out << "costs    layers timed on " << backend_ << ": " << costs.at("layer_signatures").get<std::size_t>()
          << " signatures in the timing cache, " << costs.at("seconds").get<double>() << " s\n";
    else if (which == memfmt::graph::policy::optimal)
      out << "costs    the prior table" << (backend_ == "reference" ? "" : " (--priors-only)") << '\n';
    if (calibrate_) {
      out << "chosen   by timing the whole network on " << backend_ << ":";
      for (const auto& c : calibration.at("candidates")) {
        out << ' ' << c.at("plan").get<std::string>() << ' ';
        if (!c.at("error").get<std::string>().empty()) out << "(not run: " << c.at("error").get<std::string>() << ")";
        else if (!c.at("same_as").get<std::string>().empty())
          out << "(the " << c.at("same_as").get<std::string>() << " plan)";
        else out << c.at("ms_per_batch").get<double>() << " ms";
      }
      out << '\n';
    }
    for (const auto& f : rep.fusions) out << "  fused  " << f << '\n';
    if (profile_) {
      char line[256];
      std::snprintf(line, sizeof line, "profile  every layer timed alone, mean of %d passes: %.3f ms per pass\n",
                    repeat_, profile.at("ms_per_pass").get<double>());
      out << line;
      std::snprintf(line, sizeof line, "  %-28s %6s %10s %7s\n", "kind", "layers", "ms", "share");
      out << line;
      for (const auto& k : profile.at("by_kind")) {
        std::snprintf(line, sizeof line, "  %-28s %6zu %10.3f %6.1f%%\n", k.at("kind").get<std::string>().c_str(),
                      k.at("layers").get<std::size_t>(), k.at("ms").get<double>(), 100.0 * k.at("share").get<double>());
        out << line;
      }
      out << "  slowest layers:\n";
      for (const auto& l : profile.at("slowest")) {
        std::string fused;
        for (const auto& f : l.at("fused")) fused += (fused.empty() ? " (with " : ", ") + f.get<std::string>();
        if (!fused.empty()) fused += ")";
        std::snprintf(line, sizeof line, "  %9.3f ms  ", l.at("ms").get<double>());
        out << line << l.at("layer").get<std::string>() << ": " << l.at("kind").get<std::string>() << ", "
            << (l.at("format").is_null() ? std::string("no layout") : l.at("format").get<std::string>()) << ", "
            << l.at("extents").dump() << fused << '\n';
      }
    }
    if (!output_.empty()) out << "output   " << output_ << '\n';
    return 0;
  });
}

}  // namespace memfmt_cli
