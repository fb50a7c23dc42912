// resnet_executor.hpp - runs a network of the models header layer by layer in whatever format a plan
// gives each layer (bench_network and tests/network share it), up to a chosen value: the trunk of a
// ResNet (through the last block's ReLU; no global pool / fc).
//
// Supported layers: conv (no bias), batch norm, ReLU, add, max pooling and the input; each reads its
// attributes from its graph node, the one description of the network. The graph nodes are the
// unfused layers, so the planner sees the real structure. The executor then fuses what oneDNN's
// backend offers when the plan lets it (producer and consumer in the same format, the intermediate
// value used once):
//   BN + ReLU            -> batch_norm_forward_inference(fuse_relu)
//   BN + add + ReLU      -> batch_norm_forward_inference(residual = shortcut, fuse_relu)
//   BN + add             -> batch_norm_forward_inference(residual = shortcut)
// Convolutions are not fused with anything: BN follows each one (folding BN into the conv weights
// would remove the BN layers the plan reasons about). Where a plan splits a fused group, the
// ReLU / add run unfused as plain loops over the dense buffer (both operands have one format);
// max pooling is a plain loop over logical coordinates (no backend offers it).
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
#include <memfmt/format/dispatch.hpp>
#include <memfmt/format/tags.hpp>
#include <memfmt/graph/models.hpp>
#include <memfmt/graph/network.hpp>
#include <memfmt/graph/plan.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "../common/bench_util.hpp"

namespace memfmt_network {

using memfmt::graph::family;
using memfmt::graph::node_id;
using memfmt::graph::node_kind;

// A ResNet of the models header, trunk only: `image` H = W = resolution.
struct resnet_config {
  std::int64_t batch = 4;
  std::int64_t resolution = 224;
  double width = 1.0;
  bool resnet50 = true;  // else ResNet-18
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
    memfmt::host_tensor<T, memfmt::nchw> weight;
  };
  struct bn_layer {
    std::vector<float> gamma, beta, mean, var;
  };

  resnet_config config;
  memfmt::graph::network net;
  node_id input = 0;
  node_id output = 0;  // the last block's ReLU, the value the executor computes
  std::vector<conv_layer> convs;  // indexed by node id (empty for other nodes)
  std::vector<bn_layer> bns;      // indexed by node id
  memfmt::host_tensor<T, memfmt::nchw> image;  // the input value, logical fill

  explicit resnet_model(const resnet_config& cfg) : config(cfg) {
    memfmt::graph::models::options o;
    o.batch = cfg.batch;
    o.resolution = cfg.resolution;
    o.width = cfg.width;
    o.type = memfmt::dtype_of<T>::value;
    net = cfg.resnet50 ? memfmt::graph::models::resnet50(o) : memfmt::graph::models::resnet18(o);
    input = *net.find("input");
    output = *net.producer(*net.find("avgpool"));
    convs.resize(net.size());
    bns.resize(net.size());
    for (const auto& n : net.nodes()) {
      if (n.kind == node_kind::conv) {
        const std::vector<std::int64_t> e = net.parameters(n.id).at(0).extents;  // "<conv>.weight", K C/g R S
        conv_layer& l = convs[n.id];
        l.weight = memfmt::host_tensor<T, memfmt::nchw>({e[0], e[1], e[2], e[3]});
        // Variance 1/fan_in keeps activations O(1) through 53 layers (BN statistics are fixed).
        fill_logical(l.weight.view(), static_cast<std::uint32_t>(n.id) + 11u,
                     static_cast<float>(std::sqrt(3.0 / static_cast<double>(e[1] * e[2] * e[3]))));
      } else if (n.kind == node_kind::batch_norm) {
        const std::int64_t c = n.extents[1];
        const auto s = static_cast<std::uint32_t>(n.id) * 4u;
        bns[n.id] = bn_layer{channel_values(c, s, 0.5f, 1.5f), channel_values(c, s + 1, -0.2f, 0.2f),
                             channel_values(c, s + 2, -0.2f, 0.2f), channel_values(c, s + 3, 0.5f, 1.5f)};
      }
    }
    image = memfmt::host_tensor<T, memfmt::nchw>({cfg.batch, 3, cfg.resolution, cfg.resolution});
    fill_logical(image.view(), 1u);
  }

  std::int64_t conv_count() const {
    std::int64_t n = 0;
    for (const auto& node : net.nodes()) n += node.kind == node_kind::conv && node.id <= output;
    return n;
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

// Calls fn(nchw{}) or fn(nhwc{}): the one family -> tag mapping, at rank 4.
template <class Fn>
decltype(auto) with_format(family f, Fn&& fn) {
  return memfmt::dispatch_format<4>(f, std::forward<Fn>(fn));
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
      if (n.id > m_.output) break;  // past the computed value
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
        case node_kind::activation: add_relu(n.id, f); break;
        case node_kind::binary: add_add(n.id, f); break;
        case node_kind::pool: add_max_pool(n.id, f); break;
        default:
          memfmt::detail::fail(memfmt::errc::unsupported, std::string("network executor: node '") + n.name +
                                                              "' of kind " + memfmt::graph::to_string(n.kind) +
                                                              " has no implementation");
      }
      written_[produced] = true;
      add_conversions(produced);
    }
    for (const auto& c : plan.conversions)
      if (c.value <= m_.output && !converted_[c.value])
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
      memfmt::tensor_view<const T, memfmt::nchw> w = m_.convs[id].weight.const_view();
      const memfmt::conv_params p = m_.net.at(id).template get<memfmt::graph::conv_attrs>().params;
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
      if (is_relu(u)) {
        relu = true;
        writes = u.id;
      } else if (is_add(u) && u.inputs.size() == 2 && u.inputs[0] != u.inputs[1] &&
                 written_[u.inputs[0] == id ? u.inputs[1] : u.inputs[0]]) {
        // The other operand must already be computed: in a downsampling block that is the
        // shortcut's BN, which then takes the add (the sum is symmetric) instead of the main path's.
        residual = u.inputs[0] == id ? u.inputs[1] : u.inputs[0];
        writes = u.id;
        const auto& add_users = net.consumers(u.id);
        if (add_users.size() == 1 && is_relu(net.at(add_users[0])) && format(add_users[0]) == f) {
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

  static bool is_relu(const memfmt::graph::node& n) {
    return n.kind == node_kind::activation && n.get<memfmt::activation>() == memfmt::activation::relu;
  }
  static bool is_add(const memfmt::graph::node& n) {
    return n.kind == node_kind::binary && n.get<memfmt::binary_op>() == memfmt::binary_op::add;
  }
  [[noreturn]] void unsupported(node_id id, const std::string& what) const {
    memfmt::detail::fail(memfmt::errc::unsupported,
                         "network executor: node '" + m_.net.at(id).name + "': " + what + " has no implementation");
  }

  void add_relu(node_id id, family f) {
    if (!is_relu(m_.net.at(id))) unsupported(id, "an activation other than relu");
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
    if (!is_add(m_.net.at(id))) unsupported(id, "a binary op other than add");
    const auto& ins = m_.net.at(id).inputs;
    if (m_.net.at(ins[0]).extents != m_.net.at(ins[1]).extents) unsupported(id, "a broadcasting add");
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

  // Max pooling, symmetric padding, floor mode: a loop over logical coordinates.
  void add_max_pool(node_id id, family f) {
    const memfmt::pool_params p = m_.net.at(id).template get<memfmt::pool_params>();
    if (p.kind != memfmt::pool_kind::max || p.ceil_mode || p.padding != p.padding_end)
      unsupported(id, "pooling other than max pooling with symmetric padding in floor mode");
    const node_id in = m_.net.at(id).inputs[0];
    with_format(f, [&](auto tag) {
      using F = decltype(tag);
      auto x = input_view<F>(in);
      auto y = own<F>(id).view();
      steps_.push_back([x, y, p](pass_stats&) {
        const auto xe = x.extents(), ye = y.extents();
        for (std::int64_t n = 0; n < ye[0]; ++n)
          for (std::int64_t c = 0; c < ye[1]; ++c)
            for (std::int64_t oh = 0; oh < ye[2]; ++oh)
              for (std::int64_t ow = 0; ow < ye[3]; ++ow) {
                float best = -std::numeric_limits<float>::infinity();
                for (std::int64_t kh = 0; kh < p.kernel[0]; ++kh)
                  for (std::int64_t kw = 0; kw < p.kernel[1]; ++kw) {
                    const std::int64_t h = oh * p.stride[0] - p.padding[0] + kh, w = ow * p.stride[1] - p.padding[1] + kw;
                    if (h >= 0 && h < xe[2] && w >= 0 && w < xe[3]) best = std::max(best, static_cast<float>(x(n, c, h, w)));
                  }
                y(n, c, oh, ow) = from_float(best);
              }
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
