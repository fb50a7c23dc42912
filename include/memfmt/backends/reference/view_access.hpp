// memfmt/backends/reference/view_access.hpp - rank-independent access to views for the reference loops.
//
// The reference loops are written once for 3 spatial dimensions (D, H, W); a 2-D view is seen as
// D = 1. Offsets come from the view's own strides, so one loop nest serves every format and any
// padded (strided) layout.
#pragma once

#include <cstdint>

#include "../../tensor/tensor_view.hpp"

namespace memfmt::reference::detail {

// Extents or strides of a view as N, C, D, H, W (D = 1 with stride 0 for a 2-D view).
struct dims5 {
  std::int64_t n, c, d, h, w;
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

}  // namespace memfmt::reference::detail
