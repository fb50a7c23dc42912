// memfmt/backends/cpu/layer_norm.hpp - format-aware CPU layer normalisation over the channels.
//
// The semantics, arguments and statistics layout are those of reference/layer_norm.hpp; this is the
// fast version the oneDNN backend calls in either format, over channel_vectors.hpp's dense views
// and chunks of positions. Other views (mixed or padded layouts) run the reference loops.
//
// The backward's per-channel sums are kept per chunk and added in chunk order, so results are
// bitwise the same for any number of OpenMP threads. As in cpu/group_norm.hpp, sums and
// per-element arithmetic are in double with a two-pass variance, so a large mean cannot cancel the
// variance, in unit-stride loops that vectorise (cpu/double_passes.hpp); 16-bit outputs round
// through float. BM_ln in bench_conv times both formats.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../reference/layer_norm.hpp"
#include "../reference/numeric.hpp"
#include "../reference/view_access.hpp"
#include "../validate.hpp"
#include "channel_vectors.hpp"
#include "double_passes.hpp"
#include "float_io.hpp"

namespace memfmt::cpu {
namespace layer_norm_detail {

using namespace channel_vectors;
using double_passes::round_out;
using double_passes::sum8;
using reference::detail::to_double;

template <class T, class P>
void forward(const T* x, T* y, const dense_layout& xl, const dense_layout& yl, const shape& s, const P* gamma,
             const P* beta, P* saved_mean, P* saved_invstd, double eps) {
  const std::int64_t chunks = s.chunks(), c_count = s.c;
  const double inv_c = 1.0 / static_cast<double>(c_count);
  std::vector<double> g(static_cast<std::size_t>(c_count), 1.0), b(static_cast<std::size_t>(c_count), 0.0);
  for (std::size_t c = 0; c < g.size(); ++c) {
    if (gamma) g[c] = static_cast<double>(gamma[c]);
    if (beta) b[c] = static_cast<double>(beta[c]);
  }
  const double* __restrict gc = g.data();
  const double* __restrict bc = b.data();
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t k = 0; k < chunks; ++k) {
    std::array<double, block> mean{}, invstd{};
    for_each_run(s, k, [&](std::int64_t n, std::int64_t p0, std::int64_t len) {
      const T* __restrict xs = x + n * xl.sample + p0 * xl.position;
      T* __restrict ys = y + n * yl.sample + p0 * yl.position;
      if (xl.channel == 1) {  // channels-last: each position's C values are contiguous
        for (std::int64_t i = 0; i < len; ++i) {
          const T* __restrict xp = xs + i * c_count;
          T* __restrict yp = ys + i * c_count;
          const double m = sum8(c_count, [&](std::int64_t c) { return to_double(xp[c]); }) * inv_c;
          const double var = sum8(c_count,
                                  [&](std::int64_t c) {
                                    const double v = to_double(xp[c]) - m;
                                    return v * v;
                                  }) *
                             inv_c;
          const double is = 1.0 / std::sqrt(var + eps);
          for (std::int64_t c = 0; c < c_count; ++c) yp[c] = round_out<T>((to_double(xp[c]) - m) * is * gc[c] + bc[c]);
          mean[static_cast<std::size_t>(i)] = m;
          invstd[static_cast<std::size_t>(i)] = is;
        }
      } else {  // channels-first: a run of contiguous positions, channel by channel
        const std::int64_t plane = xl.channel;
        double* __restrict mu = mean.data();
        double* __restrict is = invstd.data();
        std::fill(mu, mu + len, 0.0);
        std::fill(is, is + len, 0.0);
        for (std::int64_t c = 0; c < c_count; ++c) {
          const T* __restrict xp = xs + c * plane;
          for (std::int64_t i = 0; i < len; ++i) mu[i] += to_double(xp[i]);
        }
        for (std::int64_t i = 0; i < len; ++i) mu[i] *= inv_c;
        for (std::int64_t c = 0; c < c_count; ++c) {
          const T* __restrict xp = xs + c * plane;
          for (std::int64_t i = 0; i < len; ++i) {
            const double v = to_double(xp[i]) - mu[i];
            is[i] += v * v;
          }
        }
        for (std::int64_t i = 0; i < len; ++i) is[i] = 1.0 / std::sqrt(is[i] * inv_c + eps);
        for (std::int64_t c = 0; c < c_count; ++c) {
          const T* __restrict xp = xs + c * plane;
          T* __restrict yp = ys + c * yl.channel;
          const double gv = gc[c], bv = bc[c];
          for (std::int64_t i = 0; i < len; ++i) yp[i] = round_out<T>((to_double(xp[i]) - mu[i]) * is[i] * gv + bv);
        }
      }
      const std::int64_t q = n * s.positions + p0;
      for (std::int64_t i = 0; i < len; ++i) {
        saved_mean[q + i] = P(mean[static_cast<std::size_t>(i)]);
        saved_invstd[q + i] = P(invstd[static_cast<std::size_t>(i)]);
      }
    });
  }
}

// dx = invstd / C (C g - sum g - xhat sum(g xhat)) with g = dy gamma, per position; dgamma and
// dbeta summed per chunk, the chunks added in order.
template <class T, class P>
void backward(const T* x, const T* dy, T* dx, const dense_layout& xl, const dense_layout& dyl, const dense_layout& dxl,
              const shape& s, const P* gamma, const P* saved_mean, const P* saved_invstd, P* dgamma, P* dbeta) {
  const std::int64_t chunks = s.chunks(), c_count = s.c;
  const auto cs = static_cast<std::size_t>(c_count);
  const bool sums = dgamma || dbeta;
  std::vector<double> partial(sums ? static_cast<std::size_t>(chunks) * cs * 2 : 0, 0.0);
  std::vector<double> g(cs, 1.0);
  for (std::size_t c = 0; c < cs; ++c)
    if (gamma) g[c] = static_cast<double>(gamma[c]);
  const double* __restrict gc = g.data();
  const double m = static_cast<double>(c_count);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t k = 0; k < chunks; ++k) {
    double* __restrict pg = sums ? partial.data() + static_cast<std::size_t>(k) * cs * 2 : nullptr;
    double* __restrict pb = sums ? pg + cs : nullptr;
    std::array<double, block> mean{}, invstd{}, sum_g{}, sum_gx{};
    for_each_run(s, k, [&](std::int64_t n, std::int64_t p0, std::int64_t len) {
      const T* __restrict xs = x + n * xl.sample + p0 * xl.position;
      const T* __restrict gs = dy + n * dyl.sample + p0 * dyl.position;
      T* __restrict ds = dx + n * dxl.sample + p0 * dxl.position;
      const std::int64_t q = n * s.positions + p0;
      for (std::int64_t i = 0; i < len; ++i) {
        mean[static_cast<std::size_t>(i)] = static_cast<double>(saved_mean[q + i]);
        invstd[static_cast<std::size_t>(i)] = static_cast<double>(saved_invstd[q + i]);
      }
      if (xl.channel == 1) {
        for (std::int64_t i = 0; i < len; ++i) {
          const T* __restrict xp = xs + i * c_count;
          const T* __restrict gp = gs + i * c_count;
          T* __restrict dp = ds + i * c_count;
          const double mu = mean[static_cast<std::size_t>(i)], is = invstd[static_cast<std::size_t>(i)];
          const double sg = sum8(c_count, [&](std::int64_t c) { return to_double(gp[c]) * gc[c]; });
          const double sgx =
              sum8(c_count, [&](std::int64_t c) { return to_double(gp[c]) * gc[c] * ((to_double(xp[c]) - mu) * is); });
          if (pg)
            for (std::int64_t c = 0; c < c_count; ++c) {
              const double d = to_double(gp[c]);
              pg[c] += d * ((to_double(xp[c]) - mu) * is);
              pb[c] += d;
            }
          for (std::int64_t c = 0; c < c_count; ++c)
            dp[c] = round_out<T>(is / m * (m * to_double(gp[c]) * gc[c] - sg - (to_double(xp[c]) - mu) * is * sgx));
        }
        return;
      }
      const std::int64_t plane = xl.channel;
      double* __restrict sg = sum_g.data();
      double* __restrict sgx = sum_gx.data();
      const double* __restrict mu = mean.data();
      const double* __restrict is = invstd.data();
      std::fill(sg, sg + len, 0.0);
      std::fill(sgx, sgx + len, 0.0);
      for (std::int64_t c = 0; c < c_count; ++c) {
        const T* __restrict xp = xs + c * plane;
        const T* __restrict gp = gs + c * plane;
        const double gv = gc[c];
        for (std::int64_t i = 0; i < len; ++i) {
          const double d = to_double(gp[i]) * gv;
          sg[i] += d;
          sgx[i] += d * ((to_double(xp[i]) - mu[i]) * is[i]);
        }
        if (pg) {
          pg[c] += sum8(len, [&](std::int64_t i) { return to_double(gp[i]) * ((to_double(xp[i]) - mu[i]) * is[i]); });
          pb[c] += sum8(len, [&](std::int64_t i) { return to_double(gp[i]); });
        }
      }
      for (std::int64_t c = 0; c < c_count; ++c) {
        const T* __restrict xp = xs + c * plane;
        const T* __restrict gp = gs + c * plane;
        T* __restrict dp = ds + c * dxl.channel;
        const double gv = gc[c];
        for (std::int64_t i = 0; i < len; ++i)
          dp[i] = round_out<T>(is[i] / m *
                               (m * to_double(gp[i]) * gv - sg[i] - (to_double(xp[i]) - mu[i]) * is[i] * sgx[i]));
      }
    });
  }
  if (!sums) return;
  for (std::size_t c = 0; c < cs; ++c) {
    double sdx = 0.0, sd = 0.0;
    for (std::int64_t k = 0; k < chunks; ++k) {
      sdx += partial[static_cast<std::size_t>(k) * cs * 2 + c];
      sd += partial[static_cast<std::size_t>(k) * cs * 2 + cs + c];
    }
    if (dgamma) dgamma[c] = P(sdx);
    if (dbeta) dbeta[c] = P(sd);
  }
}

}  // namespace layer_norm_detail

template <class T, class XF, class YF>
void layer_norm_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const param_t<T>* gamma,
                        const param_t<T>* beta, param_t<T>* saved_mean, param_t<T>* saved_invstd,
                        const layer_norm_params& p) {
  namespace d = layer_norm_detail;
  validate_layer_norm_forward(x, y, saved_mean, saved_invstd, p);
  if (x.empty()) return;
  const d::dense_layout xl = d::dense_layout_of(x), yl = d::dense_layout_of(y);
  if constexpr (is_float_io_type_v<T>) {
    if (d::same_layout(xl, yl))
      return d::forward(x.data(), y.data(), xl, yl, d::shape_of(x), gamma, beta, saved_mean, saved_invstd, p.epsilon);
  }
  reference::layer_norm_forward(x, y, gamma, beta, saved_mean, saved_invstd, p);
}

template <class T, class XF, class DYF, class DXF>
void layer_norm_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                         const param_t<T>* gamma, const param_t<T>* saved_mean, const param_t<T>* saved_invstd,
                         param_t<T>* dgamma, param_t<T>* dbeta, const layer_norm_params& p) {
  namespace d = layer_norm_detail;
  validate_layer_norm_backward(x, dy, dx, saved_mean, saved_invstd, p);
  const d::dense_layout xl = d::dense_layout_of(x), dyl = d::dense_layout_of(dy), dxl = d::dense_layout_of(dx);
  if constexpr (is_float_io_type_v<T>) {
    if (!x.empty() && d::same_layout(xl, dyl) && d::same_layout(xl, dxl))
      return d::backward(x.data(), dy.data(), dx.data(), xl, dyl, dxl, d::shape_of(x), gamma, saved_mean, saved_invstd,
                         dgamma, dbeta);
  }
  reference::layer_norm_backward(x, dy, dx, gamma, saved_mean, saved_invstd, dgamma, dbeta, p);
}

}  // namespace memfmt::cpu
