// memfmt/runtime/kinds/reduce.hpp - running the layer kind `reduce`; its backward reads x and y (a max's
// argmax).
#pragma once

#include "layer_run.hpp"

namespace memfmt::runtime {

template <>
struct layer_run<layer_kind::reduce> : unary_layer {
  static memfmt::reduce_params params(const graph::network&, const graph::node& n) {
    return n.get<memfmt::reduce_params>();
  }
  template <class B, class X, class Y>
  static auto forward(B& b, const memfmt::reduce_params& p, X x, Y y) -> decltype(b.reduce_forward(x, y, p)) {
    return b.reduce_forward(x, y, p);
  }
  static constexpr saved saves(const memfmt::reduce_params&) { return saved::x_and_y; }
  template <class B, class X, class Y, class DY, class DX>
  static auto backward(B& b, const memfmt::reduce_params& p, X x, Y y, DY dy, DX dx)
      -> decltype(b.reduce_backward(x, y, dy, dx, p)) {
    return b.reduce_backward(x, y, dy, dx, p);
  }
};

}  // namespace memfmt::runtime
