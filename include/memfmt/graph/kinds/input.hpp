// memfmt/graph/kinds/input.hpp - the layer kind `input`: a value the caller hands over, in the format it is pinned to.
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::input> {
  using attrs = boundary_attrs;
  static constexpr int inputs = 0;
  static attrs of(const node& n) { return detail::boundary_of(n); }
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("format", a.format, names::family);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.input(n.name, n.extents, n.type, a.format);
  }
  template <class Cost>
  static auto prior(const Cost& c) {
    return c.same(0, "graph boundary", "none: graph boundary");
  }
};

}  // namespace memfmt::graph
