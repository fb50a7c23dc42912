// memfmt/backends/reference/pooling.hpp - reference max / average pooling and global average pooling.
//
// PyTorch's semantics (max_pool2d/3d, avg_pool2d/3d) with per-side padding (pool_params):
// - max: padded positions never win; the first maximum in window order (D, then H, then W) wins,
//   and a NaN wins over any number. The backward routes each dy to its window's winner, found
//   again from x (so the forward keeps no indices).
// - average: the window sum divided by the number of positions of the window that lie within the
//   padded input (count_include_pad; a ceil-mode window past the end padding counts less) or
//   within the input alone (!count_include_pad).
// Sums are taken in double and every output is rounded once to T. Inputs and outputs may have
// different formats of one rank and must not overlap.
#pragma once

#include <array>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

// One output position's window, per (D, H, W): input positions [lo, hi) and the divisor.
struct pool_window {
  std::array<std::int64_t, 3> lo, hi;
  double divisor;
};

struct pool_geometry {
  std::array<std::int64_t, 3> in, kernel, stride, pad, pad_end;
  bool count_include_pad;

  pool_window window(std::int64_t od, std::int64_t oh, std::int64_t ow) const noexcept {
    const std::int64_t o[3] = {od, oh, ow};
    pool_window win{};
    double padded_size = 1.0, real_size = 1.0;
    for (int i = 0; i < 3; ++i) {
      const std::int64_t start = o[i] * stride[i] - pad[i];
      const std::int64_t end = std::min(start + kernel[i], in[i] + pad_end[i]);
      win.lo[i] = std::max<std::int64_t>(start, 0);
      win.hi[i] = std::min(end, in[i]);
      padded_size *= static_cast<double>(end - start);
      real_size *= static_cast<double>(win.hi[i] - win.lo[i]);
    }
    win.divisor = count_include_pad ? padded_size : real_size;
    return win;
  }
};

template <int SpatialRank>
pool_geometry make_pool_geometry(const dims5& in, const pool_params& p) {
  return {spatial_dhw(in),
          params_dhw<SpatialRank>(p.kernel, 1),
          params_dhw<SpatialRank>(p.stride, 1),
          params_dhw<SpatialRank>(p.padding, 0),
          params_dhw<SpatialRank>(p.padding_end, 0),
          p.count_include_pad};
}

// The input position of the window's maximum (see the file comment for the tie rule).
template <class T>
std::array<std::int64_t, 3> window_argmax(const view5<const T>& x, const dims5& xs, std::int64_t n, std::int64_t c,
                                          const pool_window& win) {
  std::array<std::int64_t, 3> best = win.lo;
  double best_v = 0.0;
  bool first = true;
  for (std::int64_t d = win.lo[0]; d < win.hi[0]; ++d)
    for (std::int64_t h = win.lo[1]; h < win.hi[1]; ++h)
      for (std::int64_t w = win.lo[2]; w < win.hi[2]; ++w) {
        const double v = to_double(x.data()[offset5(xs, n, c, d, h, w)]);
        if (first || v > best_v || std::isnan(v)) {
          best = {d, h, w};
          best_v = v;
          first = false;
        }
      }
  return best;
}

template <class T>
void pool_forward(const view5<const T>& x, const view5<T>& y, const pool_params& p, const pool_geometry& g) {
  const auto xs = strides5(x), ys = strides5(y);
  for_each5(extents5(y), [&](auto n, auto c, auto od, auto oh, auto ow) {
    const auto win = g.window(od, oh, ow);
    double v = 0.0;
    if (p.kind == pool_kind::max) {
      const auto at = window_argmax(x, xs, n, c, win);
      v = to_double(x.data()[offset5(xs, n, c, at[0], at[1], at[2])]);
    } else {
      for (std::int64_t d = win.lo[0]; d < win.hi[0]; ++d)
        for (std::int64_t h = win.lo[1]; h < win.hi[1]; ++h)
          for (std::int64_t w = win.lo[2]; w < win.hi[2]; ++w) v += to_double(x.data()[offset5(xs, n, c, d, h, w)]);
      v /= win.divisor;
    }
    y.data()[offset5(ys, n, c, od, oh, ow)] = from_double<T>(v);
  });
}

template <class T>
void pool_backward(const view5<const T>& x, const view5<const T>& dy, const view5<T>& dx, const pool_params& p,
                   const pool_geometry& g) {
  const auto xe = extents5(dx);
  const auto xs = strides5(x), dys = strides5(dy);
  std::vector<double> acc(static_cast<std::size_t>(numel5(xe)), 0.0);
  for_each5(extents5(dy), [&](auto n, auto c, auto od, auto oh, auto ow) {
    const auto win = g.window(od, oh, ow);
    const double gv = to_double(dy.data()[offset5(dys, n, c, od, oh, ow)]);
    if (p.kind == pool_kind::max) {
      const auto at = window_argmax(x, xs, n, c, win);
      acc[static_cast<std::size_t>(index5(xe, n, c, at[0], at[1], at[2]))] += gv;
      return;
    }
    const double share = gv / win.divisor;
    for (std::int64_t d = win.lo[0]; d < win.hi[0]; ++d)
      for (std::int64_t h = win.lo[1]; h < win.hi[1]; ++h)
        for (std::int64_t w = win.lo[2]; w < win.hi[2]; ++w)
          acc[static_cast<std::size_t>(index5(xe, n, c, d, h, w))] += share;
  });
  store_dense(acc, dx);
}

template <class T>
void global_average_pool_forward(const view5<const T>& x, const view5<T>& y) {
  const auto xe = extents5(x);
  const auto xs = strides5(x), ys = strides5(y);
  const double count = static_cast<double>(xe.d * xe.h * xe.w);
  for (std::int64_t n = 0; n < xe.n; ++n)
    for (std::int64_t c = 0; c < xe.c; ++c) {
      double sum = 0.0;
      for (std::int64_t d = 0; d < xe.d; ++d)
        for (std::int64_t h = 0; h < xe.h; ++h)
          for (std::int64_t w = 0; w < xe.w; ++w) sum += to_double(x.data()[offset5(xs, n, c, d, h, w)]);
      y.data()[offset5(ys, n, c, 0, 0, 0)] = from_double<T>(sum / count);
    }
}

template <class T>
void global_average_pool_backward(const view5<const T>& dy, const view5<T>& dx) {
  const auto xe = extents5(dx);
  const auto dys = strides5(dy), dxs = strides5(dx);
  const double count = static_cast<double>(xe.d * xe.h * xe.w);
  for_each5(xe, [&](auto n, auto c, auto d, auto h, auto w) {
    dx.data()[offset5(dxs, n, c, d, h, w)] = from_double<T>(to_double(dy.data()[offset5(dys, n, c, 0, 0, 0)]) / count);
  });
}

}  // namespace detail

template <class T, class XF, class YF>
void pool_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const pool_params& p) {
  detail::check_element_type<T>();
  validate_pool_forward(x, y, p);
  detail::pool_forward<T>(detail::view5_of(x), detail::view5_of(y), p,
                          detail::make_pool_geometry<XF::rank - 2>(detail::extents5(x), p));
}

// dx (its extents are the input's) = the gradient of pool_forward. x is read by max pooling only;
// average pooling accepts an empty view.
template <class T, class XF, class DYF, class DXF>
void pool_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                   const pool_params& p) {
  detail::check_element_type<T>();
  validate_pool_backward(x, dy, dx, p);
  detail::pool_backward<T>(detail::view5_of(x), detail::view5_of(dy), detail::view5_of(dx), p,
                           detail::make_pool_geometry<DXF::rank - 2>(detail::extents5(dx), p));
}

// y[n, c] = the mean of x[n, c] over the spatial dims (adaptive_avg_pool to 1 x 1).
template <class T, class XF, class YF>
void global_average_pool_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y) {
  detail::check_element_type<T>();
  validate_global_pool_forward(x, y);
  detail::global_average_pool_forward<T>(detail::view5_of(x), detail::view5_of(y));
}

template <class T, class DYF, class DXF>
void global_average_pool_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx) {
  detail::check_element_type<T>();
  validate_global_pool_backward(dy, dx);
  detail::global_average_pool_backward<T>(detail::view5_of(dy), detail::view5_of(dx));
}

}  // namespace memfmt::reference
