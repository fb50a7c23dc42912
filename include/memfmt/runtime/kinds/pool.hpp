// memfmt/runtime/kinds/pool.hpp - running the layer kind `pool`; its backward reads x (a max pool's argmax).
#pragma once

#include "layer_run.hpp"

namespace memfmt::runtime {

template <>
struct layer_run<layer_kind::pool> : unary_layer {
  static memfmt::pool_params params(const graph::network&, const graph::node& n) {
    return n.get<memfmt::pool_params>();
  }
  template <class B, class X, class Y>
  static auto forward(B& b, const memfmt::pool_params& p, X x, Y y) -> decltype(b.pool_forward(x, y, p)) {
    return b.pool_forward(x, y, p);
  }
  static constexpr saved saves(const memfmt::pool_params&) { return saved::x; }
  template <class B, class X, class Y, class DY, class DX>
  static auto backward(B& b, const memfmt::pool_params& p, X x, Y, DY dy, DX dx)
      -> decltype(b.pool_backward(x, dy, dx, p)) {
    return b.pool_backward(x, dy, dx, p);
  }
};

}  // namespace memfmt::runtime
