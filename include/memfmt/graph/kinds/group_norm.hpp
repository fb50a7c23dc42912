// memfmt/graph/kinds/group_norm.hpp - the layer kind `group_norm` (torch.nn.GroupNorm).
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::group_norm> : stored_attrs<norm_attrs> {
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("groups", a.params.groups);
    c.field("epsilon", a.params.epsilon);
    c.field("affine", a.affine);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.group_norm(n.name, n.inputs[0], a.params.groups, a.params.epsilon, a.affine);
  }
  static void signature(const node& n, std::size_t, std::string& s) { detail::norm_signature(n, s); }
};

}  // namespace memfmt::graph
