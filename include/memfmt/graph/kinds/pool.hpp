// memfmt/graph/kinds/pool.hpp - the layer kind `pool`: max or average pooling over a window.
#pragma once

#include <string>

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::pool> : stored_attrs<memfmt::pool_params> {
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("kind", a.kind, names::pool);
    c.field("kernel", a.kernel);
    c.field("stride", a.stride);
    c.field("padding", a.padding);
    c.field("padding_end", a.padding_end);
    c.field("ceil_mode", a.ceil_mode);
    c.field("count_include_pad", a.count_include_pad);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) { return net.pool(n.name, n.inputs[0], a); }
  static void signature(const node& n, std::size_t dims, std::string& s) {
    const memfmt::pool_params& p = n.get<memfmt::pool_params>();
    s += " " + std::to_string(static_cast<int>(p.kind)) +
         detail::window_text(p.kernel, p.stride, p.padding, p.padding_end, dims) + (p.ceil_mode ? " ceil" : "") +
         (p.count_include_pad ? " include_pad" : "");
  }
  static void query(const node& n, op_query& q) { q.pool = n.get<memfmt::pool_params>().kind; }
};

}  // namespace memfmt::graph
