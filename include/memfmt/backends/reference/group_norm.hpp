// memfmt/backends/reference/group_norm.hpp - reference group normalisation (and instance norm).
//
// PyTorch's GroupNorm: per sample n and group g, over the C / groups channels of the group and the
// spatial dims (m values): mean, biased var, invstd = 1 / sqrt(var + eps), then per channel
//   y = gamma[c] * (x - mean) * invstd + beta[c].
// Instance norm is groups == C. gamma and beta are optional (null: 1 and 0). The forward saves mean
// and invstd (N * groups values each, (n, g) at n * groups + g) for the backward:
//   xhat = (x - mean) * invstd, g = dy * gamma[c]
//   dx = invstd / m * (m g - sum(g) - xhat sum(g xhat))       (sums over the group of sample n)
//   dgamma[c] = sum over n and spatial of dy * xhat, dbeta[c] = sum of dy (each optional).
// Statistics in double (two passes), outputs rounded once; parameters and statistics are param_t<T>.
// x and y (dy and dx) may have different formats of one rank and must not overlap.
#pragma once

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

// Calls fn(c, d, h, w) for every position of group g of a sample (extents e).
template <class Fn>
void for_each_in_group(const dims5& e, std::int64_t groups, std::int64_t g, Fn&& fn) {
  const std::int64_t per = e.c / groups;
  for (std::int64_t c = g * per; c < (g + 1) * per; ++c)
    for (std::int64_t d = 0; d < e.d; ++d)
      for (std::int64_t h = 0; h < e.h; ++h)
        for (std::int64_t w = 0; w < e.w; ++w) fn(c, d, h, w);
}

template <class P>
double param_or(const P* p, std::int64_t c, double fallback) {
  return p ? static_cast<double>(p[c]) : fallback;
}

// The backward of an empty x (N or an extent 0) reads no statistics (they may be null or short
// then) and every gradient sum is empty: zeroes dgamma and dbeta (each optional) and returns
// true; returns false for any other x. Without dgamma and dbeta it loops over nothing: an empty x
// may still have 2^31 channels.
template <class View, class P>
bool group_norm_backward_if_empty(const View& x, P* dgamma, P* dbeta) noexcept {
  if (!x.empty()) return false;
  if (!dgamma && !dbeta) return true;
  for (std::int64_t c = 0; c < x.channels(); ++c) {
    if (dgamma) dgamma[c] = P(0);
    if (dbeta) dbeta[c] = P(0);
  }
  return true;
}

template <class T>
void group_norm_forward(const view5<const T>& x, const view5<T>& y, const param_t<T>* gamma, const param_t<T>* beta,
                        param_t<T>* saved_mean, param_t<T>* saved_invstd, const group_norm_params& p) {
  using P = param_t<T>;
  // An empty x has no statistics to save (they may be null then) and y no element to write.
  if (x.empty()) return;
  const auto e = extents5(x);
  const auto xs = strides5(x), ys = strides5(y);
  const double m = static_cast<double>(e.c / p.groups * e.d * e.h * e.w);
  for (std::int64_t n = 0; n < e.n; ++n)
    for (std::int64_t g = 0; g < p.groups; ++g) {
      auto xv = [&](auto c, auto d, auto h, auto w) { return to_double(x.data()[offset5(xs, n, c, d, h, w)]); };
      double sum = 0.0;
      for_each_in_group(e, p.groups, g, [&](auto c, auto d, auto h, auto w) { sum += xv(c, d, h, w); });
      const double mean = sum / m;
      double sq = 0.0;
      for_each_in_group(e, p.groups, g, [&](auto c, auto d, auto h, auto w) {
        const double v = xv(c, d, h, w) - mean;
        sq = mul_add(v, v, sq);
      });
      const double invstd = 1.0 / std::sqrt(sq / m + p.epsilon);
      for_each_in_group(e, p.groups, g, [&](auto c, auto d, auto h, auto w) {
        const double v = (xv(c, d, h, w) - mean) * invstd * param_or(gamma, c, 1.0) + param_or(beta, c, 0.0);
        y.data()[offset5(ys, n, c, d, h, w)] = from_double<T>(v);
      });
      saved_mean[n * p.groups + g] = from_double<P>(mean);
      saved_invstd[n * p.groups + g] = from_double<P>(invstd);
    }
}

template <class T>
void group_norm_backward(const view5<const T>& x, const view5<const T>& dy, const view5<T>& dx, const param_t<T>* gamma,
                         const param_t<T>* saved_mean, const param_t<T>* saved_invstd, param_t<T>* dgamma,
                         param_t<T>* dbeta, const group_norm_params& p) {
  using P = param_t<T>;
  if (group_norm_backward_if_empty(x, dgamma, dbeta)) return;
  const auto e = extents5(x);
  const auto xs = strides5(x), dys = strides5(dy), dxs = strides5(dx);
  const double m = static_cast<double>(e.c / p.groups * e.d * e.h * e.w);
  std::vector<double> sum_dy_xhat(static_cast<std::size_t>(e.c), 0.0), sum_dy(static_cast<std::size_t>(e.c), 0.0);
  for (std::int64_t n = 0; n < e.n; ++n)
    for (std::int64_t g = 0; g < p.groups; ++g) {
      const double mean = static_cast<double>(saved_mean[n * p.groups + g]);
      const double invstd = static_cast<double>(saved_invstd[n * p.groups + g]);
      auto xhat = [&](auto c, auto d, auto h, auto w) {
        return (to_double(x.data()[offset5(xs, n, c, d, h, w)]) - mean) * invstd;
      };
      auto grad = [&](auto c, auto d, auto h, auto w) { return to_double(dy.data()[offset5(dys, n, c, d, h, w)]); };
      double sum_g = 0.0, sum_gx = 0.0;
      for_each_in_group(e, p.groups, g, [&](auto c, auto d, auto h, auto w) {
        const double gv = grad(c, d, h, w), xh = xhat(c, d, h, w);
        const double gg = gv * param_or(gamma, c, 1.0);
        sum_g += gg;
        sum_gx = mul_add(gg, xh, sum_gx);
        sum_dy[static_cast<std::size_t>(c)] += gv;
        auto& sdx = sum_dy_xhat[static_cast<std::size_t>(c)];
        sdx = mul_add(gv, xh, sdx);
      });
      for_each_in_group(e, p.groups, g, [&](auto c, auto d, auto h, auto w) {
        const double gg = grad(c, d, h, w) * param_or(gamma, c, 1.0);
        dx.data()[offset5(dxs, n, c, d, h, w)] =
            from_double<T>(invstd / m * (m * gg - sum_g - xhat(c, d, h, w) * sum_gx));
      });
    }
  for (std::int64_t c = 0; c < e.c; ++c) {
    if (dgamma) dgamma[c] = from_double<P>(sum_dy_xhat[static_cast<std::size_t>(c)]);
    if (dbeta) dbeta[c] = from_double<P>(sum_dy[static_cast<std::size_t>(c)]);
  }
}

}  // namespace detail

template <class T, class XF, class YF>
void group_norm_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const param_t<T>* gamma,
                        const param_t<T>* beta, param_t<T>* saved_mean, param_t<T>* saved_invstd,
                        const group_norm_params& p) {
  detail::check_element_type<T>();
  validate_group_norm_forward(x, y, saved_mean, saved_invstd, p);
  detail::group_norm_forward<T>(detail::view5_of(x), detail::view5_of(y), gamma, beta, saved_mean, saved_invstd, p);
}

template <class T, class XF, class DYF, class DXF>
void group_norm_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                         const param_t<T>* gamma, const param_t<T>* saved_mean, const param_t<T>* saved_invstd,
                         param_t<T>* dgamma, param_t<T>* dbeta, const group_norm_params& p) {
  detail::check_element_type<T>();
  validate_group_norm_backward(x, dy, dx, saved_mean, saved_invstd, p);
  detail::group_norm_backward<T>(detail::view5_of(x), detail::view5_of(dy), detail::view5_of(dx), gamma, saved_mean,
                                 saved_invstd, dgamma, dbeta, p);
}

}  // namespace memfmt::reference
