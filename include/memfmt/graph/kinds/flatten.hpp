// memfmt/graph/kinds/flatten.hpp - the layer kind `flatten`: [N, C, spatial...] to [N, C * spatial...].
#pragma once

#include <variant>

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::flatten> : stored_attrs<std::monostate> {
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec&, attrs&) {}
  static node_id build(network& net, const node_args& n, const attrs&) { return net.flatten(n.name, n.inputs[0]); }
  static placed eager(const eager_context& e) {
    return e.contiguous("flatten reshapes into the logical (contiguous) order");
  }
  // channels_first flatten is a view. channels_last flatten is a view too, but orders the features
  // (spatial, C): correct only when every consumer is a linear whose weight columns are permuted to
  // match (F6), or when both layouts are the same bytes.
  template <class Cost>
  static auto prior(const Cost& c) {
    const node& x = c.net.at(c.layer().inputs[0]);
    bool absorbable = is_ambiguous_shape(x.extents);
    if (!absorbable) {
      absorbable = !c.net.consumers(c.id).empty();
      for (node_id r : c.net.consumers(c.id)) absorbable = absorbable && c.net.at(r).kind == layer_kind::linear;
    }
    auto costs = c.same(0,
                        absorbable ? "flatten: a view in either layout (linear weights permuted for channels_last)"
                                   : "flatten feeding a non-linear: needs channels_first element order",
                        "none: a view");
    if (!absorbable) costs.by_family[index(format_family::channels_last)].reset();
    return costs;
  }
};

}  // namespace memfmt::graph
