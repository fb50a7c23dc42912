// memfmt/graph/kinds/opaque.hpp - the layer kind `opaque`: a user's layer memfmt knows nothing about, reading
// and writing declared formats.
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::opaque> {
  // The formats; the callback is the executor's and is not stored.
  struct attrs {
    format_family input_format = format_family::channels_first;
    format_family output_format = format_family::channels_first;
  };
  static constexpr int inputs = any_inputs;
  static attrs of(const node& n) {
    const auto& o = n.get<opaque_attrs>();
    return {o.input_format, o.output_format};
  }
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("input_format", a.input_format, names::family);
    c.field("output_format", a.output_format, names::family);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.opaque(n.name, n.inputs, n.extents, a.output_format, a.input_format);
  }
};

}  // namespace memfmt::graph
