// memfmt/graph/kinds/input.hpp - the layer kind `input`: a value the caller hands over, in the format it is pinned to.
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::input> : boundary_kind {
  static constexpr int inputs = 0;
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.input(n.name, n.extents, n.type, a.format);
  }
};

}  // namespace memfmt::graph
