// memfmt/backends/cudnn/layer_kernels_index.hpp - the index arithmetic of the cuDNN backend's own
// layer kernels (cuda_layer_kernels.cuh), as plain C++ (MEMFMT_HOST_DEVICE) so that the CPU tests
// run every thread's work against the reference backend.
//
// cuDNN 9.19 on an H100 found no engine for a standalone reduction graph (global average pooling,
// the sums of a broadcast operand's gradient) nor for up-sampling resamples, and crashed in a
// pooling backward graph; these kernels take those jobs. Each output element is one thread that
// loops over what it needs (no atomics, so results are deterministic):
// - reduce_sum_at: dst[i] = scale * the sum of src over the dimensions where dst has extent 1 and
//   src does not (global average pooling: scale 1 / positions; a broadcast gradient: scale 1);
// - expand_at: dst[i] = scale * src at i with src's extent-1 dimensions at 0 (the global average
//   pooling's backward);
// - pool_backward_at: dx at one input position, gathered from every pooling window that covers
//   it, with the reference backend's window, divisor and tie rules (reference/pooling.hpp);
// - binary_at / binary_grad_at: a binary op whose operand is broadcast with several samples
//   ([N, C, 1, 1], a squeeze-and-excite gate), which cuDNN 9.19's pointwise engines refused, and
//   its gradient at dy's extents (summed by reduce_sum_at where the operand is broadcast).
// Tensors are view5: extents and element strides of (N, C, D, H, W); a 4-D tensor has D = 1.
#pragma once

#include <cstdint>

#include "../../config.hpp"

namespace memfmt::cudnn::lk {

struct view5 {
  std::int64_t ext[5] = {1, 1, 1, 1, 1};
  std::int64_t str[5] = {0, 0, 0, 0, 0};
};

// A tensor of logical extents `dims` (N, C, then 1 to 3 spatial) and element strides `strides`.
template <class Dims>
view5 make_view5(const Dims& dims, const Dims& strides) {
  view5 v;
  const int rank = static_cast<int>(dims.size());
  v.ext[0] = dims[0];
  v.str[0] = strides[0];
  v.ext[1] = dims[1];
  v.str[1] = strides[1];
  for (int i = 2; i < rank; ++i) {  // spatial dims right-aligned into D, H, W
    v.ext[5 - (rank - i)] = dims[static_cast<std::size_t>(i)];
    v.str[5 - (rank - i)] = strides[static_cast<std::size_t>(i)];
  }
  return v;
}

MEMFMT_HOST_DEVICE bool same_extents(const view5& a, const view5& b) {
  for (int d = 0; d < 5; ++d)
    if (a.ext[d] != b.ext[d]) return false;
  return true;
}

MEMFMT_HOST_DEVICE std::int64_t numel(const view5& v) { return v.ext[0] * v.ext[1] * v.ext[2] * v.ext[3] * v.ext[4]; }

// The logical index (N, C, D, H, W) of the i-th element in row-major logical order.
MEMFMT_HOST_DEVICE void unravel(const view5& v, std::int64_t i, std::int64_t idx[5]) {
  for (int d = 4; d >= 0; --d) {
    idx[d] = i % v.ext[d];
    i /= v.ext[d];
  }
}

MEMFMT_HOST_DEVICE std::int64_t offset(const view5& v, const std::int64_t idx[5]) {
  return idx[0] * v.str[0] + idx[1] * v.str[1] + idx[2] * v.str[2] + idx[3] * v.str[3] + idx[4] * v.str[4];
}

// scale * the sum of src over the dimensions dst reduces (extent 1 in dst), for dst's element i.
// load(offset) returns src's element at that offset in the accumulation type A.
template <class A, class Load>
MEMFMT_HOST_DEVICE A reduce_sum_at(const view5& src, const view5& dst, std::int64_t i, A scale, Load load) {
  std::int64_t at[5], ext[5];
  unravel(dst, i, at);
  std::int64_t count = 1;
  for (int d = 0; d < 5; ++d) {
    ext[d] = dst.ext[d] == src.ext[d] ? 1 : src.ext[d];  // the dims summed over
    count *= ext[d];
  }
  A sum = A(0);
  for (std::int64_t j = 0; j < count; ++j) {
    std::int64_t r = j, idx[5];
    for (int d = 4; d >= 0; --d) {
      idx[d] = ext[d] == 1 ? at[d] : r % ext[d];
      if (ext[d] != 1) r /= ext[d];
    }
    sum += load(offset(src, idx));
  }
  return sum * scale;
}

// The offset in src (extent 1 or dst's per dimension) of dst's element i.
MEMFMT_HOST_DEVICE std::int64_t expand_source_offset(const view5& src, const view5& dst, std::int64_t i) {
  std::int64_t idx[5];
  unravel(dst, i, idx);
  for (int d = 0; d < 5; ++d)
    if (src.ext[d] == 1) idx[d] = 0;
  return offset(src, idx);
}

// Pooling over (D, H, W) as pool_params says, with the reference backend's rules.
struct pool_geometry {
  std::int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  std::int64_t kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, pad_end[3] = {0, 0, 0};
  bool max = true;
  bool count_include_pad = true;
};

// Output position o's window along dimension d: input positions [lo, hi) and its padded extent.
MEMFMT_HOST_DEVICE void window_along(const pool_geometry& g, int d, std::int64_t o, std::int64_t& lo, std::int64_t& hi,
                                     std::int64_t& padded) {
  const std::int64_t start = o * g.stride[d] - g.pad[d];
  const std::int64_t limit = g.in[d] + g.pad_end[d];
  const std::int64_t end = start + g.kernel[d] < limit ? start + g.kernel[d] : limit;
  lo = start > 0 ? start : 0;
  hi = end < g.in[d] ? end : g.in[d];
  padded = end - start;
}

// The first output position along d whose window can hold input position i, and the last.
MEMFMT_HOST_DEVICE void outputs_covering(const pool_geometry& g, int d, std::int64_t i, std::int64_t& first,
                                         std::int64_t& last) {
  const std::int64_t lo = i + g.pad[d] - g.kernel[d] + 1;  // o * stride >= lo
  first = lo <= 0 ? 0 : (lo + g.stride[d] - 1) / g.stride[d];
  const std::int64_t hi = (i + g.pad[d]) / g.stride[d];  // o * stride <= i + pad
  last = hi < g.out[d] - 1 ? hi : g.out[d] - 1;
}

// d(pooling)/dx at input position (n, c, at[2..4]) = dx's element: the sum over the windows that
// hold it of dy / divisor (average) or of dy where it is the window's winner (max: padded
// positions never win, the first maximum in D, H, W order wins and a NaN wins over any number, as
// the forward decides). loadx / loady return x's / dy's element at an offset in A.
template <class A, class LoadX, class LoadY>
MEMFMT_HOST_DEVICE A pool_backward_at(const pool_geometry& g, const view5& x, const view5& dy, const std::int64_t at[5],
                                      LoadX loadx, LoadY loady) {
  std::int64_t first[3], last[3];
  for (int d = 0; d < 3; ++d) outputs_covering(g, d, at[2 + d], first[d], last[d]);
  A sum = A(0);
  for (std::int64_t od = first[0]; od <= last[0]; ++od)
    for (std::int64_t oh = first[1]; oh <= last[1]; ++oh)
      for (std::int64_t ow = first[2]; ow <= last[2]; ++ow) {
        const std::int64_t o[3] = {od, oh, ow};
        std::int64_t lo[3], hi[3], padded[3];
        bool inside = true;
        for (int d = 0; d < 3; ++d) {
          window_along(g, d, o[d], lo[d], hi[d], padded[d]);
          inside = inside && at[2 + d] >= lo[d] && at[2 + d] < hi[d];
        }
        if (!inside) continue;  // a window clipped by the end padding
        const std::int64_t yi[5] = {at[0], at[1], od, oh, ow};
        const A gv = loady(offset(dy, yi));
        if (g.max) {
          std::int64_t best[3] = {lo[0], lo[1], lo[2]};
          A best_v = A(0);
          bool first_seen = true;
          for (std::int64_t d = lo[0]; d < hi[0]; ++d)
            for (std::int64_t h = lo[1]; h < hi[1]; ++h)
              for (std::int64_t w = lo[2]; w < hi[2]; ++w) {
                const std::int64_t xi[5] = {at[0], at[1], d, h, w};
                const A v = loadx(offset(x, xi));
                if (first_seen || v > best_v || v != v) {
                  best[0] = d;
                  best[1] = h;
                  best[2] = w;
                  best_v = v;
                  first_seen = false;
                }
              }
          if (best[0] == at[2] && best[1] == at[3] && best[2] == at[4]) sum += gv;
        } else {
          A divisor = A(1);
          for (int d = 0; d < 3; ++d) divisor *= g.count_include_pad ? A(padded[d]) : A(hi[d] - lo[d]);
          sum += gv / divisor;
        }
      }
  return sum;
}

// memfmt::binary_op's codes: add, sub, mul, div.
enum binary_code : int { binary_add = 0, binary_sub = 1, binary_mul = 2, binary_div = 3 };

template <class A>
MEMFMT_HOST_DEVICE A binary_at(int op, A a, A b) {
  switch (op) {
    case binary_sub: return a - b;
    case binary_mul: return a * b;
    case binary_div: return a / b;
    default: return a + b;
  }
}

// d(a op b)/d(a) * dy, or d(a op b)/d(b) * dy when of_b.
template <class A>
MEMFMT_HOST_DEVICE A binary_grad_at(int op, bool of_b, A dy, A a, A b) {
  switch (op) {
    case binary_sub: return of_b ? -dy : dy;
    case binary_mul: return dy * (of_b ? a : b);
    case binary_div: return of_b ? -dy * a / (b * b) : dy / b;
    default: return dy;
  }
}

}  // namespace memfmt::cudnn::lk
