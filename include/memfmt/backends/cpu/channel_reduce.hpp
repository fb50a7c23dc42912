// memfmt/backends/cpu/channel_reduce.hpp - format-aware CPU reductions over the channels.
//
// The semantics and arguments are those of reference/channel_reduce.hpp; this is the version the
// oneDNN backend calls in either format (oneDNN 2.6 has a forward reduction but no backward). Dense
// views run over channel_vectors.hpp's runs of positions: channels-last reduces each position's
// contiguous C values, channels-first keeps one accumulator per position of a run and adds the
// channels' rows into them, so both read memory in order and vectorise. Sums are in double, as in
// the reference; each output depends on its own position only, so any thread count gives the same
// bits. Other views (mixed or padded layouts) run the reference loops. BM_channel_reduce in
// bench_conv times both formats.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../../tensor/tensor_view.hpp"
#include "../layer_params.hpp"
#include "../reference/channel_reduce.hpp"
#include "../reference/numeric.hpp"
#include "../validate.hpp"
#include "channel_vectors.hpp"
#include "double_passes.hpp"
#include "float_io.hpp"

namespace memfmt::cpu {
namespace channel_reduce_detail {

using namespace channel_vectors;
using double_passes::round_out;
using reference::detail::to_double;

// The running value of reduction Op after one more input v (NaN wins max and min, as in PyTorch).
template <reduce_op Op>
inline double combine(double r, double v) noexcept {
  if constexpr (Op == reduce_op::max) return ((v > r) | (v != v)) ? v : r;  // | not ||: no branch
  else if constexpr (Op == reduce_op::min) return ((v < r) | (v != v)) ? v : r;
  else if constexpr (Op == reduce_op::l1) return r + std::fabs(v);
  else if constexpr (Op == reduce_op::l2 || Op == reduce_op::sum_square) return r + v * v;
  else return r + v;
}

template <reduce_op Op>
inline double start(double first) noexcept {
  return Op == reduce_op::max || Op == reduce_op::min ? first : combine<Op>(0.0, first);
}

template <reduce_op Op>
inline double finish(double r, double inv_c) noexcept {
  if constexpr (Op == reduce_op::mean) return r * inv_c;
  else if constexpr (Op == reduce_op::l2) return std::sqrt(r);
  else return r;
}

// Reduction Op of n >= 1 contiguous values in eight interleaved partial results, a fixed order
// the compiler vectorises (one running value is a chain of dependent operations).
template <reduce_op Op, class T>
double reduce_contiguous(const T* __restrict xp, std::int64_t n) noexcept {
  constexpr bool extremum = Op == reduce_op::max || Op == reduce_op::min;
  std::int64_t c = 1;
  double r = start<Op>(to_double(xp[0]));
  if (n >= 16) {
    double lanes[8];
    for (int j = 0; j < 8; ++j) lanes[j] = start<Op>(to_double(xp[j]));
    for (c = 8; c + 8 <= n; c += 8)
      for (int j = 0; j < 8; ++j) lanes[j] = combine<Op>(lanes[j], to_double(xp[c + j]));
    r = lanes[0];
    for (int j = 1; j < 8; ++j) r = extremum ? combine<Op>(r, lanes[j]) : r + lanes[j];
  }
  for (; c < n; ++c) r = combine<Op>(r, to_double(xp[c]));
  return r;
}

template <reduce_op Op, class T>
void forward(const T* x, T* y, const dense_layout& xl, const dense_layout& yl, const shape& s) {
  const std::int64_t chunks = s.chunks(), c_count = s.c;
  const double inv_c = 1.0 / static_cast<double>(c_count);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t k = 0; k < chunks; ++k) {
    for_each_run(s, k, [&](std::int64_t n, std::int64_t p0, std::int64_t len) {
      const T* __restrict xs = x + n * xl.sample + p0 * xl.position;
      T* __restrict ys = y + n * yl.sample + p0 * yl.position;
      if (xl.channel == 1) {  // channels-last: each position's C values are contiguous
        for (std::int64_t i = 0; i < len; ++i)
          ys[i * yl.position] = round_out<T>(finish<Op>(reduce_contiguous<Op>(xs + i * c_count, c_count), inv_c));
      } else {  // channels-first: one accumulator per position of the run, channel rows added in
        std::array<double, block> acc;
        double* __restrict a = acc.data();
        for (std::int64_t i = 0; i < len; ++i) a[i] = start<Op>(to_double(xs[i]));
        for (std::int64_t c = 1; c < c_count; ++c) {
          const T* __restrict xp = xs + c * xl.channel;
          std::int64_t i = 0;
          for (; i + 8 <= len; i += 8)  // fixed-width steps the compiler vectorises at -O2 too
            for (int j = 0; j < 8; ++j) a[i + j] = combine<Op>(a[i + j], to_double(xp[i + j]));
          for (; i < len; ++i) a[i] = combine<Op>(a[i], to_double(xp[i]));
        }
        for (std::int64_t i = 0; i < len; ++i) ys[i * yl.position] = round_out<T>(finish<Op>(a[i], inv_c));
      }
    });
  }
}

template <class T>
void forward(reduce_op op, const T* x, T* y, const dense_layout& xl, const dense_layout& yl, const shape& s) {
  switch (op) {
    case reduce_op::sum: return forward<reduce_op::sum>(x, y, xl, yl, s);
    case reduce_op::mean: return forward<reduce_op::mean>(x, y, xl, yl, s);
    case reduce_op::max: return forward<reduce_op::max>(x, y, xl, yl, s);
    case reduce_op::min: return forward<reduce_op::min>(x, y, xl, yl, s);
    case reduce_op::l1: return forward<reduce_op::l1>(x, y, xl, yl, s);
    case reduce_op::l2: return forward<reduce_op::l2>(x, y, xl, yl, s);
    case reduce_op::sum_square: return forward<reduce_op::sum_square>(x, y, xl, yl, s);
  }
}

// dx from x, y and dy (reference::detail::reduce_channels_gradient per element); max and min count
// each position's ties first.
template <class T>
void backward(reduce_op op, const T* x, const T* y, const T* dy, T* dx, const dense_layout& xl, const dense_layout& yl,
              const dense_layout& dyl, const dense_layout& dxl, const shape& s) {
  const std::int64_t chunks = s.chunks(), c_count = s.c;
  const bool counts_ties = op == reduce_op::max || op == reduce_op::min;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t k = 0; k < chunks; ++k) {
    for_each_run(s, k, [&](std::int64_t n, std::int64_t p0, std::int64_t len) {
      const T* __restrict xs = x + n * xl.sample + p0 * xl.position;
      const T* __restrict ys = y + n * yl.sample + p0 * yl.position;
      const T* __restrict gs = dy + n * dyl.sample + p0 * dyl.position;
      T* __restrict dxs = dx + n * dxl.sample + p0 * dxl.position;
      std::array<std::int64_t, block> ties;
      ties.fill(counts_ties ? 0 : 1);
      if (counts_ties) {
        for (std::int64_t c = 0; c < c_count; ++c)
          for (std::int64_t i = 0; i < len; ++i)
            ties[static_cast<std::size_t>(i)] +=
                to_double(xs[i * xl.position + c * xl.channel]) == to_double(ys[i * yl.position]);
      }
      for (std::int64_t i = 0; i < len; ++i) {
        const double yv = to_double(ys[i * yl.position]), g = to_double(gs[i * dyl.position]);
        for (std::int64_t c = 0; c < c_count; ++c)
          dxs[i * dxl.position + c * dxl.channel] = round_out<T>(reference::detail::reduce_channels_gradient(
              op, to_double(xs[i * xl.position + c * xl.channel]), yv, g, c_count, ties[static_cast<std::size_t>(i)]));
      }
    });
  }
}

}  // namespace channel_reduce_detail

template <class T, class XF, class YF>
void channel_reduce_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const channel_reduce_params& p) {
  namespace d = channel_reduce_detail;
  validate_channel_reduce_forward(x, y, p);
  if (x.empty()) return;
  const d::dense_layout xl = d::dense_layout_of(x), yl = d::dense_layout_of(y);
  if constexpr (is_float_io_type_v<T> || std::is_same_v<T, double>) {
    if (xl.ok && yl.ok) return d::forward(p.op, x.data(), y.data(), xl, yl, d::shape_of(x));
  }
  reference::channel_reduce_forward(x, y, p);
}

template <class T, class XF, class YF, class DYF, class DXF>
void channel_reduce_backward(tensor_view<const T, XF> x, tensor_view<const T, YF> y, tensor_view<const T, DYF> dy,
                             tensor_view<T, DXF> dx, const channel_reduce_params& p) {
  namespace d = channel_reduce_detail;
  validate_channel_reduce_backward(x, y, dy, dx, p);
  if (x.empty()) return;
  const d::dense_layout xl = d::dense_layout_of(x), yl = d::dense_layout_of(y), dyl = d::dense_layout_of(dy),
                        dxl = d::dense_layout_of(dx);
  if constexpr (is_float_io_type_v<T> || std::is_same_v<T, double>) {
    if (xl.ok && yl.ok && dyl.ok && dxl.ok)
      return d::backward(p.op, x.data(), y.data(), dy.data(), dx.data(), xl, yl, dyl, dxl, d::shape_of(x));
  }
  reference::channel_reduce_backward(x, y, dy, dx, p);
}

}  // namespace memfmt::cpu
