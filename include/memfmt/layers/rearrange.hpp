// memfmt/layers/rearrange.hpp - a rearrangement (channel shuffle, depth to space, space to depth,
// transpose of spatial dims) as one permuted copy (permuted_copy.hpp), from extents and strides.
//
// The strides are the tensors' own, so the same description serves every format (in channels-first
// a channel shuffle moves whole planes, in channels-last it permutes the C values of each position)
// and its backward pass is the same copy reversed (dx from dy). Backends run it on views
// (backends/rearrange.hpp); the ONNX importer compares a Reshape -> Transpose -> Reshape chain with it.
#pragma once

#include <array>
#include <cstdint>

#include "layer_params.hpp"
#include "permuted_copy.hpp"

namespace memfmt {

// The copy y = rearrangement p of x for logical extents and element strides of x and y (any
// indexable containers: the views' arrays, the ONNX importer's vectors), which must be valid for p
// (rearrange_output_extents).
template <class Dims>
permuted_copy rearrange_copy(const rearrange_params& p, const Dims& xe, const Dims& xs, const Dims& ye,
                             const Dims& ys) {
  permuted_copy m;
  const std::int64_t f = p.factor;
  // A stride times a factor for a dim of extent e: only used when e > 1, where the product stays
  // within the tensor's span (which fits in int64).
  const auto scaled = [](std::int64_t stride, std::int64_t k, std::int64_t e) { return e > 1 ? stride * k : 0; };
  if (p.kind == rearrange_kind::transpose) {
    // Over y's index space, x's strides permuted.
    m.rank = static_cast<int>(ye.size());
    for (std::size_t d = 0; d < ye.size(); ++d) {
      m.extents[d] = ye[d];
      m.from[d] = xs[static_cast<std::size_t>(p.perm[d])];
      m.to[d] = ys[d];
    }
    return m;
  }
  if (p.kind == rearrange_kind::channel_shuffle) {
    // [N, g, C / g, spatial...]: input channel i (C / g) + j, output channel j g + i.
    const std::int64_t per_group = xe[1] / f;
    m.rank = static_cast<int>(xe.size()) + 1;
    m.extents[0] = xe[0];
    m.from[0] = xs[0];
    m.to[0] = ys[0];
    m.extents[1] = f;
    m.from[1] = scaled(xs[1], per_group, f);
    m.to[1] = ys[1];
    m.extents[2] = per_group;
    m.from[2] = xs[1];
    m.to[2] = scaled(ys[1], f, per_group);
    for (std::size_t d = 2; d < xe.size(); ++d) {
      m.extents[d + 1] = xe[d];
      m.from[d + 1] = xs[d];
      m.to[d + 1] = ys[d];
    }
    return m;
  }
  // [N, C, H, b, W, b] over the spatial side (y of depth_to_space, x of space_to_depth) and the
  // deep side, whose channel is c b^2 + i b + j (crd) or (i b + j) C + c (dcr).
  const bool to_space = p.kind == rearrange_kind::depth_to_space;
  const std::int64_t c = to_space ? ye[1] : xe[1];
  const std::int64_t h = to_space ? xe[2] : ye[2], w = to_space ? xe[3] : ye[3];
  const auto deep = [&](std::array<std::int64_t, 6>& strides, const Dims& t) {
    const bool crd = p.order == block_order::crd;
    strides = {t[0], crd ? scaled(t[1], f * f, c) : t[1], t[2], crd ? scaled(t[1], f, f) : scaled(t[1], f * c, f),
               t[3], crd ? t[1] : scaled(t[1], c, f)};
  };
  const auto wide = [&](std::array<std::int64_t, 6>& strides, const Dims& t) {
    strides = {t[0], t[1], scaled(t[2], f, h), t[2], scaled(t[3], f, w), t[3]};
  };
  m.rank = 6;
  m.extents = {xe[0], c, h, f, w, f};
  if (to_space) {
    deep(m.from, xs);
    wide(m.to, ys);
  } else {
    wide(m.from, xs);
    deep(m.to, ys);
  }
  return m;
}

}  // namespace memfmt
