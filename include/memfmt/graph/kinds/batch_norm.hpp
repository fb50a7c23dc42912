// memfmt/graph/kinds/batch_norm.hpp - the layer kind `batch_norm` (torch.nn.BatchNorm2d/3d, an optional fused ReLU).
#pragma once

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::batch_norm> : stored_attrs<memfmt::batch_norm_params> {
  static constexpr int inputs = 1;
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("epsilon", a.epsilon);
    c.field("momentum", a.momentum);
    c.field("fuse_relu", a.fuse_relu);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.batch_norm(n.name, n.inputs[0], a);
  }
  static void signature(const node& n, std::size_t, std::string& s) {
    s += n.get<memfmt::batch_norm_params>().fuse_relu ? " relu" : "";
  }
  // Taken as indifferent, batch norm makes plans that keep NCHW batch norms costing more than the
  // conversions they save (bench_network --benchmark_filter=BM_network/resnet50/f32/).
  template <class Cost>
  static auto prior(const Cost& c) {
    const node& n = c.layer();
    const bool wide = n.type == memfmt::dtype::float32 || n.type == memfmt::dtype::float64;
    const double ratio = wide ? c.priors().batch_norm_channels_last_speedup_fp32
                              : c.priors().batch_norm_channels_last_speedup_low_precision;
    if (ratio == 1.0) return c.memory_bound();
    return c.by_speedup(c.memory_bound_ns(), ratio,
                        "batch norm prior, NHWC " + c.ratio_text(ratio) + "x (" + c.priors().batch_norm_benchmark + ")",
                        "prior: " + c.priors().batch_norm_benchmark);
  }
};

}  // namespace memfmt::graph
