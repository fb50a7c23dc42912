// memfmt/graph/kinds/concat.hpp - the layer kind `concat`: inputs joined along C or a spatial axis.
#pragma once

#include <string>

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::concat> : stored_attrs<memfmt::concat_params> {
  static constexpr int inputs = any_inputs;
  // "axis" may be left out: along C.
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    if (c.present("axis", true)) c.field("axis", a.axis, detail::axis_range);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) { return net.concat(n.name, n.inputs, a); }
  // Along C the signature stays as it was before concatenation had an axis.
  static void signature(const node& n, std::size_t, std::string& s) {
    if (const int axis = n.get<memfmt::concat_params>().axis; axis != 1) s += " axis " + std::to_string(axis);
  }
  // cat is channels_last only when every decisive input is.
  static placed eager(const eager_context& e) {
    for (node_id i : e.layer().inputs)
      if (!is_ambiguous_shape(e.net.at(i).extents) && e.formats[i] != format_family::channels_last)
        return {format_family::channels_first,
                "cat of '" + e.net.at(i).name + "' (not channels_last) returns contiguous"};
    return {format_family::channels_last, "cat of channels_last inputs stays channels_last"};
  }
};

}  // namespace memfmt::graph
