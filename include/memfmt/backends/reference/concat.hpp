// memfmt/backends/reference/concat.hpp - reference concatenation along C and slices.
//
// Pure copies (no rounding): concat puts part i at channels [sum of the parts before it, + C_i)
// of y; its backward copies those channels of dy back into each part's gradient. A slice reads
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

// to[:, to_c0 + c] = from[:, from_c0 + c] for c < count, N and spatial sizes of `from`.
template <class T>
void copy_channels(const view5<const T>& from, std::int64_t from_c0, const view5<T>& to, std::int64_t to_c0,
                   std::int64_t count) {
  auto e = extents5(from);
  e.c = count;
  const auto fs = strides5(from), ts = strides5(to);
  for_each5(e, [&](auto n, auto c, auto d, auto h, auto w) {
    to.data()[offset5(ts, n, to_c0 + c, d, h, w)] = from.data()[offset5(fs, n, from_c0 + c, d, h, w)];
  });
}

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
void concat_forward(const std::vector<tensor_view<const T, XF>>& xs, tensor_view<T, YF> y) {
  detail::check_element_type<T>();
  validate_concat("concat_forward", xs, "output y", y);
  std::int64_t c0 = 0;
  for (const auto& x : xs) {
    detail::copy_channels<T>(detail::view5_of(x), 0, detail::view5_of(y), c0, x.channels());
    c0 += x.channels();
  }
}

template <class T, class DYF, class DXF>
void concat_backward(tensor_view<const T, DYF> dy, const std::vector<tensor_view<T, DXF>>& dxs) {
  detail::check_element_type<T>();
  validate_concat("concat_backward", dxs, "output gradient dy", dy);
  std::int64_t c0 = 0;
  for (const auto& dx : dxs) {
    detail::copy_channels<T>(detail::view5_of(dy), c0, detail::view5_of(dx), 0, dx.channels());
    c0 += dx.channels();
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
