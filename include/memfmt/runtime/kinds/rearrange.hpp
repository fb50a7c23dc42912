// memfmt/runtime/kinds/rearrange.hpp - running the layer kind `rearrange`; its backward needs dy alone.
#pragma once

#include "layer_run.hpp"

namespace memfmt::runtime {

template <>
struct layer_run<layer_kind::rearrange> : unary_layer {
  static memfmt::rearrange_params params(const graph::network&, const graph::node& n) {
    return n.get<memfmt::rearrange_params>();
  }
  template <class B, class X, class Y>
  static auto forward(B& b, const memfmt::rearrange_params& p, X x, Y y) -> decltype(b.rearrange_forward(x, p, y)) {
    return b.rearrange_forward(x, p, y);
  }
  static constexpr saved saves(const memfmt::rearrange_params&) { return saved::none; }
  template <class B, class X, class Y, class DY, class DX>
  static auto backward(B& b, const memfmt::rearrange_params& p, X, Y, DY dy, DX dx)
      -> decltype(b.rearrange_backward(dy, p, dx)) {
    return b.rearrange_backward(dy, p, dx);
  }
};

}  // namespace memfmt::runtime
