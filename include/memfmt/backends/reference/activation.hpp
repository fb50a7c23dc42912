// memfmt/backends/reference/activation.hpp - reference elementwise activations, forward and backward.
//
// y = f(x) and dx = dy * f'(x), computed in double and rounded once to T. The backward reads the
// forward input x. At the kinks the derivative is PyTorch's: relu' (0) = 0, relu6' is 0 at 0 and 6,
// hardsigmoid' is 1/6 strictly inside (-3, 3) and 0 elsewhere, hardswish' is x / 3 + 1/2 on
// [-3, 3), 0 below and 1 from 3 on. x, y, dy and dx may have different formats of one rank; y may be
// x (and dx may be x or dy) when they share a format: each element is read before it is written.
#pragma once

#include <cmath>

#include "../../tensor/tensor_view.hpp"
#include "../layer_params.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

inline double sigmoid(double x) noexcept { return 1.0 / (1.0 + std::exp(-x)); }

inline double activation_value(activation kind, double x) noexcept {
  switch (kind) {
    case activation::identity: return x;
    case activation::relu: return x <= 0.0 ? 0.0 : x;  // NaN stays NaN, as in torch.relu
    case activation::relu6: return x <= 0.0 ? 0.0 : (x >= 6.0 ? 6.0 : x);
    case activation::silu: return x * sigmoid(x);
    case activation::sigmoid: return sigmoid(x);
    case activation::hardsigmoid: return x <= -3.0 ? 0.0 : (x >= 3.0 ? 1.0 : x / 6.0 + 0.5);
    case activation::hardswish: return x <= -3.0 ? 0.0 : (x >= 3.0 ? x : x * (x / 6.0 + 0.5));
    case activation::tanh: return std::tanh(x);
  }
  return x;
}

inline double activation_derivative(activation kind, double x) noexcept {
  switch (kind) {
    case activation::identity: return 1.0;
    case activation::relu: return x <= 0.0 ? 0.0 : 1.0;
    case activation::relu6: return (x <= 0.0 || x >= 6.0) ? 0.0 : 1.0;
    case activation::silu: {
      const double s = sigmoid(x);
      return s * (1.0 + x * (1.0 - s));
    }
    case activation::sigmoid: {
      const double s = sigmoid(x);
      return s * (1.0 - s);
    }
    case activation::hardsigmoid: return (x > -3.0 && x < 3.0) ? 1.0 / 6.0 : 0.0;
    case activation::hardswish: return x < -3.0 ? 0.0 : (x < 3.0 ? x / 3.0 + 0.5 : 1.0);
    case activation::tanh: {
      const double t = std::tanh(x);
      return 1.0 - t * t;
    }
  }
  return 1.0;
}

template <class T>
void activation_forward(activation kind, const view5<const T>& x, const view5<T>& y) {
  const auto xs = strides5(x), ys = strides5(y);
  for_each5(extents5(x), [&](auto n, auto c, auto d, auto h, auto w) {
    const double v = to_double(x.data()[offset5(xs, n, c, d, h, w)]);
    y.data()[offset5(ys, n, c, d, h, w)] = from_double<T>(activation_value(kind, v));
  });
}

template <class T>
void activation_backward(activation kind, const view5<const T>& x, const view5<const T>& dy, const view5<T>& dx) {
  const auto xs = strides5(x), dys = strides5(dy), dxs = strides5(dx);
  for_each5(extents5(x), [&](auto n, auto c, auto d, auto h, auto w) {
    const double v = to_double(x.data()[offset5(xs, n, c, d, h, w)]);
    const double g = to_double(dy.data()[offset5(dys, n, c, d, h, w)]);
    dx.data()[offset5(dxs, n, c, d, h, w)] = from_double<T>(g * activation_derivative(kind, v));
  });
}

}  // namespace detail

template <class T, class XF, class YF>
void activation_forward(activation kind, tensor_view<const T, XF> x, tensor_view<T, YF> y) {
  detail::check_element_type<T>();
  validate_activation_forward(x, y);
  detail::activation_forward<T>(kind, detail::view5_of(x), detail::view5_of(y));
}

template <class T, class XF, class DYF, class DXF>
void activation_backward(activation kind, tensor_view<const T, XF> x, tensor_view<const T, DYF> dy,
                         tensor_view<T, DXF> dx) {
  detail::check_element_type<T>();
  validate_activation_backward(x, dy, dx);
  detail::activation_backward<T>(kind, detail::view5_of(x), detail::view5_of(dy), detail::view5_of(dx));
}

}  // namespace memfmt::reference
