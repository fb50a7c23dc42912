// memfmt/runtime/kinds/activation.hpp - running the layer kind `activation`: y = f(x); dx from x and dy.
#pragma once

#include "layer_run.hpp"

namespace memfmt::runtime {

template <>
struct layer_run<layer_kind::activation> : unary_layer {
  static memfmt::activation_params params(const graph::network&, const graph::node& n) {
    return n.get<memfmt::activation_params>();
  }
  template <class B, class X, class Y>
  static auto forward(B& b, const memfmt::activation_params& p, X x, Y y) -> decltype(b.activation_forward(p, x, y)) {
    return b.activation_forward(p, x, y);
  }
  static constexpr saved saves(const memfmt::activation_params&) { return saved::x; }
  template <class B, class X, class Y, class DY, class DX>
  static auto backward(B& b, const memfmt::activation_params& p, X x, Y, DY dy, DX dx)
      -> decltype(b.activation_backward(p, x, dy, dx)) {
    return b.activation_backward(p, x, dy, dx);
  }
};

}  // namespace memfmt::runtime
