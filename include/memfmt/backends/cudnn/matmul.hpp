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
  std::int64_t batch = 0, features = 0, outputs = 0;
  tensor_spec a, b, c;               // x, w^T, y as [1, rows, columns]
  std::optional<tensor_spec> bias;   // [1, 1, K]
  std::string key() const { return "linear|" + a.key() + "|" + b.key() + "|" + c.key() + (bias ? "|" + bias->key() : ""); }
};

template <class T, class XF, class YF>
linear_problem make_linear_problem(tensor_view<const T, XF> x, const T* w, const T* bias, tensor_view<T, YF> y) {
  const std::int64_t f = validate_linear_forward(x, w, y);
  require_layer_dtype(dtype_of_v<T>, "cuDNN linear_forward");
  const std::int64_t n = x.batch(), k = y.channels();
  // x's features must be the flatten order, contiguous per row; y's K outputs contiguous per row.
  const auto xs = x.strides();
  std::int64_t expect = 1;
  bool x_rows = true;
  for (int d = XF::rank - 1; d >= 1; --d) {
    if (x.extent(d) > 1 && xs[static_cast<std::size_t>(d)] != expect) x_rows = false;
    expect *= x.extent(d);
  }
  if (!x_rows)
    memfmt::detail::fail(errc::unsupported,
                         "cuDNN linear_forward: input " + memfmt::detail::dims_to_string(x.extents()) + " with strides " +
                             memfmt::detail::dims_to_string(xs) +
                             " does not hold its features in flatten (C, spatial) order contiguously per sample "
                             "(a channels-last input with more than one position); convert it to channels-first");
  if (y.channels() > 1 && y.strides()[1] != 1)
    memfmt::detail::fail(errc::unsupported, "cuDNN linear_forward: output " + memfmt::detail::dims_to_string(y.extents()) +
                                                " with strides " + memfmt::detail::dims_to_string(y.strides()) +
                                                " does not hold its outputs contiguously per sample");
  const dtype t = dtype_of_v<T>;
  linear_problem pr;
  pr.batch = n;
  pr.features = f;
  pr.outputs = k;
  const auto spec3 = [t](std::int64_t id, std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
                         std::int64_t col_stride, const void* p) {
    tensor_spec s;
    s.dims = {1, rows, cols};
    s.strides = {rows * cols, row_stride, col_stride};
    s.type = t;
    s.uid = id;
    s.alignment = pointer_alignment(p);
    return s;
  };
  pr.a = spec3(uid::x, n, f, x.batch() > 1 ? xs[0] : f, 1, x.data());
  pr.b = spec3(uid::w, f, k, 1, f, w);
  pr.c = spec3(uid::y, n, k, y.batch() > 1 ? y.strides()[0] : k, 1, y.data());
  if (bias) pr.bias = spec3(uid::bias, 1, k, k, 1, bias);
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
