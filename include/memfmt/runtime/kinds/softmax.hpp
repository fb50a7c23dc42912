// memfmt/runtime/kinds/softmax.hpp - running the layer kind `softmax`; its backward reads y.
#pragma once

#include "layer_run.hpp"

namespace memfmt::runtime {

template <>
struct layer_run<layer_kind::softmax> : unary_layer {
  static memfmt::softmax_params params(const graph::network&, const graph::node& n) {
    return n.get<memfmt::softmax_params>();
  }
  template <class B, class X, class Y>
  static auto forward(B& b, const memfmt::softmax_params& p, X x, Y y) -> decltype(b.softmax_forward(x, y, p)) {
    return b.softmax_forward(x, y, p);
  }
  static constexpr saved saves(const memfmt::softmax_params&) { return saved::y; }
  template <class B, class X, class Y, class DY, class DX>
  static auto backward(B& b, const memfmt::softmax_params& p, X, Y y, DY dy, DX dx)
      -> decltype(b.softmax_backward(y, dy, dx, p)) {
    return b.softmax_backward(y, dy, dx, p);
  }
};

}  // namespace memfmt::runtime
