// memfmt/runtime/kinds/lrn.hpp - running the layer kind `lrn`; its backward reads x.
#pragma once

#include "layer_run.hpp"

namespace memfmt::runtime {

template <>
struct layer_run<layer_kind::lrn> : unary_layer {
  static memfmt::lrn_params params(const graph::network&, const graph::node& n) { return n.get<memfmt::lrn_params>(); }
  template <class B, class X, class Y>
  static auto forward(B& b, const memfmt::lrn_params& p, X x, Y y) -> decltype(b.lrn_forward(x, y, p)) {
    return b.lrn_forward(x, y, p);
  }
  static constexpr saved saves(const memfmt::lrn_params&) { return saved::x; }
  template <class B, class X, class Y, class DY, class DX>
  static auto backward(B& b, const memfmt::lrn_params& p, X x, Y, DY dy, DX dx)
      -> decltype(b.lrn_backward(x, dy, dx, p)) {
    return b.lrn_backward(x, dy, dx, p);
  }
};

}  // namespace memfmt::runtime
