// Shared by the executor model tests: random parameters and input for a network, uniform format
// assignments and the three plans the tests run, the longest reduction behind an output (for
// tolerances), the models' small sizes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "memfmt/dtype.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/network.hpp"
#include "memfmt/graph/plan.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/runtime/parameter_store.hpp"
#include "memfmt/runtime/random_parameters.hpp"

namespace memfmt_test {

inline memfmt::graph::parameter_store make_params(const memfmt::graph::network& net, std::uint32_t seed) {
  return memfmt::runtime::random_parameters(net, seed);
}

// The network's "input" tensor, uniform in [-1, 1).
inline std::vector<float> random_input(const memfmt::graph::network& net, std::uint32_t seed) {
  std::vector<float> x(static_cast<std::size_t>(net.at(*net.find("input")).numel()));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (auto& e : x) e = d(rng);
  return x;
}

inline std::vector<std::optional<memfmt::format_family>> uniform(const memfmt::graph::network& net,
                                                                 memfmt::format_family f) {
  std::vector<std::optional<memfmt::format_family>> a(net.size());
  for (const auto& n : net.nodes()) {
    if (!net.has_format(n.id)) continue;
    const auto* p = n.binding_pin();
    a[n.id] = p && p->mandatory ? p->format : f;
  }
  return a;
}

// All channels_first, all channels_last (where a layer has a choice) and the plan solve() picks
// with `model` (a backend's support query in it keeps to the formats that backend runs).
inline std::vector<std::pair<std::string, memfmt::graph::plan>> plans_of(
    const memfmt::graph::network& net, const memfmt::graph::cost_model& model = memfmt::graph::cost_model{}) {
  using memfmt::format_family;
  const memfmt::graph::cost_model priors{};
  return {{"channels_first", memfmt::graph::make_plan(net, priors, uniform(net, format_family::channels_first))},
          {"channels_last", memfmt::graph::make_plan(net, priors, uniform(net, format_family::channels_last))},
          {"solved", memfmt::graph::solve(net, model)}};
}

// The longest sum behind one output element of a layer: C/groups * kernel for convs, features for
// linears, the group's or channel's size for norms.
inline std::int64_t longest_reduction(const memfmt::graph::network& net) {
  std::int64_t r = 1;
  for (const auto& n : net.nodes())
    for (const auto& p : net.parameters(n.id))
      if (p.trainable && p.extents.size() >= 2)  // weights, not a constant's map
        r = std::max(r, memfmt::detail::checked_numel(p.extents, "test") / p.extents[0]);
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
