// memfmt/backends/reference/linear.hpp - reference fully connected layer (nn.Linear after a flatten).
//
// x [N, C, spatial...] is read as N rows of F = C * spatial features in PyTorch's flatten order
// (c, then d, h, w), whatever its format: a channels-last tensor needs no conversion and the
// weight keeps PyTorch's layout. y is [N, K, 1, 1(, 1)] (any format: all the same bytes).
//   y[n, k] = bias[k] + sum_f x[n, f] w[k, f]       w: K x F row-major, bias: K values or null
//   dx[n, f] = sum_k dy[n, k] w[k, f],  dw[k, f] = sum_n dy[n, k] x[n, f],  dbias[k] = sum_n dy[n, k]
// Sums in double, rounded once to T. Inputs and outputs must not overlap.
#pragma once

#include <cstdint>
#include <vector>

#include "../../tensor/tensor_view.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

// The storage offset of every feature f of sample 0, in flatten order (add n * stride(N)).
template <class T>
std::vector<std::int64_t> feature_offsets(const view5<T>& v) {
  const auto e = extents5(v);
  const auto s = strides5(v);
  std::vector<std::int64_t> off;
  off.reserve(static_cast<std::size_t>(e.c * e.d * e.h * e.w));
  for (std::int64_t c = 0; c < e.c; ++c)
    for (std::int64_t d = 0; d < e.d; ++d)
      for (std::int64_t h = 0; h < e.h; ++h)
        for (std::int64_t w = 0; w < e.w; ++w) off.push_back(offset5(s, 0, c, d, h, w));
  return off;
}

template <class T>
void linear_forward(const view5<const T>& x, const T* w, const T* bias, const view5<T>& y, std::int64_t features) {
  const auto xoff = feature_offsets(x);
  for (std::int64_t n = 0; n < x.batch(); ++n)
    for (std::int64_t k = 0; k < y.channels(); ++k) {
      double acc = bias ? to_double(bias[k]) : 0.0;
      for (std::int64_t f = 0; f < features; ++f)
        acc = mul_add(to_double(x.data()[n * x.str.n + xoff[static_cast<std::size_t>(f)]]),
                      to_double(w[k * features + f]), acc);
      y.data()[n * y.str.n + k * y.str.c] = from_double<T>(acc);
    }
}

template <class T>
void linear_backward_data(const view5<const T>& dy, const T* w, const view5<T>& dx, std::int64_t features) {
  const auto xoff = feature_offsets(dx);
  for (std::int64_t n = 0; n < dx.batch(); ++n)
    for (std::int64_t f = 0; f < features; ++f) {
      double acc = 0.0;
      for (std::int64_t k = 0; k < dy.channels(); ++k)
        acc = mul_add(to_double(dy.data()[n * dy.str.n + k * dy.str.c]), to_double(w[k * features + f]), acc);
      dx.data()[n * dx.str.n + xoff[static_cast<std::size_t>(f)]] = from_double<T>(acc);
    }
}

template <class T>
void linear_backward_weights(const view5<const T>& x, const view5<const T>& dy, T* dw, T* dbias,
                             std::int64_t features) {
  const auto xoff = feature_offsets(x);
  for (std::int64_t k = 0; k < dy.channels(); ++k) {
    for (std::int64_t f = 0; f < features; ++f) {
      double acc = 0.0;
      for (std::int64_t n = 0; n < x.batch(); ++n)
        acc = mul_add(to_double(dy.data()[n * dy.str.n + k * dy.str.c]),
                      to_double(x.data()[n * x.str.n + xoff[static_cast<std::size_t>(f)]]), acc);
      dw[k * features + f] = from_double<T>(acc);
    }
    if (dbias) {
      double acc = 0.0;
      for (std::int64_t n = 0; n < x.batch(); ++n) acc += to_double(dy.data()[n * dy.str.n + k * dy.str.c]);
      dbias[k] = from_double<T>(acc);
    }
  }
}

}  // namespace detail

template <class T, class XF, class YF>
void linear_forward(tensor_view<const T, XF> x, const T* w, const T* bias, tensor_view<T, YF> y) {
  detail::check_element_type<T>();
  const std::int64_t features = validate_linear_forward(x, w, y);
  detail::linear_forward<T>(detail::view5_of(x), w, bias, detail::view5_of(y), features);
}

template <class T, class DYF, class DXF>
void linear_backward_data(tensor_view<const T, DYF> dy, const T* w, tensor_view<T, DXF> dx) {
  detail::check_element_type<T>();
  const std::int64_t features = validate_linear_backward_data(dy, w, dx);
  detail::linear_backward_data<T>(detail::view5_of(dy), w, detail::view5_of(dx), features);
}

// dw: K x F row-major; dbias: K values or null.
template <class T, class XF, class DYF>
void linear_backward_weights(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, T* dw, T* dbias) {
  detail::check_element_type<T>();
  const std::int64_t features = validate_linear_backward_weights(x, dy, dw);
  detail::linear_backward_weights<T>(detail::view5_of(x), detail::view5_of(dy), dw, dbias, features);
}

}  // namespace memfmt::reference
