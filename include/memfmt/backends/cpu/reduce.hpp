// memfmt/backends/cpu/reduce.hpp - format-aware CPU reductions over C and spatial axes.
//
// The semantics and arguments are those of reference/reduce.hpp; this is the version the oneDNN
// backend calls in either format (oneDNN 2.6 has a forward reduction but no backward). The index
// space is compacted first (extent-1 dims dropped, dims ordered by x's strides, neighbours that are
// both kept or both reduced and contiguous in every tensor merged), which leaves one of two loops,
// both reading memory in order:
//   - x's innermost dim is kept (channels-first over C, channels-last over spatial axes): rows of
//     outputs along it, one accumulator per output, the reduced rows of x added in;
//   - it is reduced (channels-last over C, channels-first over spatial axes): each output reduces
//     contiguous runs of x in eight interleaved partial results.
// Sums are in double, as in the reference; each output is computed by one thread in a fixed order,
// so any thread count gives the same bits. BM_reduce in bench_conv times both formats.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../reference/numeric.hpp"
#include "../reference/reduce.hpp"
#include "../validate.hpp"
#include "double_passes.hpp"
#include "float_io.hpp"
#include "thread_shares.hpp"

namespace memfmt::cpu {
namespace reduce_detail {

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

// Two partial results of Op merged.
template <reduce_op Op>
inline double merge(double a, double b) noexcept {
  return Op == reduce_op::max || Op == reduce_op::min ? combine<Op>(a, b) : a + b;
}

template <reduce_op Op>
inline double finish(double r, double inv_count) noexcept {
  if constexpr (Op == reduce_op::mean) return r * inv_count;
  else if constexpr (Op == reduce_op::l2) return std::sqrt(r);
  else return r;
}

// The partial result of Op over n >= 1 values at xp, xp + stride, ...; contiguous runs in eight
// interleaved partial results, a fixed order the compiler vectorises (one running value is a chain
// of dependent operations).
template <reduce_op Op, class T>
double reduce_run(const T* __restrict xp, std::int64_t n, std::int64_t stride) noexcept {
  double r = start<Op>(to_double(xp[0]));
  if (stride != 1) {
    for (std::int64_t i = 1; i < n; ++i) r = combine<Op>(r, to_double(xp[i * stride]));
    return r;
  }
  std::int64_t c = 1;
  if (n >= 16) {
    double lanes[8];
    for (int j = 0; j < 8; ++j) lanes[j] = start<Op>(to_double(xp[j]));
    for (c = 8; c + 8 <= n; c += 8)
      for (int j = 0; j < 8; ++j) lanes[j] = combine<Op>(lanes[j], to_double(xp[c + j]));
    r = lanes[0];
    for (int j = 1; j < 8; ++j) r = merge<Op>(r, lanes[j]);
  }
  for (; c < n; ++c) r = combine<Op>(r, to_double(xp[c]));
  return r;
}

// Outputs per row block when x's innermost dim is kept.
inline constexpr std::int64_t row_block = 256;

// acc[i] = combine(acc[i], xp[i]) for i < n, in fixed-width steps GCC vectorises at -O2 too (its
// cheap cost model leaves loops of unknown trip count scalar).
template <reduce_op Op, class T>
inline void accumulate_row(double* __restrict acc, const T* __restrict xp, std::int64_t n) noexcept {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[i + j] = combine<Op>(acc[i + j], to_double(xp[i + j]));
  for (; i < n; ++i) acc[i] = combine<Op>(acc[i], to_double(xp[i]));
}

// ties[i * ts] += (x[i * xs] == y[i * ts]) for i < n (ts 0: one output for all, ties[0] its
// count); contiguous x in fixed-width steps, as in accumulate_row.
template <class T>
inline void count_ties(std::int64_t* __restrict ties, const T* __restrict xp, std::int64_t xs,
                       const double* __restrict y, std::int64_t ts, std::int64_t n) noexcept {
  std::int64_t i = 0;
  if (xs == 1 && ts == 0) {
    std::int64_t lanes[8] = {};
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) lanes[j] += to_double(xp[i + j]) == *y;
    for (int j = 0; j < 8; ++j) *ties += lanes[j];
  } else if (xs == 1) {
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) ties[i + j] += to_double(xp[i + j]) == y[i + j];
  }
  for (; i < n; ++i) ties[i * ts] += to_double(xp[i * xs]) == y[i * ts];
}

// The gradient of one input x of an output y, split as reference::detail::reduce_gradient's
// value in two steps: a per-output scale from y, its gradient dy, the count of values and of ties,
// then per input the scale applied to x. l2's dy / y is then one division per output, and every
// per-input step is a multiply or a select the compiler vectorises.
template <reduce_op Op>
inline double gradient_scale(double y, double dy, std::int64_t count, std::int64_t ties) noexcept {
  if constexpr (Op == reduce_op::mean) return dy / static_cast<double>(count);
  else if constexpr (Op == reduce_op::max || Op == reduce_op::min)
    return ties > 0 ? dy / static_cast<double>(ties) : 0.0;
  else if constexpr (Op == reduce_op::l2) return y == 0.0 ? 0.0 : dy / y;
  else if constexpr (Op == reduce_op::sum_square) return 2.0 * dy;
  else return dy;  // sum, l1
}

template <reduce_op Op>
inline double gradient(double x, double y, double scale) noexcept {
  if constexpr (Op == reduce_op::max || Op == reduce_op::min) return x == y ? scale : 0.0;
  else if constexpr (Op == reduce_op::l1) return x > 0.0 ? scale : x < 0.0 ? -scale : 0.0;
  else if constexpr (Op == reduce_op::l2 || Op == reduce_op::sum_square) return scale * x;
  else return scale;  // sum, mean
}

// dx[i * dxs] for i < n, from x[i * xs] and per-input results y[i * ys] and scales s[i * ys]
// (ys 0: one output for all); contiguous x and dx in fixed-width steps, as in accumulate_row.
template <reduce_op Op, class T>
inline void gradient_run(T* __restrict dxp, std::int64_t dxs, const T* __restrict xp, std::int64_t xs,
                         const double* __restrict y, const double* __restrict s, std::int64_t ys,
                         std::int64_t n) noexcept {
  std::int64_t i = 0;
  if (xs == 1 && dxs == 1) {
    if (ys == 0) {
      for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) dxp[i + j] = round_out<T>(gradient<Op>(to_double(xp[i + j]), *y, *s));
    } else {
      for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) dxp[i + j] = round_out<T>(gradient<Op>(to_double(xp[i + j]), y[i + j], s[i + j]));
    }
  }
  for (; i < n; ++i) dxp[i * dxs] = round_out<T>(gradient<Op>(to_double(xp[i * xs]), y[i * ys], s[i * ys]));
}

// Tensors of a reduction: x and dx have x's extents, y and dy the output's (stride 0 on the
// reduced dims here, so that one index addresses all four).
enum tensor_index { tx, ty, tdy, tdx, tensor_count };

// The compacted index space, outermost dim first.
struct loops {
  int rank = 0;
  std::array<std::int64_t, 5> extent{};
  std::array<bool, 5> reduced{};
  std::array<std::array<std::int64_t, 5>, tensor_count> stride{};
  std::int64_t count = 1;  // values per output

  int inner() const noexcept { return rank - 1; }
  // Products of the dims that are kept (reduced = false) or reduced, below dim `end`.
  std::int64_t product(bool of_reduced, int end) const noexcept {
    std::int64_t p = 1;
    for (int d = 0; d < end; ++d)
      if (reduced[static_cast<std::size_t>(d)] == of_reduced) p *= extent[static_cast<std::size_t>(d)];
    return p;
  }
  // Calls fn(x offset, dx offset) for every position of the reduced dims below `end`, in order.
  template <class Fn>
  void for_each_reduced(int end, Fn&& fn) const {
    std::array<int, 5> dims{};
    int k = 0;
    for (int d = 0; d < end; ++d)
      if (reduced[static_cast<std::size_t>(d)]) dims[static_cast<std::size_t>(k++)] = d;
    std::array<std::int64_t, 5> i{};
    std::int64_t xo = 0, dxo = 0;
    for (;;) {
      fn(xo, dxo);
      int j = k - 1;
      for (; j >= 0; --j) {
        const auto u = static_cast<std::size_t>(dims[static_cast<std::size_t>(j)]);
        const auto ju = static_cast<std::size_t>(j);
        if (++i[ju] < extent[u]) {
          xo += stride[tx][u];
          dxo += stride[tdx][u];
          break;
        }
        xo -= (extent[u] - 1) * stride[tx][u];
        dxo -= (extent[u] - 1) * stride[tdx][u];
        i[ju] = 0;
      }
      if (j < 0) return;
    }
  }
  // Whether the reduction is worth a thread team.
  bool parallel() const noexcept { return count * product(false, rank) >= (std::int64_t{1} << 15); }
};

// The kept dims below `end` of loops l, walked in row-major order from number `start`: their
// offset in every tensor.
class kept_cursor {
 public:
  kept_cursor(const loops& l, int end, std::int64_t start) noexcept : l_(l), end_(end) {
    for (int d = end - 1; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      if (l.reduced[u]) continue;
      index_[u] = start % l.extent[u];
      start /= l.extent[u];
      for (std::size_t t = 0; t < tensor_count; ++t) offset[t] += index_[u] * l.stride[t][u];
    }
  }
  void next() noexcept {
    for (int d = end_ - 1; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      if (l_.reduced[u]) continue;
      for (std::size_t t = 0; t < tensor_count; ++t) offset[t] += l_.stride[t][u];
      if (++index_[u] < l_.extent[u]) return;
      for (std::size_t t = 0; t < tensor_count; ++t) offset[t] -= l_.extent[u] * l_.stride[t][u];
      index_[u] = 0;
    }
  }
  std::array<std::int64_t, tensor_count> offset{};

 private:
  const loops& l_;
  int end_;
  std::array<std::int64_t, 5> index_{};
};

// Calls fn(offsets, first output of the block, outputs in the block) for the row blocks of
// units [u0, u1) when x's innermost dim `in` is kept: each row of outputs along it split into
// blocks of at most row_block.
template <class Fn>
void for_each_row_block(const loops& l, std::int64_t u0, std::int64_t u1, std::int64_t blocks, Fn&& fn) {
  const int in = l.inner();
  const std::int64_t len = l.extent[static_cast<std::size_t>(in)];
  kept_cursor row(l, in, u0 / blocks);
  std::int64_t b = u0 % blocks;
  for (std::int64_t u = u0; u < u1; ++u) {
    const std::int64_t b0 = b * row_block;
    fn(row.offset, b0, std::min(row_block, len - b0));
    if (++b == blocks) {
      b = 0;
      row.next();
    }
  }
}

// The loops of a reduction of non-empty x over `axes`, from the four tensors' strides (y's and
// dy's on the reduced dims are ignored).
template <std::size_t Rank>
loops compact(const std::array<std::int64_t, Rank>& extents,
              const std::array<std::array<std::int64_t, Rank>, tensor_count>& strides, std::uint32_t axes) {
  std::array<int, Rank> order{};
  int n = 0;
  for (int d = 0; d < static_cast<int>(Rank); ++d)
    if (extents[static_cast<std::size_t>(d)] > 1) order[static_cast<std::size_t>(n++)] = d;
  std::stable_sort(order.begin(), order.begin() + n, [&](int a, int b) {
    return strides[tx][static_cast<std::size_t>(a)] > strides[tx][static_cast<std::size_t>(b)];
  });
  loops l;
  for (int k = 0; k < n; ++k) {
    const auto d = static_cast<std::size_t>(order[static_cast<std::size_t>(k)]);
    const bool red = (axes & axis_bit(static_cast<int>(d))) != 0;
    std::array<std::int64_t, tensor_count> s{};
    for (std::size_t t = 0; t < tensor_count; ++t) s[t] = red && (t == ty || t == tdy) ? 0 : strides[t][d];
    if (red) l.count *= extents[d];
    if (l.rank > 0) {
      const auto o = static_cast<std::size_t>(l.rank - 1);
      bool mergeable = l.reduced[o] == red;
      for (std::size_t t = 0; t < tensor_count && mergeable; ++t) mergeable = l.stride[t][o] == s[t] * extents[d];
      if (mergeable) {
        l.extent[o] *= extents[d];
        for (std::size_t t = 0; t < tensor_count; ++t) l.stride[t][o] = s[t];
        continue;
      }
    }
    const auto o = static_cast<std::size_t>(l.rank++);
    l.extent[o] = extents[d];
    l.reduced[o] = red;
    for (std::size_t t = 0; t < tensor_count; ++t) l.stride[t][o] = s[t];
  }
  if (l.rank == 0) l.extent[0] = 1, l.rank = 1;  // one element: a kept dim of extent 1
  return l;
}

template <reduce_op Op, class T>
void forward(const T* x, T* y, const loops& l) {
  const int in = l.inner();
  const auto iu = static_cast<std::size_t>(in);
  const double inv_count = 1.0 / static_cast<double>(l.count);
  const std::int64_t len = l.extent[iu], xs = l.stride[tx][iu], ys = l.stride[ty][iu];
  if (!l.reduced[iu]) {
    const std::int64_t blocks = (len + row_block - 1) / row_block;
    for_each_thread_share(l.product(false, in) * blocks, l.parallel(), [&](std::int64_t u0, std::int64_t u1) {
      std::array<double, row_block> acc_store;
      for_each_row_block(l, u0, u1, blocks, [&](const auto& o, std::int64_t b0, std::int64_t n) {
        const T* xr = x + o[tx] + b0 * xs;
        double* __restrict acc = acc_store.data();
        bool first = true;
        l.for_each_reduced(in, [&](std::int64_t xo, std::int64_t) {
          const T* __restrict xp = xr + xo;
          if (first) {
            for (std::int64_t i = 0; i < n; ++i) acc[i] = start<Op>(to_double(xp[i * xs]));
            first = false;
          } else if (xs == 1) {
            accumulate_row<Op>(acc, xp, n);
          } else {
            for (std::int64_t i = 0; i < n; ++i) acc[i] = combine<Op>(acc[i], to_double(xp[i * xs]));
          }
        });
        T* yr = y + o[ty] + b0 * ys;
        for (std::int64_t i = 0; i < n; ++i) yr[i * ys] = round_out<T>(finish<Op>(acc[i], inv_count));
      });
    });
  } else {
    for_each_thread_share(l.product(false, in), l.parallel(), [&](std::int64_t u0, std::int64_t u1) {
      kept_cursor out(l, in, u0);
      for (std::int64_t u = u0; u < u1; ++u, out.next()) {
        double r = 0.0;
        bool first = true;
        l.for_each_reduced(in, [&](std::int64_t xo, std::int64_t) {
          const double part = reduce_run<Op>(x + out.offset[tx] + xo, len, xs);
          r = first ? part : merge<Op>(r, part);
          first = false;
        });
        y[out.offset[ty]] = round_out<T>(finish<Op>(r, inv_count));
      }
    });
  }
}

// dx from x, y and dy (reference::detail::reduce_gradient's values, as gradient_scale and
// gradient); max and min count each output's ties first.
template <reduce_op Op, class T>
void backward(const T* x, const T* y, const T* dy, T* dx, const loops& l) {
  constexpr bool counts_ties = Op == reduce_op::max || Op == reduce_op::min;
  const int in = l.inner();
  const auto iu = static_cast<std::size_t>(in);
  const std::int64_t len = l.extent[iu], xs = l.stride[tx][iu], dxs = l.stride[tdx][iu];
  if (!l.reduced[iu]) {
    const std::int64_t blocks = (len + row_block - 1) / row_block, ys = l.stride[ty][iu], dys = l.stride[tdy][iu];
    for_each_thread_share(l.product(false, in) * blocks, l.parallel(), [&](std::int64_t u0, std::int64_t u1) {
      std::array<double, row_block> yv, scale;
      std::array<std::int64_t, row_block> ties;
      for_each_row_block(l, u0, u1, blocks, [&](const auto& o, std::int64_t b0, std::int64_t n) {
        const T* xr = x + o[tx] + b0 * xs;
        T* dxr = dx + o[tdx] + b0 * dxs;
        for (std::int64_t i = 0; i < n; ++i) {
          const auto k = static_cast<std::size_t>(i);
          yv[k] = to_double(y[o[ty] + (b0 + i) * ys]);
          ties[k] = 0;
        }
        if (counts_ties)
          l.for_each_reduced(
              in, [&](std::int64_t xo, std::int64_t) { count_ties(ties.data(), xr + xo, xs, yv.data(), 1, n); });
        for (std::int64_t i = 0; i < n; ++i) {
          const auto k = static_cast<std::size_t>(i);
          scale[k] = gradient_scale<Op>(yv[k], to_double(dy[o[tdy] + (b0 + i) * dys]), l.count, ties[k]);
        }
        l.for_each_reduced(in, [&](std::int64_t xo, std::int64_t dxo) {
          gradient_run<Op>(dxr + dxo, dxs, xr + xo, xs, yv.data(), scale.data(), 1, n);
        });
      });
    });
  } else {
    for_each_thread_share(l.product(false, in), l.parallel(), [&](std::int64_t u0, std::int64_t u1) {
      kept_cursor out(l, in, u0);
      for (std::int64_t u = u0; u < u1; ++u, out.next()) {
        const auto& o = out.offset;
        const double yv = to_double(y[o[ty]]);
        std::int64_t ties = 0;
        if (counts_ties)
          l.for_each_reduced(
              in, [&](std::int64_t xo, std::int64_t) { count_ties(&ties, x + o[tx] + xo, xs, &yv, 0, len); });
        const double scale = gradient_scale<Op>(yv, to_double(dy[o[tdy]]), l.count, ties);
        l.for_each_reduced(in, [&](std::int64_t xo, std::int64_t dxo) {
          gradient_run<Op>(dx + o[tdx] + dxo, dxs, x + o[tx] + xo, xs, &yv, &scale, 0, len);
        });
      }
    });
  }
}

// Calls fn(std::integral_constant<reduce_op, op>).
template <class Fn>
void dispatch(reduce_op op, Fn&& fn) {
  switch (op) {
    case reduce_op::sum: return fn(std::integral_constant<reduce_op, reduce_op::sum>{});
    case reduce_op::mean: return fn(std::integral_constant<reduce_op, reduce_op::mean>{});
    case reduce_op::max: return fn(std::integral_constant<reduce_op, reduce_op::max>{});
    case reduce_op::min: return fn(std::integral_constant<reduce_op, reduce_op::min>{});
    case reduce_op::l1: return fn(std::integral_constant<reduce_op, reduce_op::l1>{});
    case reduce_op::l2: return fn(std::integral_constant<reduce_op, reduce_op::l2>{});
    case reduce_op::sum_square: return fn(std::integral_constant<reduce_op, reduce_op::sum_square>{});
  }
}

template <class T>
inline constexpr bool runs_v = is_float_io_type_v<T> || std::is_same_v<T, double>;

}  // namespace reduce_detail

template <class T, class XF, class YF>
void reduce_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const reduce_params& p) {
  namespace d = reduce_detail;
  validate_reduce_forward(x, y, p);
  if (x.empty()) return;
  if constexpr (d::runs_v<T>) {
    const d::loops l = d::compact(x.extents(), {x.strides(), y.strides(), y.strides(), x.strides()}, p.axes);
    d::dispatch(p.op, [&](auto op) { d::forward<decltype(op)::value>(x.data(), y.data(), l); });
  } else {
    reference::reduce_forward(x, y, p);
  }
}

template <class T, class XF, class YF, class DYF, class DXF>
void reduce_backward(tensor_view<const T, XF> x, tensor_view<const T, YF> y, tensor_view<const T, DYF> dy,
                     tensor_view<T, DXF> dx, const reduce_params& p) {
  namespace d = reduce_detail;
  validate_reduce_backward(x, y, dy, dx, p);
  if (x.empty()) return;
  if constexpr (d::runs_v<T>) {
    const d::loops l = d::compact(x.extents(), {x.strides(), y.strides(), dy.strides(), dx.strides()}, p.axes);
    d::dispatch(p.op, [&](auto op) { d::backward<decltype(op)::value>(x.data(), y.data(), dy.data(), dx.data(), l); });
  } else {
    reference::reduce_backward(x, y, dy, dx, p);
  }
}

}  // namespace memfmt::cpu
