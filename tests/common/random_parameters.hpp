// tests/common/random_parameters.hpp - a parameter store for every tensor a network names, random
// but valid (positive running variances), float32 weights.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "memfmt/detail/checked.hpp"
#include "memfmt/graph/network.hpp"
#include "memfmt/runtime/parameter_store.hpp"

namespace memfmt_test {

inline memfmt::runtime::parameter_store random_parameters(const memfmt::graph::network& net, std::uint32_t seed) {
  std::mt19937 rng(seed);
  memfmt::runtime::parameter_store s;
  for (const auto& n : net.nodes())
    for (const auto& p : net.parameters(n.id)) {
      const auto count = static_cast<std::size_t>(memfmt::detail::checked_numel(p.extents, "test"));
      if (p.type == memfmt::dtype::int64) {
        s.insert<std::int64_t>(p.name, p.extents, std::vector<std::int64_t>(count, 0));
        continue;
      }
      const bool positive = p.name.find("running_var") != std::string::npos;
      std::uniform_real_distribution<float> d(positive ? 0.5f : -0.3f, positive ? 1.5f : 0.3f);
      std::vector<float> v(count);
      for (auto& e : v) e = d(rng);
      s.insert<float>(p.name, p.extents, v);
    }
  return s;
}

}  // namespace memfmt_test
