// memfmt/graph/cost_model.hpp - what each layer costs in each format, and what a conversion costs.
//
// Style of oneDNN and cudnn-frontend: compute-heavy layers (conv) choose the format, memory-bound
// layers cost the same in both and so inherit their producer's format (solve.hpp's second
// criterion). Costs are integer nanoseconds, so that the min-cut optimum is exact and its ties are
// decidable.
// Every default is a prior that names the benchmark case behind it. A timing cache
// (timing_cache.hpp, filled by calibrate) replaces the priors of the layers and conversions it
// measured; override_node() and override_conversion() replace any cost of one node; a support
// query (the backend's capability) marks the formats a layer cannot run in.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "../dtype.hpp"
#include "../detail/checked.hpp"
#include "../error.hpp"
#include "../tensor/relabel.hpp"
#include "network.hpp"
#include "timing_cache.hpp"

namespace memfmt::graph {

// "1.234 ms", "56 ns": how reports print a cost.
inline std::string cost_string(cost_t ns) {
  const char* unit = "ns";
  double v = static_cast<double>(ns);
  if (std::llabs(ns) >= 1'000'000) unit = "ms", v /= 1e6;
  else if (std::llabs(ns) >= 1'000) unit = "us", v /= 1e3;
  char buf[48];
  std::snprintf(buf, sizeof buf, unit[0] == 'n' ? "%.0f %s" : "%.3f %s", v, unit);
  return buf;
}

// A layer's cost in each family (by index(f)); nullopt: the layer cannot run in it.
struct format_costs {
  std::array<std::optional<cost_t>, 2> by_family;
  std::string basis;  // which prior, measurement or override produced the numbers
  // Where the numbers come from, for explain: "measured", "prior: <benchmark case>", "user override"
  // or "none: <why>" for layers that cost nothing.
  std::string source;

  bool supports(format_family f) const noexcept { return by_family[index(f)].has_value(); }
  // The strictly cheaper supported family; nullopt when the layer is indifferent.
  std::optional<format_family> preferred() const noexcept {
    const auto& [cf, cl] = by_family;
    if (cf && (!cl || *cf < *cl)) return format_family::channels_first;
    if (cl && (!cf || *cl < *cf)) return format_family::channels_last;
    return std::nullopt;
  }
};

// NHWC/NCHW speed of one conv shape class: the fp32 column, the 16-bit and int8 column, and the
// benchmark case that measured them.
struct conv_class_prior {
  double fp32 = 1.0;
  double low_precision = 1.0;
  std::string benchmark;
};

// The priors of one backend family, each with the benchmark case behind it. The defaults are the
// oneDNN CPU table (onednn_cpu_priors()); graph/priors.hpp has the cuDNN GPU table, and
// io/priors_json.hpp reads and writes a table as a file (data/priors/*.json ship the two), so
// they can be edited without touching code. Every number must be positive and finite
// (cost_model's constructor checks).
struct cost_priors {
  // Conversion and memory-bound layers: bytes read + written over a bandwidth (memcpy's and the
  // conversion's: memcpy_GB/s and ratio_to_memcpy).
  double conversion_bytes_per_ns = 30.0;
  double memory_bytes_per_ns = 30.0;
  std::string bandwidth_benchmark = "bench_convert --benchmark_filter=BM_convert/";
  // Conv (in its faster format) and linear: FLOPs over a throughput, the faster format's GFLOP/s of
  // the ResNet-50 layers.
  double fp32_flops_per_ns = 350.0;
  double low_precision_flops_per_ns = 750.0;
  std::string throughput_benchmark = "bench_conv --benchmark_filter='BM_conv/rn50_.*/fwd/'";
  // Batch norm, NHWC over NCHW speed: memory-bound, but the backends' NCHW batch norm is a slow
  // path; 1 makes it inherit.
  double batch_norm_channels_last_speedup_fp32 = 6.0;
  double batch_norm_channels_last_speedup_low_precision = 19.5;
  std::string batch_norm_benchmark = "bench_conv --benchmark_filter='BM_bn/64x56x56/.*/infer/'";
  // Conv shape classes (default_conv_speedup says which applies), the median of each class's cases.
  conv_class_prior depthwise_conv{23.0, 54.0, "bench_conv --benchmark_filter=BM_conv/mbv2_dw3x3_144/"};
  // The grouped-conv cliff at >= 64 channels per group: pytorch/pytorch PR #68101 (CPU, groups=32:
  // NHWC 7.8 ms vs NCHW 1.5 ms) and Inductor's note (groups=2, 112 channels per group: NHWC 31x slower).
  conv_class_prior wide_grouped_conv{0.19, 0.19, "pytorch/pytorch PR #68101 (CPU, groups=32)"};
  conv_class_prior grouped_conv{3.26, 8.65, "bench_conv --benchmark_filter=BM_conv/rnx_3x3_128_g32/"};
  conv_class_prior conv3d{2.74, 4.0, "bench_conv --benchmark_filter=BM_conv/c3d_"};
  conv_class_prior pointwise_conv{0.91, 1.5, "bench_conv --benchmark_filter='BM_conv/(rn50_.*_1x1|mbv2_pw)'"};
  conv_class_prior kxk_conv{1.67, 2.77, "bench_conv --benchmark_filter='BM_conv/rn50_(stem|.*_3x3)'"};
  // A violated preferred pin costs priority x this (1 ms per priority step).
  cost_t preferred_pin_unit = 1'000'000;
};

// NHWC/NCHW throughput ratio of a conv and the measurement behind it.
struct conv_speedup {
  double channels_last;
  std::string basis;
  std::string benchmark = "none";  // the benchmark case that measured it
};

namespace detail {
inline std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", r);
  return buf;
}
}  // namespace detail

// The conv shape classes whose NHWC/NCHW ratio differs: the conv rows of the prior table, and
// how `memfmt run --profile` groups convs.
enum class conv_class : std::uint8_t { depthwise, wide_grouped, grouped, conv3d, pointwise, kxk };

constexpr const char* to_string(conv_class c) noexcept {
  switch (c) {
    case conv_class::depthwise: return "depthwise";
    case conv_class::wide_grouped: return "grouped, >= 64 channels/group";
    case conv_class::grouped: return "grouped";
    case conv_class::conv3d: return "3-D";
    case conv_class::pointwise: return "1x1";
    case conv_class::kxk: return "kxk";
  }
  return "?";
}

// `kernel_volume` is the product of the kernel's extents (1 for a 1x1 conv); rank that of the
// conv's values (5: a 3-D conv).
constexpr conv_class conv_class_of(std::int64_t in_channels, std::int64_t groups, std::int64_t kernel_volume,
                                   std::size_t rank) noexcept {
  const std::int64_t per_group = groups > 0 ? in_channels / groups : in_channels;
  if (groups > 1 && per_group == 1) return conv_class::depthwise;
  if (groups > 1 && per_group >= 64) return conv_class::wide_grouped;
  if (groups > 1) return conv_class::grouped;
  if (rank == 5) return conv_class::conv3d;
  if (kernel_volume == 1) return conv_class::pointwise;
  return conv_class::kxk;
}

// The class of conv node `n` of `net`.
inline conv_class conv_class_of(const network& net, const node& n) {
  const auto& a = n.get<conv_attrs>();
  std::int64_t volume = 1;
  for (std::size_t d = 0; d + 2 < n.extents.size(); ++d) volume *= a.kernel[d];
  return conv_class_of(net.at(n.inputs.at(0)).extents.at(1), a.params.groups, volume, n.extents.size());
}

// The prior ratio of a conv by (shape class, dtype), from `p`'s table. 16-bit and int8 share the
// low-precision column (XLA also sends int8 to NHWC); float64 and wide integers have no
// measurement and are indifferent (PyTorch never picks channels_last for float64).
inline conv_speedup default_conv_speedup(std::int64_t in_channels, std::int64_t groups, std::int64_t kernel_volume,
                                         std::size_t rank, memfmt::dtype type, const cost_priors& p = {}) {
  using memfmt::dtype;
  const bool fp32 = type == dtype::float32;
  if (!fp32 && type != dtype::float16 && type != dtype::bfloat16 && type != dtype::int8 && type != dtype::uint8)
    return {1.0, "no prior for this dtype: indifferent", "none (no measurement for this dtype)"};
  const auto pick = [&](const char* what, const conv_class_prior& c) {
    return conv_speedup{fp32 ? c.fp32 : c.low_precision,
                        std::string(what) + " prior, NHWC " + detail::ratio_text(c.fp32) + "x fp32 / " +
                            detail::ratio_text(c.low_precision) + "x 16-bit (" + c.benchmark + ")",
                        c.benchmark};
  };
  switch (conv_class_of(in_channels, groups, kernel_volume, rank)) {
    case conv_class::depthwise: return pick("depthwise conv", p.depthwise_conv);
    case conv_class::wide_grouped: return pick("grouped conv with >= 64 channels/group", p.wide_grouped_conv);
    case conv_class::grouped: return pick("grouped conv", p.grouped_conv);
    case conv_class::conv3d: return pick("3-D conv", p.conv3d);
    case conv_class::pointwise: return pick("1x1 conv", p.pointwise_conv);
    case conv_class::kxk: break;
  }
  return pick("kxk conv", p.kxk_conv);
}

// Why a layer cannot run in a family on the backend at hand (nullopt: it can). The backend's
// capability query goes here, so that a layer without a kernel in a format is unsupported in that
// family, not merely expensive.
using support_query = std::function<std::optional<std::string>(const network&, const node&, format_family)>;

class cost_model {
 public:
  explicit cost_model(cost_priors given = {}) : priors_(std::move(given)) {
    const cost_priors& priors = priors_;
    const std::pair<const char*, double> rates[] = {
        {"conversion_bytes_per_ns", priors.conversion_bytes_per_ns},
        {"memory_bytes_per_ns", priors.memory_bytes_per_ns},
        {"fp32_flops_per_ns", priors.fp32_flops_per_ns},
        {"low_precision_flops_per_ns", priors.low_precision_flops_per_ns},
        {"batch_norm_channels_last_speedup_fp32", priors.batch_norm_channels_last_speedup_fp32},
        {"batch_norm_channels_last_speedup_low_precision", priors.batch_norm_channels_last_speedup_low_precision},
        {"depthwise_conv.fp32", priors.depthwise_conv.fp32},
        {"depthwise_conv.low_precision", priors.depthwise_conv.low_precision},
        {"wide_grouped_conv.fp32", priors.wide_grouped_conv.fp32},
        {"wide_grouped_conv.low_precision", priors.wide_grouped_conv.low_precision},
        {"grouped_conv.fp32", priors.grouped_conv.fp32},
        {"grouped_conv.low_precision", priors.grouped_conv.low_precision},
        {"conv3d.fp32", priors.conv3d.fp32},
        {"conv3d.low_precision", priors.conv3d.low_precision},
        {"pointwise_conv.fp32", priors.pointwise_conv.fp32},
        {"pointwise_conv.low_precision", priors.pointwise_conv.low_precision},
        {"kxk_conv.fp32", priors.kxk_conv.fp32},
        {"kxk_conv.low_precision", priors.kxk_conv.low_precision}};
    for (const auto& [name, v] : rates)
      if (!(v > 0.0) || !std::isfinite(v))
        memfmt::detail::fail(errc::invalid_argument, std::string("cost_priors::") + name + " = " +
                                                         detail::ratio_text(v) + " must be positive and finite");
    if (priors.preferred_pin_unit < 0)
      memfmt::detail::fail(errc::invalid_argument, "cost_priors::preferred_pin_unit = " +
                                                       std::to_string(priors.preferred_pin_unit) + " must be >= 0");
  }

  const cost_priors& priors() const noexcept { return priors_; }

  // Replaces the prior of one node of `net` (e.g. with a measurement); nullopt marks a family
  // unsupported.
  void override_node(const network& net, node_id id, std::optional<cost_t> channels_first,
                     std::optional<cost_t> channels_last, std::string basis = "user override") {
    require_node(net, id, "cost override");
    if ((channels_first && *channels_first < 0) || (channels_last && *channels_last < 0) ||
        (!channels_first && !channels_last))
      memfmt::detail::fail(errc::invalid_argument, "override of node " + std::to_string(id) + " '" + net.at(id).name +
                                                       "': costs " + cost_text(channels_first) + " / " +
                                                       cost_text(channels_last) +
                                                       " must be >= 0 with at least one family supported");
    node_overrides_[id] = format_costs{{channels_first, channels_last}, std::move(basis), "user override"};
  }
  void override_conversion(const network& net, node_id value, cost_t cost) {
    require_node(net, value, "conversion override");
    if (cost < 0)
      memfmt::detail::fail(errc::invalid_argument, "conversion override of node " + std::to_string(value) + " '" +
                                                       net.at(value).name + "': cost " + std::to_string(cost) + " < 0");
    conversion_overrides_[value] = cost;
  }

  // Measured costs (calibrate, or a cache file of this device and backend) replace the priors of the
  // layers and conversions the cache holds; replaces any earlier cache. The caller checks the key
  // (timing_cache::require_key): the model cannot know which device it plans for.
  void set_timing_cache(timing_cache cache) { cache_ = std::make_shared<const timing_cache>(std::move(cache)); }
  const timing_cache* timing() const noexcept { return cache_.get(); }

  // The backend's capability query (see support_query); replaces any earlier one.
  void set_support_query(support_query q) { support_ = std::move(q); }

  // Overrides are keyed by node id: a model overridden for a larger network is refused, not applied
  // to whatever node has that id here.
  void check_overrides(const network& net) const {
    const auto last = [](const auto& m) { return m.empty() ? std::size_t{0} : m.rbegin()->first + 1; };
    const std::size_t needed = std::max(last(node_overrides_), last(conversion_overrides_));
    if (needed > net.size())
      memfmt::detail::fail(errc::invalid_argument, "cost model overrides node " + std::to_string(needed - 1) +
                                                       ", but the network has " + std::to_string(net.size()) +
                                                       " nodes");
  }

  format_costs node_costs(const network& net, node_id id) const {
    format_costs c = base_costs(net, id);
    if (support_)
      for (format_family f : {format_family::channels_first, format_family::channels_last})
        if (c.supports(f) && net.has_format(id))
          if (const std::optional<std::string> why = support_(net, net.at(id), f)) {
            c.by_family[index(f)].reset();
            c.basis += "; not in " + std::string(to_string(f)) + ": " + *why;
          }
    return c;
  }

  // Bytes a conversion of this value reads and writes; 0 for an ambiguous shape (a relabel).
  std::int64_t conversion_bytes(const network& net, node_id value) const {
    const node& n = net.at(value);
    if (!n.spatial() || is_ambiguous_shape(n.extents)) return 0;
    const std::string what = "conversion of '" + n.name + "': bytes read and written";
    return memfmt::detail::checked_mul(
        2, static_cast<std::int64_t>(memfmt::detail::checked_bytes(n.numel(), size_of(n.type), what.c_str())), what);
  }

  // The plan prices one conversion per value whichever way it goes, so a measured value costs the
  // mean of the directions the cache has.
  cost_t conversion_cost(const network& net, node_id value) const {
    if (!net.at(value).spatial() || is_ambiguous_shape(net.at(value).extents)) return 0;
    if (auto it = conversion_overrides_.find(value); it != conversion_overrides_.end()) return it->second;
    if (const std::optional<cost_t> m = measured_conversion(net.at(value))) return *m;
    return round(static_cast<double>(conversion_bytes(net, value)) / priors_.conversion_bytes_per_ns);
  }

  // Where conversion_cost's number comes from, in explain's words.
  std::string conversion_source(const network& net, node_id value) const {
    if (!net.at(value).spatial() || is_ambiguous_shape(net.at(value).extents)) return "none: a relabel";
    if (conversion_overrides_.count(value)) return "user override";
    if (measured_conversion(net.at(value))) return "measured";
    return "prior: " + priors_.bandwidth_benchmark + " (bytes over conversion_bytes_per_ns)";
  }

  // The cost of running a node in `f` that its binding preferred pin does not ask for.
  cost_t pin_penalty(const network& net, node_id id, format_family f) const {
    const pin* p = net.at(id).binding_pin();
    if (!p || p->mandatory || p->format == f) return 0;
    return priors_.preferred_pin_unit * p->priority;
  }

  // Whether pins and the layer's support (priors, overrides, support query) allow the family.
  bool allowed(const network& net, node_id id, format_family f) const {
    const pin* p = net.at(id).binding_pin();
    if (p && p->mandatory && p->format != f) return false;
    return node_costs(net, id).supports(f);
  }

 private:
  std::optional<cost_t> measured_conversion(const node& n) const {
    if (!cache_) return std::nullopt;
    const std::string sig = conversion_signature(n.extents, n.type);
    const std::optional<cost_t> a = cache_->find_conversion(sig, format_family::channels_first);
    const std::optional<cost_t> b = cache_->find_conversion(sig, format_family::channels_last);
    if (a && b) return (*a + *b + 1) / 2;
    return a ? a : b;
  }

  format_costs base_costs(const network& net, node_id id) const {
    const node& n = net.at(id);
    if (auto it = node_overrides_.find(id); it != node_overrides_.end()) {
      format_costs c = it->second;
      c.source = "user override";
      return c;
    }
    if (cache_)
      if (const std::optional<std::string> sig = layer_signature(net, id))
        if (const family_timings* t = cache_->find_layer(*sig)) {
          const cache_key& k = cache_->key();
          format_costs c{*t, "measured on " + k.device + " (" + k.backend + " " + k.backend_version + ")", "measured"};
          return c;
        }
    // The kind's home gives its prior (graph/kinds/); the others are memory-bound (they inherit
    // their producer's format, kind_infos) or user code: the same cost in both formats (oneDNN,
    // cudnn-frontend).
    const context c{*this, net, id};
    return visit_kind(n.kind, [&](auto k) -> format_costs {
      using traits = decltype(k);
      if constexpr (detail::has_prior<traits, context>::value) {
        return traits::prior(c);
      } else {
        return c.memory_bound();
      }
    });
  }

 public:
  // What a kind's prior (kind_traits::prior) reads: the layer, the priors and the cost rules.
  struct context {
    const cost_model& model;
    const network& net;
    node_id id;

    const node& layer() const { return net.at(id); }
    const cost_priors& priors() const { return model.priors_; }
    format_costs same(cost_t c, std::string basis, std::string source) const {
      return cost_model::same(c, std::move(basis), std::move(source));
    }
    format_costs by_speedup(double fast, double channels_last, std::string basis, std::string source) const {
      return cost_model::by_speedup(fast, channels_last, std::move(basis), std::move(source));
    }
    format_costs memory_bound() const {
      return same(round(memory_bound_ns()), "memory-bound: same cost in both formats",
                  "prior: " + priors().bandwidth_benchmark + " (bytes over memory_bytes_per_ns)");
    }
    double memory_bound_ns() const { return model.memory_bound_ns(net, layer()); }
    double roofline(double flops, const node& y, const node& x) const { return model.roofline(flops, y, x); }
    double kernel_volume(const spatial3& kernel) const {
      return cost_model::kernel_volume(kernel, layer().extents.size());
    }
    conv_speedup conv_prior(std::int64_t in_channels, std::int64_t groups, std::int64_t kernel_volume) const {
      const node& n = layer();
      return default_conv_speedup(in_channels, groups, kernel_volume, n.extents.size(), n.type, priors());
    }
    double flops_per_ns(memfmt::dtype t) const { return model.flops_per_ns(t); }
    static cost_t round(double v) { return cost_model::round(v); }
    static std::string ratio_text(double r) { return detail::ratio_text(r); }
  };

 private:
  static format_costs same(cost_t c, std::string basis, std::string source) {
    return format_costs{{c, c}, std::move(basis), std::move(source)};
  }
  // `fast` in the faster family, the other `channels_last` (NHWC/NCHW speed) times slower.
  static format_costs by_speedup(double fast, double channels_last, std::string basis, std::string source) {
    const double first = channels_last >= 1.0 ? fast * channels_last : fast;
    const double last = channels_last >= 1.0 ? fast : fast / channels_last;
    return format_costs{{round(first), round(last)}, std::move(basis), std::move(source)};
  }
  // A memory-bound layer: the bytes of its output and inputs over the bandwidth.
  double memory_bound_ns(const network& net, const node& n) const {
    double bytes = static_cast<double>(n.numel()) * static_cast<double>(size_of(n.type));
    for (node_id i : n.inputs)
      bytes += static_cast<double>(net.at(i).numel()) * static_cast<double>(size_of(net.at(i).type));
    return bytes / priors_.memory_bytes_per_ns;
  }
  // Compute bound or memory bound, whichever is slower, in the faster format.
  double roofline(double flops, const node& y, const node& x) const {
    const double bytes =
        (static_cast<double>(y.numel()) + static_cast<double>(x.numel())) * static_cast<double>(size_of(y.type));
    return std::max(flops / flops_per_ns(y.type), bytes / priors_.memory_bytes_per_ns);
  }
  static double kernel_volume(const spatial3& kernel, std::size_t rank) {
    double v = 1;
    for (std::size_t d = 0; d + 2 < rank; ++d) v *= static_cast<double>(kernel[d]);
    return v;
  }
  static void require_node(const network& net, node_id id, const char* what) {
    if (id >= net.size())
      memfmt::detail::fail(errc::invalid_argument, std::string(what) + " of node " + std::to_string(id) +
                                                       ": the network has " + std::to_string(net.size()) + " nodes");
  }
  // Costs are rounded to whole ns; a cost past int64 is an error, not a wrapped value.
  static cost_t round(double v) {
    if (!(v >= 0.0) || v >= 9.2e18)
      memfmt::detail::fail(errc::overflow,
                           "cost model: a cost of " + detail::ratio_text(v) + " ns does not fit int64 ns");
    return static_cast<cost_t>(std::llround(v));
  }
  static std::string cost_text(const std::optional<cost_t>& c) { return c ? std::to_string(*c) : "unsupported"; }
  double flops_per_ns(memfmt::dtype t) const noexcept {
    return t == memfmt::dtype::float32 || t == memfmt::dtype::float64 ? priors_.fp32_flops_per_ns
                                                                      : priors_.low_precision_flops_per_ns;
  }

  cost_priors priors_;
  support_query support_;
  std::shared_ptr<const timing_cache> cache_;
  std::map<node_id, format_costs> node_overrides_;
  std::map<node_id, cost_t> conversion_overrides_;
};

}  // namespace memfmt::graph
