// memfmt/graph/kinds/constant.hpp - the layer kind `constant`: a tensor the network holds (a learned map, an
// exported model's normalisation).
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::constant> : stored_attrs<constant_attrs> {
  static constexpr int inputs = 0;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("trainable", a.trainable);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.constant(n.name, n.extents, n.type, a.trainable);
  }
  static placed eager(const eager_context& e) {
    if (e.layer().extents.size() == 4)
      return {format_family::channels_last, "model.to(channels_last) lays 4-D buffers out channels_last"};
    return e.contiguous("model.to(channels_last) leaves buffers of other ranks contiguous");
  }
  template <class Cost>
  static auto prior(const Cost& c) {
    return c.same(0, "constant: laid out once, when the network is built", "none: a constant");
  }
};

}  // namespace memfmt::graph
