// memfmt/backends/reference/layer_norm.hpp - reference layer normalisation over the channels.
//
// Per sample n and spatial position p (m = C values): mean, biased var, invstd = 1 / sqrt(var +
// eps), then per channel y = gamma[c] * (x - mean) * invstd + beta[c] (layer_params.hpp's
// layer_norm_params). The forward saves mean and invstd, one per (n, p), for the backward:
//   xhat = (x - mean) * invstd, g = dy * gamma[c]
//   dx = invstd / m * (m g - sum(g) - xhat sum(g xhat))       (sums over the C values at (n, p))
//   dgamma[c] = sum over n and positions of dy * xhat, dbeta[c] = sum of dy (each optional).
// Statistics in double (two passes), outputs rounded once; parameters and statistics are param_t<T>.
// x and y (dy and dx) may have different formats of one rank and must not overlap.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../validate.hpp"
#include "group_norm.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

// Calls fn(n, d, h, w, position) for every sample and position, position the statistics' index.
template <class Fn>
void for_each_position(const dims5& e, Fn&& fn) {
  std::int64_t position = 0;
  for (std::int64_t n = 0; n < e.n; ++n)
    for (std::int64_t d = 0; d < e.d; ++d)
      for (std::int64_t h = 0; h < e.h; ++h)
        for (std::int64_t w = 0; w < e.w; ++w) fn(n, d, h, w, position++);
}

template <class T>
void layer_norm_forward(const view5<const T>& x, const view5<T>& y, const param_t<T>* gamma, const param_t<T>* beta,
                        param_t<T>* saved_mean, param_t<T>* saved_invstd, const layer_norm_params& p) {
  using P = param_t<T>;
  if (x.empty()) return;
  const auto e = extents5(x);
  const auto xs = strides5(x), ys = strides5(y);
  const double m = static_cast<double>(e.c);
  for_each_position(e, [&](auto n, auto d, auto h, auto w, std::int64_t at) {
    auto xv = [&](std::int64_t c) { return to_double(x.data()[offset5(xs, n, c, d, h, w)]); };
    double sum = 0.0;
    for (std::int64_t c = 0; c < e.c; ++c) sum += xv(c);
    const double mean = sum / m;
    double sq = 0.0;
    for (std::int64_t c = 0; c < e.c; ++c) {
      const double v = xv(c) - mean;
      sq = mul_add(v, v, sq);
    }
    const double invstd = 1.0 / std::sqrt(sq / m + p.epsilon);
    for (std::int64_t c = 0; c < e.c; ++c)
      y.data()[offset5(ys, n, c, d, h, w)] =
          from_double<T>((xv(c) - mean) * invstd * param_or(gamma, c, 1.0) + param_or(beta, c, 0.0));
    saved_mean[at] = from_double<P>(mean);
    saved_invstd[at] = from_double<P>(invstd);
  });
}

template <class T>
void layer_norm_backward(const view5<const T>& x, const view5<const T>& dy, const view5<T>& dx, const param_t<T>* gamma,
                         const param_t<T>* saved_mean, const param_t<T>* saved_invstd, param_t<T>* dgamma,
                         param_t<T>* dbeta) {
  using P = param_t<T>;
  if (group_norm_backward_if_empty(x, dgamma, dbeta)) return;
  const auto e = extents5(x);
  const auto xs = strides5(x), dys = strides5(dy), dxs = strides5(dx);
  const double m = static_cast<double>(e.c);
  std::vector<double> sum_dy_xhat(static_cast<std::size_t>(e.c), 0.0), sum_dy(static_cast<std::size_t>(e.c), 0.0);
  for_each_position(e, [&](auto n, auto d, auto h, auto w, std::int64_t at) {
    const double mean = static_cast<double>(saved_mean[at]);
    const double invstd = static_cast<double>(saved_invstd[at]);
    auto xhat = [&](std::int64_t c) { return (to_double(x.data()[offset5(xs, n, c, d, h, w)]) - mean) * invstd; };
    auto grad = [&](std::int64_t c) { return to_double(dy.data()[offset5(dys, n, c, d, h, w)]); };
    double sum_g = 0.0, sum_gx = 0.0;
    for (std::int64_t c = 0; c < e.c; ++c) {
      const double gv = grad(c), xh = xhat(c), gg = gv * param_or(gamma, c, 1.0);
      sum_g += gg;
      sum_gx = mul_add(gg, xh, sum_gx);
      sum_dy[static_cast<std::size_t>(c)] += gv;
      auto& sdx = sum_dy_xhat[static_cast<std::size_t>(c)];
      sdx = mul_add(gv, xh, sdx);
    }
    for (std::int64_t c = 0; c < e.c; ++c) {
      const double gg = grad(c) * param_or(gamma, c, 1.0);
      dx.data()[offset5(dxs, n, c, d, h, w)] = from_double<T>(invstd / m * (m * gg - sum_g - xhat(c) * sum_gx));
    }
  });
  for (std::int64_t c = 0; c < e.c; ++c) {
    if (dgamma) dgamma[c] = from_double<P>(sum_dy_xhat[static_cast<std::size_t>(c)]);
    if (dbeta) dbeta[c] = from_double<P>(sum_dy[static_cast<std::size_t>(c)]);
  }
}

}  // namespace detail

template <class T, class XF, class YF>
void layer_norm_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const param_t<T>* gamma,
                        const param_t<T>* beta, param_t<T>* saved_mean, param_t<T>* saved_invstd,
                        const layer_norm_params& p) {
  detail::check_element_type<T>();
  validate_layer_norm_forward(x, y, saved_mean, saved_invstd, p);
  detail::layer_norm_forward<T>(detail::view5_of(x), detail::view5_of(y), gamma, beta, saved_mean, saved_invstd, p);
}

template <class T, class XF, class DYF, class DXF>
void layer_norm_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                         const param_t<T>* gamma, const param_t<T>* saved_mean, const param_t<T>* saved_invstd,
                         param_t<T>* dgamma, param_t<T>* dbeta, const layer_norm_params& p) {
  detail::check_element_type<T>();
  validate_layer_norm_backward(x, dy, dx, saved_mean, saved_invstd, p);
  detail::layer_norm_backward<T>(detail::view5_of(x), detail::view5_of(dy), detail::view5_of(dx), gamma, saved_mean,
                                 saved_invstd, dgamma, dbeta);
}

}  // namespace memfmt::reference
