// memfmt/graph/kinds/pad.hpp - the layer kind `pad`: constant, reflect or replicate padding of the spatial dims.
#pragma once

#include <string>

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::pad> : stored_attrs<memfmt::pad_params> {
  static constexpr enum_names<memfmt::pad_mode, 3> modes{{"constant", "reflect", "replicate"}};
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("mode", a.mode, modes);
    c.field("begin", a.begin);
    c.field("end", a.end);
    c.field("value", a.value);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) { return net.pad(n.name, n.inputs[0], a); }
  // The extents give each dim's total padding, not how it splits between the sides, and the split
  // moves which rows a reflect or replicate copy reads.
  static void signature(const node& n, std::size_t dims, std::string& s) {
    const memfmt::pad_params& p = n.get<memfmt::pad_params>();
    s += " mode " + std::to_string(static_cast<int>(p.mode)) + " sides " + detail::spatial_text(p.begin, dims) + "/" +
         detail::spatial_text(p.end, dims);
  }
  static placed eager(const eager_context& e) {
    if (e.layer().get<memfmt::pad_params>().mode != memfmt::pad_mode::constant)
      return e.contiguous("reflection / replication padding returns contiguous");
    return e.keeps_input();
  }
  static void query(const node& n, op_query& q) { q.padding = n.get<memfmt::pad_params>().mode; }
};

}  // namespace memfmt::graph
