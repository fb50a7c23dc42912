// memfmt/graph/network.hpp - a layer DAG with everything each layer needs, whose formats a plan decides.
//
// Each node is a layer and names its one output value: logical extents (N, C, spatial...; rank 2
// after flatten/linear), dtype, the ids of its inputs and the layer's attributes. The attributes
// are the backends' own parameter structs (conv_params, batch_norm_params, pool_params, ...), so the
// plan and a later run read one source of truth and hand them to the backends unchanged.
// Ids are issued in order and an input must already exist, so the graph is acyclic by construction:
// a self or forward reference (the only way to write a cycle) is rejected as an unknown id. Every
// builder infers the output extents with checked arithmetic and throws memfmt::error naming the
// node and the offending values; parameters() lists each layer's weights in PyTorch's names and
// logical shapes ("<node>.weight" [K, C/groups, kh, kw], "<node>.running_mean" [C], ...).
#pragma once

#include <algorithm>
#include <any>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "../layers/conv_params.hpp"
#include "../layers/layer_kind.hpp"
#include "../layers/layer_params.hpp"
#include "../detail/checked.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../format/dispatch.hpp"

namespace memfmt::graph {

using memfmt::to_string;

// The other of the two families a plan chooses between (format_family: NCHW/NCDHW or NHWC/NDHWC),
// and a family as an index into per-family arrays.
constexpr format_family other(format_family f) noexcept {
  return f == format_family::channels_first ? format_family::channels_last : format_family::channels_first;
}
constexpr std::size_t index(format_family f) noexcept { return static_cast<std::size_t>(f); }

using node_id = std::size_t;

// A format requirement on a node. Mandatory pins must hold; a preferred pin is a soft cost
// (cost_model::pin_penalty) and, between preferred pins on one node, the higher priority wins.
struct pin {
  format_family format;
  bool mandatory;
  int priority;        // preferred pins: >= 1, the penalty scales with it
  std::string origin;  // who asked, for messages and the report
};

// torch.nn.Conv2d/Conv3d. `kernel` per spatial dim (1x7 is {1, 7}); stride, padding, dilation and
// groups live in `params`, the struct the backends take. Bias: a per-output-channel term.
struct conv_attrs {
  std::int64_t out_channels = 0;
  spatial3 kernel{1, 1, 1};
  memfmt::conv_params params;
  bool bias = false;
};

// torch.nn.ConvTranspose2d/3d: the backward-data pass of a conv. `params` describe the forward conv
// it transposes; output_padding adds to the output's end (PyTorch: < stride or < dilation).
struct conv_transpose_attrs {
  std::int64_t out_channels = 0;
  spatial3 kernel{1, 1, 1};
  memfmt::conv_params params;
  spatial3 output_padding{0, 0, 0};
  bool bias = false;
};

// Square (cubic) kernel with the same stride, padding and dilation in every spatial dim, as
// torch.nn.Conv2d(in, out, kernel, stride, padding, dilation, groups, bias) writes it.
inline conv_attrs conv_spec(std::int64_t out_channels, std::int64_t kernel, std::int64_t stride = 1,
                            std::int64_t padding = 0, std::int64_t groups = 1, bool bias = false,
                            std::int64_t dilation = 1) {
  conv_attrs a;
  a.out_channels = out_channels;
  a.kernel = {kernel, kernel, kernel};
  a.params.stride = {stride, stride, stride};
  a.params.padding = {padding, padding, padding};
  a.params.dilation = {dilation, dilation, dilation};
  a.params.groups = groups;
  a.bias = bias;
  return a;
}

// torch.nn.ConvTranspose2d(in, out, kernel, stride, padding, output_padding, groups, bias) with a
// square (cubic) kernel: the same stride, padding and output_padding in every spatial dim.
inline conv_transpose_attrs conv_transpose_spec(std::int64_t out_channels, std::int64_t kernel, std::int64_t stride = 1,
                                                std::int64_t padding = 0, std::int64_t output_padding = 0,
                                                std::int64_t groups = 1, bool bias = false) {
  conv_transpose_attrs a;
  a.out_channels = out_channels;
  a.kernel = {kernel, kernel, kernel};
  a.params.stride = {stride, stride, stride};
  a.params.padding = {padding, padding, padding};
  a.params.groups = groups;
  a.output_padding = {output_padding, output_padding, output_padding};
  a.bias = bias;
  return a;
}

// Group norm and instance norm (group norm with groups == C). affine: a per-channel weight and bias
// (GroupNorm's default true, InstanceNorm's false).
struct norm_attrs {
  memfmt::group_norm_params params;
  bool affine = true;
};

// Layer norm over the channels at each position (ConvNeXt's LayerNorm2d). affine: a per-channel
// weight and bias (torch.nn.LayerNorm's default true).
struct layer_norm_attrs {
  memfmt::layer_norm_params params;
  bool affine = true;
};

struct global_pool_attrs {
  memfmt::pool_kind kind = memfmt::pool_kind::average;
};

struct linear_attrs {
  std::int64_t out_features = 0;
  bool bias = true;
};

// A tensor the network holds. trainable: a parameter the training step returns a gradient for (a
// learned scale or positional map); otherwise a buffer (an exported model's normalisation).
struct constant_attrs {
  bool trainable = false;
};

// Identity in inference; p is kept for training.
struct dropout_attrs {
  double p = 0.5;
};

// A layer memfmt knows nothing about: it reads its spatial inputs in `input_format` and writes its
// output in `output_format` (the PyTorch op that "loses channels_last" reads channels_last and
// returns contiguous). `callback` is the executor's slot for the user's function.
struct opaque_attrs {
  format_family input_format = format_family::channels_first;
  format_family output_format = format_family::channels_first;
  std::any callback;
};

// Per-kind attributes; input, output and flatten have none (monostate). instance_norm and
// group_norm both hold norm_attrs; node::kind tells them apart.
using node_attrs =
    std::variant<std::monostate, conv_attrs, conv_transpose_attrs, memfmt::batch_norm_params, norm_attrs,
                 memfmt::pad_params, memfmt::activation_params, memfmt::binary_op, memfmt::pool_params,
                 global_pool_attrs, memfmt::upsample_params, memfmt::slice_params, linear_attrs, memfmt::softmax_params,
                 dropout_attrs, opaque_attrs, constant_attrs, memfmt::rearrange_params, layer_norm_attrs,
                 memfmt::reduce_params, memfmt::concat_params, memfmt::lrn_params>;

struct node {
  node_id id = 0;
  std::string name;
  layer_kind kind = layer_kind::opaque;
  std::vector<node_id> inputs;
  std::vector<std::int64_t> extents;  // of the output value
  memfmt::dtype type = memfmt::dtype::float32;
  node_attrs attrs;
  std::vector<pin> pins;

  // A 4-D or 5-D value, the only kind that has a layout.
  bool spatial() const noexcept { return extents.size() >= 4; }
  // The builder checked that it fits; checked again so a node built by hand cannot wrap.
  std::int64_t numel() const { return memfmt::detail::checked_numel(extents, "graph node: element count"); }
  // The attributes as A; an error naming the node when its kind stores something else.
  template <class A>
  const A& get() const {
    if (const A* a = std::get_if<A>(&attrs)) return *a;
    memfmt::detail::fail(errc::invalid_argument,
                         "node '" + name + "' (" + to_string(kind) + ") does not hold the attributes asked for");
  }
  // The winning pin: the mandatory one, else the highest-priority preferred one.
  const pin* binding_pin() const noexcept {
    const pin* best = nullptr;
    for (const auto& p : pins)
      if (!best || (p.mandatory && !best->mandatory) || (p.mandatory == best->mandatory && p.priority > best->priority))
        best = &p;
    return best;
  }
};

// One tensor a layer needs besides its inputs, named and shaped as PyTorch's state_dict has it.
// trainable: a parameter (counted by PyTorch's parameters()); otherwise a buffer (running stats).
struct parameter_spec {
  std::string name;
  std::vector<std::int64_t> extents;
  memfmt::dtype type = memfmt::dtype::float32;
  bool trainable = true;
};

namespace detail {

// conv_params pads symmetrically; a `padding_end` member (an optional array), where the struct has
// one, gives the end side its own value.
template <class P, class = void>
struct has_padding_end : std::false_type {};
template <class P>
struct has_padding_end<P, std::void_t<decltype(std::declval<const P&>().padding_end)>> : std::true_type {};

template <class P>
std::int64_t padding_end(const P& p, std::size_t d) {
  if constexpr (has_padding_end<P>::value) {
    if (p.padding_end) return (*p.padding_end)[d];
  }
  return p.padding[d];
}

}  // namespace detail

class network {
 public:
  // ---- graph boundaries ----
  node_id input(std::string name, std::vector<std::int64_t> extents, memfmt::dtype type, format_family format) {
    node n = make(std::move(name), layer_kind::input, {});
    if (extents.size() != 2 && extents.size() != 4 && extents.size() != 5)
      fail_node(n.name, "input extents " + memfmt::detail::dims_to_string(extents) + " must have rank 2, 4 or 5");
    n.extents = std::move(extents);
    n.type = type;
    return append_pinned(std::move(n), format, "graph input");
  }

  // A tensor the network holds (an ONNX initializer as an operand, a registered buffer, a learned
  // scale): parameter "<name>.value" of these extents, in logical order like every parameter. It
  // has no format of its own to keep: the runners lay it out once, when they are built, in the
  // format the plan gives it, so it costs nothing in either and the solver gives it its readers'
  // format. Trainable or a buffer (constant_attrs).
  node_id constant(std::string name, std::vector<std::int64_t> extents, memfmt::dtype type, bool trainable = false) {
    node n = make(std::move(name), layer_kind::constant, {});
    if (extents.size() != 2 && extents.size() != 4 && extents.size() != 5)
      fail_node(n.name, "constant extents " + memfmt::detail::dims_to_string(extents) + " must have rank 2, 4 or 5");
    for (std::int64_t e : extents)
      if (e < 1) fail_node(n.name, "constant extents " + memfmt::detail::dims_to_string(extents) + " must all be >= 1");
    if (!memfmt::is_floating(type))
      fail_node(n.name,
                "constant of dtype " + std::string(memfmt::to_string(type)) + " (a floating-point dtype is needed)");
    n.extents = std::move(extents);
    n.type = type;
    n.attrs = constant_attrs{trainable};
    return append(std::move(n));
  }

  // Rank-2 values have no layout; `format` applies to spatial ones.
  node_id output(std::string name, node_id in, format_family format) {
    node n = make(std::move(name), layer_kind::output, {in});
    n.extents = at(n, in).extents;
    return append_pinned(std::move(n), format, "graph output");
  }

  // ---- compute layers ----
  node_id conv(std::string name, node_id in, conv_attrs a) {
    node n = make(std::move(name), layer_kind::conv, {in});
    const node& x = require_spatial(n, in);
    check_conv(n.name, "conv", x, a.out_channels, a.kernel, a.params);
    n.extents = x.extents;
    n.extents[1] = a.out_channels;
    for (std::size_t d = 0; d + 2 < x.extents.size(); ++d)
      n.extents[d + 2] =
          window_extent(n.name, "conv", d, x.extents[d + 2], a.kernel[d], a.params.stride[d], a.params.padding[d],
                        detail::padding_end(a.params, d), a.params.dilation[d], false);
    n.attrs = std::move(a);
    return append(std::move(n));
  }

  // Output extent per spatial dim: (in - 1) * stride - padding - padding_end + dilation * (kernel - 1)
  // + output_padding + 1 (torch.nn.ConvTranspose2d's).
  node_id conv_transpose(std::string name, node_id in, conv_transpose_attrs a) {
    using memfmt::detail::checked_add;
    using memfmt::detail::checked_mul;
    using memfmt::detail::checked_sub;
    node n = make(std::move(name), layer_kind::conv_transpose, {in});
    const node& x = require_spatial(n, in);
    check_conv(n.name, "conv_transpose", x, a.out_channels, a.kernel, a.params);
    n.extents = x.extents;
    n.extents[1] = a.out_channels;
    for (std::size_t d = 0; d + 2 < x.extents.size(); ++d) {
      const std::int64_t op = a.output_padding[d], stride = a.params.stride[d], dilation = a.params.dilation[d];
      if (op < 0 || (op >= stride && op >= dilation))
        fail_node(n.name, "conv_transpose output_padding " + std::to_string(op) + " in spatial dim " +
                              std::to_string(d) + " must be >= 0 and smaller than stride " + std::to_string(stride) +
                              " or dilation " + std::to_string(dilation));
      const std::string what =
          "node '" + n.name + "': conv_transpose output extent in spatial dim " + std::to_string(d);
      std::int64_t e = checked_mul(x.extents[d + 2] - 1, stride, what);
      e = checked_sub(e, a.params.padding[d], what);
      e = checked_sub(e, detail::padding_end(a.params, d), what);
      e = checked_add(e, checked_mul(dilation, a.kernel[d] - 1, what), what);
      e = checked_add(checked_add(e, op, what), 1, what);
      if (e <= 0)
        fail_node(n.name, "conv_transpose output extent " + std::to_string(e) + " <= 0 in spatial dim " +
                              std::to_string(d) + " (input " + memfmt::detail::dims_to_string(x.extents) +
                              ", padding " + std::to_string(a.params.padding[d]) + ")");
      n.extents[d + 2] = e;
    }
    n.attrs = std::move(a);
    return append(std::move(n));
  }

  node_id linear(std::string name, node_id in, std::int64_t out_features, bool bias = true) {
    node n = make(std::move(name), layer_kind::linear, {in});
    const node& x = at(n, in);
    if (x.extents.size() != 2)
      fail_node(n.name, "linear input '" + x.name + "' " + memfmt::detail::dims_to_string(x.extents) +
                            " must have rank 2 (flatten it first)");
    if (x.extents[1] <= 0)
      fail_node(n.name,
                "linear input '" + x.name + "' " + memfmt::detail::dims_to_string(x.extents) + " has no features");
    if (out_features <= 0)
      fail_node(n.name, "linear out_features " + std::to_string(out_features) + " must be positive");
    n.extents = {x.extents[0], out_features};
    n.attrs = linear_attrs{out_features, bias};
    return append(std::move(n));
  }

  // ---- normalization ----
  node_id batch_norm(std::string name, node_id in, memfmt::batch_norm_params p = {}) {
    node n = make(std::move(name), layer_kind::batch_norm, {in});
    n.extents = require_spatial(n, in).extents;
    check_epsilon(n.name, p.epsilon);
    if (!(p.momentum >= 0.0 && p.momentum <= 1.0))
      fail_node(n.name, "batch_norm momentum " + std::to_string(p.momentum) + " must be in [0, 1]");
    n.attrs = p;
    return append(std::move(n));
  }

  node_id group_norm(std::string name, node_id in, std::int64_t groups, double epsilon = 1e-5, bool affine = true) {
    node n = make(std::move(name), layer_kind::group_norm, {in});
    n.extents = require_spatial(n, in).extents;
    const std::int64_t c = n.extents[1];
    if (groups <= 0 || c % groups != 0)
      fail_node(n.name, "group_norm groups " + std::to_string(groups) + " must be positive and divide channels " +
                            std::to_string(c));
    check_epsilon(n.name, epsilon);
    n.attrs = norm_attrs{{groups, epsilon}, affine};
    return append(std::move(n));
  }

  // Group norm with one group per channel (torch.nn.InstanceNorm2d/3d without running statistics).
  node_id instance_norm(std::string name, node_id in, double epsilon = 1e-5, bool affine = false) {
    node n = make(std::move(name), layer_kind::instance_norm, {in});
    n.extents = require_spatial(n, in).extents;
    check_epsilon(n.name, epsilon);
    n.attrs = norm_attrs{{std::max<std::int64_t>(n.extents[1], 1), epsilon}, affine};
    return append(std::move(n));
  }

  // Normalises each position's C values (torch.nn.LayerNorm(C) over a channels-last permute, as
  // ConvNeXt writes it; ONNX LayerNormalization over the last axis of that permute).
  node_id layer_norm(std::string name, node_id in, double epsilon = 1e-5, bool affine = true) {
    node n = make(std::move(name), layer_kind::layer_norm, {in});
    n.extents = require_spatial(n, in).extents;
    check_epsilon(n.name, epsilon);
    n.attrs = layer_norm_attrs{{epsilon}, affine};
    return append(std::move(n));
  }

  // ---- elementwise ----
  node_id activation(std::string name, node_id in, const memfmt::activation_params& f) {
    node n = make(std::move(name), layer_kind::activation, {in});
    memfmt::validate_activation(f, "node '" + n.name + "'");
    n.extents = require_value(n, in).extents;
    n.attrs = f;
    return append(std::move(n));
  }
  node_id relu(std::string name, node_id in) { return activation(std::move(name), in, memfmt::activation::relu); }

  // a op b with PyTorch broadcasting over equal ranks: each dim equal, or 1 in one operand.
  node_id binary(std::string name, node_id a, node_id b, memfmt::binary_op op) {
    node n = make(std::move(name), layer_kind::binary, {a, b});
    const node& x = require_value(n, a);
    const node& y = require_value(n, b);
    const auto describe = [](const node& v) {
      return "'" + v.name + "' " + memfmt::detail::dims_to_string(v.extents) + " " +
             std::string(memfmt::to_string(v.type));
    };
    bool ok = x.extents.size() == y.extents.size() && x.type == y.type;
    for (std::size_t d = 0; ok && d < x.extents.size(); ++d)
      ok = x.extents[d] == y.extents[d] || x.extents[d] == 1 || y.extents[d] == 1;
    if (!ok)
      fail_node(n.name, "binary operands " + describe(x) + " and " + describe(y) +
                            " must have one rank and dtype, and each dim equal or 1 (broadcast)");
    n.extents = x.extents;
    for (std::size_t d = 0; d < x.extents.size(); ++d)
      if (x.extents[d] == 1) n.extents[d] = y.extents[d];
    n.attrs = op;
    return append(std::move(n));
  }
  node_id add(std::string name, node_id a, node_id b) { return binary(std::move(name), a, b, memfmt::binary_op::add); }
  node_id mul(std::string name, node_id a, node_id b) { return binary(std::move(name), a, b, memfmt::binary_op::mul); }

  // Softmax over the channel dim (rank 4/5) or the feature dim (rank 2).
  node_id softmax(std::string name, node_id in, memfmt::softmax_params p = {}) {
    node n = make(std::move(name), layer_kind::softmax, {in});
    n.extents = require_value(n, in).extents;
    n.attrs = p;
    return append(std::move(n));
  }

  // Local response normalisation across channels of a 4-D or 5-D value (layer_params.hpp's
  // lrn_params: torch.nn.LocalResponseNorm(size, alpha, beta, k) is lrn_params::pytorch(size, ...)).
  node_id lrn(std::string name, node_id in, const memfmt::lrn_params& p) {
    node n = make(std::move(name), layer_kind::lrn, {in});
    const node& x = require_spatial(n, in);
    memfmt::validate_lrn(p, "node '" + n.name + "'");
    n.extents = x.extents;
    n.attrs = p;
    return append(std::move(n));
  }

  // One reduction (layer_params.hpp lists them) over C and / or spatial axes, each kept with
  // extent 1: torch.sum(x, (2, 3), keepdim=True) is reduce_params{sum, axis_bit(2) | axis_bit(3)}.
  node_id reduce(std::string name, node_id in, memfmt::reduce_params p) {
    node n = make(std::move(name), layer_kind::reduce, {in});
    const node& x = require_spatial(n, in);
    if (static_cast<int>(p.op) >= memfmt::reduce_op_count)
      fail_node(n.name, "reduce: unknown reduction " + std::to_string(static_cast<int>(p.op)));
    try {
      n.extents = memfmt::reduce_output_extents(x.extents, p);
    } catch (const memfmt::error& e) {
      memfmt::detail::fail(e.code(), "node '" + n.name + "' (of '" + x.name + "'): " + e.what());
    }
    n.attrs = p;
    return append(std::move(n));
  }
  // [N, C, spatial...] -> [N, 1, spatial...]: the reduction of each position's C values
  // (torch.mean(x, 1, keepdim=True), amax, ...).
  node_id channel_reduce(std::string name, node_id in, memfmt::reduce_op op) {
    return reduce(std::move(name), in, memfmt::reduce_params{op, memfmt::channel_axis_bit});
  }

  node_id dropout(std::string name, node_id in, double p = 0.5) {
    node n = make(std::move(name), layer_kind::dropout, {in});
    n.extents = require_value(n, in).extents;
    if (!(p >= 0.0 && p < 1.0)) fail_node(n.name, "dropout p " + std::to_string(p) + " must be in [0, 1)");
    n.attrs = dropout_attrs{p};
    return append(std::move(n));
  }

  // ---- spatial reshaping ----
  node_id pool(std::string name, node_id in, memfmt::pool_params p) {
    node n = make(std::move(name), layer_kind::pool, {in});
    const node& x = require_spatial(n, in);
    n.extents = x.extents;
    for (std::size_t d = 0; d + 2 < x.extents.size(); ++d) {
      // A window never sees only padding: padding < kernel (PyTorch asks kernel / 2; ONNX models
      // pad more, the layers compute it alike).
      if (p.kernel[d] <= 0 || p.stride[d] <= 0 || p.padding[d] < 0 || p.padding_end[d] < 0 ||
          p.padding[d] >= p.kernel[d] || p.padding_end[d] >= p.kernel[d])
        fail_node(n.name, "pool kernel " + std::to_string(p.kernel[d]) + ", stride " + std::to_string(p.stride[d]) +
                              ", padding " + std::to_string(p.padding[d]) + "/" + std::to_string(p.padding_end[d]) +
                              " in spatial dim " + std::to_string(d) +
                              " (need kernel, stride >= 1 and 0 <= padding < kernel)");
      n.extents[d + 2] = window_extent(n.name, "pool", d, x.extents[d + 2], p.kernel[d], p.stride[d], p.padding[d],
                                       p.padding_end[d], 1, p.ceil_mode);
    }
    n.attrs = p;
    return append(std::move(n));
  }
  // Square (cubic) windows as torch.nn.MaxPool2d(kernel, stride, padding, ceil_mode=...) writes them.
  node_id max_pool(std::string name, node_id in, std::int64_t kernel, std::int64_t stride, std::int64_t padding = 0,
                   bool ceil_mode = false) {
    return pool(std::move(name), in, square_pool(memfmt::pool_kind::max, kernel, stride, padding, ceil_mode, true));
  }
  node_id avg_pool(std::string name, node_id in, std::int64_t kernel, std::int64_t stride, std::int64_t padding = 0,
                   bool ceil_mode = false, bool count_include_pad = true) {
    return pool(std::move(name), in,
                square_pool(memfmt::pool_kind::average, kernel, stride, padding, ceil_mode, count_include_pad));
  }

  // [N, C, spatial...] -> [N, C, 1, ...] (AdaptiveAvgPool2d(1)).
  node_id global_pool(std::string name, node_id in, memfmt::pool_kind kind = memfmt::pool_kind::average) {
    node n = make(std::move(name), layer_kind::global_pool, {in});
    n.extents = require_spatial(n, in).extents;
    for (std::size_t d = 2; d < n.extents.size(); ++d) n.extents[d] = 1;
    n.attrs = global_pool_attrs{kind};
    return append(std::move(n));
  }

  // Upsampling by an integer factor in every spatial dim (nn.Upsample(scale_factor=s)).
  node_id upsample(std::string name, node_id in, std::int64_t scale,
                   memfmt::resample_mode mode = memfmt::resample_mode::nearest) {
    node n = make(std::move(name), layer_kind::upsample, {in});
    const node& x = require_spatial(n, in);
    if (scale <= 0) fail_node(n.name, "upsample scale " + std::to_string(scale) + " must be positive");
    memfmt::upsample_params p;
    p.mode = mode;
    for (std::size_t d = 0; d + 2 < x.extents.size(); ++d)
      p.output[d] = memfmt::detail::checked_mul(
          x.extents[d + 2], scale, "node '" + n.name + "': upsample extent in spatial dim " + std::to_string(d));
    return finish_upsample(std::move(n), x, p);
  }
  // Upsampling to explicit output extents (nn.Upsample(size=...)): p.output per spatial dim.
  node_id upsample(std::string name, node_id in, memfmt::upsample_params p) {
    node n = make(std::move(name), layer_kind::upsample, {in});
    const node& x = require_spatial(n, in);
    return finish_upsample(std::move(n), x, p);
  }

  // Spatial padding (F.pad over H, W / D, H, W).
  node_id pad(std::string name, node_id in, memfmt::pad_params p) {
    node n = make(std::move(name), layer_kind::pad, {in});
    const node& x = require_spatial(n, in);
    n.extents = x.extents;
    for (std::size_t d = 0; d + 2 < x.extents.size(); ++d) {
      const std::int64_t e = x.extents[d + 2], b = p.begin[d], f = p.end[d];
      if (b < 0 || f < 0)
        fail_node(n.name, "pad " + std::to_string(b) + "/" + std::to_string(f) + " in spatial dim " +
                              std::to_string(d) + " must be >= 0");
      if (p.mode == memfmt::pad_mode::reflect && (b >= e || f >= e))
        fail_node(n.name, "reflect pad " + std::to_string(b) + "/" + std::to_string(f) + " in spatial dim " +
                              std::to_string(d) + " must be smaller than the extent " + std::to_string(e));
      if (p.mode == memfmt::pad_mode::replicate && e == 0 && (b > 0 || f > 0))
        fail_node(n.name, "replicate pad of an empty spatial dim " + std::to_string(d));
      const std::string what = "node '" + n.name + "': padded extent in spatial dim " + std::to_string(d);
      n.extents[d + 2] = memfmt::detail::checked_add(memfmt::detail::checked_add(e, b, what), f, what);
    }
    n.attrs = p;
    return append(std::move(n));
  }

  // Concatenation along C (F of rank-2 values) or a spatial axis (memfmt::concat_params): same
  // rank, dtype and extents outside the axis.
  node_id concat(std::string name, std::vector<node_id> inputs, memfmt::concat_params p = {}) {
    node n = make(std::move(name), layer_kind::concat, inputs);
    if (inputs.empty()) fail_node(n.name, "concat needs at least one input");
    const node& first = require_channels(n, inputs[0]);
    const auto axis = static_cast<std::size_t>(p.axis);
    if (p.axis < 1 || axis >= first.extents.size())
      fail_node(n.name, "concat axis " + std::to_string(p.axis) + " of " +
                            memfmt::detail::dims_to_string(first.extents) + " (C or a spatial axis)");
    n.extents = first.extents;
    n.extents[axis] = 0;
    for (node_id id : inputs) {
      const node& x = require_channels(n, id);
      std::vector<std::int64_t> a = x.extents, b = first.extents;
      if (a.size() == b.size()) a[axis] = b[axis] = 0;
      if (a != b || x.type != first.type)
        fail_node(n.name, "concat input '" + x.name + "' " + memfmt::detail::dims_to_string(x.extents) + " " +
                              std::string(memfmt::to_string(x.type)) + " does not match '" + first.name + "' " +
                              memfmt::detail::dims_to_string(first.extents) + " " +
                              std::string(memfmt::to_string(first.type)) + " outside axis " + std::to_string(p.axis));
      n.extents[axis] = memfmt::detail::checked_add(n.extents[axis], x.extents[axis], "node '" + n.name + "': concat");
    }
    n.attrs = p;
    return append(std::move(n));
  }

  // Channels [begin, end) of a spatial value (torch.narrow along C).
  node_id slice(std::string name, node_id in, std::int64_t begin, std::int64_t end) {
    return slice(std::move(name), in, memfmt::slice_params{1, begin, end, 1});
  }
  // x[begin : end : step] along C or a spatial axis (memfmt::slice_params); a rank-2 [N, F] value
  // along F (axis 1).
  node_id slice(std::string name, node_id in, memfmt::slice_params p) {
    node n = make(std::move(name), layer_kind::slice, {in});
    const node& x = require_channels(n, in);
    try {
      if (x.extents.size() == 2 && p.axis != 1)
        memfmt::detail::fail(errc::invalid_argument, "slice of axis " + std::to_string(p.axis) + " of " +
                                                         memfmt::detail::dims_to_string(x.extents) +
                                                         ": a rank-2 value is sliced along axis 1 only");
      std::vector<std::int64_t> e = x.extents;
      if (e.size() == 2) e.insert(e.end(), {1, 1});  // as the kernels see it, [N, F, 1, 1]
      n.extents = memfmt::slice_output_extents(e, p);
      n.extents.resize(x.extents.size());
    } catch (const memfmt::error& e) {
      memfmt::detail::fail(e.code(), "node '" + n.name + "' (of '" + x.name + "'): " + e.what());
    }
    n.attrs = p;
    return append(std::move(n));
  }
  // torch.split along C: slices "<name>.0", "<name>.1", ... of the given sizes, which must sum to C.
  std::vector<node_id> split(const std::string& name, node_id in, const std::vector<std::int64_t>& sizes) {
    const node& x = at(in);
    std::int64_t total = 0;
    for (std::int64_t s : sizes)
      total = s > 0 ? memfmt::detail::checked_add(total, s, "node '" + name + "': split sizes") : -1;
    if (sizes.empty() || total != (x.spatial() || x.extents.size() == 2 ? x.extents[1] : -2))
      fail_node(name, "split sizes " + memfmt::detail::dims_to_string(sizes) + " of '" + x.name + "' " +
                          memfmt::detail::dims_to_string(x.extents) + " must be positive and sum to C");
    std::vector<node_id> parts;
    std::int64_t begin = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      parts.push_back(slice(name + "." + std::to_string(i), in, begin, begin + sizes[i]));
      begin += sizes[i];
    }
    return parts;
  }

  // Channel shuffle, depth to space or space to depth (memfmt::rearrange_params); the shorthands
  // below are PyTorch's and ONNX's modules.
  node_id rearrange(std::string name, node_id in, memfmt::rearrange_params p) {
    node n = make(std::move(name), layer_kind::rearrange, {in});
    const node& x = require_spatial(n, in);
    try {
      n.extents = memfmt::rearrange_output_extents(x.extents, p);
    } catch (const memfmt::error& e) {
      memfmt::detail::fail(e.code(), "node '" + n.name + "': " + e.what());
    }
    n.attrs = p;
    return append(std::move(n));
  }
  // torch.nn.ChannelShuffle(groups) / ShuffleNet's channel_shuffle.
  node_id channel_shuffle(std::string name, node_id in, std::int64_t groups) {
    return rearrange(std::move(name), in, {memfmt::rearrange_kind::channel_shuffle, groups, memfmt::block_order::crd});
  }
  // torch.nn.PixelShuffle(block) is crd order; ONNX DepthToSpace's default is dcr.
  node_id depth_to_space(std::string name, node_id in, std::int64_t block,
                         memfmt::block_order order = memfmt::block_order::crd) {
    return rearrange(std::move(name), in, {memfmt::rearrange_kind::depth_to_space, block, order});
  }
  // x.permute(perm) of spatial dims, N and C first (ONNX Transpose [0, 1, 3, 2]); a copy that
  // keeps the format.
  node_id transpose(std::string name, node_id in, const std::vector<int>& perm) {
    memfmt::rearrange_params p{memfmt::rearrange_kind::transpose, 1, memfmt::block_order::crd};
    if (perm.size() != at(in).extents.size())
      fail_node(name, "transpose perm " + memfmt::detail::dims_to_string(perm) + " of '" + at(in).name + "' " +
                          memfmt::detail::dims_to_string(at(in).extents) + ": one entry per dim");
    std::copy(perm.begin(), perm.end(), p.perm.begin());
    return rearrange(std::move(name), in, p);
  }
  // torch.nn.PixelUnshuffle(block) is crd order; ONNX SpaceToDepth is dcr.
  node_id space_to_depth(std::string name, node_id in, std::int64_t block,
                         memfmt::block_order order = memfmt::block_order::crd) {
    return rearrange(std::move(name), in, {memfmt::rearrange_kind::space_to_depth, block, order});
  }

  // [N, C, spatial...] -> [N, C * prod(spatial)]; in channels_last the element order is N, spatial, C.
  node_id flatten(std::string name, node_id in) {
    node n = make(std::move(name), layer_kind::flatten, {in});
    const node& x = require_spatial(n, in);
    std::int64_t features = 1;
    for (std::size_t d = 1; d < x.extents.size(); ++d)
      features = memfmt::detail::checked_mul(
          features, x.extents[d],
          "node '" + n.name + "': flatten features of " + memfmt::detail::dims_to_string(x.extents));
    n.extents = {x.extents[0], features};
    return append(std::move(n));
  }

  // ---- barriers ----
  // A layer the planner knows nothing about: it reads its spatial inputs in `input_format` (default:
  // `output_format`) and writes `extents` in `output_format`; its dtype is its first input's
  // (float32 without inputs). The executor attaches the function that runs it (set_callback).
  node_id opaque(std::string name, std::vector<node_id> inputs, std::vector<std::int64_t> extents,
                 format_family output_format, std::optional<format_family> input_format = std::nullopt) {
    node n = make(std::move(name), layer_kind::opaque, std::move(inputs));
    if (extents.size() != 2 && extents.size() != 4 && extents.size() != 5)
      fail_node(n.name, "opaque extents " + memfmt::detail::dims_to_string(extents) + " must have rank 2, 4 or 5");
    n.extents = std::move(extents);
    n.attrs = opaque_attrs{input_format.value_or(output_format), output_format, {}};
    return append_pinned(std::move(n), output_format, "opaque barrier");
  }
  void set_callback(node_id id, std::any callback) {
    node& n = nodes_[at(id).id];
    if (n.kind != layer_kind::opaque)
      fail_node(n.name, std::string("a callback is for opaque nodes; this one is ") + to_string(n.kind));
    std::get<opaque_attrs>(n.attrs).callback = std::move(callback);
  }

  // Adds a pin; a mandatory pin that contradicts another, or a preferred pin that contradicts one of
  // the same priority, is an error naming both.
  void pin_format(node_id id, format_family format, bool mandatory, int priority, std::string origin) {
    if (id >= nodes_.size())
      memfmt::detail::fail(errc::invalid_argument, "pin '" + origin + "': node id " + std::to_string(id) +
                                                       " does not exist (" + std::to_string(nodes_.size()) + " nodes)");
    node& n = nodes_[id];
    if (!has_format(id))
      fail_node(n.name, "pin '" + origin + "' asks for " + std::string(to_string(format)) +
                            " but the node has no layout (extents " + memfmt::detail::dims_to_string(n.extents) + ")");
    if (!mandatory && priority < 1)
      fail_node(n.name, "preferred pin '" + origin + "' has priority " + std::to_string(priority) + ", must be >= 1");
    for (const pin& p : n.pins)
      if (p.format != format && p.mandatory == mandatory && (mandatory || p.priority == priority))
        fail_node(n.name, std::string(mandatory ? "mandatory" : "preferred") + " pins conflict: '" + p.origin +
                              "' wants " + std::string(to_string(p.format)) + ", '" + origin + "' wants " +
                              std::string(to_string(format)) +
                              (mandatory ? "" : " at the same priority " + std::to_string(priority)));
    n.pins.push_back(pin{format, mandatory, priority, std::move(origin)});
  }

  // ---- queries ----
  std::size_t size() const noexcept { return nodes_.size(); }
  const node& at(node_id id) const {
    if (id >= nodes_.size())
      memfmt::detail::fail(errc::invalid_argument, "node id " + std::to_string(id) + " does not exist (" +
                                                       std::to_string(nodes_.size()) + " nodes)");
    return nodes_[id];
  }
  const std::vector<node>& nodes() const noexcept { return nodes_; }
  const std::vector<node_id>& consumers(node_id id) const {
    at(id);
    return consumers_[id];
  }
  // By name through an index, so building or loading a network of n layers is not O(n^2).
  std::optional<node_id> find(std::string_view name) const {
    const auto it = by_name_.find(std::string(name));
    if (it == by_name_.end()) return std::nullopt;
    return it->second;
  }

  // The value a layer inherits its format from: its first input (in the order the builder got them,
  // so the add's first operand, the concat's first part) that has a layout, i.e. a rank 4/5 value.
  std::optional<node_id> producer(node_id id) const {
    for (node_id i : at(id).inputs)
      if (nodes_[i].spatial()) return i;
    return std::nullopt;
  }

  // The nodes whose format this one takes when costs tie (solve's second criterion): a memory-bound
  // layer's producer; every reader of a spatial constant (each once, in id order).
  std::vector<node_id> inherits_from(node_id id) const {
    const node& n = at(id);
    if (inherits_format(n.kind)) {
      if (const auto p = producer(id)) return {*p};
      return {};
    }
    if (n.kind != layer_kind::constant || !n.spatial()) return {};
    std::vector<node_id> readers = consumers_[id];
    std::sort(readers.begin(), readers.end());
    readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
    return readers;
  }

  // A node has a layout decision when it reads or writes a spatial value.
  bool has_format(node_id id) const {
    const node& n = at(id);
    if (n.spatial()) return true;
    for (node_id i : n.inputs)
      if (nodes_[i].spatial()) return true;
    return false;
  }

  // The format a consumer running in `consumer_format` reads its spatial inputs in: its own, except
  // for an opaque layer, which declares it.
  format_family read_format(node_id consumer, format_family consumer_format) const {
    const node& n = at(consumer);
    if (n.kind == layer_kind::opaque) return std::get<opaque_attrs>(n.attrs).input_format;
    return consumer_format;
  }

  // The tensors the layer needs besides its inputs, in PyTorch's names and logical order: conv
  // weight [K, C/groups, kernel...] (transposed: [C, K/groups, kernel...]) and bias [K]; batch norm
  // weight, bias, running_mean, running_var [C] and num_batches_tracked [] (int64); group / instance
  // norm weight and bias [C] when affine; linear weight [out, in] and bias [out]. Each in the
  // layer's dtype, except the norms' in norm_parameter_type of it (float32 in a bfloat16 or float16
  // layer, as AMP keeps them).
  std::vector<parameter_spec> parameters(node_id id) const { return parameters_of(at(id)); }

  // The dtype a batch / group / instance norm of `type` takes its parameters and running statistics
  // in: float32 for bfloat16 and float16, whose rounding of a tiny variance or a large mean would
  // move every output (autocast and oneDNN's low-precision batch norm keep them in float32 too).
  static memfmt::dtype norm_parameter_type(memfmt::dtype type) noexcept {
    return type == memfmt::dtype::bfloat16 || type == memfmt::dtype::float16 ? memfmt::dtype::float32 : type;
  }

  // The same layers with every floating-point value in `type`: a float32 network run in bfloat16 or
  // float16. The parameters follow, since each layer's take its dtype (network::parameters; a
  // norm's stay float32).
  network with_float_type(memfmt::dtype type) const {
    if (!memfmt::is_floating(type))
      memfmt::detail::fail(errc::unsupported_dtype, "network: values in " + std::string(memfmt::to_string(type)) +
                                                        " (a floating-point dtype is needed)");
    network r = *this;
    for (node& n : r.nodes_)
      if (memfmt::is_floating(n.type)) n.type = type;
    return r;
  }

  // Elements of every trainable parameter (PyTorch's sum(p.numel() for p in model.parameters())).
  std::int64_t parameter_count() const {
    std::int64_t total = 0;
    for (const node& n : nodes_)
      for (const parameter_spec& p : parameters(n.id))
        if (p.trainable)
          total = memfmt::detail::checked_add(total, memfmt::detail::checked_numel(p.extents, "parameter count"),
                                              "parameter count");
    return total;
  }

 private:
  [[noreturn]] static void fail_node(const std::string& name, const std::string& what) {
    memfmt::detail::fail(errc::invalid_argument, "node '" + name + "': " + what);
  }

  node make(std::string name, layer_kind kind, std::vector<node_id> inputs) const {
    if (name.empty()) fail_node(name, std::string(to_string(kind)) + " needs a name");
    if (const auto used = find(name)) fail_node(name, "the name is already used by node " + std::to_string(*used));
    node n;
    n.id = nodes_.size();
    n.name = std::move(name);
    n.kind = kind;
    n.inputs = std::move(inputs);
    for (node_id id : n.inputs) at(n, id);
    if (!n.inputs.empty()) n.type = nodes_[n.inputs[0]].type;
    return n;
  }

  const node& at(const node& n, node_id id) const {
    if (id >= nodes_.size())
      fail_node(n.name, "input id " + std::to_string(id) + " is not an earlier node (ids 0.." +
                            std::to_string(static_cast<long long>(nodes_.size()) - 1) +
                            " exist; a later id would make a cycle)");
    return nodes_[id];
  }
  const node& require_spatial(const node& n, node_id id) const {
    const node& x = at(n, id);
    if (!x.spatial())
      fail_node(n.name, std::string(to_string(n.kind)) + " input '" + x.name + "' " +
                            memfmt::detail::dims_to_string(x.extents) + " must have rank 4 or 5");
    return x;
  }
  // Elementwise layers also take the rank-2 values of a classifier.
  const node& require_value(const node& n, node_id id) const { return at(n, id); }
  // Layers along C take rank-2 values too, their F as C.
  const node& require_channels(const node& n, node_id id) const {
    const node& x = at(n, id);
    if (x.extents.size() != 2 && !x.spatial())
      fail_node(n.name, std::string(to_string(n.kind)) + " input '" + x.name + "' " +
                            memfmt::detail::dims_to_string(x.extents) + " must have rank 2, 4 or 5");
    return x;
  }

  static void check_epsilon(const std::string& name, double epsilon) {
    if (!(epsilon > 0.0) || !std::isfinite(epsilon))
      fail_node(name, "epsilon " + std::to_string(epsilon) + " must be positive and finite");
  }

  static void check_conv(const std::string& name, const char* kind, const node& x, std::int64_t out_channels,
                         const spatial3& kernel, const memfmt::conv_params& p) {
    const std::int64_t c = x.extents[1];
    // No backend convolves an empty weight, and a batch of zero samples is the only empty input
    // a layer with weights takes.
    if (c <= 0)
      fail_node(name, std::string(kind) + " input '" + x.name + "' " + memfmt::detail::dims_to_string(x.extents) +
                          " has no channels");
    if (out_channels <= 0 || p.groups <= 0)
      fail_node(name, std::string(kind) + " out_channels " + std::to_string(out_channels) + ", groups " +
                          std::to_string(p.groups) + " must be positive");
    if (c % p.groups != 0 || out_channels % p.groups != 0)
      fail_node(name, "groups " + std::to_string(p.groups) + " must divide input channels " + std::to_string(c) +
                          " and out_channels " + std::to_string(out_channels));
    for (std::size_t d = 0; d + 2 < x.extents.size(); ++d)
      if (kernel[d] <= 0 || p.stride[d] <= 0 || p.dilation[d] <= 0 || p.padding[d] < 0 || detail::padding_end(p, d) < 0)
        fail_node(name, std::string(kind) + " kernel " + std::to_string(kernel[d]) + ", stride " +
                            std::to_string(p.stride[d]) + ", dilation " + std::to_string(p.dilation[d]) + ", padding " +
                            std::to_string(p.padding[d]) + "/" + std::to_string(detail::padding_end(p, d)) +
                            " in spatial dim " + std::to_string(d) +
                            " (need kernel, stride, dilation >= 1 and padding >= 0)");
  }

  // Output extent of a sliding window along one spatial dim (conv, pooling), PyTorch's rule:
  // (in + padding + padding_end - dilation * (kernel - 1) - 1) / stride + 1, rounded down, or up in
  // ceil mode where the last window still starts inside the input or the front padding.
  static std::int64_t window_extent(const std::string& name, const char* kind, std::size_t d, std::int64_t in,
                                    std::int64_t kernel, std::int64_t stride, std::int64_t pad_begin,
                                    std::int64_t pad_end, std::int64_t dilation, bool ceil_mode) {
    using memfmt::detail::checked_add;
    using memfmt::detail::checked_mul;
    const std::string what = "node '" + name + "': " + kind + " spatial dim " + std::to_string(d);
    const std::int64_t padded =
        checked_add(checked_add(in, pad_begin, what + " padded extent"), pad_end, what + " padded extent");
    const std::int64_t reach =
        checked_add(checked_mul(dilation, kernel - 1, what + " dilated kernel"), 1, what + " dilated kernel");
    if (padded < reach)
      fail_node(name, std::string(kind) + " window " + std::to_string(reach) + " (kernel " + std::to_string(kernel) +
                          ", dilation " + std::to_string(dilation) + ") is larger than the padded extent " +
                          std::to_string(padded) + " (input " + std::to_string(in) + ", padding " +
                          std::to_string(pad_begin) + "/" + std::to_string(pad_end) + ") in spatial dim " +
                          std::to_string(d));
    const std::int64_t span = padded - reach;
    std::int64_t out = span / stride + 1;
    if (ceil_mode && span % stride != 0) {
      ++out;
      if (checked_mul(out - 1, stride, what) >= checked_add(in, pad_begin, what)) --out;
    }
    return out;
  }

  static memfmt::pool_params square_pool(memfmt::pool_kind kind, std::int64_t kernel, std::int64_t stride,
                                         std::int64_t padding, bool ceil_mode, bool count_include_pad) {
    memfmt::pool_params p;
    p.kind = kind;
    p.kernel = {kernel, kernel, kernel};
    p.stride = {stride, stride, stride};
    p.padding = p.padding_end = {padding, padding, padding};
    p.ceil_mode = ceil_mode;
    p.count_include_pad = count_include_pad;
    return p;
  }

  node_id finish_upsample(node n, const node& x, const memfmt::upsample_params& p) {
    memfmt::require_upsample_rules(p, [&] { return "node '" + n.name + "': upsample"; });
    n.extents = x.extents;
    for (std::size_t d = 0; d + 2 < x.extents.size(); ++d) {
      if (p.output[d] <= 0)
        fail_node(n.name, "upsample output extent " + std::to_string(p.output[d]) + " in spatial dim " +
                              std::to_string(d) + " must be positive");
      n.extents[d + 2] = p.output[d];
    }
    n.attrs = p;
    return append(std::move(n));
  }

  // Every value's element and byte count and dense strides, and every parameter's, fit in 64 bits:
  // the cost model and an executor then multiply them freely (an empty value's strides too: a zero
  // batch leaves C x H x W to multiply).
  void validate(const node& n) const {
    const std::string what = "node '" + n.name + "': output extents";
    memfmt::detail::checked_dense_extent(n.extents, what);
    memfmt::detail::checked_bytes(memfmt::detail::checked_numel(n.extents, what.c_str()), memfmt::size_of(n.type),
                                  what.c_str());
    for (const parameter_spec& p : parameters_of(n)) {
      const std::string pw = "node '" + n.name + "': parameter '" + p.name + "'";
      memfmt::detail::checked_dense_extent(p.extents, pw);
      memfmt::detail::checked_bytes(memfmt::detail::checked_numel(p.extents, pw.c_str()), memfmt::size_of(p.type),
                                    pw.c_str());
    }
  }
  // parameters() of a node, appended or about to be (it reads the node and its first input).
  std::vector<parameter_spec> parameters_of(const node& n) const {
    const std::int64_t in_channels = n.inputs.empty() ? 0 : nodes_[n.inputs[0]].extents[1];
    std::vector<parameter_spec> p;
    const auto add = [&](const char* suffix, std::vector<std::int64_t> extents, bool trainable = true,
                         std::optional<memfmt::dtype> type = std::nullopt) {
      p.push_back(parameter_spec{n.name + "." + suffix, std::move(extents), type.value_or(n.type), trainable});
    };
    const auto kernel_dims = [&](std::vector<std::int64_t> e, const spatial3& kernel) {
      for (std::size_t d = 0; d + 2 < n.extents.size(); ++d) e.push_back(kernel[d]);
      return e;
    };
    switch (n.kind) {
      case layer_kind::conv: {
        const auto& a = std::get<conv_attrs>(n.attrs);
        add("weight", kernel_dims({a.out_channels, in_channels / a.params.groups}, a.kernel));
        if (a.bias) add("bias", {a.out_channels});
        break;
      }
      case layer_kind::conv_transpose: {
        const auto& a = std::get<conv_transpose_attrs>(n.attrs);
        add("weight", kernel_dims({in_channels, a.out_channels / a.params.groups}, a.kernel));
        if (a.bias) add("bias", {a.out_channels});
        break;
      }
      case layer_kind::batch_norm: {
        const std::int64_t c = n.extents[1];
        const memfmt::dtype t = norm_parameter_type(n.type);
        add("weight", {c}, true, t);
        add("bias", {c}, true, t);
        add("running_mean", {c}, false, t);
        add("running_var", {c}, false, t);
        add("num_batches_tracked", {}, false, memfmt::dtype::int64);
        break;
      }
      case layer_kind::group_norm:
      case layer_kind::instance_norm:
        if (std::get<norm_attrs>(n.attrs).affine) {
          add("weight", {n.extents[1]}, true, norm_parameter_type(n.type));
          add("bias", {n.extents[1]}, true, norm_parameter_type(n.type));
        }
        break;
      case layer_kind::layer_norm:
        if (std::get<layer_norm_attrs>(n.attrs).affine) {
          add("weight", {n.extents[1]}, true, norm_parameter_type(n.type));
          add("bias", {n.extents[1]}, true, norm_parameter_type(n.type));
        }
        break;
      case layer_kind::linear: {
        const auto& a = std::get<linear_attrs>(n.attrs);
        add("weight", {a.out_features, in_channels});
        if (a.bias) add("bias", {a.out_features});
        break;
      }
      case layer_kind::constant: add("value", n.extents, std::get<constant_attrs>(n.attrs).trainable); break;
      default: break;
    }
    return p;
  }

  node_id append(node n) {
    validate(n);
    for (node_id i : n.inputs) consumers_[i].push_back(n.id);
    by_name_.emplace(n.name, n.id);
    nodes_.push_back(std::move(n));
    consumers_.emplace_back();
    return nodes_.back().id;
  }
  node_id append_pinned(node n, format_family format, const char* origin) {
    const node_id id = append(std::move(n));
    if (has_format(id)) pin_format(id, format, true, 0, origin);
    return id;
  }

  std::vector<node> nodes_;
  std::vector<std::vector<node_id>> consumers_;
  std::unordered_map<std::string, node_id> by_name_;
};

}  // namespace memfmt::graph
