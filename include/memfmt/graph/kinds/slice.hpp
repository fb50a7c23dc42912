// memfmt/graph/kinds/slice.hpp - the layer kind `slice`: a strided range of C or of a spatial axis.
#pragma once

#include <string>

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::slice> : stored_attrs<memfmt::slice_params> {
  static constexpr int inputs = 1;
  // "axis" and "step" may be left out: a channel slice.
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("begin", a.begin);
    c.field("end", a.end);
    if (c.present("axis", true)) c.field("axis", a.axis, detail::axis_range);
    if (c.present("step", true)) c.field("step", a.step);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) { return net.slice(n.name, n.inputs[0], a); }
  static void signature(const node& n, std::size_t, std::string& s) {
    const auto& p = n.get<memfmt::slice_params>();
    s += " axis " + std::to_string(p.axis) + " begin " + std::to_string(p.begin) + " step " + std::to_string(p.step);
  }
};

}  // namespace memfmt::graph
