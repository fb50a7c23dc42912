// Shared by the executor model tests: random parameters for a network, uniform format
// assignments, the longest reduction behind an output (for tolerances), the models' small sizes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "memfmt/dtype.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/network.hpp"
#include "memfmt/runtime/parameter_store.hpp"

namespace memfmt_test {

// Weights uniform in +-sqrt(3 / fan_in) (unit variance through each layer, so deep nets neither
// vanish nor blow up), batch norm statistics near the identity.
inline memfmt::runtime::parameter_store make_params(const memfmt::graph::network& net, std::uint32_t seed) {
  std::mt19937 rng(seed);
  memfmt::runtime::parameter_store s;
  for (const auto& n : net.nodes())
    for (const auto& p : net.parameters(n.id)) {
      const auto count = static_cast<std::size_t>(memfmt::detail::checked_numel(p.extents, "test"));
      if (p.type == memfmt::dtype::int64) {
        s.insert<std::int64_t>(p.name, p.extents, std::vector<std::int64_t>(count, 0));
        continue;
      }
      float lo = -0.1f, hi = 0.1f;
      const auto ends = [&](const char* suffix) {
        const std::string t(suffix);
        return p.name.size() >= t.size() && p.name.compare(p.name.size() - t.size(), t.size(), t) == 0;
      };
      if (ends("running_var")) lo = 0.5f, hi = 1.5f;
      else if (ends("weight") && p.extents.size() == 1) lo = 0.5f, hi = 1.5f;
      else if (ends("weight")) {
        const float fan_in = static_cast<float>(count / static_cast<std::size_t>(p.extents[0]));
        hi = std::sqrt(3.f / fan_in);
        lo = -hi;
      }
      std::uniform_real_distribution<float> d(lo, hi);
      std::vector<float> v(count);
      for (auto& e : v) e = d(rng);
      if (p.type == memfmt::dtype::bfloat16) {
        std::vector<memfmt::bfloat16> b(count);
        for (std::size_t i = 0; i < count; ++i) b[i] = static_cast<memfmt::bfloat16>(v[i]);
        s.insert<memfmt::bfloat16>(p.name, p.extents, b);
      } else {
        s.insert<float>(p.name, p.extents, v);
      }
    }
  return s;
}

inline std::vector<std::optional<memfmt::graph::family>> uniform(const memfmt::graph::network& net, memfmt::graph::family f) {
  std::vector<std::optional<memfmt::graph::family>> a(net.size());
  for (const auto& n : net.nodes()) {
    if (!net.has_format(n.id)) continue;
    const auto* p = n.binding_pin();
    a[n.id] = p && p->mandatory ? p->format : f;
  }
  return a;
}

// The longest sum behind one output element of a layer: C/groups * kernel for convs, features for
// linears, the group's or channel's size for norms.
inline std::int64_t longest_reduction(const memfmt::graph::network& net) {
  std::int64_t r = 1;
  for (const auto& n : net.nodes())
    for (const auto& p : net.parameters(n.id))
      if (p.extents.size() >= 2) r = std::max(r, memfmt::detail::checked_numel(p.extents, "test") / p.extents[0]);
  return r;
}

inline memfmt::graph::models::options small(double width, std::int64_t resolution) {
  memfmt::graph::models::options o;
  o.batch = 2;
  o.resolution = resolution;
  o.width = width;
  o.classes = 10;
  o.frames = 4;
  return o;
}

}  // namespace memfmt_test
