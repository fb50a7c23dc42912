// memfmt/backends/reference/concat.hpp - reference concatenation along C and channel slices.
//
// Pure copies (no rounding): concat puts part i at channels [sum of the parts before it, + C_i)
// of y; its backward copies those channels of dy back into each part's gradient. A channel slice
// reads y = x[:, c_begin : c_begin + C_y]; its backward writes dy there and zeros elsewhere in dx.
// Parts and wholes may have different formats of one rank and must not overlap.
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

template <class T>
void zero_channels_outside(const view5<T>& v, std::int64_t c_begin, std::int64_t count) {
  const auto s = strides5(v);
  const T zero = from_double<T>(0.0);
  for_each5(extents5(v), [&](auto n, auto c, auto d, auto h, auto w) {
    if (c < c_begin || c >= c_begin + count) v.data()[offset5(s, n, c, d, h, w)] = zero;
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
void channel_slice_forward(tensor_view<const T, XF> x, std::int64_t c_begin, tensor_view<T, YF> y) {
  detail::check_element_type<T>();
  validate_channel_slice("channel_slice_forward", "input x", x, "output y", y, c_begin);
  detail::copy_channels<T>(detail::view5_of(x), c_begin, detail::view5_of(y), 0, y.channels());
}

template <class T, class DYF, class DXF>
void channel_slice_backward(tensor_view<const T, DYF> dy, std::int64_t c_begin, tensor_view<T, DXF> dx) {
  detail::check_element_type<T>();
  validate_channel_slice("channel_slice_backward", "input gradient dx", dx, "output gradient dy", dy, c_begin);
  detail::zero_channels_outside<T>(detail::view5_of(dx), c_begin, dy.channels());
  detail::copy_channels<T>(detail::view5_of(dy), 0, detail::view5_of(dx), c_begin, dy.channels());
}

}  // namespace memfmt::reference
