// memfmt/backends/cudnn/spatial_pad.hpp - spatial padding (constant, reflect, replicate) of packed
// device tensors as plans of 2-D copies (cudaMemcpy2DAsync, strided_copy.hpp), so no kernel needs
// compiling.
//
// Padding moves whole "pixels": in a channels-last tensor a position's C channels (contiguous), in
// a channels-first one a single element. So both formats are O blocks of D x H x W pixels (O = N
// channels-last, N * C channels-first) and one plan serves both. The forward copies x into the
// interior of y, then fills y's borders one dim at a time, D, H, then W, each border slab a copy of
// the slab of y it mirrors (reflect) or repeats (replicate): that slab is already complete in the
// dims filled before, so y[d, h, w] = x[src_d(d), src_h(h), src_w(w)], the reference's definition.
// W goes last so each border column is one copy over all rows. Constant mode fills y with the value
// first. The backward of constant padding is dy's interior; reflect and replicate backward sum
// several dy elements into one dx element, which copies cannot do (refused).
// Plans are plain data: the host tests replay them on host memory against the reference backend.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "../../dtype.hpp"
#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../reference/pad.hpp"
#include "../validate.hpp"
#include "legacy_tensor.hpp"
#include "status.hpp"
#include "strided_copy.hpp"
#include "tensor_desc.hpp"

namespace memfmt::cudnn {

// Depth, height and width (1 for a dimension a 2-D tensor lacks).
using dhw_extents = std::array<std::int64_t, 3>;

// A packed tensor pair (x, padded y) as O blocks of pixels.
struct pad_geometry {
  std::int64_t outer = 0;       // O
  std::size_t pixel_bytes = 0;  // P
  dhw_extents in{1, 1, 1}, out{1, 1, 1}, begin{0, 0, 0};
};

// The geometry of padding a packed tensor of extents `x` (N, C, spatial...) by `p`, whose entries
// are validated (>= 0; reflect narrower than the input).
template <class Extents>
pad_geometry pad_geometry_of(const Extents& x, bool channels_last, std::size_t element_bytes, const pad_params& p) {
  constexpr int spatial = static_cast<int>(std::tuple_size<Extents>::value) - 2;
  static_assert(spatial == 2 || spatial == 3, "pad: rank 4 or 5");
  pad_geometry g;
  g.outer = channels_last ? x[0] : x[0] * x[1];
  g.pixel_bytes = channels_last ? static_cast<std::size_t>(x[1]) * element_bytes : element_bytes;
  for (int i = 0; i < spatial; ++i) {
    const auto d = static_cast<std::size_t>(3 - spatial + i);
    g.in[d] = x[static_cast<std::size_t>(2 + i)];
    g.begin[d] = p.begin[static_cast<std::size_t>(i)];
    g.out[d] = g.in[d] + p.begin[static_cast<std::size_t>(i)] + p.end[static_cast<std::size_t>(i)];
  }
  return g;
}

namespace detail {

// Appends the copies of a box of `box` pixels per block, at `from` in a grid `from_grid` to `to`
// in a grid `to_grid` (both O blocks). Rows are indexed by (block, d, h); dims of one row and dims
// contiguous in both grids merge, so a copy covers as many rows as one pitch allows.
inline void append_box_copies(std::vector<copy_2d>& out, const pad_geometry& g, const dhw_extents& from_grid,
                              const dhw_extents& from, const dhw_extents& to_grid, const dhw_extents& to,
                              const dhw_extents& box) {
  if (g.outer == 0 || box[0] == 0 || box[1] == 0 || box[2] == 0) return;
  const auto P = g.pixel_bytes;
  const auto u = [](std::int64_t v) { return static_cast<std::size_t>(v); };
  struct row_dim {
    std::size_t count, src_stride, dst_stride;
  };
  const std::size_t src_row = u(from_grid[2]) * P, dst_row = u(to_grid[2]) * P;
  std::vector<row_dim> dims;  // outermost first
  for (const row_dim& r :
       {row_dim{u(g.outer), src_row * u(from_grid[1] * from_grid[0]), dst_row * u(to_grid[1] * to_grid[0])},
        row_dim{u(box[0]), src_row * u(from_grid[1]), dst_row * u(to_grid[1])}, row_dim{u(box[1]), src_row, dst_row}}) {
    if (r.count == 1) continue;
    if (!dims.empty() && dims.back().src_stride == r.count * r.src_stride &&
        dims.back().dst_stride == r.count * r.dst_stride) {
      dims.back() = {dims.back().count * r.count, r.src_stride, r.dst_stride};
    } else {
      dims.push_back(r);
    }
  }
  copy_2d k;
  k.width = u(box[2]) * P;
  k.height = 1;
  k.src_pitch = k.dst_pitch = k.width;
  if (!dims.empty()) {
    k.height = dims.back().count;
    k.src_pitch = dims.back().src_stride;
    k.dst_pitch = dims.back().dst_stride;
    dims.pop_back();
  }
  const std::size_t src0 = ((u(from[0]) * u(from_grid[1]) + u(from[1])) * u(from_grid[2]) + u(from[2])) * P;
  const std::size_t dst0 = ((u(to[0]) * u(to_grid[1]) + u(to[1])) * u(to_grid[2]) + u(to[2])) * P;
  // One copy per index of the outer dims (at most two remain).
  std::vector<std::size_t> idx(dims.size(), 0);
  for (;;) {
    k.src_offset = src0;
    k.dst_offset = dst0;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      k.src_offset += idx[i] * dims[i].src_stride;
      k.dst_offset += idx[i] * dims[i].dst_stride;
    }
    out.push_back(k);
    std::size_t i = dims.size();
    while (i > 0 && ++idx[i - 1] == dims[i - 1].count) idx[--i] = 0;
    if (i == 0) return;
  }
}

}  // namespace detail

// The forward: fill y (constant mode), then the copies from x into y, then those within y.
struct pad_forward_plan {
  bool fill = false;
  std::vector<copy_2d> from_x;    // src: x, dst: y
  std::vector<copy_2d> within_y;  // src: y, dst: y; after from_x, in order
};

inline pad_forward_plan plan_pad_forward(const pad_geometry& g, pad_mode mode) {
  pad_forward_plan plan;
  plan.fill = mode == pad_mode::constant;
  detail::append_box_copies(plan.from_x, g, g.in, {0, 0, 0}, g.out, g.begin, g.in);
  if (mode == pad_mode::constant) return plan;
  for (std::size_t d = 0; d < 3; ++d) {
    // The border slabs of dim d: full extent in the dims filled before, the input's in the others.
    dhw_extents box = g.in;
    for (std::size_t e = 0; e < d; ++e) box[e] = g.out[e];
    box[d] = 1;
    const auto src = reference::detail::pad_sources(mode, g.in[d], g.begin[d], g.out[d]);
    for (std::int64_t o = 0; o < g.out[d]; ++o) {
      if (o >= g.begin[d] && o < g.begin[d] + g.in[d]) continue;  // interior
      dhw_extents from = g.begin, to = g.begin;
      for (std::size_t e = 0; e < d; ++e) from[e] = to[e] = 0;
      from[d] = g.begin[d] + src[static_cast<std::size_t>(o)];
      to[d] = o;
      detail::append_box_copies(plan.within_y, g, g.out, from, g.out, to, box);
    }
  }
  return plan;
}

// The backward of constant padding: dx is dy's interior. Throws unsupported for the other modes.
inline std::vector<copy_2d> plan_pad_backward(const pad_geometry& g, pad_mode mode) {
  if (mode != pad_mode::constant)
    memfmt::detail::fail(errc::unsupported, std::string("cuDNN pad_backward: ") +
                                                (mode == pad_mode::reflect ? "reflect" : "replicate") +
                                                " padding's gradient sums several output gradients into one input "
                                                "element, which 2-D copies cannot do (constant padding only)");
  std::vector<copy_2d> copies;
  detail::append_box_copies(copies, g, g.out, g.begin, g.in, {0, 0, 0}, g.in);
  return copies;
}

// The geometry of padding `in` into `out` (validated extents), both packed and of one format;
// throws unsupported / format_mismatch naming `op` otherwise.
template <class A, class AF, class B, class BF>
pad_geometry pad_geometry_of_views(const std::string& op, const tensor_view<A, AF>& in, const tensor_view<B, BF>& out,
                                   const pad_params& p) {
  static_assert(AF::rank == BF::rank, "pad: one rank");
  const auto require_packed = [&](const char* name, const char* format, bool packed, const auto& extents) {
    if (!packed)
      memfmt::detail::fail(errc::unsupported, op + ": " + name + " (" + format + " " +
                                                  memfmt::detail::dims_to_string(extents) +
                                                  ") is not packed (padding copies take packed tensors)");
  };
  require_packed("input", AF::name, in.is_packed(), in.extents());
  require_packed("output", BF::name, out.is_packed(), out.extents());
  if (AF::channels_last != BF::channels_last)
    memfmt::detail::fail(errc::format_mismatch, op + ": input " + AF::name + " and output " + BF::name +
                                                    " (padding copies take one format for both)");
  return pad_geometry_of(in.extents(), AF::channels_last, sizeof(A), p);
}

// y = x padded by `p`, queued on `stream`. A +0 constant is a memset; any other constant is written
// by cudnnSetTensor (not deprecated; takes the value in y's type) on `handle`, set to `stream`.
template <class T, class XF, class YF>
void run_pad_forward(cudnnHandle_t handle, cudaStream_t stream, tensor_view<const T, XF> x, tensor_view<T, YF> y,
                     const pad_params& p) {
  const std::string op = "cuDNN pad_forward";
  validate_pad_forward(x, y, p);
  require_layer_dtype(dtype_of_v<T>, op);
  const pad_geometry g = pad_geometry_of_views(op, x, y, p);
  if (y.numel() == 0) return;
  const pad_forward_plan plan = plan_pad_forward(g, p.mode);
  if (plan.fill && p.value == 0.0 && !std::signbit(p.value)) {
    check_cuda(cudaMemsetAsync(y.data(), 0, static_cast<std::size_t>(y.numel()) * sizeof(T), stream),
               "cudaMemsetAsync (pad's zeros)");
  } else if (plan.fill) {
    const legacy_shape s = legacy_shape_of(op, y);
    const legacy_tensor_desc yd(dtype_of_v<T>, s.dims, s.strides[0]);
    const T value = reference::detail::from_double<T>(p.value);  // rounded as the reference rounds it
    check_cudnn(cudnnSetStream(handle, stream), "cudnnSetStream");
    check_cudnn(cudnnSetTensor(handle, yd.get(), y.data(), &value), "cudnnSetTensor (pad's constant)");
  }
  for (const copy_2d& k : plan.from_x) run_copy(k, y.data(), x.data(), stream);
  for (const copy_2d& k : plan.within_y) run_copy(k, y.data(), y.data(), stream);
}

// dx = the gradient of constant padding (dy's interior), queued on `stream`; unsupported otherwise.
template <class T, class DYF, class DXF>
void run_pad_backward(cudaStream_t stream, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx, const pad_params& p) {
  const std::string op = "cuDNN pad_backward";
  validate_pad_backward(dy, dx, p);
  require_layer_dtype(dtype_of_v<T>, op);
  const pad_geometry g = pad_geometry_of_views(op, dx, dy, p);
  const std::vector<copy_2d> copies = plan_pad_backward(g, p.mode);
  for (const copy_2d& k : copies) run_copy(k, dx.data(), dy.data(), stream);
}

}  // namespace memfmt::cudnn
