// memfmt/backends/reference/channel_reduce.hpp - reference reductions over the channel dim.
//
// For every sample and spatial position, the C values reduce to one (channel_reduce_params gives
// each reduction and its gradient). In double, rounded once to T. The backward reads the forward
// output y: max and min pass the gradient to the inputs equal to it, l2 divides by it. A NaN wins
// max and min, as in PyTorch.
#pragma once

#include <cmath>
#include <cstdint>

#include "../../tensor/tensor_view.hpp"
#include "../layer_params.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "softmax.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

// The reduction of C values read by at(c) (C >= 1), in double.
template <class At>
double reduce_channels(reduce_op op, std::int64_t channels, At&& at) {
  double r = at(0);
  switch (op) {
    case reduce_op::max:
    case reduce_op::min:
      for (std::int64_t c = 1; c < channels; ++c) {
        const double v = at(c);
        if ((op == reduce_op::max ? v > r : v < r) || std::isnan(v)) r = v;
      }
      return r;
    default: break;
  }
  r = 0.0;
  for (std::int64_t c = 0; c < channels; ++c) {
    const double v = at(c);
    r += op == reduce_op::l1 ? std::fabs(v) : (op == reduce_op::l2 || op == reduce_op::sum_square) ? v * v : v;
  }
  if (op == reduce_op::mean) return r / static_cast<double>(channels);
  if (op == reduce_op::l2) return std::sqrt(r);
  return r;
}

// d(result)/d(x_c) times dy for one position, given the result y and the count of inputs equal to
// it (max and min share the gradient among ties).
inline double reduce_channels_gradient(reduce_op op, double x, double y, double dy, std::int64_t channels,
                                       std::int64_t ties) {
  switch (op) {
    case reduce_op::sum: return dy;
    case reduce_op::mean: return dy / static_cast<double>(channels);
    case reduce_op::max:
    case reduce_op::min: return x == y ? dy / static_cast<double>(ties) : 0.0;
    case reduce_op::l1: return x > 0.0 ? dy : x < 0.0 ? -dy : 0.0;
    case reduce_op::l2: return y == 0.0 ? 0.0 : dy * x / y;
    case reduce_op::sum_square: return 2.0 * dy * x;
  }
  return 0.0;
}

template <class T>
void channel_reduce_forward(const view5<const T>& x, const view5<T>& y, const channel_reduce_params& p) {
  const auto e = extents5(x);
  if (numel5(e) == 0) return;
  const auto xs = strides5(x), ys = strides5(y);
  for_each_channel_vector(e, [&](auto n, auto d, auto h, auto w) {
    const double r = reduce_channels(p.op, e.c, [&](std::int64_t c) { return to_double(x.data()[offset5(xs, n, c, d, h, w)]); });
    y.data()[offset5(ys, n, 0, d, h, w)] = from_double<T>(r);
  });
}

template <class T>
void channel_reduce_backward(const view5<const T>& x, const view5<const T>& y, const view5<const T>& dy,
                             const view5<T>& dx, const channel_reduce_params& p) {
  const auto e = extents5(x);
  if (numel5(e) == 0) return;
  const auto xs = strides5(x), ys = strides5(y), dys = strides5(dy), dxs = strides5(dx);
  for_each_channel_vector(e, [&](auto n, auto d, auto h, auto w) {
    const double yv = to_double(y.data()[offset5(ys, n, 0, d, h, w)]);
    const double g = to_double(dy.data()[offset5(dys, n, 0, d, h, w)]);
    const auto xv = [&](std::int64_t c) { return to_double(x.data()[offset5(xs, n, c, d, h, w)]); };
    std::int64_t ties = 1;
    if (p.op == reduce_op::max || p.op == reduce_op::min) {
      ties = 0;
      for (std::int64_t c = 0; c < e.c; ++c) ties += xv(c) == yv;
    }
    for (std::int64_t c = 0; c < e.c; ++c)
      dx.data()[offset5(dxs, n, c, d, h, w)] = from_double<T>(reduce_channels_gradient(p.op, xv(c), yv, g, e.c, ties));
  });
}

}  // namespace detail

template <class T, class XF, class YF>
void channel_reduce_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const channel_reduce_params& p) {
  detail::check_element_type<T>();
  validate_channel_reduce_forward(x, y, p);
  detail::channel_reduce_forward<T>(detail::view5_of(x), detail::view5_of(y), p);
}

template <class T, class XF, class YF, class DYF, class DXF>
void channel_reduce_backward(tensor_view<const T, XF> x, tensor_view<const T, YF> y, tensor_view<const T, DYF> dy,
                             tensor_view<T, DXF> dx, const channel_reduce_params& p) {
  detail::check_element_type<T>();
  validate_channel_reduce_backward(x, y, dy, dx, p);
  detail::channel_reduce_backward<T>(detail::view5_of(x), detail::view5_of(y), detail::view5_of(dy),
                                     detail::view5_of(dx), p);
}

}  // namespace memfmt::reference
