// memfmt/graph/kinds/lrn.hpp - the layer kind `lrn`: local response normalisation across channels
// (torch.nn.LocalResponseNorm, ONNX LRN; layer_params.hpp's lrn_params has the formula).
#pragma once

#include <string>

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::lrn> : stored_attrs<memfmt::lrn_params> {
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("size", a.size);
    c.field("before", a.before);
    c.field("alpha", a.alpha);
    c.field("beta", a.beta);
    c.field("bias", a.bias);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) { return net.lrn(n.name, n.inputs[0], a); }
  // The window decides how many channels each output reads; alpha, beta and bias do not change the time.
  static void signature(const node& n, std::size_t, std::string& s) {
    const auto& p = n.get<memfmt::lrn_params>();
    s += " size " + std::to_string(p.size) + " before " + std::to_string(p.before);
  }
};

}  // namespace memfmt::graph
