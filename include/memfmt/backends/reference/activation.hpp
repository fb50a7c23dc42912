// memfmt/backends/reference/activation.hpp - reference elementwise activations, forward and backward.
//
// y = f(x) and dx = dy * f'(x), computed in double and rounded once to T. The backward reads the
// forward input x. At the kinks the derivative is PyTorch's: relu' (0) = 0, relu6' is 0 at 0 and 6,
// hardsigmoid' is alpha where 0 < alpha x + beta < 1 and 0 elsewhere, hardswish' is x / 3 + 1/2 on
// [-3, 3), 0 below and 1 from 3 on, leaky_relu' (0) = alpha, elu' (0) = alpha; clip' is 1 strictly
// between the bounds and 0 on them (hardtanh's, which relu6 is, not torch.clamp's closed window).
// x, y, dy and dx may have different formats of one rank; y may be x (and dx may be x or dy) when
// they share a format: each element is read before it is written.
#pragma once

#include <algorithm>
#include <cmath>

#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

inline double sigmoid(double x) noexcept { return 1.0 / (1.0 + std::exp(-x)); }

// hardsigmoid's alpha x + beta. PyTorch's own (the default slope 1/6, offset 1/2) as PyTorch
// computes it, x / 6 + 1/2: 1/6 has no exact double, and (1/6) * -3 + 1/2 is not 0, which would move
// the kinks at -3 and 3 off the inputs they are at.
inline double hardsigmoid_argument(const activation_params& f, double x) noexcept {
  const activation_params pytorch(activation::hardsigmoid);
  return f.alpha == pytorch.alpha && f.beta == pytorch.beta ? x / 6.0 + 0.5 : f.alpha * x + f.beta;
}

// ln(1 + e^x) without overflow for large x or loss for very negative x.
inline double softplus(double x) noexcept { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }

// The tanh GELU's argument u (layer_params.hpp has the constants).
inline double gelu_tanh_argument(double x) noexcept {
  return gelu_tanh_sqrt_2_over_pi * (x + gelu_tanh_cubic * x * x * x);
}

inline double activation_value(const activation_params& f, double x) noexcept {
  const double a = f.alpha, b = f.beta;
  switch (f.kind) {
    case activation::identity: return x;
    case activation::relu: return x <= 0.0 ? 0.0 : x;  // NaN stays NaN, as in torch.relu
    case activation::relu6: return x <= 0.0 ? 0.0 : (x >= 6.0 ? 6.0 : x);
    case activation::silu: return x * sigmoid(x);
    case activation::sigmoid: return sigmoid(x);
    case activation::hardsigmoid: {
      const double t = hardsigmoid_argument(f, x);
      return t <= 0.0 ? 0.0 : (t >= 1.0 ? 1.0 : t);
    }
    case activation::hardswish: return x <= -3.0 ? 0.0 : (x >= 3.0 ? x : x * (x / 6.0 + 0.5));
    case activation::tanh: return std::tanh(x);
    case activation::leaky_relu: return x > 0.0 ? x : a * x;
    case activation::clip: return x <= a ? a : (x >= b ? b : x);
    case activation::elu: return x > 0.0 ? x : a * std::expm1(x);
    case activation::gelu: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));       // erfc keeps the tail exact
    case activation::gelu_tanh: return x * sigmoid(2.0 * gelu_tanh_argument(x));  // (1 + tanh u) / 2 = sigmoid(2u)
    case activation::softplus: return softplus(x);
    case activation::mish: return x * std::tanh(softplus(x));
  }
  return x;
}

inline double activation_derivative(const activation_params& f, double x) noexcept {
  const double a = f.alpha, b = f.beta;
  switch (f.kind) {
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
    case activation::hardsigmoid: {
      const double t = hardsigmoid_argument(f, x);
      return (t > 0.0 && t < 1.0) ? a : 0.0;
    }
    case activation::hardswish: return x < -3.0 ? 0.0 : (x < 3.0 ? x / 3.0 + 0.5 : 1.0);
    case activation::tanh: {
      const double t = std::tanh(x);
      return 1.0 - t * t;
    }
    case activation::leaky_relu: return x > 0.0 ? 1.0 : a;
    case activation::clip: return (x > a && x < b) ? 1.0 : 0.0;
    case activation::elu: return x > 0.0 ? 1.0 : a * std::exp(x);
    case activation::gelu_tanh: {
      // d/dx x s(2u) = s + x 2 s (1 - s) u', u' = sqrt(2 / pi) (1 + 3 * 0.044715 x^2).
      const double s = sigmoid(2.0 * gelu_tanh_argument(x));
      return s + 2.0 * x * s * (1.0 - s) * gelu_tanh_sqrt_2_over_pi * (1.0 + 3.0 * gelu_tanh_cubic * x * x);
    }
    case activation::gelu: {
      // Phi(x) + x phi(x), phi the standard normal density.
      constexpr double inv_sqrt_2pi = 0.39894228040143267794;
      return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * inv_sqrt_2pi * std::exp(-0.5 * x * x);
    }
    case activation::softplus: return sigmoid(x);
    case activation::mish: {
      // tanh(sp) + x sp' (1 - tanh(sp)^2), sp = softplus(x), sp' = sigmoid(x).
      const double t = std::tanh(softplus(x));
      return t + x * sigmoid(x) * (1.0 - t * t);
    }
  }
  return 1.0;
}

template <class T>
void activation_forward(const activation_params& f, const view5<const T>& x, const view5<T>& y) {
  const auto xs = strides5(x), ys = strides5(y);
  for_each5(extents5(x), [&](auto n, auto c, auto d, auto h, auto w) {
    const double v = to_double(x.data()[offset5(xs, n, c, d, h, w)]);
    y.data()[offset5(ys, n, c, d, h, w)] = from_double<T>(activation_value(f, v));
  });
}

template <class T>
void activation_backward(const activation_params& f, const view5<const T>& x, const view5<const T>& dy,
                         const view5<T>& dx) {
  const auto xs = strides5(x), dys = strides5(dy), dxs = strides5(dx);
  for_each5(extents5(x), [&](auto n, auto c, auto d, auto h, auto w) {
    const double v = to_double(x.data()[offset5(xs, n, c, d, h, w)]);
    const double g = to_double(dy.data()[offset5(dys, n, c, d, h, w)]);
    dx.data()[offset5(dxs, n, c, d, h, w)] = from_double<T>(g * activation_derivative(f, v));
  });
}

}  // namespace detail

template <class T, class XF, class YF>
void activation_forward(const activation_params& f, tensor_view<const T, XF> x, tensor_view<T, YF> y) {
  detail::check_element_type<T>();
  validate_activation_forward(f, x, y);
  detail::activation_forward<T>(f, detail::view5_of(x), detail::view5_of(y));
}

template <class T, class XF, class DYF, class DXF>
void activation_backward(const activation_params& f, tensor_view<const T, XF> x, tensor_view<const T, DYF> dy,
                         tensor_view<T, DXF> dx) {
  detail::check_element_type<T>();
  validate_activation_backward(f, x, dy, dx);
  detail::activation_backward<T>(f, detail::view5_of(x), detail::view5_of(dy), detail::view5_of(dx));
}

}  // namespace memfmt::reference
