// memfmt/layers/layer_params.hpp - parameters of the layers other than convolution and batch norm.
//
// The network description (graph/network.hpp) stores these structs in its nodes and every backend
// takes them as they are, so the plan and the run read one source of truth. Spatial entries are
// per dimension (H, W) or (D, H, W); entries past the spatial rank are ignored, as in conv_params.
// Semantics follow PyTorch 1.13 where PyTorch and ONNX agree, and say so where they differ.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>

#include "../detail/checked.hpp"
#include "../error.hpp"

namespace memfmt {

using spatial3 = std::array<std::int64_t, 3>;

// Elementwise activations. y = f(x):
//   relu max(0, x); relu6 min(max(0, x), 6); silu x * sigmoid(x); sigmoid 1 / (1 + e^-x);
//   hardsigmoid clamp(alpha x + beta, 0, 1); hardswish x * clamp(x / 6 + 1 / 2, 0, 1); tanh;
//   leaky_relu x for x > 0, alpha x otherwise; clip min(max(x, alpha), beta); elu x for x > 0,
//   alpha (e^x - 1) otherwise; gelu x * (1 + erf(x / sqrt 2)) / 2 (the exact GELU: PyTorch's
//   default, ConvNeXt's); gelu_tanh x * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2 (PyTorch's
//   approximate='tanh'); softplus ln(1 + e^x) (ONNX Softplus; PyTorch's beta 1 softplus, whose
//   threshold of 20 differs by under e^-20); mish x * tanh(softplus(x)) (YOLOv4's); identity
//   (dropout in inference).
enum class activation : std::uint8_t {
  identity,
  relu,
  relu6,
  silu,
  sigmoid,
  hardsigmoid,
  hardswish,
  tanh,
  leaky_relu,
  clip,
  elu,
  gelu,
  gelu_tanh,
  softplus,
  mish
};
inline constexpr int activation_count = 15;

// The functions' names in enum order (the network JSON's "function" values).
inline constexpr std::array<const char*, activation_count> activation_names{
    "identity",   "relu", "relu6", "silu", "sigmoid",   "hardsigmoid", "hardswish", "tanh",
    "leaky_relu", "clip", "elu",   "gelu", "gelu_tanh", "softplus",    "mish"};

constexpr const char* to_string(activation f) noexcept {
  return static_cast<int>(f) < activation_count ? activation_names[static_cast<std::size_t>(f)] : "?";
}

// gelu_tanh is PyTorch's approximate="tanh" GELU, 0.5 x (1 + tanh(u)) with
// u = sqrt(2 / pi) (x + 0.044715 x^3): its constants, which the ONNX importer also matches.
inline constexpr double gelu_tanh_sqrt_2_over_pi = 0.79788456080286535588;
inline constexpr double gelu_tanh_cubic = 0.044715;

// Whether f reads alpha and beta (activation_params).
constexpr bool has_parameters(activation f) noexcept {
  return f == activation::hardsigmoid || f == activation::leaky_relu || f == activation::clip || f == activation::elu;
}

// An activation with its parameters, as the network description stores it and every backend takes
// it. alpha and beta mean, per function (defaults in brackets):
//   hardsigmoid: slope alpha, offset beta [1/6, 1/2: PyTorch's; ONNX HardSigmoid's are 0.2, 0.5];
//   leaky_relu:  negative slope alpha [0.01: PyTorch's and ONNX's]; beta unused;
//   clip:        bounds alpha <= beta, either may be infinite [-inf, inf: ONNX Clip's];
//   elu:         alpha [1]; beta unused.
// The other functions read neither (both 0). A function converts implicitly, with its defaults.
struct activation_params {
  activation kind = activation::identity;
  double alpha = 0.0, beta = 0.0;

  constexpr activation_params() noexcept = default;
  constexpr activation_params(activation f) noexcept  // NOLINT(google-explicit-constructor): always valid
      : kind(f), alpha(default_alpha(f)), beta(default_beta(f)) {}
  constexpr activation_params(activation f, double a, double b) noexcept : kind(f), alpha(a), beta(b) {}

  static constexpr activation_params hardsigmoid(double slope, double offset) noexcept {
    return {activation::hardsigmoid, slope, offset};
  }
  static constexpr activation_params leaky_relu(double negative_slope) noexcept {
    return {activation::leaky_relu, negative_slope, 0.0};
  }
  static constexpr activation_params clip(double lo, double hi) noexcept { return {activation::clip, lo, hi}; }
  static constexpr activation_params elu(double a) noexcept { return {activation::elu, a, 0.0}; }

  static constexpr double default_alpha(activation f) noexcept {
    switch (f) {
      case activation::hardsigmoid: return 1.0 / 6.0;
      case activation::leaky_relu: return 0.01;
      case activation::clip: return -std::numeric_limits<double>::infinity();
      case activation::elu: return 1.0;
      default: return 0.0;
    }
  }
  static constexpr double default_beta(activation f) noexcept {
    if (f == activation::hardsigmoid) return 0.5;
    if (f == activation::clip) return std::numeric_limits<double>::infinity();
    return 0.0;
  }

  friend constexpr bool operator==(const activation_params& a, const activation_params& b) noexcept {
    return a.kind == b.kind && a.alpha == b.alpha && a.beta == b.beta;
  }
  friend constexpr bool operator!=(const activation_params& a, const activation_params& b) noexcept {
    return !(a == b);
  }
};

namespace layer_detail {
// The fewest significant digits (15 to 17) that read back as v: 0.2 prints as 0.2, and different
// values print differently.
inline std::string exact_number(double v) {
  char buf[32];
  for (int digits = 15; digits < 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) return buf;
  }
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
}  // namespace layer_detail

// "relu", "leaky_relu(alpha=0.2, beta=0)", "clip(alpha=-1, beta=inf)": for messages and keys
// (different parameters give different names).
inline std::string to_string(const activation_params& f) {
  std::string s = to_string(f.kind);
  if (!has_parameters(f.kind) && f.alpha == 0.0 && f.beta == 0.0) return s;
  return s + "(alpha=" + layer_detail::exact_number(f.alpha) + ", beta=" + layer_detail::exact_number(f.beta) + ")";
}

// Throws invalid_argument naming the function and its values unless they are in range: alpha and
// beta 0 for a function without parameters, finite for hardsigmoid, leaky_relu and elu (beta 0 for
// the last two), and for clip not NaN, with alpha <= beta. Backends check on every call, so the
// message is built only on failure.
inline void validate_activation(const activation_params& f, std::string_view where) {
  const auto bad = [&](const char* need) {
    detail::fail(errc::invalid_argument, std::string(where) + ": activation " + to_string(f) + " (" + need + ")");
  };
  if (static_cast<int>(f.kind) >= activation_count) bad("unknown function");
  const bool finite = std::isfinite(f.alpha) && std::isfinite(f.beta);
  switch (f.kind) {
    case activation::hardsigmoid:
      if (!finite) bad("needs finite alpha and beta");
      break;
    case activation::leaky_relu:
    case activation::elu:
      if (!finite || f.beta != 0.0) bad("needs a finite alpha and beta 0");
      break;
    case activation::clip:
      if (std::isnan(f.alpha) || std::isnan(f.beta) || f.alpha > f.beta) bad("needs bounds alpha <= beta");
      break;
    default:
      if (f.alpha != 0.0 || f.beta != 0.0) bad("takes no parameters: alpha and beta must be 0");
  }
}

// Binary elementwise ops with PyTorch broadcasting over logical dims (a size-1 dim repeats).
enum class binary_op : std::uint8_t { add, sub, mul, div };

enum class pool_kind : std::uint8_t { max, average };

// Max / average pooling (torch.nn.MaxPool2d/AvgPool2d and 3d; ONNX MaxPool/AveragePool). Padding is
// per side: `padding` before, `padding_end` after each spatial dim (PyTorch: both equal). Padded
// positions never win a max; an average counts them only with count_include_pad (PyTorch's
// default true, ONNX's default false). ceil_mode rounds the output size up, but a window that would
// start in the end padding is dropped (PyTorch's and ONNX's rule).
struct pool_params {
  pool_kind kind = pool_kind::max;
  spatial3 kernel{1, 1, 1};
  spatial3 stride{1, 1, 1};
  spatial3 padding{0, 0, 0};
  spatial3 padding_end{0, 0, 0};
  bool ceil_mode = false;
  bool count_include_pad = true;
};

enum class resample_mode : std::uint8_t { nearest, linear };

// Where output index o of a spatial dim (input size in, output size out, scale s: out / in unless
// given, L = in s: ONNX's unrounded length_resized) samples the input, ONNX Resize's
// coordinate_transformation_mode: half_pixel (o + 1/2) / s - 1/2; pytorch_half_pixel the same, 0
// where L <= 1; align_corners o (in - 1) / (L - 1), 0 where L <= 1; asymmetric o / s;
// tf_half_pixel_for_nn (o + 1/2) / s.
// pytorch is PyTorch's own rule of each mode (upsample_params), which backends run natively.
enum class resample_coordinates : std::uint8_t {
  pytorch,
  half_pixel,
  pytorch_half_pixel,
  align_corners,
  asymmetric,
  tf_half_pixel_for_nn
};
// How nearest rounds that coordinate to an input index (ONNX's nearest_mode), then clamped to
// [0, in - 1].
enum class nearest_rounding : std::uint8_t { round_prefer_floor, round_prefer_ceil, floor, ceil };

// Upsampling to explicit output extents (a scale s gives floor(in * s)). With pytorch coordinates,
// nearest: source index floor(out * in / out_size) (PyTorch's 'nearest', ONNX Resize nearest +
// asymmetric + floor); linear: bilinear (trilinear in 3-D) with align_corners = false, half-pixel
// centres clamped at 0 (PyTorch's default; ONNX Resize linear + half_pixel). With the other
// coordinates, ONNX Resize's: nearest reads the rounded index, linear interpolates at the
// coordinate clamped to [0, in - 1], with the per-dim scale where given (ONNX's scales input,
// which need not be out / in).
struct upsample_params {
  resample_mode mode = resample_mode::nearest;
  spatial3 output{1, 1, 1};
  resample_coordinates coordinates = resample_coordinates::pytorch;
  nearest_rounding rounding = nearest_rounding::round_prefer_floor;  // nearest, coordinates other than pytorch
  std::array<double, 3> scale{0.0, 0.0, 0.0};  // per spatial dim, > 0, or 0 for out / in; not with pytorch
};

// The input coordinate output index o samples (resample_coordinates); not for pytorch.
inline double resample_source(resample_coordinates c, std::int64_t o, std::int64_t in, std::int64_t out, double scale) {
  const double od = static_cast<double>(o);
  const double s = scale > 0.0 ? scale : static_cast<double>(out) / static_cast<double>(in);
  const double length = scale > 0.0 ? static_cast<double>(in) * scale : static_cast<double>(out);
  switch (c) {
    case resample_coordinates::pytorch_half_pixel: return length > 1.0 ? (od + 0.5) / s - 0.5 : 0.0;
    case resample_coordinates::align_corners:
      return length > 1.0 ? od * static_cast<double>(in - 1) / (length - 1.0) : 0.0;
    case resample_coordinates::asymmetric: return od / s;
    case resample_coordinates::tf_half_pixel_for_nn: return (od + 0.5) / s;
    default: return (od + 0.5) / s - 0.5;  // half_pixel
  }
}

// The input index nearest resampling reads at coordinate x, clamped to [0, in - 1].
inline std::int64_t nearest_source(nearest_rounding r, double x, std::int64_t in) {
  double i = 0.0;
  switch (r) {
    case nearest_rounding::floor: i = std::floor(x); break;
    case nearest_rounding::ceil: i = std::ceil(x); break;
    case nearest_rounding::round_prefer_ceil: i = std::floor(x + 0.5); break;
    default: i = x == std::floor(x) + 0.5 ? std::floor(x) : std::round(x); break;
  }
  if (!(i > 0.0)) return 0;
  return i >= static_cast<double>(in - 1) ? in - 1 : static_cast<std::int64_t>(i);
}

// The coordinate mode, rounding and scales of an upsample are in range, and scales only come with
// ONNX coordinates; `where()` names the layer in the error (built only on failure).
template <class Where>
void require_upsample_rules(const upsample_params& p, const Where& where) {
  if (static_cast<int>(p.coordinates) > static_cast<int>(resample_coordinates::tf_half_pixel_for_nn) ||
      static_cast<int>(p.rounding) > static_cast<int>(nearest_rounding::ceil))
    detail::fail(errc::invalid_argument, where() + ": coordinate mode " +
                                             std::to_string(static_cast<int>(p.coordinates)) + " / nearest rounding " +
                                             std::to_string(static_cast<int>(p.rounding)) + " out of range");
  for (int i = 0; i < 3; ++i) {
    const double s = p.scale[static_cast<std::size_t>(i)];
    if (!(s == 0.0 || (s > 0.0 && std::isfinite(s))) || (s != 0.0 && p.coordinates == resample_coordinates::pytorch))
      detail::fail(errc::invalid_argument,
                   where() + ": scale " + std::to_string(s) + " in spatial dim " + std::to_string(i) +
                       " (need 0 for out / in, or a finite positive scale with ONNX coordinates)");
  }
}

enum class pad_mode : std::uint8_t { constant, reflect, replicate };

// Spatial padding (torch.nn.functional.pad over the spatial dims; ONNX Pad constant/reflect/edge).
// Entries are >= 0 (cropping is not padding). reflect needs padding < the extent in that dim.
struct pad_params {
  pad_mode mode = pad_mode::constant;
  spatial3 begin{0, 0, 0};
  spatial3 end{0, 0, 0};
  double value = 0.0;  // constant mode
};

// Instance norm is group norm with groups == C; both normalise over (C / groups) x spatial per
// sample and apply a per-channel affine transform (PyTorch's GroupNorm and InstanceNorm2d(affine)).
// InstanceNorm2d keeps no running statistics by default, and neither does this.
struct group_norm_params {
  std::int64_t groups = 1;
  double epsilon = 1e-5;
};

// Layer norm over the channels (ConvNeXt's LayerNorm2d: torch.nn.LayerNorm(C) applied to a
// channels-last permute; ONNX LayerNormalization over the last axis of that permute): per sample
// and spatial position, over its C values, mean and biased var, then per channel
//   y = gamma[c] * (x - mean) / sqrt(var + eps) + beta[c].
// The saved statistics hold one value per sample and position: N * D * H * W each.
struct layer_norm_params {
  double epsilon = 1e-5;
};

// Softmax over the channel dim of [N, C, spatial...] or the feature dim of [N, F].
struct softmax_params {
  bool log = false;  // log-softmax
};

// Local response normalisation across channels (torch.nn.LocalResponseNorm, ONNX LRN, AlexNet and
// GoogLeNet): per sample and position, with S_c the sum of x_j^2 over the window of `size`
// channels j = c - before ... c - before + size - 1 (those outside [0, C) count as 0),
//   y_c = x_c / (bias + alpha / size * S_c)^beta.
// An even window has one more channel before c in PyTorch (before = size / 2) and one more after
// in ONNX (before = (size - 1) / 2); pytorch() and onnx() place it. The backward,
//   dx_i = dy_i d_i^-beta - 2 alpha beta / size * x_i * sum over the windows c holding i of
//          dy_c x_c d_c^(-beta - 1),  d_c = bias + alpha / size * S_c,
// reads x.
struct lrn_params {
  std::int64_t size = 1;
  std::int64_t before = 0;
  double alpha = 1e-4;
  double beta = 0.75;
  double bias = 1.0;  // PyTorch's k

  static lrn_params pytorch(std::int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0) {
    return {size, size / 2, alpha, beta, k};
  }
  static lrn_params onnx(std::int64_t size, double alpha = 1e-4, double beta = 0.75, double bias = 1.0) {
    return {size, (size - 1) / 2, alpha, beta, bias};
  }
};

// Throws invalid_argument naming the values unless the window fits (size >= 1, 0 <= before < size)
// and alpha, beta and bias are finite. The builder and every backend call check.
inline void validate_lrn(const lrn_params& p, std::string_view where) {
  if (p.size < 1 || p.before < 0 || p.before >= p.size)
    detail::fail(errc::invalid_argument, std::string(where) + ": local response norm window of size " +
                                             std::to_string(p.size) + " with " + std::to_string(p.before) +
                                             " channels before c (needs size >= 1 and 0 <= before < size)");
  if (!std::isfinite(p.alpha) || !std::isfinite(p.beta) || !std::isfinite(p.bias))
    detail::fail(errc::invalid_argument, std::string(where) + ": local response norm alpha " +
                                             layer_detail::exact_number(p.alpha) + ", beta " +
                                             layer_detail::exact_number(p.beta) + ", bias " +
                                             layer_detail::exact_number(p.bias) + " must be finite");
}

// Reductions over a set of axes of [N, C, spatial...], each reduced axis kept with extent 1
// (keepdim): C (torch.mean / amax / amin / sum / norm over dim 1; ONNX ReduceMean, ReduceMax,
// ReduceMin, ReduceSum, ReduceL1, ReduceL2, ReduceSumSquare over axis 1), spatial axes (SimAM's
// sum over H and W, coordinate attention's pooling along one axis), or both; N is never reduced.
// Per output element, over the count values x_i it reduces,
//   sum: sum x_i; mean: sum x_i / count; max, min: the largest / smallest x_i; l1: sum |x_i|;
//   l2: sqrt(sum x_i^2); sum_square: sum x_i^2.
// Gradients (dy the output's): sum dy; mean dy / count; max and min dy to every x_i equal to the
// result, shared equally among ties (torch.amax's rule); l1 dy sign(x_i); l2 dy x_i / y, 0 where
// y = 0 (PyTorch's subgradient); sum_square 2 dy x_i. A reduced extent of 0 is refused: max and
// min have no value.
enum class reduce_op : std::uint8_t { sum, mean, max, min, l1, l2, sum_square };
inline constexpr int reduce_op_count = 7;

// The reductions' names in enum order (the network JSON's "op" values).
inline constexpr std::array<const char*, reduce_op_count> reduce_op_names{"sum", "mean", "max",       "min",
                                                                          "l1",  "l2",   "sum_square"};

constexpr const char* to_string(reduce_op r) noexcept {
  return static_cast<int>(r) < reduce_op_count ? reduce_op_names[static_cast<std::size_t>(r)] : "?";
}

// Axis sets as bit masks, bit d for logical dim d (1 is C, 2.. the spatial dims).
constexpr std::uint32_t axis_bit(int axis) noexcept { return axis >= 0 && axis < 32 ? std::uint32_t{1} << axis : 0; }
inline constexpr std::uint32_t channel_axis_bit = axis_bit(1);

struct reduce_params {
  reduce_op op = reduce_op::mean;
  std::uint32_t axes = channel_axis_bit;  // the reduced axes, axis_bit(d) | ...
};

// The axes of a mask as text, "[1, 2]", for errors and signatures.
inline std::string axes_to_string(std::uint32_t axes) {
  std::string s = "[";
  for (int d = 0; d < 32; ++d)
    if (axes & axis_bit(d)) s += (s.size() > 1 ? ", " : "") + std::to_string(d);
  return s + "]";
}

// A slice along one axis, y = x[begin : end : step] there and whole elsewhere: axis 1 is C
// (torch.split, narrow), axes 2.. the spatial dims (x[:, :, a:b:s], ONNX Slice with a positive
// step: YOLOv5's Focus, a UNet's centre crop). The output has ceil((end - begin) / step) >= 1
// entries on the axis; 0 <= begin < end <= the input's extent, step >= 1. A pure copy: its backward
// writes dy at the taken positions and zeros elsewhere.
struct slice_params {
  int axis = 1;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t step = 1;
};

// Rearrangements that move elements between the channel dim and others, with no arithmetic:
//   channel_shuffle (factor g groups; torch.nn.ChannelShuffle, ShuffleNet): output channel
//     j * g + i is input channel i * (C / g) + j; any rank 4 or 5.
//   depth_to_space (factor b; rank 4): [N, C b^2, H, W] -> [N, C, H b, W b], output (c, h b + i,
//     w b + j) reading input channel c b^2 + i b + j in crd order (torch.nn.PixelShuffle, ONNX
//     DepthToSpace mode CRD) or (i b + j) C + c in dcr order (ONNX's default DCR).
//   space_to_depth (factor b; rank 4): its inverse, [N, C, H, W] -> [N, C b^2, H / b, W / b]; crd
//     is torch.nn.PixelUnshuffle, dcr ONNX SpaceToDepth.
//   transpose (perm; rank 4 or 5): output dim d is input dim perm[d], N and C staying put
//     (x.permute(0, 1, 3, 2), ONNX Transpose [0, 1, 3, 2]: coordinate attention's pooled W). The
//     output keeps the input's format, so unlike PyTorch's permute it is a copy, not a view.
enum class rearrange_kind : std::uint8_t { channel_shuffle, depth_to_space, space_to_depth, transpose };
enum class block_order : std::uint8_t { crd, dcr };

constexpr const char* to_string(rearrange_kind k) noexcept {
  switch (k) {
    case rearrange_kind::channel_shuffle: return "channel_shuffle";
    case rearrange_kind::depth_to_space: return "depth_to_space";
    case rearrange_kind::space_to_depth: return "space_to_depth";
    case rearrange_kind::transpose: return "transpose";
  }
  return "?";
}
constexpr const char* to_string(block_order o) noexcept { return o == block_order::crd ? "crd" : "dcr"; }

struct rearrange_params {
  rearrange_kind kind = rearrange_kind::channel_shuffle;
  std::int64_t factor = 1;                 // groups (channel_shuffle) or block size
  block_order order = block_order::crd;    // depth_to_space and space_to_depth
  std::array<int, 5> perm{0, 1, 2, 3, 4};  // transpose; entries past the rank stay put
};

// Concatenation along one axis: axis 1 is C (F of rank-2 values; torch.cat(dim=1)), axes 2.. the
// spatial dims (coordinate attention's [pooled H, pooled W]). Parts agree on every other axis.
struct concat_params {
  int axis = 1;
};

// ---------------------------------------------------------------- shape inference
// The output extents of each layer, validated: the network description infers its shapes with
// these and every backend validates its arguments through them (validate.hpp), so a shape that
// builds is a shape that runs. Extents are logical (N, C, spatial...), rank 4 or 5; errors name the
// operation, the input sizes and the offending parameter.

namespace layer_detail {

template <class Extents>
constexpr int spatial_rank() {
  constexpr int rank = static_cast<int>(std::tuple_size<Extents>::value);
  static_assert(rank == 4 || rank == 5, "layers: 2-D (rank 4) or 3-D (rank 5) tensors");
  return rank - 2;
}

// N and C may be 0 (an empty batch); spatial sizes must be positive. `where()` names the layer
// and input: these checks run on every backend call, so messages are built only on failure.
template <class Where, class Extents>
void require_input_sizes(const Where& where, const Extents& x) {
  for (std::size_t d = 0; d < x.size(); ++d)
    if (x[d] < 0 || (d >= 2 && x[d] == 0))
      detail::fail(errc::invalid_argument, where() + ": sizes must be >= 0 and spatial sizes > 0");
}

inline std::string dim_name(int i) { return "spatial dim " + std::to_string(i); }

}  // namespace layer_detail

// Pooling: out = floor_or_ceil((in + padding + padding_end - kernel) / stride) + 1, and with
// ceil_mode one less when the last window would start in the end padding. Every padding entry
// must be < kernel, so every window holds at least one input element (PyTorch asks padding <=
// kernel / 2; the looser bound keeps ONNX's asymmetric pads).
template <class Extents>
Extents pool_output_extents(const Extents& x, const pool_params& p) {
  constexpr int sr = layer_detail::spatial_rank<Extents>();
  const auto where = [&] {
    return std::string(p.kind == pool_kind::max ? "max_pool" : "average_pool") + ": input " + detail::dims_to_string(x);
  };
  layer_detail::require_input_sizes(where, x);
  Extents y = x;
  for (int i = 0; i < sr; ++i) {
    const std::int64_t k = p.kernel[i], s = p.stride[i], pb = p.padding[i], pe = p.padding_end[i];
    if (k < 1 || s < 1 || pb < 0 || pe < 0 || pb >= k || pe >= k)
      detail::fail(errc::invalid_argument, where() + ": kernel " + std::to_string(k) + ", stride " + std::to_string(s) +
                                               ", padding " + std::to_string(pb) + " / " + std::to_string(pe) +
                                               " (begin / end) in " + layer_detail::dim_name(i) +
                                               " (need kernel >= 1, stride >= 1, 0 <= padding < kernel)");
    const std::int64_t padded = detail::checked_add(detail::checked_add(x[2 + i], pb, where), pe, where);
    if (padded < k)
      detail::fail(errc::invalid_argument, where() + ": padded input " + std::to_string(padded) + " < kernel " +
                                               std::to_string(k) + " in " + layer_detail::dim_name(i));
    const std::int64_t span = padded - k;
    std::int64_t out = span / s + 1;
    if (p.ceil_mode && span % s != 0) {
      std::int64_t start = 0;  // of the extra window, relative to the padded input
      if (!detail::mul_overflows(out, s, &start) && start < x[2 + i] + pb) ++out;
    }
    y[2 + i] = out;
  }
  return y;
}

// Global average pooling: N, C, 1, 1(, 1).
template <class Extents>
Extents global_pool_output_extents(const Extents& x) {
  constexpr int sr = layer_detail::spatial_rank<Extents>();
  layer_detail::require_input_sizes([&] { return "global_average_pool: input " + detail::dims_to_string(x); }, x);
  Extents y = x;
  for (int i = 0; i < sr; ++i) y[2 + i] = 1;
  return y;
}

// Reduction: x with extent 1 on every reduced axis. The axes must be C or spatial axes of x, at
// least one, each of extent >= 1.
template <class Extents>
Extents reduce_output_extents(const Extents& x, const reduce_params& p) {
  const auto where = [&] {
    return "reduce over axes " + axes_to_string(p.axes) + ": input " + detail::dims_to_string(x);
  };
  layer_detail::require_input_sizes(where, x);
  if (p.axes == 0 || (p.axes & axis_bit(0)) || (p.axes >> x.size()) != 0)
    detail::fail(errc::invalid_argument, where() + ": the axes must be C (1) or spatial axes (2 to " +
                                             std::to_string(x.size() - 1) + "), at least one");
  Extents y = x;
  for (std::size_t d = 1; d < x.size(); ++d)
    if (p.axes & axis_bit(static_cast<int>(d))) {
      if (x[d] < 1)
        detail::fail(errc::invalid_argument, where() + ": axis " + std::to_string(d) + " has no values to reduce");
      y[d] = 1;
    }
  return y;
}

// Slice: x with ceil((end - begin) / step) entries on the axis.
template <class Extents>
Extents slice_output_extents(const Extents& x, const slice_params& p) {
  const auto where = [&] {
    return "slice of axis " + std::to_string(p.axis) + " [" + std::to_string(p.begin) + ", " + std::to_string(p.end) +
           ") step " + std::to_string(p.step) + ": input " + detail::dims_to_string(x);
  };
  if (x.size() < 3) detail::fail(errc::invalid_argument, where() + ": needs an input of rank 3 or more");
  layer_detail::require_input_sizes(where, x);
  if (p.axis < 1 || static_cast<std::size_t>(p.axis) >= x.size())
    detail::fail(errc::invalid_argument,
                 where() + ": the axis must be C (1) or a spatial axis (2 to " + std::to_string(x.size() - 1) + ")");
  const std::int64_t extent = x[static_cast<std::size_t>(p.axis)];
  if (p.begin < 0 || p.end <= p.begin || p.end > extent || p.step < 1)
    detail::fail(errc::invalid_argument,
                 where() + ": need 0 <= begin < end <= " + std::to_string(extent) + " and step >= 1");
  Extents y = x;
  y[static_cast<std::size_t>(p.axis)] = (p.end - p.begin - 1) / p.step + 1;  // no overflow: end - begin > 0
  return y;
}

// Upsampling: N, C, p.output (each >= 1).
template <class Extents>
Extents upsample_output_extents(const Extents& x, const upsample_params& p) {
  constexpr int sr = layer_detail::spatial_rank<Extents>();
  const auto where = [&] { return "upsample: input " + detail::dims_to_string(x); };
  layer_detail::require_input_sizes(where, x);
  require_upsample_rules(p, where);
  Extents y = x;
  for (int i = 0; i < sr; ++i) {
    if (p.output[i] < 1)
      detail::fail(errc::invalid_argument, where() + ": output size " + std::to_string(p.output[i]) + " in " +
                                               layer_detail::dim_name(i) + " (need >= 1)");
    y[2 + i] = p.output[i];
  }
  return y;
}

// Padding: in + begin + end per spatial dim; reflect needs begin, end < in (PyTorch's rule).
template <class Extents>
Extents pad_output_extents(const Extents& x, const pad_params& p) {
  constexpr int sr = layer_detail::spatial_rank<Extents>();
  const auto where = [&] { return "pad: input " + detail::dims_to_string(x); };
  layer_detail::require_input_sizes(where, x);
  Extents y = x;
  for (int i = 0; i < sr; ++i) {
    const std::int64_t b = p.begin[i], e = p.end[i];
    if (b < 0 || e < 0)
      detail::fail(errc::invalid_argument, where() + ": padding " + std::to_string(b) + " / " + std::to_string(e) +
                                               " (begin / end) in " + layer_detail::dim_name(i) + " (need >= 0)");
    if (p.mode == pad_mode::reflect && (b >= x[2 + i] || e >= x[2 + i]))
      detail::fail(errc::invalid_argument, where() + ": reflect padding " + std::to_string(b) + " / " +
                                               std::to_string(e) + " (begin / end) in " + layer_detail::dim_name(i) +
                                               " must be < the input size " + std::to_string(x[2 + i]));
    y[2 + i] = detail::checked_add(detail::checked_add(x[2 + i], b, where), e, where);
  }
  return y;
}

// PyTorch broadcasting of two operands of the same rank: in each dim the sizes are equal or one
// of them is 1, and the result takes the other.
template <class Extents>
Extents broadcast_extents(const Extents& a, const Extents& b) {
  Extents y = a;
  for (std::size_t d = 0; d < a.size(); ++d) {
    if (a[d] < 0 || b[d] < 0 || (a[d] != b[d] && a[d] != 1 && b[d] != 1))
      detail::fail(errc::shape_mismatch, "binary: operands " + detail::dims_to_string(a) + " and " +
                                             detail::dims_to_string(b) + " do not broadcast in dim " +
                                             std::to_string(d) + " (sizes must be equal or one of them 1)");
    y[d] = a[d] == 1 ? b[d] : a[d];
  }
  return y;
}

// "[0, 1, 3, 2]": a transpose's perm over the first `rank` dims.
inline std::string perm_to_string(const std::array<int, 5>& perm, std::size_t rank) {
  std::string s = "[";
  for (std::size_t d = 0; d < rank && d < perm.size(); ++d) s += (d ? ", " : "") + std::to_string(perm[d]);
  return s + "]";
}

// A rearrangement's output extents (rearrange_params), for extents of any container (the network's
// vectors, the views' arrays); errors name the input and the factor.
template <class Extents>
Extents rearrange_output_extents(const Extents& x, const rearrange_params& p) {
  const bool any_rank = p.kind == rearrange_kind::channel_shuffle || p.kind == rearrange_kind::transpose;
  const auto where = [&] {
    return std::string(to_string(p.kind)) +
           (p.kind == rearrange_kind::transpose ? " " + perm_to_string(p.perm, x.size())
                                                : " by " + std::to_string(p.factor)) +
           ": input " + detail::dims_to_string(x);
  };
  const std::size_t rank = x.size();
  if (rank != 4 && (rank != 5 || !any_rank))
    detail::fail(errc::invalid_argument, where() + ": needs rank 4" + std::string(any_rank ? " or 5" : ""));
  layer_detail::require_input_sizes(where, x);
  if (static_cast<int>(p.kind) > static_cast<int>(rearrange_kind::transpose) ||
      static_cast<int>(p.order) > static_cast<int>(block_order::dcr))
    detail::fail(errc::invalid_argument, where() + ": kind " + std::to_string(static_cast<int>(p.kind)) + " / order " +
                                             std::to_string(static_cast<int>(p.order)) + " out of range");
  if (p.factor < 1 && p.kind != rearrange_kind::transpose)
    detail::fail(errc::invalid_argument, where() + ": the factor must be >= 1");
  Extents y = x;
  switch (p.kind) {
    case rearrange_kind::transpose: {
      // N and C stay, the spatial dims are a permutation of themselves, and entries past the rank
      // are their own index (so equal transposes compare equal).
      std::uint32_t seen = 0;
      for (std::size_t d = 0; d < p.perm.size(); ++d) {
        const int v = p.perm[d];
        const bool ok =
            d < 2 || d >= rank ? v == static_cast<int>(d) : v >= 2 && v < static_cast<int>(rank) && !(seen & (1u << v));
        if (!ok)
          detail::fail(errc::invalid_argument, where() + ": perm must keep N and C first and permute the " +
                                                   std::to_string(rank - 2) + " spatial dims (" + std::to_string(d) +
                                                   " -> " + std::to_string(v) + ")");
        if (d < rank) seen |= 1u << v;
      }
      for (std::size_t d = 2; d < rank; ++d) y[d] = x[static_cast<std::size_t>(p.perm[d])];
      break;
    }
    case rearrange_kind::channel_shuffle:
      if (x[1] % p.factor != 0)
        detail::fail(errc::invalid_argument, where() + ": " + std::to_string(p.factor) +
                                                 " groups must divide channels " + std::to_string(x[1]));
      break;
    case rearrange_kind::depth_to_space: {
      std::int64_t block = 0;
      if (detail::mul_overflows(p.factor, p.factor, &block) || x[1] % block != 0)
        detail::fail(errc::invalid_argument,
                     where() + ": channels " + std::to_string(x[1]) + " must be a multiple of the block size squared");
      y[1] = x[1] / block;
      y[2] = detail::checked_mul(x[2], p.factor, where);
      y[3] = detail::checked_mul(x[3], p.factor, where);
      break;
    }
    case rearrange_kind::space_to_depth: {
      std::int64_t block = 0;  // checked even when C is 0, for the copy's strides (rearrange.hpp)
      if (x[2] % p.factor != 0 || x[3] % p.factor != 0 || detail::mul_overflows(p.factor, p.factor, &block))
        detail::fail(errc::invalid_argument, where() + ": the block size must divide the spatial sizes");
      y[1] = detail::checked_mul(detail::checked_mul(x[1], p.factor, where), p.factor, where);
      y[2] = x[2] / p.factor;
      y[3] = x[3] / p.factor;
      break;
    }
  }
  return y;
}

}  // namespace memfmt
