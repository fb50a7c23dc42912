// memfmt/runtime/random_parameters.hpp - a network's parameters filled with random values.
//
// For examples, tests and benchmarks that run a network without trained weights: every tensor
// network::parameters() names, with its dtype and shape, and values that keep activations of a
// deep network near unit scale.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "../detail/checked.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../graph/network.hpp"
#include "parameter_store.hpp"

namespace memfmt::runtime {

// Every parameter of `net` (network::parameters()) drawn from a generator seeded with `seed`:
// weights of rank >= 2 uniform in +-sqrt(3 / fan_in) (unit variance through each layer, so deep
// nets neither vanish nor blow up), norm scales, running variances and constants in [0.5, 1.5]
// (a constant may scale or divide), biases and running means in +-0.1, integer tensors (batch
// counts) 0. float32, float64 and bfloat16 parameters get the float draws rounded to their type;
// float16 ones are an error.
inline parameter_store random_parameters(const graph::network& net, std::uint32_t seed) {
  std::mt19937 rng(seed);
  parameter_store s;
  for (const auto& n : net.nodes())
    for (const auto& p : net.parameters(n.id)) {
      const auto count = static_cast<std::size_t>(memfmt::detail::checked_numel(p.extents, p.name.c_str()));
      if (p.type == dtype::int64) {
        s.insert<std::int64_t>(p.name, p.extents, std::vector<std::int64_t>(count, 0));
        continue;
      }
      float lo = -0.1f, hi = 0.1f;
      const auto ends = [&](const char* suffix) {
        const std::string t(suffix);
        return p.name.size() >= t.size() && p.name.compare(p.name.size() - t.size(), t.size(), t) == 0;
      };
      if (ends("running_var") || n.kind == layer_kind::constant) lo = 0.5f, hi = 1.5f;
      else if (ends("weight") && p.extents.size() == 1) lo = 0.5f, hi = 1.5f;
      else if (ends("weight")) {
        const float fan_in = static_cast<float>(count / static_cast<std::size_t>(p.extents[0]));
        hi = std::sqrt(3.f / fan_in);
        lo = -hi;
      }
      std::uniform_real_distribution<float> d(lo, hi);
      std::vector<float> v(count);
      for (auto& e : v) e = d(rng);
      if (p.type == dtype::float32) s.insert<float>(p.name, p.extents, v);
      else if (p.type == dtype::float64) s.insert<double>(p.name, p.extents, std::vector<double>(v.begin(), v.end()));
      else if (p.type == dtype::bfloat16)
        s.insert<bfloat16>(p.name, p.extents, std::vector<bfloat16>(v.begin(), v.end()));
      else
        memfmt::detail::fail(errc::unsupported_dtype, "random_parameters: '" + p.name + "' is " +
                                                          std::string(to_string(p.type)) +
                                                          " (float32, float64, bfloat16 or int64 drawn)");
    }
  return s;
}

}  // namespace memfmt::runtime
