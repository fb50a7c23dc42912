// memfmt/onnx/import.hpp - ONNX models as memfmt networks with their weights.
//
// import_file / import_bytes / import_model read a model with the ONNX project's own protobuf
// types (libonnx) and give the graph::network the planner and executor take, its parameters named
// as network::parameters() names them ("<node>.weight" ...; PyTorch's state_dict names where the
// exporter kept them) and the graph's inputs and outputs. Every shape is fixed at import (a
// symbolic batch dim takes import_options::batch), so subgraphs computing only from constants and
// shapes (Shape -> Gather -> Concat -> Pad's pads) are evaluated here (detail/fold.hpp).
//
// Layers the network describes become its nodes; a 1-D conv net's [N, C, L] values become
// [N, C, 1, L] (the same bytes in either layout); an initializer that an elementwise op reads
// becomes a constant node. Any other op becomes an opaque node that reads and
// writes channels-first, with the output shape ONNX's own shape inference gives; where that is no
// network value's (a transformer's [N, tokens, dim]), the ops up to the next one that is form one
// barrier. Every model can be planned, and imported_model::unsupported names the op and node for
// an executor to refuse.
// A malformed model (bad protobuf, missing initializer, wrong ranks, unknown attribute values, a
// shape that disagrees with ONNX's inference) is a memfmt::error naming the node and the values.
#pragma once

#include <cstdint>
#include <fstream>
#include <ios>
#include <limits>
#include <string>
#include <string_view>

#include <onnx/onnx_pb.h>

#include "../error.hpp"
#include "../io/file.hpp"
#include "detail/ops.hpp"
#include "model.hpp"

namespace memfmt::onnx {

inline imported_model import_model(const ::onnx::ModelProto& model, const import_options& options) {
  return detail::importer(model, options).run();
}

// A serialized ModelProto; `what` names it in messages.
inline imported_model import_bytes(std::string_view bytes, const import_options& options = {},
                                   const std::string& what = "ONNX model") {
  ::onnx::ModelProto model;
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    memfmt::detail::fail(errc::invalid_argument,
                         what + ": not a serialized ONNX ModelProto (" + std::to_string(bytes.size()) + " bytes)");
  if (!model.has_graph()) memfmt::detail::fail(errc::invalid_argument, what + ": the model has no graph");
  return import_model(model, options);
}

// Reads `path` (a regular file: a directory or device is refused by name) straight into the
// ModelProto, one copy of its bytes, then imports it.
inline imported_model import_file(const std::string& path, const import_options& options = {}) {
  io::input_file f(path, "ONNX model");
  // protobuf reads at most 2 GiB; larger models keep their weights in external data files.
  if (f.size() > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    memfmt::detail::fail(errc::unsupported, f.label() + " is " + std::to_string(f.size()) +
                                                " bytes, past protobuf's 2 GiB (external data is not supported)");
  std::ifstream in(path, std::ios::binary);
  ::onnx::ModelProto model;
  if (!model.ParseFromIstream(&in))
    memfmt::detail::fail(errc::invalid_argument,
                         f.label() + ": not a serialized ONNX ModelProto (" + std::to_string(f.size()) + " bytes)");
  if (!model.has_graph()) memfmt::detail::fail(errc::invalid_argument, f.label() + ": the model has no graph");
  return import_model(model, options);
}

}  // namespace memfmt::onnx
