// memfmt/onnx/detail/translate_elementwise.hpp - activations, Clip, PRelu, binary ops and their
// constant operands, Pow, reductions.
// Members of detail::importer, declared in importer.hpp; users include onnx/import.hpp.
#pragma once

#include "importer.hpp"

namespace memfmt::onnx::detail {

// Gelu (opset 20): the exact GELU, or with approximate "tanh" PyTorch's tanh form.
inline void importer::gelu(const node_reader& r) {
  const std::string approximate = r.get_choice("approximate", "none", {"none", "tanh"});
  activation(r, approximate == "tanh" ? memfmt::activation::gelu_tanh : memfmt::activation::gelu);
}

inline void importer::activation(const node_reader& r, const activation_params& f) {
  const value& x = tensor_input(r, 0);
  set_like(r, net().activation(layer_name(r, nullptr), *x.node, f), x);
}

// PRelu with a constant slope (per channel or one): max(x, 0) + slope * min(x, 0), the min a clip
// to [-inf, 0]. One branch is an exact 0, so each output is PRelu's single rounding of slope * x,
// infinities included; four memory-bound passes where one would do. Before opset 7 (no numpy
// broadcasting yet) a slope of C values is per channel, as PyTorch's exporter wrote PReLU(C).
inline void importer::prelu(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  value s = *constant_input(r, 1, true);
  if (result_.opset < 7 && s.shape.size() == 1 && x.shape.size() >= 2 && s.shape[0] == x.shape[1]) {
    s.shape.resize(x.shape.size() - 1, 1);
    s.constant->shape = s.shape;
  }
  const graph::node_id slope = constant_node(r, r.input(1), s, x);
  const std::string name = layer_name(r, nullptr);
  const graph::node_id pos = net().relu(unique_name(name + ".positive"), *x.node);
  const graph::node_id neg = net().activation(unique_name(name + ".negative"), *x.node,
                                              activation_params::clip(-std::numeric_limits<double>::infinity(), 0.0));
  const graph::node_id scaled = net().mul(unique_name(name + ".scaled"), neg, slope);
  set_like(r, net().add(name, pos, scaled), x);
}

// Clip(0, 6) is relu6, Clip(0, inf) relu, any other a clip; bounds from attributes before opset
// 11, inputs after.
inline void importer::clip(const node_reader& r) {
  const double inf = std::numeric_limits<double>::infinity();
  double lo = -inf, hi = inf;
  if (result_.opset < 11) {
    lo = r.get_float("min", -std::numeric_limits<float>::max());
    hi = r.get_float("max", std::numeric_limits<float>::max());
  } else {
    lo = scalar_input(r, 1, -inf);
    hi = scalar_input(r, 2, inf);
  }
  if (lo == 0.0 && hi == 6.0) return activation(r, memfmt::activation::relu6);
  if (lo == 0.0 && hi >= static_cast<double>(std::numeric_limits<float>::max()))
    return activation(r, memfmt::activation::relu);
  if (std::isnan(lo) || std::isnan(hi) || lo > hi)
    throw not_expressible{"Clip to [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (needs min <= max)"};
  activation(r, activation_params::clip(lo, hi));
}

// Two network values of one rank, or a network value and a constant (x * 0.5, (x - mean) / std):
// the constant becomes a constant node.
inline void importer::binary(const node_reader& r, memfmt::binary_op op) {
  const value& a = input_value(r, 0);
  const value& b = input_value(r, 1);
  if (!a.node && !b.node) throw not_expressible{"both operands are constants"};
  const value& x = a.node ? a : b;
  if (a.node && b.constant && gelu(r, a, r.input(0), r.input(1), op)) return;
  if (op == memfmt::binary_op::mul && a.node && r.input(0) == r.input(1) && gelu_tanh(r, a, r.input(0))) return;
  if (a.node && b.node && a.shape.size() != b.shape.size())
    throw not_expressible{"operands of ranks " + std::to_string(a.shape.size()) + " and " +
                          std::to_string(b.shape.size())};
  if (a.node && b.node && a.channels_last != b.channels_last)
    throw not_expressible{"one operand is transposed to channels-last and the other is not"};
  const graph::node_id ia = a.node ? *a.node : constant_node(r, r.input(0), a, x);
  const graph::node_id ib = b.node ? *b.node : constant_node(r, r.input(1), b, x);
  const graph::node_id id = net().binary(layer_name(r, nullptr), ia, ib, op);
  set_like(r, id, x);
}

// Constant c, an operand of an elementwise op whose other operand is network value x, as a
// constant node of x's rank: c's shape right-aligned with leading 1s (ONNX's numpy broadcasting),
// moved back to [N, C, spatial...] where x is a channels-last view (only where that keeps the
// element order: a per-channel [C] or a scalar) and lifted as x is. One node per constant and
// shape, however many ops read it.
inline graph::node_id importer::constant_node(const node_reader& r, const std::string& name, const value& c,
                                              const value& x) {
  if (c.shape.size() > x.shape.size())
    throw not_expressible{"constant '" + name + "' " + memfmt::detail::dims_to_string(c.shape) +
                          " has a higher rank than " + memfmt::detail::dims_to_string(x.shape)};
  if (std::find(c.shape.begin(), c.shape.end(), 0) != c.shape.end())
    throw not_expressible{"constant '" + name + "' " + memfmt::detail::dims_to_string(c.shape) + " is empty"};
  if (c.type != x.type || !memfmt::is_floating(c.type))
    throw not_expressible{"constant '" + name + "' is " + std::string(memfmt::to_string(c.type)) + ", its operand " +
                          std::string(memfmt::to_string(x.type))};
  shape_t s(x.shape.size() - c.shape.size(), 1);
  s.insert(s.end(), c.shape.begin(), c.shape.end());
  if (x.channels_last) {
    const std::vector<std::int64_t> perm = channels_first_perm(s.size());
    std::int64_t last = -1;
    for (std::int64_t from : perm) {
      if (s[static_cast<std::size_t>(from)] == 1) continue;
      if (from < last)
        throw not_expressible{"constant '" + name + "' " + memfmt::detail::dims_to_string(c.shape) +
                              " would need its elements reordered to broadcast over a channels-last transpose"};
      last = from;
    }
    s = permuted(s, perm);
  }
  if (x.lifted()) s = lift(s);
  const auto key = std::make_pair(name, s);
  if (const auto it = constant_nodes_.find(key); it != constant_nodes_.end()) return it->second;
  const graph::node_id id = net().constant(unique_name(name), s, c.type);
  bind_parameters(r, id, {named(c)});
  constant_nodes_.emplace(key, id);
  return id;
}

// A reduction over C and / or spatial axes is a reduce layer; ReduceMean / ReduceMax over every
// spatial axis of a channels-first value are global pooling, and ReduceMean over C may instead
// start a layer norm written out (decomposed_layer_norm). keepdims 0 drops the reduced axes: a
// flatten follows where [N, F] remains, nothing where the network's extents already read as the
// ONNX shape (a rank-4 value reduced over H is a rank-3 [N, C, W]); other drops, and reductions
// over N, are barriers.
inline void importer::reduce(const node_reader& r, memfmt::reduce_op op) {
  const value& x = tensor_input(r, 0);
  if (op == memfmt::reduce_op::mean && decomposed_layer_norm(r, x)) return;
  require_spatial_input(x);
  const std::size_t rank = x.shape.size();
  shape_t axes = reduce_axes(r);
  if (axes.empty()) return alias(r.proto().output(0), x);
  for (auto& a : axes) a = normalize_axis(r, a, rank);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  const bool keepdims = r.get_int("keepdims", 1) != 0;
  if (axes.front() == 0)
    throw not_expressible{"reduction over axes " + memfmt::detail::dims_to_string(axes) + ", N among them"};
  shape_t spatial;
  for (std::size_t d = 2; d < rank; ++d) spatial.push_back(static_cast<std::int64_t>(d));
  if (!x.channels_last && axes == spatial && (op == memfmt::reduce_op::mean || op == memfmt::reduce_op::max))
    return global_pool(r, op == memfmt::reduce_op::mean ? memfmt::pool_kind::average : memfmt::pool_kind::max,
                       !keepdims);
  memfmt::reduce_params p{op, 0};
  shape_t dropped = x.shape;  // the ONNX output with keepdims 0
  for (auto a = axes.rbegin(); a != axes.rend(); ++a) {
    std::int64_t d = x.channels_last ? channels_last_perm(rank)[static_cast<std::size_t>(*a)] : *a;
    if (x.lifted() && d >= 2) ++d;
    p.axes |= memfmt::axis_bit(static_cast<int>(d));
    dropped.erase(dropped.begin() + *a);
  }
  const auto describe = [&] {
    return "reduction over axes " + memfmt::detail::dims_to_string(axes) + " of " +
           (x.channels_last ? "a channels-last view " : "") + memfmt::detail::dims_to_string(x.shape) +
           " with keepdims 0";
  };
  if (!keepdims && dropped.size() < 2) throw not_expressible{describe() + " (leaves [N] alone)"};
  if (!keepdims && dropped.size() > 2) {
    shape_t kept = net().at(*x.node).extents;
    for (std::size_t d = 1; d < kept.size(); ++d)
      if (p.axes & memfmt::axis_bit(static_cast<int>(d))) kept[d] = 1;
    if (x.channels_last || lift(dropped) != kept)
      throw not_expressible{describe() + " (the network value would keep axes where ONNX drops them)"};
  }
  const graph::node_id id = net().reduce(layer_name(r, nullptr), *x.node, p);
  if (keepdims) return set_like(r, id, x);
  if (dropped.size() > 2) return set_tensor(r, r.proto().output(0), id, dropped);
  const graph::node_id f = net().flatten(unique_name(net().at(id).name + ".flatten"), id);
  set_tensor(r, r.proto().output(0), f, net().at(f).extents);
}

// Pow by the constant 2 is x * x (SimAM's and a variance's squares), unless a sum over C reads it
// (squares_summed_over_channels: one sum_square reduction). Other exponents are barriers.
inline void importer::power(const node_reader& r) {
  if (squares_summed_over_channels(r)) return;
  const value& x = tensor_input(r, 0);
  if (r.inputs() != 2 || scalar_constant(r.input(1)) != 2.0)
    throw not_expressible{"Pow by another exponent than the constant 2"};
  set_like(r, net().mul(layer_name(r, nullptr), *x.node, *x.node), x);
}

// A reduction's axes: the attribute, or (ReduceSum from opset 13, the others from 18) the
// constant second input. None means all axes, N among them, which no layer expresses, unless
// noop_with_empty_axes makes it an identity (empty axes returned).
inline shape_t importer::reduce_axes(const node_reader& r) {
  shape_t axes = r.get_ints("axes");
  if (axes.empty() && r.inputs() > 1 && !r.proto().input(1).empty())
    if (const value* a = constant_input(r, 1, true)) axes = int64_values(*a->constant);
  if (axes.empty() && r.get_int("noop_with_empty_axes", 0) == 0) throw not_expressible{"reduction over all axes"};
  return axes;
}

}  // namespace memfmt::onnx::detail
