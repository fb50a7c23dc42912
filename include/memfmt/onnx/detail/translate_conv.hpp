// memfmt/onnx/detail/translate_conv.hpp - Conv, ConvTranspose, pooling, Gemm and MatMul, and the
// sliding-window geometry they share.
// Members of detail::importer, declared in importer.hpp; users include onnx/import.hpp.
#pragma once

#include "importer.hpp"

namespace memfmt::onnx::detail {

// pads / auto_pad of a sliding window over `in` (ONNX spatial extents).
inline void importer::resolve_pads(const node_reader& r, window& w, const shape_t& in) const {
  const std::size_t n = in.size();
  const std::string auto_pad = r.get_choice("auto_pad", "NOTSET", {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"});
  w.begin.assign(n, 0);
  w.end.assign(n, 0);
  if (auto_pad == "NOTSET") {
    const shape_t pads = r.get_ints("pads", shape_t(2 * n, 0));
    if (pads.size() != 2 * n)
      r.fail(errc::invalid_argument,
             "pads " + memfmt::detail::dims_to_string(pads) + " must have " + std::to_string(2 * n) + " entries");
    for (std::size_t d = 0; d < n; ++d) {
      w.begin[d] = pads[d];
      w.end[d] = pads[d + n];
      if (w.begin[d] < 0 || w.end[d] < 0)
        r.fail(errc::invalid_argument, "negative pads " + memfmt::detail::dims_to_string(pads));
    }
  } else if (auto_pad != "VALID") {
    for (std::size_t d = 0; d < n; ++d) {
      const std::string what = r.label() + ": SAME padding";
      const std::int64_t out = (in[d] + w.stride[d] - 1) / w.stride[d];
      const std::int64_t reach =
          memfmt::detail::checked_add(memfmt::detail::checked_mul(w.dilation[d], w.kernel[d] - 1, what), 1, what);
      const std::int64_t total = std::max<std::int64_t>(
          0, memfmt::detail::checked_sub(
                 memfmt::detail::checked_add(memfmt::detail::checked_mul(out - 1, w.stride[d], what), reach, what),
                 in[d], what));
      w.begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.end[d] = total - w.begin[d];
    }
  }
}

inline importer::window importer::read_window(const node_reader& r, const shape_t& kernel, const shape_t& in) const {
  const std::size_t n = in.size();
  window w;
  w.kernel = kernel;
  w.stride = r.get_ints("strides", shape_t(n, 1));
  w.dilation = r.get_ints("dilations", shape_t(n, 1));
  if (w.stride.size() != n || w.dilation.size() != n || w.kernel.size() != n)
    r.fail(errc::invalid_argument, "kernel " + memfmt::detail::dims_to_string(w.kernel) + ", strides " +
                                       memfmt::detail::dims_to_string(w.stride) + ", dilations " +
                                       memfmt::detail::dims_to_string(w.dilation) + " must have one entry per " +
                                       "spatial dim (" + std::to_string(n) + ")");
  for (std::size_t d = 0; d < n; ++d)
    if (w.kernel[d] < 1 || w.stride[d] < 1 || w.dilation[d] < 1)
      r.fail(errc::invalid_argument, "kernel " + memfmt::detail::dims_to_string(w.kernel) + ", strides " +
                                         memfmt::detail::dims_to_string(w.stride) + ", dilations " +
                                         memfmt::detail::dims_to_string(w.dilation) + " must be >= 1");
  resolve_pads(r, w, in);
  return w;
}

// The network's spatial3 of ONNX per-dim values; a lifted 1-D value's H gets `h`.
inline spatial3 importer::to_spatial(const shape_t& v, bool lifted, std::int64_t h) {
  spatial3 s{h, h, h};
  const std::size_t off = lifted ? 1 : 0;
  for (std::size_t d = 0; d < v.size() && d + off < 3; ++d) s[d + off] = v[d];
  return s;
}

// Asymmetric padding as a separate zero pad node when the conv parameters pad symmetrically:
// the conv then pads min(begin, end) on both sides.
inline graph::node_id importer::pad_asymmetric(const std::string& name, graph::node_id in, window& w, bool lifted) {
  bool symmetric = true;
  for (std::size_t d = 0; d < w.begin.size(); ++d) symmetric = symmetric && w.begin[d] == w.end[d];
  if (symmetric) return in;
  memfmt::pad_params p;
  p.mode = memfmt::pad_mode::constant;
  shape_t extra_b(w.begin.size()), extra_e(w.begin.size());
  for (std::size_t d = 0; d < w.begin.size(); ++d) {
    const std::int64_t m = std::min(w.begin[d], w.end[d]);
    extra_b[d] = w.begin[d] - m;
    extra_e[d] = w.end[d] - m;
    w.begin[d] = w.end[d] = m;
  }
  p.begin = to_spatial(extra_b, lifted, 0);
  p.end = to_spatial(extra_e, lifted, 0);
  return net().pad(unique_name(name + ".pad"), in, p);
}

inline void importer::conv(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  const value* w = constant_input(r, 1, true);
  const value* b = constant_input(r, 2, false);
  const std::size_t rank = x.shape.size();
  if (rank < 3 || rank > 5) throw not_expressible{"input rank " + std::to_string(rank)};
  if (w->shape.size() != rank)
    r.fail(errc::invalid_argument, "weight " + memfmt::detail::dims_to_string(w->shape) +
                                       " must have the rank of input " + memfmt::detail::dims_to_string(x.shape));
  const std::int64_t groups = r.get_int("group", 1);
  if (groups < 1 || x.shape[1] % groups != 0 || w->shape[1] * groups != x.shape[1])
    r.fail(errc::shape_mismatch, "input " + memfmt::detail::dims_to_string(x.shape) + ", weight " +
                                     memfmt::detail::dims_to_string(w->shape) + ", group " + std::to_string(groups) +
                                     ": weight dim 1 must be C / group");
  const shape_t kernel = spatial_of(w->shape);
  if (r.has("kernel_shape") && r.get_ints("kernel_shape") != kernel)
    r.fail(errc::shape_mismatch, "kernel_shape " + memfmt::detail::dims_to_string(r.get_ints("kernel_shape")) +
                                     " differs from the weight's " + memfmt::detail::dims_to_string(kernel));
  if (b && (b->shape.size() != 1 || b->shape[0] != w->shape[0]))
    r.fail(errc::shape_mismatch,
           "bias " + memfmt::detail::dims_to_string(b->shape) + " must be [" + std::to_string(w->shape[0]) + "]");
  window win = read_window(r, kernel, spatial_of(x.shape));
  const std::string name = layer_name(r, w);
  const bool lifted = x.lifted();
  graph::conv_attrs a;
  a.out_channels = w->shape[0];
  a.kernel = to_spatial(kernel, lifted, 1);
  a.params.stride = to_spatial(win.stride, lifted, 1);
  a.params.dilation = to_spatial(win.dilation, lifted, 1);
  a.params.groups = groups;
  a.bias = b != nullptr;
  graph::node_id in = *x.node;
  if (conv_pads_per_side) set_padding_end(a.params, to_spatial(win.end, lifted, 0));
  else in = pad_asymmetric(name, in, win, lifted);
  a.params.padding = to_spatial(win.begin, lifted, 0);
  const graph::node_id id = net().conv(name, in, a);
  std::vector<std::pair<parameter, std::string>> params{named(*w)};
  if (b) params.push_back(named(*b));
  bind_parameters(r, id, params);
  set_tensor(r, id, lifted);
}

inline void importer::conv_transpose(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  const value* w = constant_input(r, 1, true);
  const value* b = constant_input(r, 2, false);
  const std::size_t rank = x.shape.size();
  if (rank < 3 || rank > 5) throw not_expressible{"input rank " + std::to_string(rank)};
  if (w->shape.size() != rank || w->shape[0] != x.shape[1])
    r.fail(errc::shape_mismatch, "weight " + memfmt::detail::dims_to_string(w->shape) +
                                     " must be [C, K / group, kernel...] for input " +
                                     memfmt::detail::dims_to_string(x.shape));
  const std::int64_t groups = r.get_int("group", 1);
  if (groups < 1 || x.shape[1] % groups != 0)
    r.fail(errc::invalid_argument, "group " + std::to_string(groups) + " must divide C " + std::to_string(x.shape[1]));
  const std::size_t n = rank - 2;
  const shape_t kernel = spatial_of(w->shape), in = spatial_of(x.shape);
  if (r.has("kernel_shape") && r.get_ints("kernel_shape") != kernel)
    r.fail(errc::shape_mismatch, "kernel_shape " + memfmt::detail::dims_to_string(r.get_ints("kernel_shape")) +
                                     " differs from the weight's " + memfmt::detail::dims_to_string(kernel));
  const std::int64_t out_channels = w->shape[1] * groups;
  if (b && (b->shape.size() != 1 || b->shape[0] != out_channels))
    r.fail(errc::shape_mismatch,
           "bias " + memfmt::detail::dims_to_string(b->shape) + " must be [" + std::to_string(out_channels) + "]");
  window win;
  win.kernel = kernel;
  win.stride = r.get_ints("strides", shape_t(n, 1));
  win.dilation = r.get_ints("dilations", shape_t(n, 1));
  shape_t out_pad = r.get_ints("output_padding", shape_t(n, 0));
  if (win.stride.size() != n || win.dilation.size() != n || out_pad.size() != n)
    r.fail(errc::invalid_argument, "strides, dilations and output_padding need one entry per spatial dim");
  const std::string auto_pad = r.get_choice("auto_pad", "NOTSET", {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"});
  shape_t out_shape = r.get_ints("output_shape");
  if (out_shape.size() == n + 2) out_shape = spatial_of(out_shape);
  if (!out_shape.empty() && out_shape.size() != n)
    r.fail(errc::invalid_argument, "output_shape " + memfmt::detail::dims_to_string(out_shape) + " needs " +
                                       std::to_string(n) + " spatial entries");
  if (out_shape.empty() && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"))
    for (std::size_t d = 0; d < n; ++d) out_shape.push_back(in[d] * win.stride[d]);
  win.begin.assign(n, 0);
  win.end.assign(n, 0);
  if (!out_shape.empty()) {
    // ONNX: total padding = stride * (in - 1) + output_padding + dilated kernel - output_shape,
    // split (rounding down) with the odd one at the end for SAME_UPPER and at the start otherwise.
    // A negative end pad (output_shape past the full output) is more output_padding: rows no
    // input reaches, the bias alone.
    for (std::size_t d = 0; d < n; ++d) {
      const std::int64_t total =
          win.stride[d] * (in[d] - 1) + out_pad[d] + (kernel[d] - 1) * win.dilation[d] + 1 - out_shape[d];
      const std::int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);  // floor(total / 2)
      win.begin[d] = auto_pad == "SAME_UPPER" ? half : total - half;
      win.end[d] = total - win.begin[d];
      if (win.begin[d] < 0)
        throw not_expressible{"output_shape " + memfmt::detail::dims_to_string(out_shape) +
                              " extends the transposed conv's output before its start"};
      if (win.end[d] < 0) {
        out_pad[d] -= win.end[d];
        win.end[d] = 0;
        if (out_pad[d] >= win.stride[d] && out_pad[d] >= win.dilation[d])
          throw not_expressible{"output_shape " + memfmt::detail::dims_to_string(out_shape) +
                                " past the full output by stride and dilation or more"};
      }
    }
  } else if (auto_pad == "NOTSET") {
    resolve_pads(r, win, in);
  }
  // A larger front pad: symmetric padding of the front amount, the difference given back as
  // output_padding (the rows it adds are the ones the smaller end pad keeps).
  for (std::size_t d = 0; d < n; ++d) {
    if (conv_pads_per_side) break;
    if (win.begin[d] < win.end[d]) throw not_expressible{"a transposed conv padding more at the end than at the start"};
    if (win.begin[d] > win.end[d]) {
      out_pad[d] += win.begin[d] - win.end[d];
      win.end[d] = win.begin[d];
      if (out_pad[d] >= win.stride[d] && out_pad[d] >= win.dilation[d])
        throw not_expressible{"asymmetric padding needing output_padding >= stride and dilation"};
    }
  }
  const bool lifted = x.lifted();
  graph::conv_transpose_attrs a;
  a.out_channels = out_channels;
  a.kernel = to_spatial(kernel, lifted, 1);
  a.params.stride = to_spatial(win.stride, lifted, 1);
  a.params.dilation = to_spatial(win.dilation, lifted, 1);
  a.params.padding = to_spatial(win.begin, lifted, 0);
  set_padding_end(a.params, to_spatial(win.end, lifted, 0));
  a.params.groups = groups;
  a.output_padding = to_spatial(out_pad, lifted, 0);
  a.bias = b != nullptr;
  const graph::node_id id = net().conv_transpose(layer_name(r, w), *x.node, a);
  std::vector<std::pair<parameter, std::string>> params{named(*w)};
  if (b) params.push_back(named(*b));
  bind_parameters(r, id, params);
  set_tensor(r, id, lifted);
}

inline void importer::pool(const node_reader& r, memfmt::pool_kind kind) {
  const value& x = tensor_input(r, 0);
  require_spatial_input(x);
  require_single_output(r);
  const shape_t kernel = r.get_ints("kernel_shape");
  if (kernel.empty()) r.fail(errc::invalid_argument, "kernel_shape is required");
  window w = read_window(r, kernel, spatial_of(x.shape));
  for (std::int64_t d : w.dilation)
    if (d != 1) throw not_expressible{"pooling with dilations " + memfmt::detail::dims_to_string(w.dilation)};
  for (std::size_t d = 0; d < kernel.size(); ++d)
    if (w.begin[d] >= kernel[d] || w.end[d] >= kernel[d])
      throw not_expressible{"padding of a whole window (a window would see only padding)"};
  if (r.get_int("storage_order", 0) != 0) throw not_expressible{"storage_order 1"};
  const bool lifted = x.lifted();
  memfmt::pool_params p;
  p.kind = kind;
  p.kernel = to_spatial(kernel, lifted, 1);
  p.stride = to_spatial(w.stride, lifted, 1);
  p.padding = to_spatial(w.begin, lifted, 0);
  p.padding_end = to_spatial(w.end, lifted, 0);
  p.ceil_mode = r.get_int("ceil_mode", 0) != 0;
  p.count_include_pad = r.get_int("count_include_pad", 0) != 0;
  set_tensor(r, net().pool(layer_name(r, nullptr), *x.node, p), lifted);
}

inline void importer::global_pool(const node_reader& r, memfmt::pool_kind kind, bool flatten_after) {
  const value& x = tensor_input(r, 0);
  require_spatial_input(x);
  graph::node_id id = net().global_pool(layer_name(r, nullptr), *x.node, kind);
  if (flatten_after) {
    id = net().flatten(unique_name(net().at(id).name + ".flatten"), id);
    return set_tensor(r, r.proto().output(0), id, net().at(id).extents);
  }
  set_tensor(r, id, x.lifted());
}

// A linear layer from a [in, out] or [out, in] constant, alpha folded into the weight and beta
// into the bias.
inline void importer::linear(const node_reader& r, const value& a, const value& b, bool b_is_out_in, double alpha,
                             const value* c, double beta) {
  if (a.shape.size() != 2)
    throw not_expressible{"a matrix product of a rank " + std::to_string(a.shape.size()) + " input"};
  if (b.shape.size() != 2)
    throw not_expressible{"a matrix product with a rank " + std::to_string(b.shape.size()) + " weight"};
  const std::int64_t in = b_is_out_in ? b.shape[1] : b.shape[0], out = b_is_out_in ? b.shape[0] : b.shape[1];
  if (in != a.shape[1])
    r.fail(errc::shape_mismatch, "input " + memfmt::detail::dims_to_string(a.shape) + " and weight " +
                                     memfmt::detail::dims_to_string(b.shape) + " do not multiply");
  parameter w = make_parameter(b.type, {out, in}, r.label());
  for (std::int64_t i = 0; i < out; ++i)
    for (std::int64_t j = 0; j < in; ++j) {
      const auto src = static_cast<std::size_t>(b_is_out_in ? i * in + j : j * out + i);
      store_element(w, static_cast<std::size_t>(i * in + j), alpha * element_as_double(*b.constant, src), 0);
    }
  std::optional<parameter> bias;
  if (c) {
    const std::int64_t n = memfmt::detail::checked_numel(c->shape, "Gemm C");
    const bool per_output = n == out && (c->shape.size() == 1 || (c->shape.size() == 2 && c->shape[0] == 1));
    if (n != 1 && !per_output)
      throw not_expressible{"Gemm C " + memfmt::detail::dims_to_string(c->shape) + " is not a per-output bias"};
    bias = make_parameter(c->type, {out}, r.label());
    for (std::int64_t i = 0; i < out; ++i)
      store_element(*bias, static_cast<std::size_t>(i),
                    beta * element_as_double(*c->constant, n == 1 ? 0 : static_cast<std::size_t>(i)), 0);
  }
  const graph::node_id id = net().linear(layer_name(r, &b), *a.node, out, bias.has_value());
  std::vector<std::pair<parameter, std::string>> params{{w, b.initializer}};
  if (bias) params.emplace_back(*bias, c->initializer);
  bind_parameters(r, id, params);
  set_tensor(r, r.proto().output(0), id, {a.shape[0], out});
}

inline void importer::gemm(const node_reader& r) {
  // ONNX's Gemm multiplies matrices; other ranks are a malformed model, not an op to plan around.
  for (int i = 0; i < 2; ++i) {
    const value& v = input_value(r, i);
    if (v.shape.size() != 2 && !(v.barrier && v.barrier->shape_unknown))
      r.fail(errc::invalid_argument, std::string(i == 0 ? "A " : "B ") + memfmt::detail::dims_to_string(v.shape) +
                                         " has rank " + std::to_string(v.shape.size()) +
                                         ", not 2 (Gemm multiplies matrices)");
  }
  const value& a = tensor_input(r, 0);
  const value* b = constant_input(r, 1, true);
  const value* c = constant_input(r, 2, false);
  if (r.get_int("transA", 0) != 0) throw not_expressible{"Gemm with transA"};
  linear(r, a, *b, r.get_int("transB", 0) != 0, r.get_float("alpha", 1.f), c, r.get_float("beta", 1.f));
}

inline void importer::matmul(const node_reader& r) {
  const value& a = tensor_input(r, 0);
  if (a.channels_last) return pointwise_conv(r, a, *constant_input(r, 1, true));
  linear(r, a, *constant_input(r, 1, true), false, 1.0, nullptr, 0.0);
}

// MatMul of a channels-last view [N, spatial..., C] by a [C, K] constant is a 1x1 conv of the
// logical value to K channels (nn.Linear over a permuted tensor, as ConvNeXt's blocks write it).
// An Add of a [K] constant that is the product's only reader becomes the conv's bias (nn.Linear
// exports as MatMul + Add), and the layer takes the bias's module name.
inline void importer::pointwise_conv(const node_reader& r, const value& x, const value& w) {
  const std::int64_t c = x.shape.back();
  if (w.shape.size() != 2 || w.shape[0] != c)
    throw not_expressible{"a product of channels-last " + memfmt::detail::dims_to_string(x.shape) + " and " +
                          memfmt::detail::dims_to_string(w.shape) + " (needs a [C, K] constant)"};
  if (w.type != x.type)
    r.fail(errc::unsupported_dtype,
           "weight is " + std::string(to_string(w.type)) + ", input " + std::string(to_string(x.type)));
  const std::int64_t k = w.shape[1];
  const value* bias = nullptr;
  const ::onnx::NodeProto* add = only_reader(r.proto().output(0));
  if (add && add->op_type() == "Add" && add->input_size() == 2) {
    const auto it = values_.find(other_input(*add, r.proto().output(0)));
    if (it != values_.end() && it->second.constant && it->second.type == x.type && !it->second.shape.empty() &&
        it->second.shape.back() == k && memfmt::detail::checked_numel(it->second.shape, "bias") == k &&
        it->second.shape.size() <= x.shape.size())
      bias = &it->second;
  }
  parameter weight = make_parameter(w.type, {k, c}, r.label());
  for (std::int64_t o = 0; o < k; ++o)
    for (std::int64_t i = 0; i < c; ++i)
      store_element(weight, static_cast<std::size_t>(o * c + i),
                    element_as_double(*w.constant, static_cast<std::size_t>(i * k + o)), 0);
  const std::optional<std::string> module = free_module(bias, ".bias");
  const std::string name = module ? unique_name(*module) : layer_name(r, &w);
  const graph::node_id id = net().conv(name, *x.node, graph::conv_spec(k, 1, 1, 0, 1, bias != nullptr));
  std::vector<std::pair<parameter, std::string>> params{{weight, w.initializer}};
  if (bias) {
    parameter b = *bias->constant;
    b.shape = {k};
    params.emplace_back(std::move(b), bias->initializer);
  }
  bind_parameters(r, id, params);
  if (bias) fused_.insert(add);
  set_like(r, bias ? add->output(0) : r.proto().output(0), id, x);
}

}  // namespace memfmt::onnx::detail
