// memfmt/onnx/detail/translate_norm.hpp - BatchNormalization, InstanceNormalization,
// GroupNormalization, LayerNormalization, LRN, Softmax, Dropout.
// Members of detail::importer, declared in importer.hpp; users include onnx/import.hpp.
#pragma once

#include "importer.hpp"

namespace memfmt::onnx::detail {

inline void importer::require_spatial_input(const value& x) const {
  if (x.shape.size() < 3 || x.shape.size() > 5)
    throw not_expressible{"input of rank " + std::to_string(x.shape.size()) + " (the layer takes [N, C, spatial...])"};
}

inline void importer::require_channel_vectors(const node_reader& r, const value& x,
                                              std::initializer_list<const value*> vs) const {
  for (const value* v : vs)
    if (v->shape.size() != 1 || v->shape[0] != x.shape[1])
      r.fail(errc::shape_mismatch, "per-channel operand " + memfmt::detail::dims_to_string(v->shape) + " must be [" +
                                       std::to_string(x.shape[1]) + "] for input " +
                                       memfmt::detail::dims_to_string(x.shape));
}

inline void importer::batch_norm(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  require_spatial_input(x);
  const value* scale = constant_input(r, 1, true);
  const value* bias = constant_input(r, 2, true);
  const value* mean = constant_input(r, 3, true);
  const value* var = constant_input(r, 4, true);
  require_channel_vectors(r, x, {scale, bias, mean, var});
  if (r.get_int("training_mode", 0) != 0) throw not_expressible{"training_mode 1"};
  require_single_output(r);
  memfmt::batch_norm_params p;
  p.epsilon = r.get_float("epsilon", 1e-5f);
  p.momentum = 1.0 - static_cast<double>(r.get_float("momentum", 0.9f));  // ONNX keeps the running share
  const graph::node_id id = net().batch_norm(layer_name(r, scale), *x.node, p);
  bind_parameters(r, id, {named(*scale), named(*bias), named(*mean), named(*var)});
  set_tensor(r, id, x.lifted());
}

inline void importer::instance_norm(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  require_spatial_input(x);
  const value* scale = constant_input(r, 1, true);
  const value* bias = constant_input(r, 2, true);
  require_channel_vectors(r, x, {scale, bias});
  const graph::node_id id =
      net().instance_norm(layer_name(r, scale), *x.node, static_cast<double>(r.get_float("epsilon", 1e-5f)), true);
  bind_parameters(r, id, {named(*scale), named(*bias)});
  set_tensor(r, id, x.lifted());
}

// GroupNormalization (opset 18; PyTorch's nn.GroupNorm): a scale and bias of G values, one per
// group, repeated here over the group's channels; from opset 21 of C values, one per channel.
inline void importer::group_norm(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  require_spatial_input(x);
  if (!r.has("num_groups")) r.fail(errc::invalid_argument, "has no num_groups");
  const std::int64_t groups = r.get_int("num_groups", 0), c = x.shape[1];
  if (groups < 1 || c % groups != 0)
    r.fail(errc::invalid_argument, "num_groups " + std::to_string(groups) + " does not divide the " +
                                       std::to_string(c) + " channels of " + memfmt::detail::dims_to_string(x.shape));
  const value* scale = constant_input(r, 1, true);
  const value* bias = constant_input(r, 2, true);
  const bool per_group = result_.opset < 21;
  const std::int64_t n = per_group ? groups : c;
  for (const value* v : {scale, bias})
    if (v->type != x.type || v->shape.size() != 1 || v->shape[0] != n)
      r.fail(errc::shape_mismatch, "scale or bias " + memfmt::detail::dims_to_string(v->shape) + " must be [" +
                                       std::to_string(n) + "] of the input's type (one per " +
                                       (per_group ? "group, opset " : "channel, opset ") +
                                       std::to_string(result_.opset) + ")");
  const graph::node_id id =
      net().group_norm(layer_name(r, scale), *x.node, groups, static_cast<double>(r.get_float("epsilon", 1e-5f)), true);
  if (per_group && groups != c) {
    parameter w = make_parameter(x.type, {c}, r.label()), b = make_parameter(x.type, {c}, r.label());
    for (std::int64_t i = 0; i < c; ++i) {
      const auto at = static_cast<std::size_t>(i), group = static_cast<std::size_t>(i / (c / groups));
      store_element(w, at, element_as_double(*scale->constant, group), 0);
      store_element(b, at, element_as_double(*bias->constant, group), 0);
    }
    bind_parameters(r, id, {{w, ""}, {b, ""}});
  } else {
    bind_parameters(r, id, {named(*scale), named(*bias)});
  }
  set_tensor(r, id, x.lifted());
}

// LayerNormalization over the last axis of a channels-last view: layer norm over C. Over any
// other axes it is a barrier.
inline void importer::layer_norm(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  const std::size_t rank = x.shape.size();
  const std::int64_t axis = normalize_axis(r, r.get_int("axis", -1), rank);
  if (!x.channels_last || axis != static_cast<std::int64_t>(rank) - 1)
    throw not_expressible{"normalisation from axis " + std::to_string(axis) + " of " +
                          (x.channels_last ? "channels-last view " : "") + memfmt::detail::dims_to_string(x.shape) +
                          " (only over C: the last axis of a channels-last transpose)"};
  require_single_output(r);
  const value* scale = constant_input(r, 1, true);
  const value* bias = constant_input(r, 2, false);
  const std::int64_t c = x.shape.back();
  for (const value* v : {scale, bias})
    if (v && (v->shape.empty() || v->shape.back() != c || memfmt::detail::checked_numel(v->shape, "scale") != c))
      r.fail(errc::shape_mismatch, "scale or bias " + memfmt::detail::dims_to_string(v->shape) + " must be [" +
                                       std::to_string(c) + "] for input " + memfmt::detail::dims_to_string(x.shape));
  const graph::node_id id =
      net().layer_norm(layer_name(r, scale), *x.node, static_cast<double>(r.get_float("epsilon", 1e-5f)), true);
  std::vector<std::pair<parameter, std::string>> params{named(*scale)};
  if (bias) params.push_back(named(*bias));
  else params.emplace_back(make_parameter(scale->type, {c}, r.label()), "");  // no bias: zeros
  bind_parameters(r, id, params);
  set_like(r, id, x);
}

// LRN (AlexNet, GoogLeNet, CaffeNet in the ONNX model zoo): across C over `size` channels, (size -
// 1) / 2 of them before c (an even window leans the other way from PyTorch's).
inline void importer::lrn(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  require_spatial_input(x);
  if (!r.has("size")) r.fail(errc::invalid_argument, "has no size");
  const std::int64_t size = r.get_int("size", 0);
  if (size < 1) r.fail(errc::invalid_argument, "size " + std::to_string(size) + " must be >= 1");
  const memfmt::lrn_params p = memfmt::lrn_params::onnx(size, r.get_float("alpha", 1e-4f), r.get_float("beta", 0.75f),
                                                        r.get_float("bias", 1.0f));
  set_tensor(r, net().lrn(layer_name(r, nullptr), *x.node, p), x.lifted());
}

// Softmax over C (rank >= 3) or the features (rank 2). Before opset 13 the axis splits the input
// into [outer, inner] and normalises over inner: the same where the dims after C are 1.
inline void importer::softmax(const node_reader& r, bool log) {
  const value& x = tensor_input(r, 0);
  const std::size_t rank = x.shape.size();
  const std::int64_t axis = normalize_axis(r, r.get_int("axis", result_.opset < 13 ? 1 : -1), rank);
  bool ok = axis == 1;
  if (result_.opset < 13)
    for (std::size_t d = 2; d < rank; ++d) ok = ok && x.shape[d] == 1;
  if (rank == 2 && axis == 1) ok = true;
  if (!ok) throw not_expressible{"softmax over axis " + std::to_string(axis) + " of rank " + std::to_string(rank)};
  memfmt::softmax_params p;
  p.log = log;
  set_tensor(r, net().softmax(layer_name(r, nullptr), *x.node, p), x.lifted());
}

inline void importer::dropout(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  require_single_output(r);
  double ratio = r.get_float("ratio", 0.5f);
  if (result_.opset >= 12) {
    ratio = scalar_input(r, 1, 0.5);
    if (scalar_input(r, 2, 0.0) != 0.0) throw not_expressible{"Dropout in training mode"};
  }
  set_tensor(r, net().dropout(layer_name(r, nullptr), *x.node, ratio), x.lifted());
}

}  // namespace memfmt::onnx::detail
