// memfmt/graph/kinds/binary.hpp - the layer kind `binary`: add, sub, mul or div of two values, broadcast.
#pragma once

#include <string>

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::binary> : stored_attrs<memfmt::binary_op> {
  static constexpr enum_names<memfmt::binary_op, 4> ops{{"add", "sub", "mul", "div"}};
  static constexpr int inputs = 2;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("op", a, ops);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.binary(n.name, n.inputs[0], n.inputs[1], a);
  }
  static void signature(const node& n, std::size_t, std::string& s) {
    s += " " + std::to_string(static_cast<int>(n.get<memfmt::binary_op>()));
  }
  // TensorIterator's first decisive operand: the first input whose extents are not ambiguous (a
  // [N, C, 1, 1] gate decides nothing).
  static placed eager(const eager_context& e) {
    for (node_id i : e.layer().inputs)
      if (e.net.at(i).spatial() && !is_ambiguous_shape(e.net.at(i).extents))
        return {*e.formats[i], "follows its first decisive operand '" + e.net.at(i).name + "' (TensorIterator)"};
    return e.keeps_input();
  }
};

}  // namespace memfmt::graph
