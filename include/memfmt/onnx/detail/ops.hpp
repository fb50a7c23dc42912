// memfmt/onnx/detail/ops.hpp - the op table: one entry per ONNX op that a network layer expresses.
//
// An op that is not here becomes an opaque node (importer::opaque), as does one whose translator
// throws not_expressible. To teach the importer an op: write its translator beside its family's
// (translate_*.hpp, declared in importer.hpp), add its line here, and say whether it reads a
// channels-last transpose of a network value as the same layer over C (the `true`);
// docs/adding_a_layer.md has the whole checklist.
#pragma once

#include <map>
#include <string>

#include "importer.hpp"
#include "recognise.hpp"
#include "graph_io.hpp"
#include "translate_conv.hpp"
#include "translate_elementwise.hpp"
#include "translate_norm.hpp"
#include "translate_shape.hpp"

namespace memfmt::onnx::detail {

inline const std::map<std::string, importer::op_entry>& importer::ops() {
  using R = const node_reader&;
  static const std::map<std::string, op_entry> table = {
      {"Conv", {[](importer& i, R r) { i.conv(r); }}},
      {"ConvTranspose", {[](importer& i, R r) { i.conv_transpose(r); }}},
      {"BatchNormalization", {[](importer& i, R r) { i.batch_norm(r); }}},
      {"InstanceNormalization", {[](importer& i, R r) { i.instance_norm(r); }}},
      {"LRN", {[](importer& i, R r) { i.lrn(r); }}},
      {"Relu", {[](importer& i, R r) { i.activation(r, memfmt::activation::relu); }, true}},
      {"Sigmoid",
       {[](importer& i, R r) {
          if (!i.times_input(r, {}, memfmt::activation::silu)) i.activation(r, memfmt::activation::sigmoid);
        },
        true}},
      {"Softplus",
       {[](importer& i, R r) {
          if (!i.times_input(r, {"Tanh"}, memfmt::activation::mish)) i.activation(r, memfmt::activation::softplus);
        },
        true}},
      {"Mish", {[](importer& i, R r) { i.activation(r, memfmt::activation::mish); }, true}},
      {"Tanh", {[](importer& i, R r) { i.activation(r, memfmt::activation::tanh); }, true}},
      {"HardSwish", {[](importer& i, R r) { i.activation(r, memfmt::activation::hardswish); }, true}},
      {"HardSigmoid",
       {[](importer& i, R r) {
          const double alpha = r.get_float("alpha", 0.2f), beta = r.get_float("beta", 0.5f);
          if (near(alpha, 1.0 / 6.0) && beta == 0.5 && i.times_input(r, {}, memfmt::activation::hardswish)) return;
          i.activation(r, activation_params::hardsigmoid(alpha, beta));
        },
        true}},
      {"LeakyRelu",
       {[](importer& i, R r) { i.activation(r, activation_params::leaky_relu(r.get_float("alpha", 0.01f))); }, true}},
      {"Elu", {[](importer& i, R r) { i.activation(r, activation_params::elu(r.get_float("alpha", 1.0f))); }, true}},
      {"PRelu", {[](importer& i, R r) { i.prelu(r); }, true}},
      {"Clip", {[](importer& i, R r) { i.clip(r); }, true}},
      {"Add", {[](importer& i, R r) { i.binary(r, memfmt::binary_op::add); }, true}},
      {"Sub", {[](importer& i, R r) { i.binary(r, memfmt::binary_op::sub); }, true}},
      {"Mul", {[](importer& i, R r) { i.binary(r, memfmt::binary_op::mul); }, true}},
      {"Div", {[](importer& i, R r) { i.binary(r, memfmt::binary_op::div); }, true}},
      {"MaxPool", {[](importer& i, R r) { i.pool(r, memfmt::pool_kind::max); }}},
      {"AveragePool", {[](importer& i, R r) { i.pool(r, memfmt::pool_kind::average); }}},
      {"GlobalAveragePool", {[](importer& i, R r) { i.global_pool(r, memfmt::pool_kind::average, false); }}},
      {"GlobalMaxPool", {[](importer& i, R r) { i.global_pool(r, memfmt::pool_kind::max, false); }}},
      {"ReduceMean", {[](importer& i, R r) { i.reduce(r, memfmt::reduce_op::mean); }, true}},
      {"ReduceMax", {[](importer& i, R r) { i.reduce(r, memfmt::reduce_op::max); }, true}},
      {"ReduceMin", {[](importer& i, R r) { i.reduce(r, memfmt::reduce_op::min); }, true}},
      {"ReduceSum", {[](importer& i, R r) { i.reduce(r, memfmt::reduce_op::sum); }, true}},
      {"ReduceL1", {[](importer& i, R r) { i.reduce(r, memfmt::reduce_op::l1); }, true}},
      {"ReduceL2", {[](importer& i, R r) { i.reduce(r, memfmt::reduce_op::l2); }, true}},
      {"ReduceSumSquare", {[](importer& i, R r) { i.reduce(r, memfmt::reduce_op::sum_square); }, true}},
      {"Pow", {[](importer& i, R r) { i.power(r); }, true}},
      {"Concat", {[](importer& i, R r) { i.concat(r); }, true}},
      {"Split", {[](importer& i, R r) { i.split(r); }, true}},
      {"Slice", {[](importer& i, R r) { i.slice(r); }, true}},
      {"Resize", {[](importer& i, R r) { i.resize(r); }}},
      {"Upsample", {[](importer& i, R r) { i.resize(r); }}},
      {"Pad", {[](importer& i, R r) { i.pad(r); }}},
      {"Flatten", {[](importer& i, R r) { i.flatten(r); }}},
      {"Reshape", {[](importer& i, R r) { i.reshape(r); }}},
      {"Gemm", {[](importer& i, R r) { i.gemm(r); }}},
      {"MatMul", {[](importer& i, R r) { i.matmul(r); }, true}},
      {"Softmax", {[](importer& i, R r) { i.softmax(r, false); }}},
      {"LogSoftmax", {[](importer& i, R r) { i.softmax(r, true); }}},
      {"Dropout", {[](importer& i, R r) { i.dropout(r); }}},
      {"Identity", {[](importer& i, R r) { i.alias(r.proto().output(0), i.tensor_input(r, 0)); }, true}},
      {"DepthToSpace", {[](importer& i, R r) { i.depth_space(r, true); }}},
      {"SpaceToDepth", {[](importer& i, R r) { i.depth_space(r, false); }}},
      {"Transpose", {[](importer& i, R r) { i.transpose(r); }, true}},
      {"LayerNormalization", {[](importer& i, R r) { i.layer_norm(r); }, true}},
      {"GroupNormalization", {[](importer& i, R r) { i.group_norm(r); }}},
      {"Gelu", {[](importer& i, R r) { i.gelu(r); }, true}},
  };
  return table;
}

}  // namespace memfmt::onnx::detail
