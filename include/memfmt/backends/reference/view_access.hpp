// memfmt/backends/reference/view_access.hpp - rank-independent access to views for the reference loops.
//
// The reference loops are written once for 3 spatial dimensions (D, H, W); a 2-D view is seen as
// D = 1. Offsets come from the view's own strides, so one loop nest serves every format and any
// padded (strided) layout.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../../tensor/tensor_view.hpp"
#include "numeric.hpp"

namespace memfmt::reference::detail {

// Extents or strides of a view as N, C, D, H, W (D = 1 with stride 0 for a 2-D view).
struct dims5 {
  std::int64_t n, c, d, h, w;
  // No elements. Loops that first build a per-dim table (pad sources, resampling taps) return
  // then: an empty value may still have one huge dim.
  bool empty() const noexcept { return n == 0 || c == 0 || d == 0 || h == 0 || w == 0; }
};

template <class T, class F>
dims5 extents5(const tensor_view<T, F>& v) noexcept {
  if constexpr (F::rank == 4) return {v.extent(0), v.extent(1), 1, v.extent(2), v.extent(3)};
  else return {v.extent(0), v.extent(1), v.extent(2), v.extent(3), v.extent(4)};
}

template <class T, class F>
dims5 strides5(const tensor_view<T, F>& v) noexcept {
  if constexpr (F::rank == 4) return {v.stride(0), v.stride(1), 0, v.stride(2), v.stride(3)};
  else return {v.stride(0), v.stride(1), v.stride(2), v.stride(3), v.stride(4)};
}

inline std::int64_t offset5(const dims5& s, std::int64_t n, std::int64_t c, std::int64_t d, std::int64_t h,
                            std::int64_t w) noexcept {
  return n * s.n + c * s.c + d * s.d + h * s.h + w * s.w;
}

// Calls fn(n, c, d, h, w) for every position of extents e, w fastest.
template <class Fn>
void for_each5(const dims5& e, Fn&& fn) {
  for (std::int64_t n = 0; n < e.n; ++n)
    for (std::int64_t c = 0; c < e.c; ++c)
      for (std::int64_t d = 0; d < e.d; ++d)
        for (std::int64_t h = 0; h < e.h; ++h)
          for (std::int64_t w = 0; w < e.w; ++w) fn(n, c, d, h, w);
}

// Dense N, C, D, H, W index into a scratch buffer of extents e (sizes were validated, so the
// products fit).
inline std::int64_t index5(const dims5& e, std::int64_t n, std::int64_t c, std::int64_t d, std::int64_t h,
                           std::int64_t w) noexcept {
  return (((n * e.c + c) * e.d + d) * e.h + h) * e.w + w;
}
inline std::int64_t numel5(const dims5& e) noexcept { return e.n * e.c * e.d * e.h * e.w; }

// A view as the reference loops read it: its data, and its extents and strides as N, C, D, H, W.
// The loops take these instead of typed views, so each is compiled once per element type and not
// once more for every combination of formats and ranks its views may have: the format is in the
// strides either way, read at run time.
template <class T>
struct view5 {
  T* ptr = nullptr;
  dims5 ext{}, str{};

  T* data() const noexcept { return ptr; }
  std::int64_t batch() const noexcept { return ext.n; }
  std::int64_t channels() const noexcept { return ext.c; }
  std::int64_t numel() const noexcept { return ext.n * ext.c * ext.d * ext.h * ext.w; }
  bool empty() const noexcept { return numel() == 0; }
};

template <class T, class F>
view5<T> view5_of(const tensor_view<T, F>& v) noexcept {
  return {v.data(), extents5(v), strides5(v)};
}
template <class T>
dims5 extents5(const view5<T>& v) noexcept {
  return v.ext;
}
template <class T>
dims5 strides5(const view5<T>& v) noexcept {
  return v.str;
}

// The spatial sizes as (D, H, W).
inline std::array<std::int64_t, 3> spatial_dhw(const dims5& e) noexcept { return {e.d, e.h, e.w}; }

// Per-spatial-dimension parameters (H, W) or (D, H, W) moved into the (D, H, W) slots, a 2-D
// op's D slot holding `fill` (kernel 1, stride 1, padding 0: D = 1 is then a no-op).
template <int SpatialRank>
std::array<std::int64_t, 3> params_dhw(const std::array<std::int64_t, 3>& p, std::int64_t fill) noexcept {
  static_assert(SpatialRank == 2 || SpatialRank == 3, "2-D or 3-D");
  if constexpr (SpatialRank == 2) return {fill, p[0], p[1]};
  else return p;
}

// Writes a double scratch buffer of dense N, C, D, H, W order (index5) into a view, rounding
// each value once: the scatter-style backward passes accumulate there first.
template <class T>
void store_dense(const std::vector<double>& acc, const view5<T>& out) {
  const auto e = extents5(out);
  const auto s = strides5(out);
  for_each5(e, [&](auto n, auto c, auto d, auto h, auto w) {
    out.data()[offset5(s, n, c, d, h, w)] = from_double<T>(acc[static_cast<std::size_t>(index5(e, n, c, d, h, w))]);
  });
}

// Calls fn(n, d, h, w) for every sample and spatial position: the layers over each position's C
// values (softmax, local response norm).
template <class Fn>
void for_each_channel_vector(const dims5& e, Fn&& fn) {
  for (std::int64_t n = 0; n < e.n; ++n)
    for (std::int64_t d = 0; d < e.d; ++d)
      for (std::int64_t h = 0; h < e.h; ++h)
        for (std::int64_t w = 0; w < e.w; ++w) fn(n, d, h, w);
}

}  // namespace memfmt::reference::detail
