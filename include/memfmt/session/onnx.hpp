// memfmt/session/onnx.hpp - an ONNX file to outputs on any backend: one include, a few lines.
//
//   #include <memfmt/session/onnx.hpp>
//   #include <memfmt/backends/onednn/backend.hpp>
//   auto s = memfmt::load_onnx<memfmt::onednn::backend>("resnet50.onnx");
//   auto outputs = s.run({{"input", image}});  // graph::parameter (dtype, ONNX shape, bytes) by name
//
// The model is imported (onnx/import.hpp), planned for the backend and built into an executor; a
// node without a memfmt layer is refused before any work, naming it. onnx::run_model runs an
// imported model once in a given plan (the tests' way: every plan, one backend).
#pragma once

#include <map>
#include <string>
#include <utility>

#include "../error.hpp"
#include "../onnx/import.hpp"
#include "session.hpp"

namespace memfmt {

// An imported model as a session's model: its graph inputs and outputs in ONNX's shapes.
// @pre m.runnable(); otherwise memfmt::error (unsupported) naming the first node without a layer.
inline model model_of(const onnx::imported_model& m) {
  if (!m.runnable())
    memfmt::detail::fail(errc::unsupported,
                         "the model has " + std::to_string(m.unsupported.size()) +
                             " node(s) without a memfmt layer; the first is op " + m.unsupported.front().op +
                             " (ONNX node '" + m.unsupported.front().onnx_node + "'): " + m.unsupported.front().reason);
  model out;
  out.network = m.network;
  out.parameters = m.parameters;
  for (const onnx::graph_value& v : m.inputs) out.inputs.push_back({v.name, v.type, v.shape});
  for (const onnx::graph_value& v : m.outputs) out.outputs.push_back({v.name, v.type, v.shape});
  return out;
}

// The ONNX file at `path` in a session on a backend of its own.
template <class Backend>
session<Backend> load_onnx(const std::string& path, const session_options& options = {},
                           const onnx::import_options& import = {}) {
  return session<Backend>(model_of(onnx::import_file(path, import)), options);
}

namespace onnx {

// Builds an executor for `plan` on `backend` (the executor's build-time errors - an op or dtype the
// backend cannot run, errc::unsupported / unsupported_dtype - propagate), runs `feeds` (one per
// graph input, by name, ONNX shapes) and returns every graph output by name in ONNX's shapes.
template <class Backend>
std::map<std::string, parameter> run_model(const imported_model& m, const graph::plan& plan, Backend& backend,
                                           const std::map<std::string, parameter>& feeds,
                                           runtime::executor_options options = {}) {
  return session<Backend>(model_of(m), backend, plan, options).run(feeds);
}

}  // namespace onnx
}  // namespace memfmt
