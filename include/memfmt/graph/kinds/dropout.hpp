// memfmt/graph/kinds/dropout.hpp - the layer kind `dropout`: identity in inference, p kept for training.
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::dropout> : stored_attrs<dropout_attrs> {
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("p", a.p);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.dropout(n.name, n.inputs[0], a.p);
  }
};

}  // namespace memfmt::graph
