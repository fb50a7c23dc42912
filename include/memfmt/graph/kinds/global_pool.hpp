// memfmt/graph/kinds/global_pool.hpp - the layer kind `global_pool`: max or average over all spatial positions.
#pragma once

#include <string>

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::global_pool> : stored_attrs<global_pool_attrs> {
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("kind", a.kind, names::pool);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.global_pool(n.name, n.inputs[0], a.kind);
  }
  static void signature(const node& n, std::size_t, std::string& s) {
    s += " " + std::to_string(static_cast<int>(n.get<global_pool_attrs>().kind));
  }
  static void query(const node& n, op_query& q) { q.pool = n.get<global_pool_attrs>().kind; }
};

}  // namespace memfmt::graph
