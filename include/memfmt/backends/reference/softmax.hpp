// memfmt/backends/reference/softmax.hpp - reference softmax and log-softmax over the channel dim.
//
// For every sample and spatial position, over C (an [N, F] tensor is [N, F, 1, 1]):
//   softmax y = exp(x - max) / sum(exp(x - max)),  log-softmax y = x - max - log(sum(exp(x - max))).
// The backward reads the forward output y:
//   softmax dx = y (dy - sum(dy y)),  log-softmax dx = dy - exp(y) sum(dy).
// In double, rounded once to T. Each position's C values are read before any is written, so y may
// be x (and dx may be y or dy) when they share a format.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

template <class T>
void softmax_forward(const view5<const T>& x, const view5<T>& y, const softmax_params& p) {
  const auto e = extents5(x);
  if (numel5(e) == 0) return;  // the scratch below is C long, and an empty tensor may have any C
  const auto xs = strides5(x), ys = strides5(y);
  std::vector<double> v(static_cast<std::size_t>(e.c));
  for_each_channel_vector(e, [&](auto n, auto d, auto h, auto w) {
    double top = -std::numeric_limits<double>::infinity();
    for (std::int64_t c = 0; c < e.c; ++c) {
      v[static_cast<std::size_t>(c)] = to_double(x.data()[offset5(xs, n, c, d, h, w)]);
      top = std::max(top, v[static_cast<std::size_t>(c)]);
    }
    double sum = 0.0;
    for (double xv : v) sum += std::exp(xv - top);
    const double log_sum = std::log(sum);
    for (std::int64_t c = 0; c < e.c; ++c) {
      const double shifted = v[static_cast<std::size_t>(c)] - top;
      y.data()[offset5(ys, n, c, d, h, w)] = from_double<T>(p.log ? shifted - log_sum : std::exp(shifted) / sum);
    }
  });
}

template <class T>
void softmax_backward(const view5<const T>& y, const view5<const T>& dy, const view5<T>& dx, const softmax_params& p) {
  const auto e = extents5(y);
  if (numel5(e) == 0) return;
  const auto ys = strides5(y), dys = strides5(dy), dxs = strides5(dx);
  std::vector<double> yv(static_cast<std::size_t>(e.c)), gv(static_cast<std::size_t>(e.c));
  for_each_channel_vector(e, [&](auto n, auto d, auto h, auto w) {
    double dot = 0.0;
    for (std::int64_t c = 0; c < e.c; ++c) {
      const auto i = static_cast<std::size_t>(c);
      yv[i] = to_double(y.data()[offset5(ys, n, c, d, h, w)]);
      gv[i] = to_double(dy.data()[offset5(dys, n, c, d, h, w)]);
      dot = p.log ? dot + gv[i] : mul_add(gv[i], yv[i], dot);
    }
    for (std::int64_t c = 0; c < e.c; ++c) {
      const auto i = static_cast<std::size_t>(c);
      const double g = p.log ? gv[i] - std::exp(yv[i]) * dot : yv[i] * (gv[i] - dot);
      dx.data()[offset5(dxs, n, c, d, h, w)] = from_double<T>(g);
    }
  });
}

}  // namespace detail

template <class T, class XF, class YF>
void softmax_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const softmax_params& p) {
  detail::check_element_type<T>();
  validate_softmax_forward(x, y);
  detail::softmax_forward<T>(detail::view5_of(x), detail::view5_of(y), p);
}

template <class T, class YF, class DYF, class DXF>
void softmax_backward(tensor_view<const T, YF> y, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                      const softmax_params& p) {
  detail::check_element_type<T>();
  validate_softmax_backward(y, dy, dx);
  detail::softmax_backward<T>(detail::view5_of(y), detail::view5_of(dy), detail::view5_of(dx), p);
}

}  // namespace memfmt::reference
