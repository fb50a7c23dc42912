// memfmt/graph/kinds/output.hpp - the layer kind `output`: a value handed back, in the format it is pinned to.
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::output> : boundary_kind {
  static constexpr int inputs = 1;
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.output(n.name, n.inputs[0], a.format);
  }
};

}  // namespace memfmt::graph
