// memfmt/graph/timing_cache.hpp - measured layer and conversion costs of one device and backend.
//
// The TensorRT timing cache, for formats: costs are keyed by what decides them, not by node id,
// so identical layers (same op, attributes, extents and dtype) share one measurement and a cache
// serves every network built from such layers. A cache belongs to one device (CPU model and the
// ISA its backend uses, or GPU name and compute capability), backend and backend version; a cost
// measured elsewhere is wrong here, so cost_model::set_timing_cache refuses a cache whose key
// differs from the one it is asked for (require_key), naming whose it is.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../detail/checked.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "kinds.hpp"
#include "network.hpp"

namespace memfmt::graph {

using cost_t = std::int64_t;  // nanoseconds, as in cost_model.hpp

// Whose measurements a cache holds.
struct cache_key {
  std::string device;           // "Intel(R) Xeon(R) ... (isa avx512_core)", "NVIDIA H100 (sm_90)"
  std::string backend;          // the backend's name: "reference", "onednn", "cudnn"
  std::string backend_version;  // "2.6.0", or memfmt's version for the reference backend

  friend bool operator==(const cache_key& a, const cache_key& b) {
    return a.device == b.device && a.backend == b.backend && a.backend_version == b.backend_version;
  }
  friend bool operator!=(const cache_key& a, const cache_key& b) { return !(a == b); }
};

inline std::string to_string(const cache_key& k) {
  return "device '" + k.device + "', backend " + k.backend + " " + k.backend_version;
}

// The node's timing signature: kind, the attributes that change its running time, its inputs' and
// output's extents and the dtype. nullopt for nodes without a layout choice a backend runs
// (graph boundaries, views, opaque user code, rank-2 layers): their prior stands.
inline std::optional<std::string> layer_signature(const network& net, node_id id) {
  const node& n = net.at(id);
  if (!net.has_format(id) || !n.spatial()) return std::nullopt;
  const std::size_t dims = n.extents.size() - 2;
  std::string s = to_string(n.kind);
  // The kinds whose homes define no signature (graph boundaries, constants, flatten, dropout,
  // linear, opaque) keep their prior.
  const bool timed = visit_kind(n.kind, [&](auto k) {
    using traits = decltype(k);
    if constexpr (detail::has_signature<traits>::value) {
      traits::signature(n, dims, s);
      return true;
    } else {
      return false;
    }
  });
  if (!timed) return std::nullopt;
  s += " in";
  for (node_id i : n.inputs) s += " " + detail::dims_text(net.at(i).extents);
  s += " out " + detail::dims_text(n.extents) + " " + std::string(memfmt::to_string(n.type));
  return s;
}

// A conversion's signature: the value's extents and dtype (the direction is the cache's second key).
inline std::string conversion_signature(const std::vector<std::int64_t>& extents, memfmt::dtype type) {
  return detail::dims_text(extents) + " " + std::string(memfmt::to_string(type));
}

// Per family (by index(f)): the median ns, or nullopt where the backend cannot run the layer
// in that family.
using family_timings = std::array<std::optional<cost_t>, 2>;

class timing_cache {
 public:
  timing_cache() = default;
  explicit timing_cache(cache_key key) : key_(std::move(key)) {}

  const cache_key& key() const noexcept { return key_; }

  // Whose measurements these are must be `expected`: an error naming both otherwise.
  void require_key(const cache_key& expected, const std::string& what = "timing cache") const {
    if (key_ != expected)
      memfmt::detail::fail(errc::invalid_argument, what + " holds the measurements of " + to_string(key_) +
                                                       ", not of " + to_string(expected) + " (calibrate here instead)");
  }

  // One layer signature in both families; at least one must be measured.
  void record_layer(const std::string& signature, family_timings t) {
    if ((!t[0] && !t[1]) || (t[0] && *t[0] < 0) || (t[1] && *t[1] < 0))
      memfmt::detail::fail(errc::invalid_argument,
                           "timing cache: layer '" + signature + "' needs a cost >= 0 in at least one family");
    layers_[signature] = t;
  }
  // A conversion of `signature` from `from` to the other family.
  void record_conversion(const std::string& signature, format_family from, cost_t ns) {
    if (ns < 0)
      memfmt::detail::fail(errc::invalid_argument, "timing cache: conversion '" + signature + "' from " +
                                                       std::string(memfmt::to_string(from)) + " costs " +
                                                       std::to_string(ns) + " ns < 0");
    conversions_[signature][index(from)] = ns;
  }

  const family_timings* find_layer(const std::string& signature) const {
    const auto it = layers_.find(signature);
    return it == layers_.end() ? nullptr : &it->second;
  }
  std::optional<cost_t> find_conversion(const std::string& signature, format_family from) const {
    const auto it = conversions_.find(signature);
    return it == conversions_.end() ? std::nullopt : it->second[index(from)];
  }

  const std::map<std::string, family_timings>& layers() const noexcept { return layers_; }
  // Per signature, by index of the source family.
  const std::map<std::string, family_timings>& conversions() const noexcept { return conversions_; }

  // Adds `other`'s entries (its key must match); other's measurement wins where both have one.
  void merge(const timing_cache& other) {
    other.require_key(key_, "the timing cache merged in");
    for (const auto& [sig, t] : other.layers_) layers_[sig] = t;
    for (const auto& [sig, t] : other.conversions_)
      for (std::size_t f = 0; f < 2; ++f)
        if (t[f]) conversions_[sig][f] = t[f];
  }

 private:
  cache_key key_;
  std::map<std::string, family_timings> layers_;
  std::map<std::string, family_timings> conversions_;
};

}  // namespace memfmt::graph
