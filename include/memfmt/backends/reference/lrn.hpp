// memfmt/backends/reference/lrn.hpp - reference local response normalisation across channels
// (layer_params.hpp's lrn_params states the formula, the window and the backward).
//
// For every sample and spatial position, over C: the window sums of x^2, then y. In double, rounded
// once to T. Each position's C values are read before any is written, so y may be x (and dx may be
// x or dy) when they share a format.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../../layers/layer_params.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

// d_c = bias + alpha / size * (sum of v_j^2 over c's window), for each c.
inline void lrn_denominators(const std::vector<double>& v, const lrn_params& p, std::vector<double>& d) {
  const auto c_count = static_cast<std::int64_t>(v.size());
  const double scale = p.alpha / static_cast<double>(p.size);
  for (std::int64_t c = 0; c < c_count; ++c) {
    double sum = 0.0;
    const std::int64_t first = std::max<std::int64_t>(0, c - p.before);
    const std::int64_t last = std::min(c_count - 1, c - p.before + p.size - 1);
    for (std::int64_t j = first; j <= last; ++j)
      sum = mul_add(v[static_cast<std::size_t>(j)], v[static_cast<std::size_t>(j)], sum);
    d[static_cast<std::size_t>(c)] = mul_add(scale, sum, p.bias);
  }
}

template <class T>
void lrn_forward(const view5<const T>& x, const view5<T>& y, const lrn_params& p) {
  const auto e = extents5(x);
  if (numel5(e) == 0) return;  // the scratch below is C long, and an empty tensor may have any C
  const auto xs = strides5(x), ys = strides5(y);
  const auto c_count = static_cast<std::size_t>(e.c);
  std::vector<double> v(c_count), d(c_count);
  for_each_channel_vector(e, [&](auto n, auto dd, auto h, auto w) {
    for (std::int64_t c = 0; c < e.c; ++c)
      v[static_cast<std::size_t>(c)] = to_double(x.data()[offset5(xs, n, c, dd, h, w)]);
    lrn_denominators(v, p, d);
    for (std::int64_t c = 0; c < e.c; ++c) {
      const auto i = static_cast<std::size_t>(c);
      y.data()[offset5(ys, n, c, dd, h, w)] = from_double<T>(v[i] * std::pow(d[i], -p.beta));
    }
  });
}

template <class T>
void lrn_backward(const view5<const T>& x, const view5<const T>& dy, const view5<T>& dx, const lrn_params& p) {
  const auto e = extents5(x);
  if (numel5(e) == 0) return;
  const auto xs = strides5(x), dys = strides5(dy), dxs = strides5(dx);
  const auto c_count = static_cast<std::size_t>(e.c);
  std::vector<double> v(c_count), g(c_count), d(c_count), q(c_count);
  const double scale = 2.0 * p.alpha * p.beta / static_cast<double>(p.size);
  const std::int64_t after = p.size - 1 - p.before;
  for_each_channel_vector(e, [&](auto n, auto dd, auto h, auto w) {
    for (std::int64_t c = 0; c < e.c; ++c) {
      const auto i = static_cast<std::size_t>(c);
      v[i] = to_double(x.data()[offset5(xs, n, c, dd, h, w)]);
      g[i] = to_double(dy.data()[offset5(dys, n, c, dd, h, w)]);
    }
    lrn_denominators(v, p, d);
    for (std::size_t i = 0; i < c_count; ++i) q[i] = g[i] * v[i] * std::pow(d[i], -p.beta - 1.0);
    // Channel i is in the windows of c = i - after ... i + before.
    for (std::int64_t c = 0; c < e.c; ++c) {
      const auto i = static_cast<std::size_t>(c);
      double sum = 0.0;
      const std::int64_t first = std::max<std::int64_t>(0, c - after);
      const std::int64_t last = std::min(e.c - 1, c + p.before);
      for (std::int64_t j = first; j <= last; ++j) sum += q[static_cast<std::size_t>(j)];
      dx.data()[offset5(dxs, n, c, dd, h, w)] = from_double<T>(g[i] * std::pow(d[i], -p.beta) - scale * v[i] * sum);
    }
  });
}

}  // namespace detail

template <class T, class XF, class YF>
void lrn_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const lrn_params& p) {
  detail::check_element_type<T>();
  validate_lrn_forward(x, y, p);
  detail::lrn_forward<T>(detail::view5_of(x), detail::view5_of(y), p);
}

template <class T, class XF, class DYF, class DXF>
void lrn_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                  const lrn_params& p) {
  detail::check_element_type<T>();
  validate_lrn_backward(x, dy, dx, p);
  detail::lrn_backward<T>(detail::view5_of(x), detail::view5_of(dy), detail::view5_of(dx), p);
}

}  // namespace memfmt::reference
