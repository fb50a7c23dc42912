// memfmt/onnx/run.hpp - an imported model through runtime::executor, tensors in and out as ONNX has them.
//
// run_model takes the graph inputs in ONNX's logical order and shapes (a 1-D net's [N, C, L]),
// lays each out in the format the plan gives its input node, runs one forward pass of the
// executor on any backend and returns the graph outputs back in logical order and ONNX's shapes:
// what a caller comparing with another framework's tensors needs, whatever the plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../convert/convert.hpp"
#include "../error.hpp"
#include "../format/dispatch.hpp"
#include "../graph/policy.hpp"
#include "../runtime/executor.hpp"
#include "import.hpp"

namespace memfmt::onnx {

// The bytes of a dense float value of network extents `extents` moved between logical
// (channels-first) order and format `f`: to_format lays logical bytes out in f, !to_format reads
// them back. Rank 2 values and channels_first are the same bytes either way.
inline std::vector<std::byte> relayout(const parameter& value, const std::vector<std::int64_t>& extents,
                                       graph::family f, bool to_format, const std::string& what) {
  if (f == graph::family::channels_first || extents.size() < 4) return value.bytes;
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

// Builds an executor for `plan` on `backend` (the executor's build-time errors - an op or dtype the
// backend cannot run, errc::unsupported / unsupported_dtype - propagate), runs `feeds` (one per
// graph input, by name, ONNX shapes) and returns every graph output by name in ONNX's shapes.
template <class Backend>
std::map<std::string, parameter> run_model(const imported_model& m, const graph::plan& plan, Backend& backend,
                                           const std::map<std::string, parameter>& feeds,
                                           runtime::executor_options options = {}) {
  if (!m.runnable())
    memfmt::detail::fail(errc::unsupported, "run_model: the model has " + std::to_string(m.unsupported.size()) +
                                                " node(s) without a memfmt layer; the first is op " +
                                                m.unsupported.front().op + " (ONNX node '" +
                                                m.unsupported.front().onnx_node + "')");
  runtime::executor<Backend> ex(m.network, plan, backend, m.parameters, options);
  const graph::network& net = m.network;
  const auto format_of = [&](graph::node_id id) { return plan.format(id).value_or(graph::family::channels_first); };
  std::map<std::string, std::vector<std::byte>> bytes;
  std::map<std::string, runtime::tensor_ref> in_refs, out_refs;
  for (const graph_value& in : m.inputs) {
    const auto it = feeds.find(in.name);
    if (it == feeds.end())
      memfmt::detail::fail(errc::invalid_argument, "run_model: no value for graph input '" + in.name + "' (" +
                                                       runtime::describe(in.type, in.shape) + ")");
    const parameter& v = it->second;
    if (v.type != in.type || v.shape != in.shape)
      memfmt::detail::fail(errc::shape_mismatch, "run_model: graph input '" + in.name + "' is " +
                                                     runtime::describe(in.type, in.shape) + ", given " +
                                                     runtime::describe(v.type, v.shape));
    const graph::node_id id = *net.find(in.name);
    const auto& e = net.at(id).extents;
    bytes[in.name] = relayout(v, e, format_of(id), true, "run_model: graph input '" + in.name + "'");
    in_refs[in.name] = runtime::tensor_ref{v.type, e, format_of(id), bytes[in.name].data()};
  }
  for (const auto& [name, v] : feeds)
    if (!in_refs.count(name))
      memfmt::detail::fail(errc::invalid_argument, "run_model: '" + name + "' " + runtime::describe(v.type, v.shape) +
                                                       " is no graph input of the model");
  for (const graph_value& out : m.outputs) {
    const graph::node_id id = *net.find(out.name);
    const auto& n = net.at(id);
    bytes[out.name].resize(memfmt::detail::checked_bytes(n.numel(), size_of(n.type), out.name.c_str()));
    out_refs[out.name] = runtime::tensor_ref{n.type, n.extents, format_of(id), bytes[out.name].data()};
  }
  ex.forward(in_refs, out_refs);
  std::map<std::string, parameter> r;
  for (const graph_value& out : m.outputs) {
    const graph::node_id id = *net.find(out.name);
    const parameter planned{out.type, out.shape, std::move(bytes[out.name])};
    r[out.name] = parameter{out.type, out.shape,
                            relayout(planned, net.at(id).extents, format_of(id), false,
                                     "run_model: graph output '" + out.name + "'")};
  }
  return r;
}

}  // namespace memfmt::onnx
