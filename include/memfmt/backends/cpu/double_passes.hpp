// memfmt/backends/cpu/double_passes.hpp - the double arithmetic the CPU norm kernels vectorise.
//
// The group and layer norm kernels (cpu/group_norm.hpp, cpu/layer_norm.hpp) sum and normalise in
// double, as the reference does, in plain loops the compiler vectorises: sums in eight interleaved
// partials, and outputs rounded without branches.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "float_io.hpp"

namespace memfmt::cpu::double_passes {

// sum over i < len of f(i) in eight interleaved partial sums: a fixed order the compiler can
// vectorise (a single running double sum is a chain of dependent adds).
template <class F>
double sum8(std::int64_t len, F&& f) {
  double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 8 <= len; i += 8)
    for (int j = 0; j < 8; ++j) l[j] += f(i + j);
  for (int j = 0; i < len; ++i, ++j) l[j] += f(i);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// The output rounding of the passes over a shared layout, without branches so the loops vectorise:
// float as the reference rounds it; 16-bit types through float (the extra rounding step at most
// moves a tie by one unit). The reference's correctly rounded double -> 16-bit conversion costs a
// library call per element.
template <class T>
T round_out(double v) noexcept {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    // An IEEE float's range is [-inf, inf], so every double converts, rounded to nearest even, past
    // FLT_MAX + half an ulp to infinity: what the reference's double_to_float spells out.
    static_assert(std::numeric_limits<float>::is_iec559, "IEEE float conversion");
    return from_float<T>(static_cast<float>(v));
  }
}

}  // namespace memfmt::cpu::double_passes
