// memfmt/runtime/kinds/pad.hpp - running the layer kind `pad`; its backward needs dy alone.
#pragma once

#include "layer_run.hpp"

namespace memfmt::runtime {

template <>
struct layer_run<layer_kind::pad> : unary_layer {
  static memfmt::pad_params params(const graph::network&, const graph::node& n) { return n.get<memfmt::pad_params>(); }
  template <class B, class X, class Y>
  static auto forward(B& b, const memfmt::pad_params& p, X x, Y y) -> decltype(b.pad_forward(x, y, p)) {
    return b.pad_forward(x, y, p);
  }
  static constexpr saved saves(const memfmt::pad_params&) { return saved::none; }
  template <class B, class X, class Y, class DY, class DX>
  static auto backward(B& b, const memfmt::pad_params& p, X, Y, DY dy, DX dx) -> decltype(b.pad_backward(dy, dx, p)) {
    return b.pad_backward(dy, dx, p);
  }
};

}  // namespace memfmt::runtime
