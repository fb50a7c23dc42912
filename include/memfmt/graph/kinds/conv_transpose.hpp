// memfmt/graph/kinds/conv_transpose.hpp - the layer kind `conv_transpose` (torch.nn.ConvTranspose2d/3d).
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::conv_transpose> : stored_attrs<conv_transpose_attrs> {
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    detail::conv_codec(c, a);
    c.field("output_padding", a.output_padding);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.conv_transpose(n.name, n.inputs[0], a);
  }
  static void signature(const node& n, std::size_t dims, std::string& s) {
    const conv_transpose_attrs& a = n.get<conv_transpose_attrs>();
    s += " out " + std::to_string(a.out_channels) + detail::conv_text(a.kernel, a.params, dims) + " output_padding " +
         detail::spatial_text(a.output_padding, dims) + (a.bias ? " bias" : "");
  }
  static placed eager(const eager_context& e) {
    return e.contiguous("ConvTranspose has no channels_last kernel: returns contiguous");
  }
  // The backward-data pass of a conv: its FLOPs are the forward conv's, counted from the input.
  template <class Cost>
  static auto prior(const Cost& c) {
    const node& n = c.layer();
    const node& x = c.net.at(n.inputs[0]);
    const conv_transpose_attrs& a = n.get<conv_transpose_attrs>();
    const double flops = 2.0 * static_cast<double>(x.numel()) * static_cast<double>(a.out_channels / a.params.groups) *
                         c.kernel_volume(a.kernel);
    return c.by_speedup(c.roofline(flops, n, x), 1.0, "conv_transpose: no measurement, indifferent",
                        "prior: none (no measurement; FLOPs over fp32_flops_per_ns)");
  }
};

}  // namespace memfmt::graph
