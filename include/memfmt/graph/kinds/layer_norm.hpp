// memfmt/graph/kinds/layer_norm.hpp - the layer kind `layer_norm`: over the channels at each position
// (ConvNeXt's LayerNorm2d).
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::layer_norm> : stored_attrs<layer_norm_attrs> {
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("epsilon", a.params.epsilon);
    c.field("affine", a.affine);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.layer_norm(n.name, n.inputs[0], a.params.epsilon, a.affine);
  }
  static void signature(const node& n, std::size_t, std::string& s) {
    s += n.get<layer_norm_attrs>().affine ? " affine" : "";
  }
  // F.layer_norm of a channels-last permute, permuted back: the norm writes [N, H, W, C] contiguous.
  static placed eager(const eager_context&) {
    return {format_family::channels_last, "layer_norm of a channels-last permute, permuted back, is channels_last"};
  }
};

}  // namespace memfmt::graph
