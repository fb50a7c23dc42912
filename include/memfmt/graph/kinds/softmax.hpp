// memfmt/graph/kinds/softmax.hpp - the layer kind `softmax`: softmax or log-softmax over C.
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::softmax> : stored_attrs<memfmt::softmax_params> {
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("log", a.log);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) { return net.softmax(n.name, n.inputs[0], a); }
  static void signature(const node& n, std::size_t, std::string& s) {
    s += n.get<memfmt::softmax_params>().log ? " log" : "";
  }
  static placed eager(const eager_context& e) { return e.contiguous("softmax over channels returns contiguous"); }
};

}  // namespace memfmt::graph
