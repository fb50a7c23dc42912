// resnet_executor.hpp - a ResNet-50 trunk described once as a memfmt::graph::network and run layer
// by layer in whatever format a plan gives each layer (bench_network and tests/network share it).
//
// What is modelled (forward inference):
//   stem: conv 7x7/2 (3 -> 64) + BN + ReLU. No backend offers max pooling, so the pool is left out
//         and the input is half the usual size: a 112x112 image gives the 56x56 stem output that
//         conv + maxpool give from 224x224 in ResNet-50, and every later layer has ResNet-50's shapes;
//   16 bottleneck blocks (3, 4, 6, 3): 1x1 -> BN -> ReLU -> 3x3 (stride 2 in the first block of
//         stages 2-4) -> BN -> ReLU -> 1x1 (x4) -> BN -> + shortcut -> ReLU; the first block of each
//         stage has a 1x1 (strided) conv + BN on the shortcut; no conv bias (BN follows);
//   it stops at the last block's ReLU (no global pool / fc).
// The graph nodes are the unfused layers (conv, batch_norm, pointwise = ReLU, add), so the planner
// sees the real structure. The executor then fuses what oneDNN's backend offers when the plan lets
// it (producer and consumer in the same format, the intermediate value used once):
//   BN + ReLU            -> batch_norm_forward_inference(fuse_relu)
//   BN + add + ReLU      -> batch_norm_forward_inference(residual = shortcut, fuse_relu)
//   BN + add             -> batch_norm_forward_inference(residual = shortcut)
// Convolutions are not fused with anything: BN follows each one (folding BN into the conv weights
// would remove the BN layers the plan reasons about). Where a plan splits a fused group, the
// ReLU / add run unfused as plain loops over the dense buffer (both operands have one format).
// Conversions: one converted copy per plan.conversions entry, made right after its producer ran and
// read by all of that entry's consumers (memfmt::convert, timed).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <memfmt/backends/conv_params.hpp>
#include <memfmt/convert/convert.hpp>
#include <memfmt/dtype.hpp>
#include <memfmt/error.hpp>
#include <memfmt/format/tags.hpp>
#include <memfmt/graph/network.hpp>
#include <memfmt/graph/plan.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "../common/bench_util.hpp"

namespace memfmt_network {

using memfmt::graph::family;
using memfmt::graph::node_id;
using memfmt::graph::node_kind;

struct resnet_config {
  std::int64_t batch = 4;
  std::int64_t image = 112;  // input H = W (see the header comment: 112 -> 56x56 stem output)
  std::int64_t stem_channels = 64;
  std::array<std::int64_t, 4> widths{64, 128, 256, 512};  // bottleneck widths; outputs are 4x
  std::array<int, 4> blocks{3, 4, 6, 3};
};

using memfmt_bench::fill_logical;

// Per-channel values in [lo, hi), a hash of (seed, channel).
inline std::vector<float> channel_values(std::int64_t c, std::uint32_t seed, float lo, float hi) {
  std::vector<float> v(static_cast<std::size_t>(c));
  for (std::int64_t i = 0; i < c; ++i) {
    std::uint32_t h = static_cast<std::uint32_t>(i + 1) * 2246822519u ^ (seed * 2654435761u);
    h ^= h >> 13;
    h *= 3266489917u;
    h ^= h >> 16;
    v[static_cast<std::size_t>(i)] = lo + (hi - lo) * static_cast<float>(h & 0xffffu) / 65536.f;
  }
  return v;
}

// The network and its parameters (weights are KCRS, shared by every variant so the backend's weight
// cache, keyed by pointer, reorders each once per primitive layout).
template <class T>
struct resnet_model {
  struct conv_layer {
    memfmt::conv_params params;
    memfmt::host_tensor<T, memfmt::nchw> weight;
  };
  struct bn_layer {
    std::vector<float> gamma, beta, mean, var;
  };

  resnet_config config;
  memfmt::graph::network net;
  node_id input = 0;
  node_id output = 0;  // the last block's ReLU
  std::vector<conv_layer> convs;  // indexed by node id (empty for other nodes)
  std::vector<bn_layer> bns;      // indexed by node id
  memfmt::host_tensor<T, memfmt::nchw> image;  // the input value, logical fill

  explicit resnet_model(const resnet_config& cfg) : config(cfg) {
    using memfmt::graph::conv_attrs;
    input = net.input("image", {cfg.batch, 3, cfg.image, cfg.image}, memfmt::dtype_of<T>::value,
                      family::channels_first);
    node_id h = conv_bn("stem", input, {cfg.stem_channels, 7, 2, 3}, true);
    for (int stage = 0; stage < 4; ++stage)
      for (int b = 0; b < cfg.blocks[static_cast<std::size_t>(stage)]; ++b) {
        const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
        const std::int64_t mid = cfg.widths[static_cast<std::size_t>(stage)];
        const std::int64_t stride = (b == 0 && stage > 0) ? 2 : 1;
        node_id y = conv_bn(name + ".a", h, {mid, 1}, true);
        y = conv_bn(name + ".b", y, {mid, 3, stride, 1}, true);
        y = conv_bn(name + ".c", y, {4 * mid, 1}, false);
        const node_id shortcut = b == 0 ? conv_bn(name + ".down", h, {4 * mid, 1, stride}, false) : h;
        h = net.pointwise(name + ".relu", net.add(name + ".add", y, shortcut));
      }
    output = h;
    convs.resize(net.size());
    bns.resize(net.size());
    for (const auto& n : net.nodes()) {
      const auto& x = net.at(n.inputs.empty() ? n.id : n.inputs[0]);
      if (n.kind == node_kind::conv) {
        conv_layer& l = convs[n.id];
        const auto& a = attrs_[n.id];
        for (int i = 0; i < 2; ++i) {
          l.params.stride[static_cast<std::size_t>(i)] = a.stride;
          l.params.padding[static_cast<std::size_t>(i)] = a.padding;
        }
        const std::int64_t fan_in = x.extents[1] * a.kernel * a.kernel;
        l.weight = memfmt::host_tensor<T, memfmt::nchw>({a.out_channels, x.extents[1], a.kernel, a.kernel});
        // Variance 1/fan_in keeps activations O(1) through 53 layers (BN statistics are fixed).
        fill_logical(l.weight.view(), static_cast<std::uint32_t>(n.id) + 11u,
                     static_cast<float>(std::sqrt(3.0 / static_cast<double>(fan_in))));
      } else if (n.kind == node_kind::batch_norm) {
        const std::int64_t c = n.extents[1];
        const auto s = static_cast<std::uint32_t>(n.id) * 4u;
        bns[n.id] = bn_layer{channel_values(c, s, 0.5f, 1.5f), channel_values(c, s + 1, -0.2f, 0.2f),
                             channel_values(c, s + 2, -0.2f, 0.2f), channel_values(c, s + 3, 0.5f, 1.5f)};
      }
    }
    image = memfmt::host_tensor<T, memfmt::nchw>({cfg.batch, 3, cfg.image, cfg.image});
    fill_logical(image.view(), 1u);
  }

  std::int64_t conv_count() const {
    std::int64_t n = 0;
    for (const auto& node : net.nodes()) n += node.kind == node_kind::conv;
    return n;
  }

 private:
  std::vector<memfmt::graph::conv_attrs> attrs_;

  node_id conv_bn(const std::string& name, node_id in, memfmt::graph::conv_attrs a, bool relu) {
    const node_id c = net.conv(name + ".conv", in, a);
    attrs_.resize(net.size());
    attrs_[c] = a;
    const node_id h = net.batch_norm(name + ".bn", c);
    return relu ? net.pointwise(name + ".relu", h) : h;
  }
};

// Every layer in `f`; the input stays channels_first (it is pinned: the image arrives as NCHW), so
// an all-channels_last assignment converts it once at the start.
inline std::vector<std::optional<family>> uniform_assignment(const memfmt::graph::network& net, family f) {
  std::vector<std::optional<family>> a(net.size());
  for (const auto& n : net.nodes())
    if (net.has_format(n.id)) a[n.id] = n.kind == node_kind::input ? family::channels_first : f;
  return a;
}

// Measured per pass: conversions executed and the time spent in memfmt::convert.
struct pass_stats {
  std::int64_t conversions = 0;
  double conversion_seconds = 0;
};

// Calls fn(nchw{}) or fn(nhwc{}).
template <class Fn>
decltype(auto) with_format(family f, Fn&& fn) {
  if (f == family::channels_first) return fn(memfmt::nchw{});
  return fn(memfmt::nhwc{});
}

// The steps of one plan over one model, bound to their buffers once; run() executes a forward pass.
template <class T, class Backend>
class executor {
 public:
  executor(Backend& backend, const resnet_model<T>& model, const memfmt::graph::plan& plan)
      : b_(backend), m_(model), plan_(plan), slots_(model.net.size()), written_(model.net.size(), false) {
    const auto& net = m_.net;
    if (plan.nodes.size() != net.size())
      memfmt::detail::fail(memfmt::errc::shape_mismatch, "network executor: plan has " +
                                                             std::to_string(plan.nodes.size()) + " nodes, network " +
                                                             std::to_string(net.size()));
    std::vector<bool> absorbed(net.size(), false);
    for (const auto& n : net.nodes()) {
      if (absorbed[n.id]) continue;
      const family f = format(n.id);
      node_id produced = n.id;
      switch (n.kind) {
        case node_kind::input: {
          with_format(f, [&](auto tag) {
            using F = decltype(tag);
            memfmt::convert(m_.image.const_view(), own<F>(n.id).view());
          });
          break;
        }
        case node_kind::conv: add_conv(n.id, f); break;
        case node_kind::batch_norm: produced = add_batch_norm(n.id, f, absorbed); break;
        case node_kind::pointwise: add_relu(n.id, f); break;
        case node_kind::add: add_add(n.id, f); break;
        default:
          memfmt::detail::fail(memfmt::errc::unsupported, std::string("network executor: node '") + n.name +
                                                              "' of kind " + memfmt::graph::to_string(n.kind) +
                                                              " has no implementation");
      }
      written_[produced] = true;
      add_conversions(produced);
    }
    for (const auto& c : plan.conversions)
      if (!converted_[c.value])
        memfmt::detail::fail(memfmt::errc::invalid_argument,
                             "network executor: conversion of '" + net.at(c.value).name +
                                 "' was not scheduled (its producer was fused away)");
  }

  // One forward pass. Conversions are timed one by one (steady_clock around each convert call).
  executor(const executor&) = delete;  // the steps point into this object
  executor& operator=(const executor&) = delete;

  pass_stats run() {
    pass_stats s;
    for (auto& step : steps_) step(s);
    return s;
  }

  // The final output converted to NCHW (logical order), for comparisons.
  memfmt::host_tensor<T, memfmt::nchw> output_nchw() {
    const node_id out = m_.output;
    const auto& e = m_.net.at(out).extents;
    memfmt::host_tensor<T, memfmt::nchw> r({e[0], e[1], e[2], e[3]});
    with_format(format(out), [&](auto tag) {
      using F = decltype(tag);
      memfmt::convert(own<F>(out).const_view(), r.view());
    });
    return r;
  }

  std::int64_t conversions_per_pass() const noexcept { return conversions_; }
  std::int64_t fused_groups() const noexcept { return fused_; }

 private:
  struct slot {
    memfmt::host_tensor<T, memfmt::nchw> cf;
    memfmt::host_tensor<T, memfmt::nhwc> cl;
  };

  family format(node_id id) const {
    const auto f = plan_.format(id);
    if (!f)
      memfmt::detail::fail(memfmt::errc::invalid_argument,
                           "network executor: node '" + m_.net.at(id).name + "' has no format in the plan");
    return *f;
  }

  // The buffer holding value `id` in format F (the producer's own output or the converted copy),
  // allocated on first use.
  template <class F>
  memfmt::host_tensor<T, F>& own(node_id id, bool allocate = true) {
    slot& s = slots_[id];
    auto& t = [&]() -> memfmt::host_tensor<T, F>& {
      if constexpr (std::is_same_v<F, memfmt::nchw>) return s.cf;
      else return s.cl;
    }();
    const auto& ext = m_.net.at(id).extents;
    if (allocate && t.data() == nullptr)
      t = memfmt::host_tensor<T, F>({ext[0], ext[1], ext[2], ext[3]});
    return t;
  }

  // Value `v` as a consumer running in F reads it: the producer's buffer or the plan's converted copy.
  template <class F>
  memfmt::tensor_view<const T, F> input_view(node_id v) {
    const family want = F::channels_last ? family::channels_last : family::channels_first;
    if (format(v) != want && !converted_for(v, want))
      memfmt::detail::fail(memfmt::errc::invalid_argument, "network executor: '" + m_.net.at(v).name + "' is " +
                                                               memfmt::graph::to_string(format(v)) +
                                                               " and the plan has no conversion to " +
                                                               memfmt::graph::to_string(want));
    return own<F>(v).const_view();
  }

  bool converted_for(node_id v, family to) const {
    for (const auto& c : plan_.conversions)
      if (c.value == v && c.to == to) return true;
    return false;
  }

  void add_conv(node_id id, family f) {
    const node_id in = m_.net.at(id).inputs[0];
    with_format(f, [&](auto tag) {
      using F = decltype(tag);
      auto x = input_view<F>(in);
      auto y = own<F>(id).view();
      const auto& l = m_.convs[id];
      memfmt::tensor_view<const T, memfmt::nchw> w = l.weight.const_view();
      const memfmt::conv_params p = l.params;
      steps_.push_back([this, x, w, y, p](pass_stats&) { b_.conv_forward(x, w, static_cast<const T*>(nullptr), y, p); });
    });
  }

  // BN, fused with its only consumer (ReLU, or add [+ ReLU]) when that runs in the same format.
  // Returns the node whose value the step writes.
  node_id add_batch_norm(node_id id, family f, std::vector<bool>& absorbed) {
    const auto& net = m_.net;
    const node_id in = net.at(id).inputs[0];
    node_id writes = id;
    std::optional<node_id> residual;
    bool relu = false;
    const auto& users = net.consumers(id);
    if (users.size() == 1 && format(users[0]) == f) {
      const auto& u = net.at(users[0]);
      if (u.kind == node_kind::pointwise) {
        relu = true;
        writes = u.id;
      } else if (u.kind == node_kind::add && u.inputs.size() == 2 && u.inputs[0] != u.inputs[1] &&
                 written_[u.inputs[0] == id ? u.inputs[1] : u.inputs[0]]) {
        // The other operand must already be computed: in a downsampling block that is the
        // shortcut's BN, which then takes the add (the sum is symmetric) instead of the main path's.
        residual = u.inputs[0] == id ? u.inputs[1] : u.inputs[0];
        writes = u.id;
        const auto& add_users = net.consumers(u.id);
        if (add_users.size() == 1 && net.at(add_users[0]).kind == node_kind::pointwise && format(add_users[0]) == f) {
          relu = true;
          absorbed[u.id] = true;
          writes = add_users[0];
        }
      }
    }
    if (writes != id) {
      absorbed[writes] = true;
      ++fused_;
    }
    with_format(f, [&](auto tag) {
      using F = decltype(tag);
      auto x = input_view<F>(in);
      auto y = own<F>(writes).view();
      memfmt::tensor_view<const T, F> r = residual ? input_view<F>(*residual) : memfmt::tensor_view<const T, F>{};
      const auto& bn = m_.bns[id];
      memfmt::batch_norm_params p;
      p.fuse_relu = relu;
      steps_.push_back([this, x, y, r, &bn, p](pass_stats&) {
        b_.batch_norm_forward_inference(x, y, bn.gamma.data(), bn.beta.data(), bn.mean.data(), bn.var.data(), p, r);
      });
    });
    return writes;
  }

  void add_relu(node_id id, family f) {
    const node_id in = m_.net.at(id).inputs[0];
    with_format(f, [&](auto tag) {
      using F = decltype(tag);
      auto x = input_view<F>(in);
      auto y = own<F>(id).view();
      steps_.push_back([x, y](pass_stats&) {
        // x and y are dense with one format: the flat order is the same in both.
        const std::int64_t n = y.numel();
        for (std::int64_t i = 0; i < n; ++i) y.data()[i] = relu_of(x.data()[i]);
      });
    });
  }

  void add_add(node_id id, family f) {
    const auto& ins = m_.net.at(id).inputs;
    with_format(f, [&](auto tag) {
      using F = decltype(tag);
      auto a = input_view<F>(ins[0]);
      auto c = input_view<F>(ins[1]);
      auto y = own<F>(id).view();
      steps_.push_back([a, c, y](pass_stats&) {
        const std::int64_t n = y.numel();
        for (std::int64_t i = 0; i < n; ++i)
          y.data()[i] = from_float(static_cast<float>(a.data()[i]) + static_cast<float>(c.data()[i]));
      });
    });
  }

  // The plan's conversions of value `v`, right after the step that wrote it.
  void add_conversions(node_id v) {
    if (converted_.empty()) converted_.assign(m_.net.size(), false);
    for (const auto& c : plan_.conversions) {
      if (c.value != v) continue;
      converted_[v] = true;
      ++conversions_;
      with_format(c.from, [&](auto from_tag) {
        using From = decltype(from_tag);
        with_format(c.to, [&](auto to_tag) {
          using To = decltype(to_tag);
          auto src = own<From>(v).const_view();
          auto dst = own<To>(v).view();
          steps_.push_back([src, dst](pass_stats& s) {
            const auto t0 = std::chrono::steady_clock::now();
            memfmt::convert(src, dst);
            s.conversion_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            ++s.conversions;
          });
        });
      });
    }
  }

  static T from_float(float v) {
    if constexpr (std::is_same_v<T, float>) return v;
    else return T(v);
  }
  static T relu_of(T v) { return static_cast<float>(v) > 0.f ? v : from_float(0.f); }

  Backend& b_;
  const resnet_model<T>& m_;
  memfmt::graph::plan plan_;
  std::vector<slot> slots_;
  std::vector<std::function<void(pass_stats&)>> steps_;
  std::vector<bool> written_;  // values whose step is already scheduled
  std::vector<bool> converted_;
  std::int64_t conversions_ = 0;
  std::int64_t fused_ = 0;
};

// Largest |a - b| over max |ref| (logical NCHW order; a and ref are the same shape).
template <class T>
double normalized_max_error(const memfmt::host_tensor<T, memfmt::nchw>& a, const memfmt::host_tensor<T, memfmt::nchw>& ref) {
  if (a.extents() != ref.extents())
    memfmt::detail::fail(memfmt::errc::shape_mismatch, "compare: extents " +
                                                           memfmt::detail::dims_to_string(a.extents()) + " vs " +
                                                           memfmt::detail::dims_to_string(ref.extents()));
  double err = 0, scale = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double x = static_cast<double>(static_cast<float>(a.data()[i]));
    const double r = static_cast<double>(static_cast<float>(ref.data()[i]));
    if (!std::isfinite(x) || !std::isfinite(r)) return std::numeric_limits<double>::infinity();
    err = std::max(err, std::abs(x - r));
    scale = std::max(scale, std::abs(r));
  }
  return scale > 0 ? err / scale : err;
}

// Tolerance of a network output against another run (relative to max |value|): fp32 kernels differ
// in summation order only; bf16 rounds every layer's output to 8 bits of mantissa.
template <class T>
constexpr double network_tolerance() noexcept {
  return std::is_same_v<T, float> ? 1e-4 : 3e-2;
}

}  // namespace memfmt_network
