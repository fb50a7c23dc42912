// memfmt/graph/kinds/instance_norm.hpp - the layer kind `instance_norm` (torch.nn.InstanceNorm2d/3d: a group norm
// with one group per channel).
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::instance_norm> : stored_attrs<norm_attrs> {
  static constexpr int inputs = 1;
  // "groups" is written (it is C) and not needed back: the builder sets it.
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    if (c.present("groups", true)) c.field("groups", a.params.groups);
    c.field("epsilon", a.params.epsilon);
    c.field("affine", a.affine);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.instance_norm(n.name, n.inputs[0], a.params.epsilon, a.affine);
  }
  static void signature(const node& n, std::size_t, std::string& s) { detail::norm_signature(n, s); }
  static placed eager(const eager_context& e) {
    return e.contiguous("InstanceNorm has no channels_last kernel: returns contiguous");
  }
};

}  // namespace memfmt::graph
