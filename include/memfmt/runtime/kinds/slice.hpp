// memfmt/runtime/kinds/slice.hpp - running the layer kind `slice`; its backward needs dy alone.
#pragma once

#include "layer_run.hpp"

namespace memfmt::runtime {

template <>
struct layer_run<layer_kind::slice> : unary_layer {
  static memfmt::slice_params params(const graph::network&, const graph::node& n) {
    return n.get<memfmt::slice_params>();
  }
  template <class B, class X, class Y>
  static auto forward(B& b, const memfmt::slice_params& p, X x, Y y) -> decltype(b.slice_forward(x, p, y)) {
    return b.slice_forward(x, p, y);
  }
  static constexpr saved saves(const memfmt::slice_params&) { return saved::none; }
  template <class B, class X, class Y, class DY, class DX>
  static auto backward(B& b, const memfmt::slice_params& p, X, Y, DY dy, DX dx)
      -> decltype(b.slice_backward(dy, p, dx)) {
    return b.slice_backward(dy, p, dx);
  }
};

}  // namespace memfmt::runtime
