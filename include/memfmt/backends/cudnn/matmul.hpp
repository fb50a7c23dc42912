// memfmt/backends/cudnn/matmul.hpp - a linear layer as a cuDNN matmul graph.
//
// y[n, k] = sum_f x[n, f] * w[k, f] + bias[k]: x read as A [1, N, F] (N rows of the features in
// PyTorch's flatten order), the row-major weight [K, F] as its transpose B [1, F, K] (strides
// [K * F, 1, F], no copy), the product into a float intermediate, then + bias [1, 1, K]. The
// features of a channels-last x with more than one position are in (spatial, C) order, which no
// stride of A describes: that case is refused (the reference backend reads it by its strides).
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <optional>
#include <string>

#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../validate.hpp"
#include "graph.hpp"
#include "graphs.hpp"
#include "tensor_desc.hpp"

namespace memfmt::cudnn {

struct linear_problem {
  const char* name = "linear";  // the cache key's prefix: linear, linear_dgrad, linear_wgrad
  std::int64_t batch = 0, features = 0, outputs = 0;
  tensor_spec a, b, c;              // c = a x b, each [1, rows, columns] (forward: x, w^T, y)
  std::optional<tensor_spec> bias;  // [1, 1, K]
  std::string key() const {
    return std::string(name) + "|" + a.key() + "|" + b.key() + "|" + c.key() + (bias ? "|" + bias->key() : "");
  }
};

namespace detail {

// A problem over `batch` samples, `features` inputs and `outputs` outputs, its matrices still to set
// (each direction lays x, w and y out as a, b and c its own way).
inline linear_problem sized_linear_problem(const char* name, std::int64_t batch, std::int64_t features,
                                           std::int64_t outputs) {
  linear_problem pr;
  pr.name = name;
  pr.batch = batch;
  pr.features = features;
  pr.outputs = outputs;
  return pr;
}

// A matrix [1, rows, cols] with the given row and column strides.
inline tensor_spec matrix_spec(dtype t, std::int64_t id, std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
                               std::int64_t col_stride, const void* p) {
  tensor_spec s;
  s.dims = {1, rows, cols};
  s.strides = {rows * cols, row_stride, col_stride};
  s.type = t;
  s.uid = id;
  s.alignment = pointer_alignment(p);
  return s;
}

// The stride between samples of an activation whose features are in flatten (C, spatial) order,
// contiguous per sample; unsupported otherwise (a channels-last tensor with several positions).
template <class T, class F>
std::int64_t flatten_row_stride(const tensor_view<T, F>& v, std::int64_t features, const std::string& what) {
  const auto st = v.strides();
  std::int64_t expect = 1;
  for (int d = F::rank - 1; d >= 1; --d) {
    if (v.extent(d) > 1 && st[static_cast<std::size_t>(d)] != expect)
      memfmt::detail::fail(errc::unsupported,
                           what + " " + memfmt::detail::dims_to_string(v.extents()) + " with strides " +
                               memfmt::detail::dims_to_string(st) +
                               " does not hold its features in flatten (C, spatial) order contiguously per sample "
                               "(a channels-last input with more than one position); convert it to channels-first");
    expect *= v.extent(d);
  }
  return v.extent(0) > 1 ? st[0] : features;
}

// The stride between samples of the [N, K, 1, ...] outputs (or their gradient), K contiguous.
template <class T, class F>
std::int64_t output_row_stride(const tensor_view<T, F>& v, const std::string& what) {
  if (v.channels() > 1 && v.strides()[1] != 1)
    memfmt::detail::fail(errc::unsupported, what + " " + memfmt::detail::dims_to_string(v.extents()) +
                                                " with strides " + memfmt::detail::dims_to_string(v.strides()) +
                                                " does not hold its outputs contiguously per sample");
  return v.extent(0) > 1 ? v.strides()[0] : v.channels();
}

}  // namespace detail

template <class T, class XF, class YF>
linear_problem make_linear_problem(tensor_view<const T, XF> x, const T* w, const T* bias, tensor_view<T, YF> y) {
  const std::int64_t f = validate_linear_forward(x, w, y);
  require_layer_dtype(dtype_of_v<T>, "cuDNN linear_forward");
  const std::int64_t n = x.batch(), k = y.channels();
  const std::int64_t x_row = detail::flatten_row_stride(x, f, "cuDNN linear_forward: input");
  const std::int64_t y_row = detail::output_row_stride(y, "cuDNN linear_forward: output");
  const dtype t = dtype_of_v<T>;
  linear_problem pr = detail::sized_linear_problem("linear", n, f, k);
  pr.a = detail::matrix_spec(t, uid::x, n, f, x_row, 1, x.data());
  pr.b = detail::matrix_spec(t, uid::w, f, k, 1, f, w);
  pr.c = detail::matrix_spec(t, uid::y, n, k, y_row, 1, y.data());
  if (bias) pr.bias = detail::matrix_spec(t, uid::bias, 1, k, k, 1, bias);
  return pr;
}

inline graph_builder linear_graph(const linear_problem& pr) {
  graph_builder g;
  if (!pr.bias) {
    g.matmul(pr.a, pr.b, pr.c, CUDNN_DATA_FLOAT);
    return g;
  }
  tensor_spec product = virtual_like(pr.c, dtype::float32, uid::virtual_base);
  product.strides = {pr.batch * pr.outputs, pr.outputs, 1};
  g.matmul(pr.a, pr.b, product, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_ADD, product, &*pr.bias, pr.c, CUDNN_DATA_FLOAT);
  return g;
}

}  // namespace memfmt::cudnn
