// memfmt/onnx/detail/recognise.hpp - the exporters' decompositions recognised as one layer: GELU
// (exact and tanh), SiLU, Mish, hardswish, layer norm, group norm, a channel sum of squares, and a
// Gather that is a transpose.
// Members of detail::importer, declared in importer.hpp; users include onnx/import.hpp.
#pragma once

#include "importer.hpp"

namespace memfmt::onnx::detail {

// x * (1 + erf(x / sqrt 2)) / 2 as exporters write the exact GELU (PyTorch: Div by sqrt 2, Erf,
// Add 1, Mul by x, Mul by 0.5, or the last two swapped; x * (1 / sqrt 2) and either operand order
// alike) is one gelu
// activation, and the later nodes of the pattern are skipped. Each intermediate value must have
// that one reader. Called with the first node (x op c, c constant); false where it is no GELU.
inline bool importer::gelu(const node_reader& r, const value& x, const std::string& x_name, const std::string& c_name,
                           memfmt::binary_op op) {
  const double sqrt2 = std::sqrt(2.0);
  if (!(op == memfmt::binary_op::div && near(scalar_constant(c_name), sqrt2)) &&
      !(op == memfmt::binary_op::mul && near(scalar_constant(c_name), 1.0 / sqrt2)))
    return false;
  const ::onnx::NodeProto* erf = only_reader(r.proto().output(0));
  if (!erf || erf->op_type() != "Erf" || erf->output_size() != 1) return false;
  const ::onnx::NodeProto* add = only_reader(erf->output(0));
  if (!add || add->op_type() != "Add" || add->input_size() != 2 ||
      !near(scalar_constant(other_input(*add, erf->output(0))), 1.0))
    return false;
  // Then * x, * 0.5 (the TorchScript exporter) or * 0.5, * x (the dynamo exporter).
  const ::onnx::NodeProto* mul = only_reader(add->output(0));
  if (!mul || mul->op_type() != "Mul" || mul->input_size() != 2) return false;
  const std::string first = other_input(*mul, add->output(0));
  const bool x_first = first == x_name;
  if (!x_first && !near(scalar_constant(first), 0.5)) return false;
  const ::onnx::NodeProto* last = only_reader(mul->output(0));
  if (!last || last->op_type() != "Mul" || last->input_size() != 2) return false;
  const std::string second = other_input(*last, mul->output(0));
  if (x_first ? !near(scalar_constant(second), 0.5) : second != x_name) return false;
  fused_.insert({erf, add, mul, last});
  set_like(r, last->output(0), net().activation(layer_name(r, nullptr), *x.node, memfmt::activation::gelu), x);
  return true;
}

// The tanh GELU as PyTorch 1.13 writes it (F.gelu(x, approximate="tanh")): x * x, * x, * 0.044715,
// + x, * sqrt(2 / pi), Tanh, + 1, * x, * 0.5, either operand order alike, is one gelu_tanh
// activation, and the later nodes are skipped. Each intermediate value must have that one reader.
// Called with the first node (x * x); false where it is no tanh GELU.
inline bool importer::gelu_tanh(const node_reader& r, const value& x, const std::string& x_name) {
  // The one reader of `from`, an `op` whose other operand is `other` (a name) or, with `constant`,
  // a scalar constant near it.
  const auto next = [&](const std::string& from, const char* op, const std::string* other,
                        std::optional<double> constant) -> const ::onnx::NodeProto* {
    const ::onnx::NodeProto* n = only_reader(from);
    if (!n || n->op_type() != op || n->output_size() != 1) return nullptr;
    if (!other && !constant) return n->input_size() == 1 ? n : nullptr;
    if (n->input_size() != 2) return nullptr;
    const std::string& o = other_input(*n, from);
    return (other && o == *other) || (constant && near(scalar_constant(o), *constant)) ? n : nullptr;
  };
  const ::onnx::NodeProto* cube = next(r.proto().output(0), "Mul", &x_name, std::nullopt);
  const ::onnx::NodeProto* kappa = cube ? next(cube->output(0), "Mul", nullptr, memfmt::gelu_tanh_cubic) : nullptr;
  const ::onnx::NodeProto* sum = kappa ? next(kappa->output(0), "Add", &x_name, std::nullopt) : nullptr;
  const ::onnx::NodeProto* beta =
      sum ? next(sum->output(0), "Mul", nullptr, memfmt::gelu_tanh_sqrt_2_over_pi) : nullptr;
  const ::onnx::NodeProto* tanh = beta ? next(beta->output(0), "Tanh", nullptr, std::nullopt) : nullptr;
  const ::onnx::NodeProto* one = tanh ? next(tanh->output(0), "Add", nullptr, 1.0) : nullptr;
  const ::onnx::NodeProto* times_x = one ? next(one->output(0), "Mul", &x_name, std::nullopt) : nullptr;
  const ::onnx::NodeProto* half = times_x ? next(times_x->output(0), "Mul", nullptr, 0.5) : nullptr;
  if (!half) return false;
  fused_.insert({cube, kappa, sum, beta, tanh, one, times_x, half});
  set_like(r, half->output(0), net().activation(layer_name(r, nullptr), *x.node, memfmt::activation::gelu_tanh), x);
  return true;
}

// f(x) * x, as exporters write silu (Sigmoid, Mul: PyTorch's nn.SiLU), hardswish (HardSigmoid with
// PyTorch's slope 1/6 and offset 1/2, Mul: nn.Hardswish before opset 14) and mish (Softplus, Tanh,
// Mul: nn.Mish before opset 18): node r, then the one-input ops `through`, then a Mul by r's input,
// each intermediate value read by the next node only, is one activation f, which the executor can
// fuse into the conv before it where two or three memory-bound passes would run; the later nodes
// are skipped. False where the pattern is not there.
inline bool importer::times_input(const node_reader& r, std::initializer_list<const char*> through,
                                  memfmt::activation f) {
  std::string at = r.proto().output(0);
  std::vector<const ::onnx::NodeProto*> skipped;
  for (const char* op : through) {
    const ::onnx::NodeProto* n = only_reader(at);
    if (!n || n->op_type() != op || n->input_size() != 1 || n->output_size() != 1) return false;
    skipped.push_back(n);
    at = n->output(0);
  }
  const ::onnx::NodeProto* mul = only_reader(at);
  if (!mul || mul->op_type() != "Mul" || mul->input_size() != 2 || mul->output_size() != 1 ||
      other_input(*mul, at) != r.input(0))
    return false;
  skipped.push_back(mul);
  const value& x = tensor_input(r, 0);
  fused_.insert(skipped.begin(), skipped.end());
  set_like(r, mul->output(0), net().activation(layer_name(r, nullptr), *x.node, f), x);
  return true;
}

// x.pow(2).sum(1, keepdim=True), optionally .sqrt() (SSD's L2Norm as its authors wrote it): Pow by
// 2 read only by a ReduceSum over C with keepdims is one sum_square reduction, l2 when a Sqrt is
// the sum's only reader. Called at the Pow; false where it is no such pattern.
inline bool importer::squares_summed_over_channels(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  if (!x.node || x.channels_last || x.shape.size() < 3 || x.shape.size() > 5 || r.inputs() != 2 ||
      scalar_constant(r.input(1)) != 2.0)
    return false;
  const ::onnx::NodeProto* sum = only_reader(r.proto().output(0));
  if (!sum || sum->op_type() != "ReduceSum" || sum->output_size() != 1 || sum->input(0) != r.proto().output(0))
    return false;
  const node_reader sr(*sum, "ONNX node '" + sum->name() + "' (ReduceSum)");
  if (sr.get_int("keepdims", 1) == 0) return false;
  shape_t axes = sr.get_ints("axes");
  if (axes.empty() && sum->input_size() > 1)
    if (const std::optional<value> a = constant_named(sum->input(1)); a && a->type == memfmt::dtype::int64)
      axes = int64_values(*a->constant);
  if (axes.size() != 1 || normalize_axis(sr, axes[0], x.shape.size()) != 1) return false;
  const ::onnx::NodeProto* sqrt = only_reader(sum->output(0));
  const bool root = is_node(sqrt, "Sqrt", 1);
  const graph::node_id id = net().channel_reduce(layer_name(r, nullptr), *x.node,
                                                 root ? memfmt::reduce_op::l2 : memfmt::reduce_op::sum_square);
  fused_.insert(sum);
  if (root) fused_.insert(sqrt);
  set_like(r, (root ? sqrt : sum)->output(0), id, x);
  return true;
}

// The only reader of `name` is a Transpose whose only reader is a Reshape, and neither value is a
// graph output: a chain finish_chain may turn into one layer.
inline bool importer::chain_follows(const std::string& name) const {
  const ::onnx::NodeProto* t = only_reader(name);
  if (!t || t->op_type() != "Transpose" || t->output_size() != 1) return false;
  const ::onnx::NodeProto* s = only_reader(t->output(0));
  return s && s->op_type() == "Reshape";
}

// A transpose as PyTorch 2's dynamo exporter writes an as_strided view (ConvNeXt's LayerNorm2d
// after its 1x1 pooling): x reshaped to one dim, then a Gather (axis 0) of constant indices, the
// flat offsets of x's elements in the order of some transpose of x. Called at the Reshape: the
// transpose as transpose() imports it, the Gather skipped; false where it is no such pair.
inline bool importer::gathered_transpose(const node_reader& r, const value& x, const shape_t& target) {
  const std::size_t rank = x.shape.size();
  if (!x.node || target.size() != 1 || rank < 2 || rank > 5) return false;
  const std::int64_t numel = memfmt::detail::checked_numel(x.shape, "reshape input");
  // The comparison below reads every index once per candidate order (at most 120).
  if (target[0] != numel || numel > (std::int64_t{1} << 20)) return false;
  const ::onnx::NodeProto* gather = only_reader(r.proto().output(0));
  if (!is_node(gather, "Gather", 2) || gather->input(0) != r.proto().output(0) || gather->output_size() != 1 ||
      node_reader(*gather, "ONNX node '" + gather->name() + "'").get_int("axis", 0) != 0)
    return false;
  const std::optional<value> indices = constant_named(gather->input(1));
  if (!indices || (indices->type != memfmt::dtype::int64 && indices->type != memfmt::dtype::int32) ||
      indices->shape.size() != rank)
    return false;
  const shape_t at = int64_values(*indices->constant);
  const shape_t strides = row_major_strides(x.shape);
  std::vector<std::int64_t> perm(rank);
  for (std::size_t d = 0; d < rank; ++d) perm[d] = static_cast<std::int64_t>(d);
  do {
    if (permuted(x.shape, perm) != indices->shape) continue;
    // Element i of the transposed tensor (row-major over its dims) and its offset in x.
    shape_t pos(rank, 0);
    bool same = true;
    for (std::int64_t i = 0; i < numel && same; ++i) {
      std::int64_t offset = 0;
      for (std::size_t d = 0; d < rank; ++d) offset += pos[d] * strides[static_cast<std::size_t>(perm[d])];
      same = at[static_cast<std::size_t>(i)] == offset;
      for (std::size_t d = rank; d-- > 0;) {
        if (++pos[d] < indices->shape[d]) break;
        pos[d] = 0;
      }
    }
    if (!same) continue;
    transpose_value(r, x, perm, gather->output(0));
    fused_.insert(gather);
    return true;
  } while (std::next_permutation(perm.begin(), perm.end()));
  return false;
}

// n is an `op` node of `inputs` inputs and one output (what a pattern reads; a mutated file's
// nodes may have none).
inline bool importer::is_node(const ::onnx::NodeProto* n, const char* op, int inputs) {
  return n && n->op_type() == op && n->input_size() == inputs && n->output_size() == 1;
}

// The constant other operand of `op` node n (which reads `from`), if it holds one value per
// channel of x placed at C when broadcast against x (C on axis c_axis: [C] for a channels-last
// view, [C, 1, 1] or [1, C, 1, 1] for a 2-D network value); its shape is then [C].
inline std::optional<value> importer::channel_constant(const ::onnx::NodeProto* n, const std::string& from,
                                                       const char* op, const value& x, std::size_t c_axis) const {
  std::optional<value> v;
  if (is_node(n, op, 2)) v = constant_named(other_input(*n, from));
  const std::size_t rank = x.shape.size(), trailing = rank - c_axis;  // dims from C to the end
  const std::int64_t c = x.shape[c_axis];
  if (v && (v->type != x.type || v->shape.size() < trailing || v->shape.size() > rank ||
            v->shape[v->shape.size() - trailing] != c ||
            memfmt::detail::checked_numel(v->shape, "per-channel operand") != c))
    v.reset();
  if (v) v->constant->shape = {c};
  return v;
}

inline importer::channel_affine_t importer::channel_affine(std::string& out, std::set<const ::onnx::NodeProto*>& nodes,
                                                           const value& x, std::size_t c_axis) const {
  channel_affine_t t;
  const ::onnx::NodeProto* mul = only_reader(out);
  t.weight = channel_constant(mul, out, "Mul", x, c_axis);
  if (!t.weight) return t;
  nodes.insert(mul);
  out = mul->output(0);
  const ::onnx::NodeProto* add = only_reader(out);
  t.bias = channel_constant(add, out, "Add", x, c_axis);
  if (t.bias) nodes.insert(add), out = add->output(0);
  return t;
}

// Layer norm written out over C, of x that is a channels-last view (as exporters before opset 17
// write nn.LayerNorm after a permute; the reduced axis is the last) or a network value (the
// LayerNorm2d of detectron2, SAM and the original ConvNeXt: x.mean(1, keepdim=True); axis 1):
//   mean = ReduceMean(x), d = x - mean, var = ReduceMean(Pow(d, 2)), y = d / Sqrt(var + eps),
//   then optionally y * weight and + bias (constants of C values that broadcast along C: [C] for
//   a view, [C, 1, 1] or [1, C, 1, 1] for axis 1; either operand order).
// Called at the first ReduceMean; every intermediate value must be read only within the pattern
// (d by the Pow and the Div), whose later nodes are then skipped. false where it is no layer norm.
inline bool importer::decomposed_layer_norm(const node_reader& r, const value& x) {
  const std::size_t rank = x.shape.size();
  if (!x.node || rank < 3 || rank > 5) return false;
  const std::size_t c_axis = x.channels_last ? rank - 1 : 1;
  const std::int64_t c = x.shape[c_axis];
  const auto over_c = [&](const ::onnx::NodeProto& n) {
    const node_reader nr(n, "ONNX node '" + n.name() + "'");
    const shape_t axes = nr.get_ints("axes");
    return n.op_type() == "ReduceMean" && n.input_size() == 1 && nr.get_int("keepdims", 1) == 1 && axes.size() == 1 &&
           (axes[0] == static_cast<std::int64_t>(c_axis) ||
            axes[0] == static_cast<std::int64_t>(c_axis) - static_cast<std::int64_t>(rank));
  };
  const std::string& x_name = r.input(0);
  const std::string& mean = r.proto().output(0);
  if (!over_c(r.proto())) return false;
  const ::onnx::NodeProto* sub = only_reader(mean);
  if (!is_node(sub, "Sub", 2) || sub->input(0) != x_name || sub->input(1) != mean) return false;
  const std::string& d = sub->output(0);
  const auto readers = readers_.find(d);
  if (readers == readers_.end() || readers->second.size() != 2) return false;
  const ::onnx::NodeProto* pow = readers->second[0]->op_type() == "Pow" ? readers->second[0] : readers->second[1];
  const ::onnx::NodeProto* div = pow == readers->second[0] ? readers->second[1] : readers->second[0];
  if (!is_node(pow, "Pow", 2) || pow->input(0) != d || scalar_constant(pow->input(1)) != 2.0) return false;
  const ::onnx::NodeProto* var = only_reader(pow->output(0));
  if (!var || var->output_size() != 1 || !over_c(*var)) return false;
  const ::onnx::NodeProto* add_eps = only_reader(var->output(0));
  if (!is_node(add_eps, "Add", 2)) return false;
  const std::optional<double> eps = scalar_constant(other_input(*add_eps, var->output(0)));
  if (!eps || !(*eps > 0.0)) return false;
  const ::onnx::NodeProto* sqrt = only_reader(add_eps->output(0));
  if (!is_node(sqrt, "Sqrt", 1) || only_reader(sqrt->output(0)) != div) return false;
  if (!is_node(div, "Div", 2) || div->input(0) != d || div->input(1) != sqrt->output(0)) return false;
  std::set<const ::onnx::NodeProto*> nodes{sub, pow, var, add_eps, sqrt, div};
  std::string out = div->output(0);
  const auto [weight, bias] = channel_affine(out, nodes, x, c_axis);
  parameter w = weight ? *weight->constant : make_parameter(x.type, {c}, r.label());
  if (!weight)
    for (std::int64_t i = 0; i < c; ++i) store_element(w, static_cast<std::size_t>(i), 1.0, 0);
  const parameter b = bias ? *bias->constant : make_parameter(x.type, {c}, r.label());
  const graph::node_id id = net().layer_norm(layer_name(r, weight ? &*weight : nullptr), *x.node, *eps, true);
  bind_parameters(r, id, {{w, weight ? weight->initializer : ""}, {b, bias ? bias->initializer : ""}});
  fused_.insert(nodes.begin(), nodes.end());
  set_like(r, out, id, x);
  return true;
}

// GroupNorm as exporters write it (PyTorch's F.group_norm): x [N, C, ...] reshaped to [N, G, -1],
// InstanceNormalization of that (scale and bias of G values), reshaped back to x's shape (by
// Shape(x) or a constant), then optionally * weight and + bias of C values along C. Called at the
// first Reshape: one group norm, its affine weights folding the instance norm's (w_c gamma_g,
// w_c beta_g + b_c). false where it is no group norm.
inline bool importer::decomposed_group_norm(const node_reader& r, const value& x, const shape_t& target) {
  const std::size_t rank = x.shape.size();
  if (!x.node || x.channels_last || rank < 3 || rank > 5 || target.size() != 3 || target[0] != x.shape[0]) return false;
  const std::int64_t c = x.shape[1], g = target[1];
  if (g <= 0 || c % g != 0) return false;
  const std::string& grouped = r.proto().output(0);
  const ::onnx::NodeProto* in = only_reader(grouped);
  if (!is_node(in, "InstanceNormalization", 3) || in->input(0) != grouped) return false;
  const std::optional<value> gamma = constant_named(in->input(1)), beta = constant_named(in->input(2));
  for (const std::optional<value>* v : {&gamma, &beta})
    if (!*v || (*v)->type != x.type || memfmt::detail::checked_numel((*v)->shape, "instance norm operand") != g)
      return false;
  const ::onnx::NodeProto* back = only_reader(in->output(0));
  if (!is_node(back, "Reshape", 2) || back->input(0) != in->output(0)) return false;
  const auto shape_node = producers_.find(back->input(1));
  const bool to_x_shape = shape_node != producers_.end() && shape_node->second->op_type() == "Shape"
                              ? shape_node->second->input_size() == 1 && shape_node->second->input(0) == r.input(0) &&
                                    shape_node->second->attribute_size() == 0
                              : [&] {
                                  const std::optional<value> s = constant_named(back->input(1));
                                  return s && s->type == memfmt::dtype::int64 && int64_values(*s->constant) == x.shape;
                                }();
  if (!to_x_shape) return false;
  std::set<const ::onnx::NodeProto*> nodes{in, back};
  std::string out = back->output(0);
  const auto [weight, bias] = channel_affine(out, nodes, x, 1);
  parameter w = make_parameter(x.type, {c}, r.label()), b = make_parameter(x.type, {c}, r.label());
  bool plain = true;  // the instance norm's scale 1 and bias 0 (PyTorch's): the weights are the initializers
  for (std::int64_t i = 0; i < c; ++i) {
    const auto at = static_cast<std::size_t>(i), group = static_cast<std::size_t>(i / (c / g));
    const double wc = weight ? element_as_double(*weight->constant, at) : 1.0;
    const double bc = bias ? element_as_double(*bias->constant, at) : 0.0;
    const double gs = element_as_double(*gamma->constant, group), gb = element_as_double(*beta->constant, group);
    plain = plain && gs == 1.0 && gb == 0.0;
    store_element(w, at, wc * gs, 0);
    store_element(b, at, wc * gb + bc, 0);
  }
  const double eps = node_reader(*in, "ONNX node '" + in->name() + "'").get_float("epsilon", 1e-5f);
  const graph::node_id id = net().group_norm(layer_name(r, weight ? &*weight : nullptr), *x.node, g, eps, true);
  bind_parameters(r, id,
                  {{w, weight && plain ? weight->initializer : ""}, {b, bias && plain ? bias->initializer : ""}});
  fused_.insert(nodes.begin(), nodes.end());
  set_like(r, out, id, x);
  return true;
}

}  // namespace memfmt::onnx::detail
