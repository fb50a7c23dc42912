// memfmt/graph/kinds/conv.hpp - the layer kind `conv` (torch.nn.Conv2d/Conv3d).
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::conv> : stored_attrs<conv_attrs> {
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    detail::conv_codec(c, a);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) { return net.conv(n.name, n.inputs[0], a); }
  static void signature(const node& n, std::size_t dims, std::string& s) {
    const conv_attrs& a = n.get<conv_attrs>();
    s += " out " + std::to_string(a.out_channels) + detail::conv_text(a.kernel, a.params, dims) +
         (a.bias ? " bias" : "");
  }
  // ATen's conv takes the output format from the input or the weight, and module.to(channels_last)
  // lays out 4-D weights only (1x1 and depthwise too); Conv3d returns contiguous.
  static placed eager(const eager_context& e) {
    if (e.layer().extents.size() == 4)
      return {format_family::channels_last, "conv with a channels_last weight writes channels_last"};
    return e.contiguous("3-D conv: model.to(channels_last) leaves 5-D weights, Conv3d returns contiguous");
  }
  // Roofline for the faster format (FLOPs over throughput or bytes over bandwidth, whichever is
  // slower: depthwise is memory-bound), the slower format the prior ratio behind it.
  template <class Cost>
  static auto prior(const Cost& c) {
    const node& n = c.layer();
    const node& x = c.net.at(n.inputs[0]);
    const conv_attrs& a = n.get<conv_attrs>();
    const double volume = c.kernel_volume(a.kernel);
    const auto s = c.conv_prior(x.extents[1], a.params.groups, static_cast<std::int64_t>(volume));
    const double flops =
        2.0 * static_cast<double>(n.numel()) * static_cast<double>(x.extents[1] / a.params.groups) * volume;
    return c.by_speedup(c.roofline(flops, n, x), s.channels_last, s.basis, "prior: " + s.benchmark);
  }
};

}  // namespace memfmt::graph
