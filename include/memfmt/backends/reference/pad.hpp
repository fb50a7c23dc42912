// memfmt/backends/reference/pad.hpp - reference spatial padding (constant, reflect, replicate).
//
// torch.nn.functional.pad over the spatial dims. Output index o of a dim reads input index
// i = o - begin when it lies inside; outside, constant mode writes the value, reflect mirrors
// about the edge element (-i, or 2 (in - 1) - i) and replicate clamps to the edge. The backward
// sums dy into the input element each output position read (constant positions read none).
// Inputs and outputs may have different formats of one rank and must not overlap.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

// The input index each output index of one dim reads, -1 for the constant.
inline std::vector<std::int64_t> pad_sources(pad_mode mode, std::int64_t in, std::int64_t begin, std::int64_t out) {
  std::vector<std::int64_t> src(static_cast<std::size_t>(out));
  for (std::int64_t o = 0; o < out; ++o) {
    std::int64_t i = o - begin;
    if (i < 0 || i >= in) {
      if (mode == pad_mode::constant) i = -1;
      else if (mode == pad_mode::reflect) i = i < 0 ? -i : 2 * (in - 1) - i;
      else i = i < 0 ? 0 : in - 1;
    }
    src[static_cast<std::size_t>(o)] = i;
  }
  return src;
}

// Calls fn(n, c, od, oh, ow, id, ih, iw, inside) for every output position; id, ih, iw are the
// source when `inside`.
// `begin` is the padding before each of (D, H, W).
template <class Fn>
void for_each_pad_source(const pad_params& p, const std::array<std::int64_t, 3>& begin, const dims5& in,
                         const dims5& out, Fn&& fn) {
  if (out.empty()) return;
  const auto sd = pad_sources(p.mode, in.d, begin[0], out.d), sh = pad_sources(p.mode, in.h, begin[1], out.h),
             sw = pad_sources(p.mode, in.w, begin[2], out.w);
  for_each5(out, [&](auto n, auto c, auto od, auto oh, auto ow) {
    const std::int64_t id = sd[static_cast<std::size_t>(od)], ih = sh[static_cast<std::size_t>(oh)],
                       iw = sw[static_cast<std::size_t>(ow)];
    fn(n, c, od, oh, ow, id, ih, iw, id >= 0 && ih >= 0 && iw >= 0);
  });
}

template <class T>
void pad_forward(const view5<const T>& x, const view5<T>& y, const pad_params& p,
                 const std::array<std::int64_t, 3>& begin) {
  const T fill = from_double<T>(p.value);
  const auto xs = strides5(x), ys = strides5(y);
  for_each_pad_source(p, begin, extents5(x), extents5(y),
                      [&](auto n, auto c, auto od, auto oh, auto ow, auto id, auto ih, auto iw, bool inside) {
                        y.data()[offset5(ys, n, c, od, oh, ow)] =
                            inside ? x.data()[offset5(xs, n, c, id, ih, iw)] : fill;
                      });
}

template <class T>
void pad_backward(const view5<const T>& dy, const view5<T>& dx, const pad_params& p,
                  const std::array<std::int64_t, 3>& begin) {
  const auto xe = extents5(dx);
  const auto dys = strides5(dy);
  std::vector<double> acc(static_cast<std::size_t>(numel5(xe)), 0.0);
  for_each_pad_source(p, begin, xe, extents5(dy),
                      [&](auto n, auto c, auto od, auto oh, auto ow, auto id, auto ih, auto iw, bool inside) {
                        if (inside)
                          acc[static_cast<std::size_t>(index5(xe, n, c, id, ih, iw))] +=
                              to_double(dy.data()[offset5(dys, n, c, od, oh, ow)]);
                      });
  store_dense(acc, dx);
}

}  // namespace detail

template <class T, class XF, class YF>
void pad_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const pad_params& p) {
  detail::check_element_type<T>();
  validate_pad_forward(x, y, p);
  detail::pad_forward<T>(detail::view5_of(x), detail::view5_of(y), p, detail::params_dhw<XF::rank - 2>(p.begin, 0));
}

// dx (its extents are the input's) = the gradient of pad_forward.
template <class T, class DYF, class DXF>
void pad_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx, const pad_params& p) {
  detail::check_element_type<T>();
  validate_pad_backward(dy, dx, p);
  detail::pad_backward<T>(detail::view5_of(dy), detail::view5_of(dx), p, detail::params_dhw<DXF::rank - 2>(p.begin, 0));
}

}  // namespace memfmt::reference
