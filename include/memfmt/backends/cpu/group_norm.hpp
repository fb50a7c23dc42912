// memfmt/backends/cpu/group_norm.hpp - format-aware CPU group normalisation (and instance norm).
//
// The semantics, arguments and rounding are those of reference/group_norm.hpp (saved mean and invstd
// at n * groups + g, optional gamma / beta / dgamma / dbeta); this is the fast version a CPU backend
// without a group norm primitive (oneDNN 2.6) calls. Each pass streams the tensors once in the
// order of x's memory: channels-first views go channel by channel over runs of pixels,
// channels-last views pixel by pixel over runs of channels, accumulating per-channel sums that are
// folded into group sums afterwards.
//
// Work is cut into chunks (sample n and a block of rows or of channels, whichever keeps a chunk's
// memory contiguous) whose size depends only on the shape; each chunk keeps its own partial sums
// and the partials are added in a fixed order, so the result is bitwise the same for any number of
// OpenMP threads. Sums and per-element arithmetic are in double with a two-pass variance (mean
// first, then squared deviations), so a large mean cannot cancel the variance. Where the views share
// one layout, the passes walk contiguous runs (a row sum in eight interleaved partials) and 16-bit
// outputs round through float; mixed layouts go element by element and round as the reference does.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../reference/group_norm.hpp"
#include "../reference/numeric.hpp"
#include "../reference/view_access.hpp"
#include "../validate.hpp"
#include "double_passes.hpp"
#include "float_io.hpp"

namespace memfmt::cpu {
namespace group_norm_detail {

using reference::detail::dims5;

// About this many elements per chunk: big enough to amortise the per-chunk partial sums, small
// enough that a single sample still splits over threads.
inline constexpr std::int64_t chunk_elements = 4096;

// Chunks follow x's memory: a channels-last sample splits into blocks of D * H rows (W pixels of
// all channels each), a channels-first one into blocks of whole channels (all D * H * W pixels).
struct chunking {
  bool channels_inner;             // x is channels-last: channels vary fastest
  std::int64_t per_chunk;          // rows (channels-last) or channels (channels-first) per chunk
  std::int64_t chunks_per_sample;  // 0 when there is nothing to split
  std::int64_t chunks;             // N * chunks_per_sample
};

inline chunking make_chunking(const dims5& e, bool channels_inner) noexcept {
  const std::int64_t rows = e.d * e.h;
  const std::int64_t unit = channels_inner ? e.c * e.w : rows * e.w;  // elements of one row / channel
  const std::int64_t count = channels_inner ? rows : e.c;
  const std::int64_t per = unit > 0 && unit < chunk_elements ? chunk_elements / unit : 1;
  const std::int64_t cps = (count + per - 1) / per;
  return {channels_inner, per, cps, e.n * cps};
}

// The positions of one chunk: sample n, channels [c0, c1), rows [r0, r1) of the D * H rows.
struct chunk {
  std::int64_t n, c0, c1, r0, r1;
};

inline chunk chunk_at(const dims5& e, const chunking& ch, std::int64_t i) noexcept {
  const std::int64_t n = i / ch.chunks_per_sample, b = i % ch.chunks_per_sample;
  const std::int64_t count = ch.channels_inner ? e.d * e.h : e.c;
  const std::int64_t lo = b * ch.per_chunk, hi = lo + ch.per_chunk < count ? lo + ch.per_chunk : count;
  return ch.channels_inner ? chunk{n, 0, e.c, lo, hi} : chunk{n, lo, hi, 0, e.d * e.h};
}

// Calls fn(c, d, h, w) for every position of chunk k in memory order: channels innermost for a
// channels-last x, the W pixels of a row innermost otherwise.
template <class Fn>
void for_each_in_chunk(const dims5& e, const chunking& ch, const chunk& k, Fn&& fn) {
  if (ch.channels_inner) {
    for (std::int64_t r = k.r0; r < k.r1; ++r) {
      const std::int64_t d = r / e.h, h = r % e.h;
      for (std::int64_t w = 0; w < e.w; ++w)
        for (std::int64_t c = k.c0; c < k.c1; ++c) fn(c, d, h, w);
    }
  } else {
    for (std::int64_t c = k.c0; c < k.c1; ++c)
      for (std::int64_t r = k.r0; r < k.r1; ++r) {
        const std::int64_t d = r / e.h, h = r % e.h;
        for (std::int64_t w = 0; w < e.w; ++w) fn(c, d, h, w);
      }
  }
}

// Calls fn(chunk, i) for every chunk i, in parallel when OpenMP is on; fn must not throw.
template <class Fn>
void for_each_chunk(const dims5& e, const chunking& ch, Fn&& fn) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (ch.chunks > 1)
#endif
  for (std::int64_t i = 0; i < ch.chunks; ++i) fn(chunk_at(e, ch, i), i);
}

// Per sample and channel totals (n * C + c) of per-chunk partials (chunk * C + c, only the
// chunk's channels written), chunks in order.
inline std::vector<double> channel_totals(const std::vector<double>& part, const dims5& e, const chunking& ch) {
  std::vector<double> total(static_cast<std::size_t>(e.n * e.c), 0.0);
  for (std::int64_t i = 0; i < ch.chunks; ++i) {
    const chunk k = chunk_at(e, ch, i);
    for (std::int64_t c = k.c0; c < k.c1; ++c)
      total[static_cast<std::size_t>(k.n * e.c + c)] += part[static_cast<std::size_t>(i * e.c + c)];
  }
  return total;
}

// Per sample and group sums (n * groups + g) of weight[c] * per-channel totals (weight null: 1).
template <class P>
std::vector<double> group_totals(const std::vector<double>& total, const dims5& e, std::int64_t groups,
                                 const P* weight) {
  const std::int64_t per = e.c / groups;
  std::vector<double> sums(static_cast<std::size_t>(e.n * groups), 0.0);
  for (std::int64_t n = 0; n < e.n; ++n)
    for (std::int64_t c = 0; c < e.c; ++c)
      sums[static_cast<std::size_t>(n * groups + c / per)] +=
          total[static_cast<std::size_t>(n * e.c + c)] * (weight ? static_cast<double>(weight[c]) : 1.0);
  return sums;
}

// A per-(n, g) value spread to every channel of its group (n * C + c), for the per-element loops.
inline std::vector<double> per_channel(const std::vector<double>& by_group, const dims5& e, std::int64_t groups) {
  const std::int64_t per = e.c / groups;
  std::vector<double> out(static_cast<std::size_t>(e.n * e.c));
  for (std::int64_t n = 0; n < e.n; ++n)
    for (std::int64_t c = 0; c < e.c; ++c)
      out[static_cast<std::size_t>(n * e.c + c)] = by_group[static_cast<std::size_t>(n * groups + c / per)];
  return out;
}

template <class T, class P>
constexpr void check_types() {
  static_assert(
      std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bfloat16> || std::is_same_v<T, half>,
      "memfmt::cpu::group_norm: T must be float, double, half or bfloat16");
  static_assert(std::is_floating_point_v<P>, "memfmt::cpu::group_norm: parameters must be float or double");
}

template <class T, class F>
bool channels_innermost(const tensor_view<T, F>& x) noexcept {
  const auto s = reference::detail::strides5(x);
  return s.c < s.w;
}

inline bool same_strides(const dims5& a, const dims5& b) noexcept {
  return a.n == b.n && a.c == b.c && a.d == b.d && a.h == b.h && a.w == b.w;
}

using double_passes::round_out;
using double_passes::sum8;

// The elementwise passes over one run, as plain loops over restrict pointers so they vectorise:
// y = (x - mean) * scale + shift and dx = k_dy * dy - k_0 - (x - mean) * invstd * k_xhat, with the
// per-channel factors indexed by the run's position (a pixel's run of channels) or fixed (a row of
// one channel, index 0).
template <bool PerElement, class T, class Step>
void normalize_run(const T* __restrict xp, T* __restrict yp, std::int64_t len, Step step, const double* __restrict mean,
                   const double* __restrict scale, const double* __restrict shift) {
  for (std::int64_t j = 0; j < len; ++j) {
    const std::int64_t c = PerElement ? j : 0;
    yp[j * step] = round_out<T>((reference::detail::to_double(xp[j * step]) - mean[c]) * scale[c] + shift[c]);
  }
}

template <bool PerElement, class T, class Step>
void input_grad_run(const T* __restrict xp, const T* __restrict gp, T* __restrict out, std::int64_t len, Step step,
                    const double* __restrict mean, const double* __restrict invstd, const double* __restrict k_dy,
                    const double* __restrict k_0, const double* __restrict k_xhat) {
  for (std::int64_t j = 0; j < len; ++j) {
    const std::int64_t c = PerElement ? j : 0;
    const double xh = (reference::detail::to_double(xp[j * step]) - mean[c]) * invstd[c];
    out[j * step] = round_out<T>(k_dy[c] * reference::detail::to_double(gp[j * step]) - k_0[c] - xh * k_xhat[c]);
  }
}

// Calls run(c, base, len, step) for every run of chunk k in a layout of strides s: channels-last
// chunks are pixels (run over channels c0..c1, `c` the first), channels-first ones rows (run over
// W of channel c). step is the run's stride; the fast passes specialise step == 1.
template <class Run>
void for_each_run_in_chunk(const dims5& e, const dims5& s, const chunking& ch, const chunk& k, Run&& run) {
  if (ch.channels_inner) {
    for (std::int64_t r = k.r0; r < k.r1; ++r) {
      const std::int64_t row = k.n * s.n + (r / e.h) * s.d + (r % e.h) * s.h;
      for (std::int64_t w = 0; w < e.w; ++w) run(k.c0, row + w * s.w + k.c0 * s.c, k.c1 - k.c0, s.c);
    }
  } else {
    for (std::int64_t c = k.c0; c < k.c1; ++c)
      for (std::int64_t r = k.r0; r < k.r1; ++r)
        run(c, k.n * s.n + c * s.c + (r / e.h) * s.d + (r % e.h) * s.h, e.w, s.w);
  }
}

// Calls fn(step) with step a compile-time 1 where it is 1, so unit-stride runs vectorise.
template <class Fn>
void unit_or_strided(std::int64_t step, Fn&& fn) {
  if (step == 1) fn(std::integral_constant<std::int64_t, 1>{});
  else fn(step);
}

}  // namespace group_norm_detail

template <class T, class P, class XF, class YF>
void group_norm_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const P* gamma, const P* beta, P* saved_mean,
                        P* saved_invstd, const group_norm_params& p) {
  namespace gd = group_norm_detail;
  namespace rd = reference::detail;
  gd::check_types<T, P>();
  validate_group_norm_forward(x, y, saved_mean, saved_invstd, p);
  if (x.empty()) return;  // no statistics to save (they may be null), as in the reference
  const auto e = rd::extents5(x);
  const auto xs = rd::strides5(x), ys = rd::strides5(y);
  const auto ch = gd::make_chunking(e, gd::channels_innermost(x));
  const double m = static_cast<double>(e.c / p.groups * e.d * e.h * e.w);
  const T* xd = x.data();
  T* yd = y.data();
  const auto C = static_cast<std::size_t>(e.c);

  // The statistics read x alone: they walk x's runs (pixels of channels, or rows of a channel).
  std::vector<double> part(static_cast<std::size_t>(ch.chunks) * C, 0.0);
  gd::for_each_chunk(e, ch, [&](const gd::chunk& k, std::int64_t i) {
    double* acc = part.data() + static_cast<std::size_t>(i) * C;
    gd::for_each_run_in_chunk(e, xs, ch, k, [&](std::int64_t c, std::int64_t base, std::int64_t len, std::int64_t st) {
      gd::unit_or_strided(st, [&](auto step) {
        const T* xp = xd + base;
        if (ch.channels_inner)
          for (std::int64_t j = 0; j < len; ++j) acc[c + j] += rd::to_double(xp[j * step]);
        else acc[c] += gd::sum8(len, [&](std::int64_t j) { return rd::to_double(xp[j * step]); });
      });
    });
  });
  std::vector<double> mean = gd::group_totals<P>(gd::channel_totals(part, e, ch), e, p.groups, nullptr);
  for (auto& v : mean) v /= m;
  const std::vector<double> mean_c = gd::per_channel(mean, e, p.groups);

  std::fill(part.begin(), part.end(), 0.0);
  gd::for_each_chunk(e, ch, [&](const gd::chunk& k, std::int64_t i) {
    double* acc = part.data() + static_cast<std::size_t>(i) * C;
    const double* mc = mean_c.data() + static_cast<std::size_t>(k.n) * C;
    gd::for_each_run_in_chunk(e, xs, ch, k, [&](std::int64_t c, std::int64_t base, std::int64_t len, std::int64_t st) {
      gd::unit_or_strided(st, [&](auto step) {
        const T* xp = xd + base;
        if (ch.channels_inner) {
          for (std::int64_t j = 0; j < len; ++j) {
            const double v = rd::to_double(xp[j * step]) - mc[c + j];
            acc[c + j] += v * v;
          }
        } else {
          acc[c] += gd::sum8(len, [&](std::int64_t j) {
            const double v = rd::to_double(xp[j * step]) - mc[c];
            return v * v;
          });
        }
      });
    });
  });
  std::vector<double> invstd = gd::group_totals<P>(gd::channel_totals(part, e, ch), e, p.groups, nullptr);
  for (auto& v : invstd) v = 1.0 / std::sqrt(v / m + p.epsilon);

  // y = (x - mean) * scale[c] + beta[c] with scale = invstd * gamma[c], per sample and channel.
  std::vector<double> scale = gd::per_channel(invstd, e, p.groups), shift(C, 0.0);
  for (std::int64_t n = 0; n < e.n; ++n)
    for (std::int64_t c = 0; c < e.c; ++c)
      if (gamma) scale[static_cast<std::size_t>(n * e.c + c)] *= static_cast<double>(gamma[c]);
  if (beta)
    for (std::size_t c = 0; c < C; ++c) shift[c] = static_cast<double>(beta[c]);
  gd::for_each_chunk(e, ch, [&](const gd::chunk& k, std::int64_t) {
    const double* mc = mean_c.data() + static_cast<std::size_t>(k.n) * C;
    const double* sc = scale.data() + static_cast<std::size_t>(k.n) * C;
    const double* bc = shift.data();
    if (!gd::same_strides(xs, ys)) {  // x and y in different layouts: element by element
      gd::for_each_in_chunk(e, ch, k, [&](auto c, auto d, auto h, auto w) {
        const double v = (rd::to_double(xd[rd::offset5(xs, k.n, c, d, h, w)]) - mc[c]) * sc[c] + bc[c];
        yd[rd::offset5(ys, k.n, c, d, h, w)] = rd::from_double<T>(v);
      });
      return;
    }
    gd::for_each_run_in_chunk(e, xs, ch, k, [&](std::int64_t c, std::int64_t base, std::int64_t len, std::int64_t st) {
      gd::unit_or_strided(st, [&](auto step) {
        if (ch.channels_inner) gd::normalize_run<true>(xd + base, yd + base, len, step, mc + c, sc + c, bc + c);
        else gd::normalize_run<false>(xd + base, yd + base, len, step, mc + c, sc + c, bc + c);
      });
    });
  });
  if (saved_mean == nullptr || saved_invstd == nullptr) return;  // allowed for an empty x only
  for (std::size_t i = 0; i < mean.size(); ++i) {
    saved_mean[i] = rd::from_double<P>(mean[i]);
    saved_invstd[i] = rd::from_double<P>(invstd[i]);
  }
}

template <class T, class P, class XF, class DYF, class DXF>
void group_norm_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                         const P* gamma, const P* saved_mean, const P* saved_invstd, P* dgamma, P* dbeta,
                         const group_norm_params& p) {
  namespace gd = group_norm_detail;
  namespace rd = reference::detail;
  gd::check_types<T, P>();
  validate_group_norm_backward(x, dy, dx, saved_mean, saved_invstd, p);
  if (rd::group_norm_backward_if_empty(x, dgamma, dbeta)) return;
  const auto e = rd::extents5(x);
  const auto xs = rd::strides5(x), dys = rd::strides5(dy), dxs = rd::strides5(dx);
  const auto ch = gd::make_chunking(e, gd::channels_innermost(x));
  const double m = static_cast<double>(e.c / p.groups * e.d * e.h * e.w);
  const T *xd = x.data(), *dyd = dy.data();
  T* dxd = dx.data();
  const auto C = static_cast<std::size_t>(e.c);

  std::vector<double> mean(static_cast<std::size_t>(e.n * p.groups)), invstd(mean.size());
  for (std::size_t i = 0; i < mean.size(); ++i) {
    mean[i] = static_cast<double>(saved_mean[i]);
    invstd[i] = static_cast<double>(saved_invstd[i]);
  }
  const std::vector<double> mean_c = gd::per_channel(mean, e, p.groups),
                            invstd_c = gd::per_channel(invstd, e, p.groups);

  // Per chunk and channel: sum of dy and of dy * xhat.
  std::vector<double> part_dy(static_cast<std::size_t>(ch.chunks) * C, 0.0), part_dyx(part_dy.size(), 0.0);
  gd::for_each_chunk(e, ch, [&](const gd::chunk& k, std::int64_t i) {
    double* sdy = part_dy.data() + static_cast<std::size_t>(i) * C;
    double* sdyx = part_dyx.data() + static_cast<std::size_t>(i) * C;
    const double* mc = mean_c.data() + static_cast<std::size_t>(k.n) * C;
    const double* ic = invstd_c.data() + static_cast<std::size_t>(k.n) * C;
    if (!gd::same_strides(xs, dys)) {  // x and dy in different layouts: element by element
      gd::for_each_in_chunk(e, ch, k, [&](auto c, auto d, auto h, auto w) {
        const double g = rd::to_double(dyd[rd::offset5(dys, k.n, c, d, h, w)]);
        const double xh = (rd::to_double(xd[rd::offset5(xs, k.n, c, d, h, w)]) - mc[c]) * ic[c];
        sdy[c] += g;
        sdyx[c] = rd::mul_add(g, xh, sdyx[c]);
      });
      return;
    }
    gd::for_each_run_in_chunk(e, xs, ch, k, [&](std::int64_t c, std::int64_t base, std::int64_t len, std::int64_t st) {
      gd::unit_or_strided(st, [&](auto step) {
        const T *xp = xd + base, *gp = dyd + base;
        if (ch.channels_inner) {
          for (std::int64_t j = 0; j < len; ++j) {
            const double g = rd::to_double(gp[j * step]);
            sdy[c + j] += g;
            sdyx[c + j] += g * ((rd::to_double(xp[j * step]) - mc[c + j]) * ic[c + j]);
          }
        } else {
          sdy[c] += gd::sum8(len, [&](std::int64_t j) { return rd::to_double(gp[j * step]); });
          sdyx[c] += gd::sum8(len, [&](std::int64_t j) {
            return rd::to_double(gp[j * step]) * ((rd::to_double(xp[j * step]) - mc[c]) * ic[c]);
          });
        }
      });
    });
  });
  const std::vector<double> total_dy = gd::channel_totals(part_dy, e, ch),
                            total_dyx = gd::channel_totals(part_dyx, e, ch);
  for (std::int64_t c = 0; c < e.c; ++c) {
    double sum_dy = 0.0, sum_dyx = 0.0;
    for (std::int64_t n = 0; n < e.n; ++n) {
      sum_dy += total_dy[static_cast<std::size_t>(n * e.c + c)];
      sum_dyx += total_dyx[static_cast<std::size_t>(n * e.c + c)];
    }
    if (dbeta) dbeta[c] = rd::from_double<P>(sum_dy);
    if (dgamma) dgamma[c] = rd::from_double<P>(sum_dyx);
  }

  // dx = invstd / m * (m * g - sum(g) - xhat * sum(g * xhat)) with g = dy * gamma[c]:
  // dx = k_dy[c] * dy - k_0[c] - xhat * k_xhat[c], per sample and channel.
  const std::vector<double> sum_g = gd::group_totals(total_dy, e, p.groups, gamma),
                            sum_gx = gd::group_totals(total_dyx, e, p.groups, gamma);
  std::vector<double> k_0 = gd::per_channel(sum_g, e, p.groups), k_xhat = gd::per_channel(sum_gx, e, p.groups),
                      k_dy = invstd_c;
  for (std::int64_t n = 0; n < e.n; ++n)
    for (std::int64_t c = 0; c < e.c; ++c) {
      const auto i = static_cast<std::size_t>(n * e.c + c);
      k_0[i] *= invstd_c[i] / m;
      k_xhat[i] *= invstd_c[i] / m;
      if (gamma) k_dy[i] *= static_cast<double>(gamma[c]);
    }
  gd::for_each_chunk(e, ch, [&](const gd::chunk& k, std::int64_t) {
    const auto at = static_cast<std::size_t>(k.n) * C;
    const double *mc = mean_c.data() + at, *ic = invstd_c.data() + at;
    const double *kd = k_dy.data() + at, *k0 = k_0.data() + at, *kx = k_xhat.data() + at;
    if (!gd::same_strides(xs, dys) || !gd::same_strides(xs, dxs)) {  // mixed layouts: element by element
      gd::for_each_in_chunk(e, ch, k, [&](auto c, auto d, auto h, auto w) {
        const double g = rd::to_double(dyd[rd::offset5(dys, k.n, c, d, h, w)]);
        const double xh = (rd::to_double(xd[rd::offset5(xs, k.n, c, d, h, w)]) - mc[c]) * ic[c];
        dxd[rd::offset5(dxs, k.n, c, d, h, w)] = rd::from_double<T>(kd[c] * g - k0[c] - xh * kx[c]);
      });
      return;
    }
    gd::for_each_run_in_chunk(e, xs, ch, k, [&](std::int64_t c, std::int64_t base, std::int64_t len, std::int64_t st) {
      gd::unit_or_strided(st, [&](auto step) {
        if (ch.channels_inner)
          gd::input_grad_run<true>(xd + base, dyd + base, dxd + base, len, step, mc + c, ic + c, kd + c, k0 + c,
                                   kx + c);
        else
          gd::input_grad_run<false>(xd + base, dyd + base, dxd + base, len, step, mc + c, ic + c, kd + c, k0 + c,
                                    kx + c);
      });
    });
  });
}

}  // namespace memfmt::cpu
