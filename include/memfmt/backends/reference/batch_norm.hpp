// memfmt/backends/reference/batch_norm.hpp - reference batch normalisation (training, inference, backward).
//
// PyTorch's semantics, per channel c over N and the spatial dimensions (m values):
//   mean = sum(x) / m, var = sum((x - mean)^2) / m (biased), invstd = 1 / sqrt(var + eps)
//   y = relu?( gamma * (x - mean) * invstd + beta [+ residual] )
//   running_mean = (1 - momentum) * running_mean + momentum * mean
//   running_var  = (1 - momentum) * running_var  + momentum * var * m / (m - 1)   (unbiased)
// Statistics are computed in double (two passes) and every output is rounded once. Each operation
// validates everything first (the shared checks of validate.hpp); on error the outputs are untouched. x, y (and dy, dx)
// may be the same buffer (in-place), nothing else may overlap.
#pragma once

#include <cmath>
#include <cstdint>

#include "../../tensor/tensor_view.hpp"
#include "../../layers/conv_params.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

// Calls fn(n, c, d, h, w) for every position of channel c (extents e, a 2-D view has d == 0 only).
template <class Fn>
void for_each_in_channel(const dims5& e, std::int64_t c, Fn&& fn) {
  for (std::int64_t n = 0; n < e.n; ++n)
    for (std::int64_t d = 0; d < e.d; ++d)
      for (std::int64_t h = 0; h < e.h; ++h)
        for (std::int64_t w = 0; w < e.w; ++w) fn(n, c, d, h, w);
}

template <class T>
void batch_norm_forward_training(const view5<const T>& x, const view5<T>& y, const param_t<T>* gamma,
                                 const param_t<T>* beta, param_t<T>* running_mean, param_t<T>* running_var,
                                 param_t<T>* saved_mean, param_t<T>* saved_invstd, const batch_norm_params& p,
                                 const view5<const T>& residual) {
  using P = param_t<T>;
  const bool has_res = residual.data() != nullptr;
  const std::int64_t channels = x.channels();
  const std::int64_t m = channels > 0 ? x.numel() / channels : 0;  // values per channel

  const auto e = extents5(x);
  const auto xs = strides5(x), ys = strides5(y), rs = strides5(residual);
  const double md = static_cast<double>(m);
  for (std::int64_t c = 0; c < channels; ++c) {
    double sum = 0.0;
    for_each_in_channel(e, c, [&](auto n, auto cc, auto d, auto h, auto w) {
      sum += to_double(x.data()[offset5(xs, n, cc, d, h, w)]);
    });
    const double mean = sum / md;
    double sq = 0.0;
    for_each_in_channel(e, c, [&](auto n, auto cc, auto d, auto h, auto w) {
      const double v = to_double(x.data()[offset5(xs, n, cc, d, h, w)]) - mean;
      sq = mul_add(v, v, sq);
    });
    const double var = sq / md;
    const double invstd = 1.0 / std::sqrt(var + p.epsilon);
    const double scale = static_cast<double>(gamma[c]) * invstd, shift = static_cast<double>(beta[c]);
    for_each_in_channel(e, c, [&](auto n, auto cc, auto d, auto h, auto w) {
      double v = (to_double(x.data()[offset5(xs, n, cc, d, h, w)]) - mean) * scale + shift;
      if (has_res) v += to_double(residual.data()[offset5(rs, n, cc, d, h, w)]);
      if (p.fuse_relu && v <= 0.0) v = 0.0;  // a NaN stays NaN, as in torch.relu
      y.data()[offset5(ys, n, cc, d, h, w)] = from_double<T>(v);
    });
    saved_mean[c] = from_double<P>(mean);
    saved_invstd[c] = from_double<P>(invstd);
    running_mean[c] = from_double<P>((1.0 - p.momentum) * static_cast<double>(running_mean[c]) + p.momentum * mean);
    running_var[c] =
        from_double<P>((1.0 - p.momentum) * static_cast<double>(running_var[c]) + p.momentum * var * md / (md - 1.0));
  }
}

template <class T>
void batch_norm_forward_inference(const view5<const T>& x, const view5<T>& y, const param_t<T>* gamma,
                                  const param_t<T>* beta, const param_t<T>* running_mean, const param_t<T>* running_var,
                                  const batch_norm_params& p, const view5<const T>& residual) {
  const bool has_res = residual.data() != nullptr;
  const std::int64_t channels = x.channels();

  const auto e = extents5(x);
  const auto xs = strides5(x), ys = strides5(y), rs = strides5(residual);
  for (std::int64_t c = 0; c < channels; ++c) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + p.epsilon);
    const double mean = static_cast<double>(running_mean[c]);
    const double scale = static_cast<double>(gamma[c]) * invstd, shift = static_cast<double>(beta[c]);
    for_each_in_channel(e, c, [&](auto n, auto cc, auto d, auto h, auto w) {
      double v = (to_double(x.data()[offset5(xs, n, cc, d, h, w)]) - mean) * scale + shift;
      if (has_res) v += to_double(residual.data()[offset5(rs, n, cc, d, h, w)]);
      if (p.fuse_relu && v <= 0.0) v = 0.0;
      y.data()[offset5(ys, n, cc, d, h, w)] = from_double<T>(v);
    });
  }
}

template <class T>
void batch_norm_backward(const view5<const T>& x, const view5<const T>& dy, const view5<T>& dx, const param_t<T>* gamma,
                         const param_t<T>* saved_mean, const param_t<T>* saved_invstd, param_t<T>* dgamma,
                         param_t<T>* dbeta, const batch_norm_params& p, const view5<const T>& y,
                         const view5<T>& dresidual) {
  using P = param_t<T>;
  const bool has_dres = dresidual.data() != nullptr;
  const std::int64_t channels = x.channels();
  const std::int64_t m = channels > 0 ? x.numel() / channels : 0;

  const bool mask = p.fuse_relu;
  const auto e = extents5(x);
  const auto xs = strides5(x), dys = strides5(dy), dxs = strides5(dx);
  const auto ys = strides5(y), drs = strides5(dresidual);
  const double md = static_cast<double>(m);
  for (std::int64_t c = 0; c < channels; ++c) {
    const double mean = static_cast<double>(saved_mean[c]), invstd = static_cast<double>(saved_invstd[c]);
    auto grad_at = [&](std::int64_t n, std::int64_t cc, std::int64_t d, std::int64_t h, std::int64_t w) {
      const double g = to_double(dy.data()[offset5(dys, n, cc, d, h, w)]);
      if (mask && !(to_double(y.data()[offset5(ys, n, cc, d, h, w)]) > 0.0)) return 0.0;
      return g;
    };
    double sum_g = 0.0, sum_gx = 0.0;
    for_each_in_channel(e, c, [&](auto n, auto cc, auto d, auto h, auto w) {
      const double g = grad_at(n, cc, d, h, w);
      const double xhat = (to_double(x.data()[offset5(xs, n, cc, d, h, w)]) - mean) * invstd;
      sum_g += g;
      sum_gx = mul_add(g, xhat, sum_gx);
    });
    const double k = static_cast<double>(gamma[c]) * invstd / md;
    for_each_in_channel(e, c, [&](auto n, auto cc, auto d, auto h, auto w) {
      const double g = grad_at(n, cc, d, h, w);
      const double xhat = (to_double(x.data()[offset5(xs, n, cc, d, h, w)]) - mean) * invstd;
      // Read everything before writing: dx or dresidual may share dy's buffer.
      dx.data()[offset5(dxs, n, cc, d, h, w)] = from_double<T>(k * (md * g - sum_g - xhat * sum_gx));
      if (has_dres) dresidual.data()[offset5(drs, n, cc, d, h, w)] = from_double<T>(g);
    });
    dgamma[c] = from_double<P>(sum_gx);
    dbeta[c] = from_double<P>(sum_g);
  }
}

}  // namespace detail

template <class T, class F>
void batch_norm_forward_training(tensor_view<const T, F> x, tensor_view<T, F> y, const param_t<T>* gamma,
                                 const param_t<T>* beta, param_t<T>* running_mean, param_t<T>* running_var,
                                 param_t<T>* saved_mean, param_t<T>* saved_invstd, const batch_norm_params& p,
                                 tensor_view<const T, F> residual = {}) {
  static_assert(is_reference_type_v<T>, "memfmt::reference: T must be float, double, half or bfloat16");
  validate_batch_norm_forward_training(x, y, gamma, beta, running_mean, running_var, saved_mean, saved_invstd, p,
                                       residual);
  detail::batch_norm_forward_training<T>(detail::view5_of(x), detail::view5_of(y), gamma, beta, running_mean,
                                         running_var, saved_mean, saved_invstd, p, detail::view5_of(residual));
}

template <class T, class F>
void batch_norm_forward_inference(tensor_view<const T, F> x, tensor_view<T, F> y, const param_t<T>* gamma,
                                  const param_t<T>* beta, const param_t<T>* running_mean, const param_t<T>* running_var,
                                  const batch_norm_params& p, tensor_view<const T, F> residual = {}) {
  static_assert(is_reference_type_v<T>, "memfmt::reference: T must be float, double, half or bfloat16");
  validate_batch_norm_forward_inference(x, y, gamma, beta, running_mean, running_var, p, residual);
  detail::batch_norm_forward_inference<T>(detail::view5_of(x), detail::view5_of(y), gamma, beta, running_mean,
                                          running_var, p, detail::view5_of(residual));
}

// Backward of batch_norm_forward_training, from the saved statistics:
//   g = dy (masked by y > 0 with fuse_relu), xhat = (x - saved_mean) * saved_invstd
//   dbeta = sum(g), dgamma = sum(g * xhat), dx = gamma * invstd / m * (m * g - dbeta - xhat * dgamma)
//   dresidual = g (when given).
template <class T, class F>
void batch_norm_backward(tensor_view<const T, F> x, tensor_view<const T, F> dy, tensor_view<T, F> dx,
                         const param_t<T>* gamma, const param_t<T>* saved_mean, const param_t<T>* saved_invstd,
                         param_t<T>* dgamma, param_t<T>* dbeta, const batch_norm_params& p,
                         tensor_view<const T, F> y = {}, tensor_view<T, F> dresidual = {}) {
  static_assert(is_reference_type_v<T>, "memfmt::reference: T must be float, double, half or bfloat16");
  validate_batch_norm_backward(x, dy, dx, gamma, saved_mean, saved_invstd, dgamma, dbeta, p, y, dresidual);
  detail::batch_norm_backward<T>(detail::view5_of(x), detail::view5_of(dy), detail::view5_of(dx), gamma, saved_mean,
                                 saved_invstd, dgamma, dbeta, p, detail::view5_of(y), detail::view5_of(dresidual));
}

}  // namespace memfmt::reference
