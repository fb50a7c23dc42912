// memfmt/graph/kinds/linear.hpp - the layer kind `linear` (torch.nn.Linear on a rank-2 value).
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::linear> : stored_attrs<linear_attrs> {
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("out_features", a.out_features);
    c.field("bias", a.bias);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.linear(n.name, n.inputs[0], a.out_features, a.bias);
  }
  template <class Cost>
  static auto prior(const Cost& c) {
    const node& n = c.layer();
    const double flops = 2.0 * static_cast<double>(n.numel()) * static_cast<double>(c.net.at(n.inputs[0]).extents[1]);
    return c.same(c.round(flops / c.flops_per_ns(n.type)), "linear (rank 2, no layout)",
                  "prior: " + c.priors().throughput_benchmark + " (FLOPs over throughput)");
  }
};

}  // namespace memfmt::graph
