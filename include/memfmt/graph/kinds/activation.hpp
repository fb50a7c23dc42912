// memfmt/graph/kinds/activation.hpp - the layer kind `activation`: a pointwise function (ReLU, GELU, clip ...).
#pragma once

#include <cmath>
#include <string>

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::activation> : stored_attrs<memfmt::activation_params> {
  static constexpr enum_names<memfmt::activation, memfmt::activation_count> functions{memfmt::activation_names};
  static constexpr int inputs = 1;
  // alpha and beta for the functions that have them; an infinite clip bound (JSON has no infinity)
  // is left out and reads back as the function's default.
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    memfmt::activation f = a.kind;
    c.field("function", f, functions);
    if (c.reading()) a = memfmt::activation_params(f);
    if (c.present("alpha", memfmt::has_parameters(a.kind) && std::isfinite(a.alpha))) c.field("alpha", a.alpha);
    if (c.present("beta", memfmt::has_parameters(a.kind) && std::isfinite(a.beta))) c.field("beta", a.beta);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.activation(n.name, n.inputs[0], a);
  }
  // The function's number, then its parameters where it has any (keys of the others unchanged).
  static void signature(const node& n, std::size_t, std::string& s) {
    const memfmt::activation_params& f = n.get<memfmt::activation_params>();
    s += " " + std::to_string(static_cast<int>(f.kind));
    if (memfmt::has_parameters(f.kind)) s += " " + memfmt::to_string(f);
  }
  static void query(const node& n, op_query& q) { q.function = n.get<memfmt::activation_params>(); }
};

}  // namespace memfmt::graph
