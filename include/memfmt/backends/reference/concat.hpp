// memfmt/backends/reference/concat.hpp - reference concatenation and slices.
//
// Pure copies (no rounding): concat puts part i at [sum of the parts before it, + its extent) along
// its axis of y, the slice of y that it is; its backward copies that slice of dy back into each
// part's gradient. A slice reads
// y = x[begin : end : step] along its axis (slice_params); its backward writes dy there and zeros
// elsewhere in dx. Parts and wholes may have different formats of one rank and must not overlap.
#pragma once

#include <cstdint>
#include <vector>

#include "../../tensor/tensor_view.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

// Calls fn(offset in whole, offset in part) for every element of part = whole sliced by p (whole
// of logical rank `rank`).
template <class Fn>
void for_each_sliced(const dims5& whole_strides, const slice_params& p, int rank, const dims5& part_extents,
                     const dims5& part_strides, Fn&& fn) {
  // The sliced axis among N, C, D, H, W (a 2-D view has no D).
  const int axis5 = p.axis == 1 ? 1 : p.axis + (rank == 4 ? 1 : 0);
  for_each5(part_extents, [&](auto n, auto c, auto d, auto h, auto w) {
    std::int64_t i[5] = {n, c, d, h, w};
    i[axis5] = p.begin + i[axis5] * p.step;
    fn(offset5(whole_strides, i[0], i[1], i[2], i[3], i[4]), offset5(part_strides, n, c, d, h, w));
  });
}

}  // namespace detail

template <class T, class XF, class YF>
void concat_forward(const std::vector<tensor_view<const T, XF>>& xs, tensor_view<T, YF> y,
                    const concat_params& p = {}) {
  detail::check_element_type<T>();
  const std::vector<slice_params> where = validate_concat("concat_forward", xs, "output y", y, p);
  const auto yv = detail::view5_of(y);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const auto xv = detail::view5_of(xs[i]);
    detail::for_each_sliced(yv.str, where[i], YF::rank, xv.ext, xv.str,
                            [&](std::int64_t whole, std::int64_t part) { y.data()[whole] = xs[i].data()[part]; });
  }
}

template <class T, class DYF, class DXF>
void concat_backward(tensor_view<const T, DYF> dy, const std::vector<tensor_view<T, DXF>>& dxs,
                     const concat_params& p = {}) {
  detail::check_element_type<T>();
  const std::vector<slice_params> where = validate_concat("concat_backward", dxs, "output gradient dy", dy, p);
  const auto dyv = detail::view5_of(dy);
  for (std::size_t i = 0; i < dxs.size(); ++i) {
    const auto dxv = detail::view5_of(dxs[i]);
    detail::for_each_sliced(dyv.str, where[i], DYF::rank, dxv.ext, dxv.str,
                            [&](std::int64_t whole, std::int64_t part) { dxs[i].data()[part] = dy.data()[whole]; });
  }
}

template <class T, class XF, class YF>
void slice_forward(tensor_view<const T, XF> x, const slice_params& p, tensor_view<T, YF> y) {
  detail::check_element_type<T>();
  validate_slice("slice_forward", "input x", x, "output y", y, p);
  const auto xv = detail::view5_of(x);
  const auto yv = detail::view5_of(y);
  detail::for_each_sliced(xv.str, p, XF::rank, yv.ext, yv.str,
                          [&](std::int64_t from, std::int64_t to) { y.data()[to] = x.data()[from]; });
}

template <class T, class DYF, class DXF>
void slice_backward(tensor_view<const T, DYF> dy, const slice_params& p, tensor_view<T, DXF> dx) {
  detail::check_element_type<T>();
  validate_slice("slice_backward", "input gradient dx", dx, "output gradient dy", dy, p);
  const auto dxv = detail::view5_of(dx);
  const auto dyv = detail::view5_of(dy);
  const T zero = detail::from_double<T>(0.0);
  detail::for_each5(dxv.ext, [&](auto n, auto c, auto d, auto h, auto w) {
    dx.data()[detail::offset5(dxv.str, n, c, d, h, w)] = zero;
  });
  detail::for_each_sliced(dxv.str, p, DXF::rank, dyv.ext, dyv.str,
                          [&](std::int64_t to, std::int64_t from) { dx.data()[to] = dy.data()[from]; });
}

}  // namespace memfmt::reference
