// memfmt/backends/reference/reduce.hpp - reference reductions over C and spatial axes.
//
// Every output element reduces the box of x that differs from it only on the reduced axes
// (reduce_params gives each reduction and its gradient). In double, rounded once to T. The
// backward reads the forward output y: max and min pass the gradient to the inputs equal to it,
// l2 divides by it. A NaN wins max and min, as in PyTorch.
#pragma once

#include <array>
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

// The reduction of count >= 1 values read by at(k), in double.
template <class At>
double reduce_values(reduce_op op, std::int64_t count, At&& at) {
  double r = at(0);
  switch (op) {
    case reduce_op::max:
    case reduce_op::min:
      for (std::int64_t k = 1; k < count; ++k) {
        const double v = at(k);
        if ((op == reduce_op::max ? v > r : v < r) || std::isnan(v)) r = v;
      }
      return r;
    default: break;
  }
  r = 0.0;
  for (std::int64_t k = 0; k < count; ++k) {
    const double v = at(k);
    r += op == reduce_op::l1 ? std::fabs(v) : (op == reduce_op::l2 || op == reduce_op::sum_square) ? v * v : v;
  }
  if (op == reduce_op::mean) return r / static_cast<double>(count);
  if (op == reduce_op::l2) return std::sqrt(r);
  return r;
}

// d(result)/d(x_i) times dy for one input of a reduction of count values, given the result y and
// the count of inputs equal to it (max and min share the gradient among ties).
inline double reduce_gradient(reduce_op op, double x, double y, double dy, std::int64_t count, std::int64_t ties) {
  switch (op) {
    case reduce_op::sum: return dy;
    case reduce_op::mean: return dy / static_cast<double>(count);
    case reduce_op::max:
    case reduce_op::min: return x == y ? dy / static_cast<double>(ties) : 0.0;
    case reduce_op::l1: return x > 0.0 ? dy : x < 0.0 ? -dy : 0.0;
    case reduce_op::l2: return y == 0.0 ? 0.0 : dy * x / y;
    case reduce_op::sum_square: return 2.0 * dy * x;
  }
  return 0.0;
}

// The box one output element reduces, as N, C, D, H, W extents: x's on the reduced axes, 1
// elsewhere (a 2-D view's logical axes 2 and 3 are H and W).
template <int Rank>
dims5 reduced_box(const dims5& x, std::uint32_t axes) noexcept {
  const auto on = [&](int axis, std::int64_t extent) { return (axes & axis_bit(axis)) ? extent : std::int64_t{1}; };
  if constexpr (Rank == 4) return {1, on(1, x.c), 1, on(2, x.h), on(3, x.w)};
  else return {1, on(1, x.c), on(2, x.d), on(3, x.h), on(4, x.w)};
}

// Calls fn(element k, x offset of k) for the box's elements in order, from the output's offset.
template <class Fn>
void for_each_in_box(const dims5& box, const dims5& xs, std::int64_t base, Fn&& fn) {
  std::int64_t k = 0;
  for_each5(box, [&](auto, auto c, auto d, auto h, auto w) { fn(k++, base + offset5(xs, 0, c, d, h, w)); });
}

template <int Rank, class T>
void reduce_forward(const view5<const T>& x, const view5<T>& y, const reduce_params& p) {
  const auto e = extents5(x);
  if (numel5(e) == 0) return;
  const auto xs = strides5(x), ys = strides5(y);
  const dims5 box = reduced_box<Rank>(e, p.axes);
  const std::int64_t count = numel5(box);
  std::vector<std::int64_t> at(static_cast<std::size_t>(count));
  for_each5(extents5(y), [&](auto n, auto c, auto d, auto h, auto w) {
    for_each_in_box(box, xs, offset5(xs, n, c, d, h, w),
                    [&](std::int64_t k, std::int64_t o) { at[static_cast<std::size_t>(k)] = o; });
    const double r = reduce_values(
        p.op, count, [&](std::int64_t k) { return to_double(x.data()[at[static_cast<std::size_t>(k)]]); });
    y.data()[offset5(ys, n, c, d, h, w)] = from_double<T>(r);
  });
}

template <int Rank, class T>
void reduce_backward(const view5<const T>& x, const view5<const T>& y, const view5<const T>& dy, const view5<T>& dx,
                     const reduce_params& p) {
  const auto e = extents5(x);
  if (numel5(e) == 0) return;
  const auto xs = strides5(x), ys = strides5(y), dys = strides5(dy), dxs = strides5(dx);
  const dims5 box = reduced_box<Rank>(e, p.axes);
  const std::int64_t count = numel5(box);
  for_each5(extents5(y), [&](auto n, auto c, auto d, auto h, auto w) {
    const double yv = to_double(y.data()[offset5(ys, n, c, d, h, w)]);
    const double g = to_double(dy.data()[offset5(dys, n, c, d, h, w)]);
    std::int64_t ties = 1;
    if (p.op == reduce_op::max || p.op == reduce_op::min) {
      ties = 0;
      for_each_in_box(box, xs, offset5(xs, n, c, d, h, w),
                      [&](std::int64_t, std::int64_t o) { ties += to_double(x.data()[o]) == yv; });
    }
    const std::int64_t dx_base = offset5(dxs, n, c, d, h, w);
    for_each5(box, [&](auto, auto bc, auto bd, auto bh, auto bw) {
      const double xv = to_double(x.data()[offset5(xs, n, c + bc, d + bd, h + bh, w + bw)]);
      dx.data()[dx_base + offset5(dxs, 0, bc, bd, bh, bw)] =
          from_double<T>(reduce_gradient(p.op, xv, yv, g, count, ties));
    });
  });
}

}  // namespace detail

template <class T, class XF, class YF>
void reduce_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const reduce_params& p) {
  detail::check_element_type<T>();
  validate_reduce_forward(x, y, p);
  detail::reduce_forward<XF::rank, T>(detail::view5_of(x), detail::view5_of(y), p);
}

template <class T, class XF, class YF, class DYF, class DXF>
void reduce_backward(tensor_view<const T, XF> x, tensor_view<const T, YF> y, tensor_view<const T, DYF> dy,
                     tensor_view<T, DXF> dx, const reduce_params& p) {
  detail::check_element_type<T>();
  validate_reduce_backward(x, y, dy, dx, p);
  detail::reduce_backward<XF::rank, T>(detail::view5_of(x), detail::view5_of(y), detail::view5_of(dy),
                                       detail::view5_of(dx), p);
}

}  // namespace memfmt::reference
