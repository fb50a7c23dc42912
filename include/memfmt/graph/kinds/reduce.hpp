// memfmt/graph/kinds/reduce.hpp - the layer kind `reduce`: mean, sum, max ... over C and spatial axes, kept as
// size 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::reduce> {
  static constexpr enum_names<memfmt::reduce_op, memfmt::reduce_op_count> ops{memfmt::reduce_op_names};
  // The axes as a list; "axes" may be left out: a reduction over C.
  struct attrs {
    memfmt::reduce_op op = memfmt::reduce_op::mean;
    std::optional<std::vector<std::int64_t>> axes;
  };
  static constexpr int inputs = 1;
  static attrs of(const node& n) {
    const auto& p = n.get<memfmt::reduce_params>();
    std::vector<std::int64_t> axes;
    for (int d = 1; d < 32; ++d)
      if (p.axes & memfmt::axis_bit(d)) axes.push_back(d);
    return {p.op, axes};
  }
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("op", a.op, ops);
    if (!c.present("axes", true)) return;
    if (!a.axes) a.axes.emplace();
    c.field("axes", *a.axes, int_range{1, 4, "C (1) or spatial axes (2 to 4)"});
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    memfmt::reduce_params p;
    p.op = a.op;
    if (a.axes) {
      p.axes = 0;
      for (const std::int64_t axis : *a.axes) p.axes |= memfmt::axis_bit(static_cast<int>(axis));
    }
    return net.reduce(n.name, n.inputs[0], p);
  }
  static void signature(const node& n, std::size_t, std::string& s) {
    const auto& p = n.get<memfmt::reduce_params>();
    s += " " + std::string(memfmt::to_string(p.op)) + " axes " + memfmt::axes_to_string(p.axes);
  }
  static placed eager(const eager_context& e) {
    return e.contiguous("reductions (mean, sum, amax...) return contiguous");
  }
};

}  // namespace memfmt::graph
