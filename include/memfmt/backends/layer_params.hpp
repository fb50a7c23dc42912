// memfmt/backends/layer_params.hpp - parameters of the layers other than convolution and batch norm.
//
// The network description (graph/network.hpp) stores these structs in its nodes and every backend
// takes them as they are, so the plan and the run read one source of truth. Spatial entries are
// per dimension (H, W) or (D, H, W); entries past the spatial rank are ignored, as in conv_params.
// Semantics follow PyTorch 1.13 where PyTorch and ONNX agree, and say so where they differ.
#pragma once

#include <array>
#include <cstdint>

namespace memfmt {

using spatial3 = std::array<std::int64_t, 3>;

// Elementwise activations. y = f(x):
//   relu max(0, x); relu6 min(max(0, x), 6); silu x * sigmoid(x); sigmoid 1 / (1 + e^-x);
//   hardsigmoid clamp(x / 6 + 1 / 2, 0, 1) (PyTorch's; ONNX HardSigmoid with alpha 1/6, beta 1/2);
//   hardswish x * hardsigmoid(x); tanh; identity (dropout in inference).
enum class activation : std::uint8_t { identity, relu, relu6, silu, sigmoid, hardsigmoid, hardswish, tanh };

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

// Upsampling to explicit output extents (a scale s gives floor(in * s)). nearest: source index
// floor(out * in / out_size) (PyTorch's 'nearest', ONNX Resize nearest + asymmetric + floor).
// linear: bilinear (trilinear in 3-D) with align_corners = false, half-pixel centres clamped at 0
// (PyTorch's default; ONNX Resize linear + half_pixel).
struct upsample_params {
  resample_mode mode = resample_mode::nearest;
  spatial3 output{1, 1, 1};
};

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

// Softmax over the channel dim of [N, C, spatial...] or the feature dim of [N, F].
struct softmax_params {
  bool log = false;  // log-softmax
};

}  // namespace memfmt
