// memfmt/onnx/model.hpp - what an ONNX import takes and gives: import_options, imported_model, and
// which node inputs are weights (is_parameter_slot, parameter_inputs). onnx/import.hpp imports.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "../dtype.hpp"
#include "../graph/network.hpp"
#include "../graph/parameter_store.hpp"
#include "unsupported_node.hpp"

namespace memfmt::onnx {

struct import_options {
  std::int64_t batch = 1;                                       // a symbolic first dim of a graph input
  std::map<std::string, std::int64_t> dims;                     // other symbolic dims, by their dim_param name
  format_family input_format = format_family::channels_first;   // the pins of the graph inputs
  format_family output_format = format_family::channels_first;  // and outputs
  // Values for graph inputs that are weights at run time (ONNX's backend tests feed a Conv's W as
  // an input): they become constants, as initializers would. parameter_inputs() says which.
  std::map<std::string, graph::parameter> input_values;
  bool check_shapes = true;  // each value's shape must equal ONNX shape inference's, where it has one
  // A bound on the work a model can ask of the importer: the elements of all the constants it folds
  // (each one is at most 2^26). Shape arithmetic folds a few; past the bound, errc::unsupported.
  std::int64_t max_folded_elements = std::int64_t{1} << 28;
};

// A graph input or output: its name (the network node's name too), shape as the model states it
// (a 1-D net's [N, C, L], where the network has [N, C, 1, L]) and dtype.
struct graph_value {
  std::string name;
  std::vector<std::int64_t> shape;
  memfmt::dtype type = memfmt::dtype::float32;
};

struct imported_model {
  graph::network network;
  graph::parameter_store parameters;          // every parameter network.parameters() lists
  std::map<std::string, std::string> source;  // parameter name -> the ONNX tensor it came from
  // The graph's inputs and the outputs that are network values (one that is not, such as a
  // detector's boxes behind a barrier, ends the barrier in an opaque node instead).
  std::vector<graph_value> inputs, outputs;
  std::vector<unsupported_node> unsupported;
  std::int64_t opset = 0;
  bool runnable() const noexcept { return unsupported.empty(); }
};

imported_model import_model(const ::onnx::ModelProto& model, const import_options& options = {});

// ---- which node inputs are weights ----

// Input `index` of `op` is a weight or shape operand (a Conv's W and B, a Pad's pads, ...), not
// data: the importer needs it constant.
inline bool is_parameter_slot(const std::string& op, int index) {
  static const std::map<std::string, int> first_parameter = {{"Conv", 1},
                                                             {"ConvTranspose", 1},
                                                             {"BatchNormalization", 1},
                                                             {"InstanceNormalization", 1},
                                                             {"LayerNormalization", 1},
                                                             {"GroupNormalization", 1},
                                                             {"Gemm", 1},
                                                             {"MatMul", 1},
                                                             {"Pad", 1},
                                                             {"Resize", 1},
                                                             {"Upsample", 1},
                                                             {"Clip", 1},
                                                             {"Reshape", 1},
                                                             {"Slice", 1},
                                                             {"Split", 1},
                                                             {"Dropout", 1},
                                                             {"Unsqueeze", 1},
                                                             {"Squeeze", 1},
                                                             {"Expand", 1},
                                                             {"ConstantOfShape", 0},
                                                             {"ReduceMean", 1},
                                                             {"ReduceMax", 1},
                                                             {"ReduceMin", 1},
                                                             {"ReduceSum", 1},
                                                             {"ReduceL1", 1},
                                                             {"ReduceL2", 1},
                                                             {"ReduceSumSquare", 1},
                                                             {"PRelu", 1},
                                                             {"Pow", 1}};
  const auto it = first_parameter.find(op);
  return it != first_parameter.end() && index >= it->second;
}

// The graph inputs (without an initializer) that every consumer reads in a parameter slot: what an
// ONNX backend test feeds as an input but a deployed model has as an initializer.
inline std::set<std::string> parameter_inputs(const ::onnx::ModelProto& model) {
  const auto& g = model.graph();
  std::set<std::string> init;
  for (const auto& t : g.initializer()) init.insert(t.name());
  std::map<std::string, bool> only_parameter;
  for (const auto& in : g.input())
    if (!init.count(in.name())) only_parameter[in.name()] = false;
  std::map<std::string, int> uses;
  for (const auto& n : g.node())
    for (int i = 0; i < n.input_size(); ++i) {
      const auto it = only_parameter.find(n.input(i));
      if (it == only_parameter.end()) continue;
      const bool slot = is_parameter_slot(n.op_type(), i);
      it->second = uses[n.input(i)]++ == 0 ? slot : (it->second && slot);
    }
  std::set<std::string> r;
  for (const auto& [name, p] : only_parameter)
    if (p) r.insert(name);
  return r;
}
}  // namespace memfmt::onnx
