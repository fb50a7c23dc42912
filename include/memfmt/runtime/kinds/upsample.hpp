// memfmt/runtime/kinds/upsample.hpp - running the layer kind `upsample`; its backward needs dy alone.
#pragma once

#include "layer_run.hpp"

namespace memfmt::runtime {

template <>
struct layer_run<layer_kind::upsample> : unary_layer {
  static memfmt::upsample_params params(const graph::network&, const graph::node& n) {
    return n.get<memfmt::upsample_params>();
  }
  template <class B, class X, class Y>
  static auto forward(B& b, const memfmt::upsample_params& p, X x, Y y) -> decltype(b.upsample_forward(x, y, p)) {
    return b.upsample_forward(x, y, p);
  }
  static constexpr saved saves(const memfmt::upsample_params&) { return saved::none; }
  template <class B, class X, class Y, class DY, class DX>
  static auto backward(B& b, const memfmt::upsample_params& p, X, Y, DY dy, DX dx)
      -> decltype(b.upsample_backward(dy, dx, p)) {
    return b.upsample_backward(dy, dx, p);
  }
};

}  // namespace memfmt::runtime
