// What the fuzz targets that run networks share: a budget that keeps each input to milliseconds
// on the reference backend under the sanitizers, deterministic input values, and the comparison of
// two runs' float outputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "memfmt/graph/network.hpp"

namespace memfmt_fuzz {

// Multiply-adds of a forward pass, and elements of the largest value or parameter, past which a
// network is not run.
inline constexpr double max_forward_work = 2e6;
inline constexpr std::int64_t max_value_elements = std::int64_t{1} << 18;

// Multiply-adds and element reads of a forward pass, roughly: what each output element reads.
// Past max_forward_work (or a value or parameter past max_value_elements) it stops counting.
inline double forward_work(const memfmt::graph::network& net) {
  using memfmt::layer_kind;
  double work = 0;
  for (const memfmt::graph::node& n : net.nodes()) {
    if (n.numel() > max_value_elements) return max_forward_work + 1;
    for (const memfmt::graph::parameter_spec& p : net.parameters(n.id))
      if (memfmt::detail::checked_numel(p.extents, "parameter") > max_value_elements) return max_forward_work + 1;
    double per_output = 4;
    const auto input_channels = [&] {
      const auto& e = net.at(n.inputs.at(0)).extents;
      return e.size() > 1 ? static_cast<double>(e[1]) : 1.0;
    };
    const auto volume = [](const memfmt::spatial3& k) {
      return static_cast<double>(k[0]) * static_cast<double>(k[1]) * static_cast<double>(k[2]);
    };
    switch (n.kind) {
      case layer_kind::conv: {
        const auto& a = n.get<memfmt::graph::conv_attrs>();
        per_output = input_channels() / static_cast<double>(a.params.groups) * volume(a.kernel);
        break;
      }
      case layer_kind::conv_transpose: {
        const auto& a = n.get<memfmt::graph::conv_transpose_attrs>();
        per_output = input_channels() / static_cast<double>(a.params.groups) * volume(a.kernel);
        break;
      }
      case layer_kind::pool: per_output = volume(n.get<memfmt::pool_params>().kernel); break;
      case layer_kind::linear:
      case layer_kind::global_pool: {
        const auto& in = net.at(n.inputs.at(0));
        per_output = static_cast<double>(in.numel()) / static_cast<double>(std::max<std::int64_t>(1, in.extents[0]));
        break;
      }
      default: break;
    }
    work += static_cast<double>(n.numel()) * per_output;
    if (work > max_forward_work) return work;
  }
  return work;
}

// n deterministic values in [-1, 1] (no two neighbours equal, so max pooling meets no ties).
inline std::vector<float> input_values(std::int64_t n, double phase = 0.3) {
  std::vector<float> v(static_cast<std::size_t>(std::max<std::int64_t>(0, n)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i) + phase));
  return v;
}

// Float32 values as bytes and back (host byte order, as tensors and parameter stores hold them).
inline std::vector<std::byte> to_bytes(const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
inline std::vector<float> to_floats(const std::vector<std::byte>& b) {
  std::vector<float> v(b.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
  return v;
}

// Two runs' values of one tensor agree up to the rounding another fusion or summation order gives:
// within 1e-3 of the larger magnitude. Tensors with non-finite or huge values (random weights
// overflow easily) are not compared.
inline void require_close(const std::vector<float>& a, const std::vector<float>& b, const std::string& what,
                          const char* first, const char* second) {
  require(a.size() == b.size(), what + " has " + std::to_string(a.size()) + " elements " + first + " and " +
                                    std::to_string(b.size()) + " " + second);
  double scale = 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return;
    scale = std::max({scale, std::fabs(static_cast<double>(a[i])), std::fabs(static_cast<double>(b[i]))});
  }
  if (scale > 1e6) return;
  for (std::size_t i = 0; i < a.size(); ++i)
    require(std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])) <= 1e-3 * scale,
            what + " element " + std::to_string(i) + " is " + std::to_string(a[i]) + " " + first + " and " +
                std::to_string(b[i]) + " " + second);
}

}  // namespace memfmt_fuzz
