// memfmt/layers/conv_params.hpp - convolution and batch-norm parameters shared by every backend.
//
// Every backend (reference, oneDNN, cuDNN) takes the same parameter structs and validates them
// the same way before doing any work, so an error reads the same whichever backend ran.
//
// Tensors: activations are typed views (nchw/nhwc, ncdhw/ndhwc), logical N, C, spatial.
// Weights use the same tags over logical K, C/groups, R, S (T, R, S in 3-D): an `nchw` weight
// view is KCRS, an `nhwc` weight view is KRSC.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "../detail/checked.hpp"
#include "../error.hpp"

namespace memfmt {

struct conv_params {
  // Per spatial dimension (H, W) or (D, H, W); entries past the spatial rank are ignored.
  std::array<std::int64_t, 3> stride{1, 1, 1};
  std::array<std::int64_t, 3> padding{0, 0, 0};  // zero padding before each spatial dim
  std::array<std::int64_t, 3> dilation{1, 1, 1};
  std::int64_t groups = 1;
  // Zero padding after each spatial dim; nullopt: the same as `padding` (PyTorch's symmetric
  // padding). Asymmetric padding is what ONNX pads and TensorFlow's "SAME" give.
  std::optional<std::array<std::int64_t, 3>> padding_end;

  std::int64_t end_padding(int i) const { return padding_end ? (*padding_end)[i] : padding[i]; }
};

struct batch_norm_params {
  double epsilon = 1e-5;
  double momentum = 0.1;   // running = (1 - momentum) * running + momentum * batch (PyTorch's convention)
  bool fuse_relu = false;  // y = max(0, bn(x) [+ residual])
};

// Output extents of a convolution, validated. `x` are input extents (N, C, spatial...), `w` weight
// extents (K, C/groups, kernel...). Throws memfmt::error naming the values on: rank mismatch,
// non-positive sizes, groups not dividing C or K, C/groups != weight C, stride/dilation < 1,
// negative padding, an output size <= 0, or sizes whose arithmetic overflows 64 bits.
template <class Extents>
Extents conv_output_extents(const Extents& x, const Extents& w, const conv_params& p) {
  constexpr int rank = static_cast<int>(std::tuple_size<Extents>::value);
  static_assert(rank == 4 || rank == 5, "conv: 2-D (rank 4) or 3-D (rank 5) tensors");
  // The message prefix is built only on failure: every backend's conv validates with this per call.
  const auto where = [&] {
    return "conv: input " + detail::dims_to_string(x) + ", weight " + detail::dims_to_string(w);
  };
  for (int d = 0; d < rank; ++d) {
    if (x[d] <= 0) detail::fail(errc::invalid_argument, where() + ": input sizes must be positive");
    if (w[d] <= 0) detail::fail(errc::invalid_argument, where() + ": weight sizes must be positive");
  }
  if (p.groups < 1) detail::fail(errc::invalid_argument, where() + ": groups = " + std::to_string(p.groups) + " < 1");
  if (x[1] % p.groups != 0)
    detail::fail(errc::invalid_argument, where() + ": groups = " + std::to_string(p.groups) +
                                             " does not divide input channels C = " + std::to_string(x[1]));
  if (w[0] % p.groups != 0)
    detail::fail(errc::invalid_argument, where() + ": groups = " + std::to_string(p.groups) +
                                             " does not divide output channels K = " + std::to_string(w[0]));
  if (w[1] * p.groups != x[1])
    detail::fail(errc::shape_mismatch,
                 where() + ": weight has " + std::to_string(w[1]) + " input channels per group, " +
                     "expected C / groups = " + std::to_string(x[1]) + " / " + std::to_string(p.groups));
  Extents y{};
  y[0] = x[0];
  y[1] = w[0];
  for (int i = 0; i < rank - 2; ++i) {
    const std::int64_t pad_end = p.end_padding(i);
    if (p.stride[i] < 1 || p.dilation[i] < 1 || p.padding[i] < 0 || pad_end < 0)
      detail::fail(errc::invalid_argument,
                   where() + ": stride " + std::to_string(p.stride[i]) + ", dilation " + std::to_string(p.dilation[i]) +
                       ", padding " + std::to_string(p.padding[i]) + " (end " + std::to_string(pad_end) +
                       ") in spatial dim " + std::to_string(i) + " (need stride >= 1, dilation >= 1, padding >= 0)");
    std::int64_t eff = 0, padded = 0;
    if (detail::mul_overflows(p.dilation[i], w[2 + i] - 1, &eff) || detail::add_overflows(eff, 1, &eff))
      detail::fail(errc::overflow, where() + ": dilated kernel, dilation " + std::to_string(p.dilation[i]) + " * (" +
                                       std::to_string(w[2 + i]) + " - 1) + 1 in spatial dim " + std::to_string(i) +
                                       ", overflows 64 bits");
    if (detail::add_overflows(x[2 + i], p.padding[i], &padded) || detail::add_overflows(padded, pad_end, &padded))
      detail::fail(errc::overflow, where() + ": padded input " + std::to_string(x[2 + i]) + " + " +
                                       std::to_string(p.padding[i]) + " + " + std::to_string(pad_end) +
                                       " in spatial dim " + std::to_string(i) + " overflows 64 bits");
    if (padded < eff)
      detail::fail(errc::invalid_argument, where() + ": output size <= 0 in spatial dim " + std::to_string(i) +
                                               " (padded input " + std::to_string(padded) + " < dilated kernel " +
                                               std::to_string(eff) + ")");
    y[2 + i] = (padded - eff) / p.stride[i] + 1;
  }
  return y;
}

}  // namespace memfmt
