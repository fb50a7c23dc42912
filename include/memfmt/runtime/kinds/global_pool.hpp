// memfmt/runtime/kinds/global_pool.hpp - running the layer kind `global_pool`: an average by the backend's
// global pool, a max as a pool whose window is the whole map.
#pragma once

#include <cstddef>

#include "layer_run.hpp"

namespace memfmt::runtime {

struct global_pool_call {
  bool average = true;
  memfmt::pool_params window;  // max: the whole map
};

template <>
struct layer_run<layer_kind::global_pool> : unary_layer {
  static global_pool_call params(const graph::network& net, const graph::node& n) {
    global_pool_call c;
    c.average = n.get<graph::global_pool_attrs>().kind == memfmt::pool_kind::average;
    const auto& e = net.at(n.inputs[0]).extents;
    for (std::size_t d = 2; d < e.size(); ++d) c.window.kernel[d - 2] = e[d];
    return c;
  }
  template <class B, class X, class Y>
  static auto forward(B& b, const global_pool_call& p, X x, Y y)
      -> decltype(b.global_average_pool_forward(x, y), b.pool_forward(x, y, p.window)) {
    if (p.average) return b.global_average_pool_forward(x, y);
    return b.pool_forward(x, y, p.window);
  }
  static constexpr saved saves(const global_pool_call& p) { return p.average ? saved::none : saved::x; }
  template <class B, class X, class Y, class DY, class DX>
  static auto backward(B& b, const global_pool_call& p, X x, Y, DY dy, DX dx)
      -> decltype(b.global_average_pool_backward(dy, dx), b.pool_backward(x, dy, dx, p.window)) {
    if (p.average) return b.global_average_pool_backward(dy, dx);
    return b.pool_backward(x, dy, dx, p.window);
  }
};

}  // namespace memfmt::runtime
