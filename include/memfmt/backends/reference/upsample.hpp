// memfmt/backends/reference/upsample.hpp - reference nearest and (bi/tri)linear upsampling.
//
// Resampling to the output sizes of upsample_params, separable per spatial dim. For output index o
// of a dim of input size in and output size out:
// - nearest: source min(floor(o * in / out), in - 1), in exact integer arithmetic (PyTorch computes
//   in / out in float, which agrees for the sizes networks use);
// - linear (align_corners = false): source s = max((o + 1/2) * in / out - 1/2, 0), interpolating
//   between floor(s) and the next index (clamped at in - 1) with weights 1 - frac, frac.
// With ONNX coordinates (upsample_params::coordinates), the source is resample_source's, rounded
// by nearest_source or clamped to [0, in - 1] and interpolated alike.
// The backward scatters dy with the same weights. Sums in double, rounded once to T; inputs and
// outputs may have different formats of one rank and must not overlap.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "../../detail/checked.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

// The sources of each output index of one dim: up to two (input index, weight) pairs.
struct resample_taps {
  std::vector<std::array<std::pair<std::int64_t, double>, 2>> taps;
  int count;  // 1 for nearest, 2 for linear
};

// Spatial dim `dim` (0 is the first of p's spatial3) of input size in and output size out.
inline resample_taps make_taps(const upsample_params& p, int dim, std::int64_t in, std::int64_t out) {
  const resample_mode mode = p.mode;
  resample_taps t{std::vector<std::array<std::pair<std::int64_t, double>, 2>>(static_cast<std::size_t>(out)),
                  mode == resample_mode::nearest ? 1 : 2};
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double given = dim >= 0 ? p.scale[static_cast<std::size_t>(dim)] : 0.0;
  for (std::int64_t o = 0; o < out; ++o) {
    auto& tap = t.taps[static_cast<std::size_t>(o)];
    if (p.coordinates != resample_coordinates::pytorch) {
      const double x = resample_source(p.coordinates, o, in, out, given);
      if (mode == resample_mode::nearest) {
        tap[0] = {nearest_source(p.rounding, x, in), 1.0};
        tap[1] = {0, 0.0};
      } else {
        const double s = std::clamp(x, 0.0, static_cast<double>(in - 1));
        const auto i0 = static_cast<std::int64_t>(s);
        const std::int64_t i1 = i0 < in - 1 ? i0 + 1 : i0;
        tap[0] = {i0, 1.0 - (s - static_cast<double>(i0))};
        tap[1] = {i1, s - static_cast<double>(i0)};
      }
    } else if (mode == resample_mode::nearest) {
      const std::int64_t src = memfmt::detail::checked_mul(o, in, "upsample: source index") / out;
      tap[0] = {std::min(src, in - 1), 1.0};
      tap[1] = {0, 0.0};
    } else {
      double s = (static_cast<double>(o) + 0.5) * scale - 0.5;
      if (s < 0.0) s = 0.0;
      const auto i0 = static_cast<std::int64_t>(s);
      const std::int64_t i1 = i0 < in - 1 ? i0 + 1 : i0;
      const double frac = s - static_cast<double>(i0);
      tap[0] = {i0, 1.0 - frac};
      tap[1] = {i1, frac};
    }
  }
  return t;
}

// Calls fn(n, c, od, oh, ow, id, ih, iw, weight) for every output position and each of its taps
// of non-zero weight (an unused neighbour, even an infinite one, then adds nothing). spatial_rank
// 2 or 3 says which of D, H, W are p's spatial dims.
template <class Fn>
void for_each_tap(const upsample_params& p, int spatial_rank, const dims5& in, const dims5& out, Fn&& fn) {
  if (out.empty()) return;
  const int first = 3 - spatial_rank;  // D is no spatial dim of a 2-D value
  const resample_taps td = make_taps(p, 0 - first, in.d, out.d), th = make_taps(p, 1 - first, in.h, out.h),
                      tw = make_taps(p, 2 - first, in.w, out.w);
  for_each5(out, [&](auto n, auto c, auto od, auto oh, auto ow) {
    const auto& a = td.taps[static_cast<std::size_t>(od)];
    const auto& b = th.taps[static_cast<std::size_t>(oh)];
    const auto& e = tw.taps[static_cast<std::size_t>(ow)];
    for (int i = 0; i < td.count; ++i)
      for (int j = 0; j < th.count; ++j)
        for (int k = 0; k < tw.count; ++k) {
          const double weight = a[i].second * b[j].second * e[k].second;
          if (weight != 0.0) fn(n, c, od, oh, ow, a[i].first, b[j].first, e[k].first, weight);
        }
  });
}

template <class T>
void upsample_forward(const view5<const T>& x, const view5<T>& y, const upsample_params& p, int spatial_rank) {
  const auto ye = extents5(y);
  const auto xs = strides5(x);
  std::vector<double> acc(static_cast<std::size_t>(numel5(ye)), 0.0);
  for_each_tap(p, spatial_rank, extents5(x), ye,
               [&](auto n, auto c, auto od, auto oh, auto ow, auto id, auto ih, auto iw, double weight) {
                 auto& a = acc[static_cast<std::size_t>(index5(ye, n, c, od, oh, ow))];
                 a = mul_add(weight, to_double(x.data()[offset5(xs, n, c, id, ih, iw)]), a);
               });
  store_dense(acc, y);
}

template <class T>
void upsample_backward(const view5<const T>& dy, const view5<T>& dx, const upsample_params& p, int spatial_rank) {
  const auto xe = extents5(dx);
  const auto dys = strides5(dy);
  std::vector<double> acc(static_cast<std::size_t>(numel5(xe)), 0.0);
  for_each_tap(p, spatial_rank, xe, extents5(dy),
               [&](auto n, auto c, auto od, auto oh, auto ow, auto id, auto ih, auto iw, double weight) {
                 auto& a = acc[static_cast<std::size_t>(index5(xe, n, c, id, ih, iw))];
                 a = mul_add(weight, to_double(dy.data()[offset5(dys, n, c, od, oh, ow)]), a);
               });
  store_dense(acc, dx);
}

}  // namespace detail

template <class T, class XF, class YF>
void upsample_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const upsample_params& p) {
  detail::check_element_type<T>();
  validate_upsample_forward(x, y, p);
  detail::upsample_forward<T>(detail::view5_of(x), detail::view5_of(y), p, XF::rank - 2);
}

// dx (its extents are the input's) = the gradient of upsample_forward.
template <class T, class DYF, class DXF>
void upsample_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx, const upsample_params& p) {
  detail::check_element_type<T>();
  validate_upsample_backward(dy, dx, p);
  detail::upsample_backward<T>(detail::view5_of(dy), detail::view5_of(dx), p, DXF::rank - 2);
}

}  // namespace memfmt::reference
