// memfmt/session/session.hpp - a network on a backend in one object: tensors in, tensors out.
//
// A session is what ONNX Runtime's InferenceSession is to its users: it plans the network's formats
// for the backend (the backend's capability query inside the plan), builds the executor, converts
// the weights once, and owns what must outlive what (the backend, unless the caller lends one,
// outlives the executor). run() takes the inputs in logical (channels-first) order and the caller's
// shapes, lays each out in the format the plan gives it, and returns the outputs the same way,
// whatever the plan. From an ONNX file: session/onnx.hpp.
//
//   memfmt::session<memfmt::onednn::backend> s(memfmt::model_of(net, weights));
//   auto outputs = s.run({{"input", image}});   // graph::parameter in, graph::parameter out
//
// This is the top layer: it sits over the runtime (executor, calibration) and the graph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../convert/convert.hpp"
#include "../error.hpp"
#include "../format/dispatch.hpp"
#include "../graph/cost_model.hpp"
#include "../graph/network.hpp"
#include "../graph/parameter_store.hpp"
#include "../graph/plan.hpp"
#include "../graph/policy.hpp"
#include "../graph/timing_cache.hpp"
#include "../runtime/backend_support.hpp"
#include "../runtime/calibrate.hpp"
#include "../runtime/executor.hpp"

namespace memfmt {

// A graph input or output as the caller sees it: its name, dtype and logical shape (channels-first
// order; for an imported model, ONNX's shape, which may differ from the network's extents: a 1-D
// net's [N, C, L] is a network value [N, C, 1, L]).
struct io_value {
  std::string name;
  memfmt::dtype type = memfmt::dtype::float32;
  std::vector<std::int64_t> shape;
};

// What a session runs: a network, every parameter it lists, and its inputs and outputs.
struct model {
  graph::network network;
  graph::parameter_store parameters;
  std::vector<io_value> inputs, outputs;
};

// A network and its parameters as a model whose inputs and outputs are the network's own, in
// their extents.
inline model model_of(graph::network net, graph::parameter_store params) {
  model m;
  for (std::size_t i = 0; i < net.size(); ++i) {
    const graph::node& n = net.at(static_cast<graph::node_id>(i));
    if (n.kind == layer_kind::input) m.inputs.push_back({n.name, n.type, n.extents});
    if (n.kind == layer_kind::output) m.outputs.push_back({n.name, n.type, n.extents});
  }
  m.network = std::move(net);
  m.parameters = std::move(params);
  return m;
}

struct session_options {
  // How formats are chosen: the planner's optimum (the default) or a fixed policy.
  graph::policy policy = graph::policy::optimal;
  // With policy optimal: time the network's layers on the backend first (runtime::calibrate, as
  // TensorRT's builder does) and solve over those timings; false solves over the shipped priors.
  bool measure = true;
  runtime::calibrate_options calibration;  // its `known`: timings measured before, not timed again
  graph::cost_priors priors;               // for what is not measured
  runtime::executor_options execution;
};

namespace detail {

// The bytes of a dense float value of network extents `extents` moved between logical
// (channels-first) order and format `f`: to_format lays logical bytes out in f, !to_format reads
// them back. Rank 2 values and channels_first are the same bytes either way.
inline std::vector<std::byte> relayout(const graph::parameter& value, const std::vector<std::int64_t>& extents,
                                       format_family f, bool to_format, const std::string& what) {
  if (f == format_family::channels_first || extents.size() < 4) return value.bytes;
  std::vector<std::byte> out(value.bytes.size());
  runtime::detail::dispatch_float_dtype(value.type, what, [&](auto tag) {
    using T = decltype(tag);
    dispatch_format(f, static_cast<int>(extents.size()), [&](auto format) {
      using L = decltype(format);
      using CF = typename L::channels_first_t;
      if (to_format)
        memfmt::convert(runtime::detail::view_of<CF>(reinterpret_cast<const T*>(value.bytes.data()), extents),
                        runtime::detail::view_of<L>(reinterpret_cast<T*>(out.data()), extents));
      else
        memfmt::convert(runtime::detail::view_of<L>(reinterpret_cast<const T*>(value.bytes.data()), extents),
                        runtime::detail::view_of<CF>(reinterpret_cast<T*>(out.data()), extents));
    });
  });
  return out;
}

}  // namespace detail

template <class Backend>
class session {
 public:
  // A session that owns its backend (default-constructed).
  explicit session(model m, const session_options& o = {}) : session(std::move(m), std::make_shared<Backend>(), o) {}
  // On a backend the caller owns; it must outlive the session.
  session(model m, Backend& backend, const session_options& o = {})
      : session(std::move(m), std::shared_ptr<Backend>(&backend, [](Backend*) {}), o) {}
  // A given plan (verified by the executor) on a backend the caller owns.
  session(model m, Backend& backend, graph::plan p, const runtime::executor_options& execution = {})
      : backend_(&backend, [](Backend*) {}), model_(std::make_unique<model>(std::move(m))), plan_(std::move(p)) {
    build(execution);
  }

  // @pre feeds has one value per model input, by name, of its dtype and shape.
  // @post one value per model output, by name, of its dtype and shape, in logical order.
  // Errors (memfmt::error) name the input and what was given.
  std::map<std::string, graph::parameter> run(const std::map<std::string, graph::parameter>& feeds) {
    const graph::network& net = model_->network;
    const auto format_of = [&](graph::node_id id) { return plan_.format(id).value_or(format_family::channels_first); };
    std::map<std::string, std::vector<std::byte>> bytes;
    std::map<std::string, runtime::tensor_ref> in_refs, out_refs;
    for (std::size_t i = 0; i < model_->inputs.size(); ++i) {
      const io_value& in = model_->inputs[i];
      const auto it = feeds.find(in.name);
      if (it == feeds.end())
        memfmt::detail::fail(errc::invalid_argument, "session::run: no value for graph input '" + in.name + "' (" +
                                                         graph::describe(in.type, in.shape) + ")");
      const graph::parameter& v = it->second;
      if (v.type != in.type || v.shape != in.shape)
        memfmt::detail::fail(errc::shape_mismatch, "session::run: graph input '" + in.name + "' is " +
                                                       graph::describe(in.type, in.shape) + ", given " +
                                                       graph::describe(v.type, v.shape));
      const graph::node_id id = input_ids_[i];
      const auto& e = net.at(id).extents;
      bytes[in.name] = detail::relayout(v, e, format_of(id), true, "session::run: input '" + in.name + "'");
      in_refs[in.name] = runtime::tensor_ref{v.type, e, format_of(id), bytes[in.name].data()};
    }
    for (const auto& [name, v] : feeds)
      if (!in_refs.count(name))
        memfmt::detail::fail(
            errc::invalid_argument,
            "session::run: '" + name + "' " + graph::describe(v.type, v.shape) + " is no graph input of the model");
    for (std::size_t i = 0; i < model_->outputs.size(); ++i) {
      const io_value& out = model_->outputs[i];
      const auto& n = net.at(output_ids_[i]);
      bytes[out.name].resize(memfmt::detail::checked_bytes(n.numel(), size_of(n.type), out.name.c_str()));
      out_refs[out.name] = runtime::tensor_ref{n.type, n.extents, format_of(output_ids_[i]), bytes[out.name].data()};
    }
    executor_->forward(in_refs, out_refs);
    std::map<std::string, graph::parameter> r;
    for (std::size_t i = 0; i < model_->outputs.size(); ++i) {
      const io_value& out = model_->outputs[i];
      const graph::node_id id = output_ids_[i];
      const graph::parameter planned{out.type, out.shape, std::move(bytes[out.name])};
      r[out.name] = graph::parameter{out.type, out.shape,
                                     detail::relayout(planned, net.at(id).extents, format_of(id), false,
                                                      "session::run: output '" + out.name + "'")};
    }
    return r;
  }

  const model& loaded() const noexcept { return *model_; }
  const graph::plan& plan() const noexcept { return plan_; }
  // What calibration measured (policy optimal with measure on), for io::write_timing_cache_file.
  const std::optional<graph::timing_cache>& timings() const noexcept { return timings_; }
  Backend& backend() noexcept { return *backend_; }
  runtime::executor<Backend>& executor() noexcept { return *executor_; }

 private:
  session(model m, std::shared_ptr<Backend> backend, const session_options& o)
      : backend_(std::move(backend)), model_(std::make_unique<model>(std::move(m))) {
    graph::cost_model costs(o.priors);
    costs.set_support_query(runtime::support_query_for(*backend_));  // no format the backend refuses
    if (o.policy == graph::policy::optimal && o.measure) {
      timings_ = runtime::calibrate(model_->network, *backend_, o.calibration);
      costs.set_timing_cache(*timings_);
    }
    plan_ = graph::plan_with(model_->network, costs, o.policy);
    build(o.execution);
  }

  // The network nodes of the model's inputs and outputs, found once here rather than on every run.
  void build(const runtime::executor_options& execution) {
    const auto node_of = [&](const io_value& v, const char* what) {
      const std::optional<graph::node_id> id = model_->network.find(v.name);
      if (!id)
        memfmt::detail::fail(errc::invalid_argument,
                             std::string("session: ") + what + " '" + v.name + "' is no node of the network");
      return *id;
    };
    for (const io_value& v : model_->inputs) input_ids_.push_back(node_of(v, "input"));
    for (const io_value& v : model_->outputs) output_ids_.push_back(node_of(v, "output"));
    executor_ =
        std::make_unique<runtime::executor<Backend>>(model_->network, plan_, *backend_, model_->parameters, execution);
  }

  // Declared first, destroyed last: the executor holds a reference to the backend.
  std::shared_ptr<Backend> backend_;
  std::unique_ptr<model> model_;
  graph::plan plan_;
  std::optional<graph::timing_cache> timings_;
  std::vector<graph::node_id> input_ids_, output_ids_;  // model_->inputs[i] is node input_ids_[i]
  std::unique_ptr<runtime::executor<Backend>> executor_;
};

}  // namespace memfmt
