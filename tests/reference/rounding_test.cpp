// The reference rounds each double result once to T. Checked against brute force: for every double
// tried, the nearest representable value (ties to even) found by searching the type's sorted values.
// The interesting inputs sit just beside a halfway point, where double -> float -> 16-bit would
// round twice and land on the wrong side.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"

namespace {

using namespace memfmt;

// Non-negative finite values of a 16-bit type (as double, ascending, bit pattern order), plus the
// first value past the largest, standing for infinity (where overflowing values round to).
template <class T>
struct value_table {
  std::vector<double> value;
  std::vector<std::uint16_t> bits;
  value_table() {
    for (std::uint32_t b = 0; b < 0x8000u; ++b) {
      T t;
      t.bits = static_cast<std::uint16_t>(b);
      const double v = static_cast<double>(static_cast<float>(t));
      if (!std::isfinite(v)) break;  // the first non-finite pattern is +inf; everything after is NaN
      value.push_back(v);
      bits.push_back(static_cast<std::uint16_t>(b));
    }
    const double last_step = value.back() - value[value.size() - 2];
    value.push_back(value.back() + last_step);  // "infinity" continues the last binade's spacing
    bits.push_back(bits.back() + 1);            // the +inf pattern
  }
  // Nearest value, ties to the even bit pattern, by search (the sign is applied by the caller).
  std::uint16_t round(double a) const {
    if (a >= value.back()) return bits.back();
    const auto hi = static_cast<std::size_t>(std::upper_bound(value.begin(), value.end(), a) - value.begin());
    const std::size_t lo = hi - 1;
    if (value[lo] == a) return bits[lo];
    const double mid = value[lo] + (value[hi] - value[lo]) / 2;  // exact in double
    if (a < mid) return bits[lo];
    if (a > mid) return bits[hi];
    return (bits[lo] & 1u) == 0 ? bits[lo] : bits[hi];
  }
  std::uint16_t round_signed(double v) const {
    const std::uint16_t m = round(std::fabs(v));
    return std::signbit(v) ? static_cast<std::uint16_t>(m | 0x8000u) : m;
  }
};

template <class T>
void check_rounding() {
  const value_table<T> table;
  std::vector<double> inputs;
  // Beside every halfway point (and on it) between adjacent values, in every binade.
  for (std::size_t i = 0; i + 1 < table.value.size(); i += 7) {
    const double mid = table.value[i] + (table.value[i + 1] - table.value[i]) / 2;
    for (double rel : {0.0, 1e-12, -1e-12, 1e-9, -1e-9, 0x1p-30, -0x1p-30})
      inputs.push_back(mid * (1 + rel) + (mid == 0 ? rel : 0));
    inputs.push_back(table.value[i]);
  }
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20000; ++i) {
    const double mag = std::ldexp(1.0, std::uniform_int_distribution<int>(-30, 20)(rng));
    inputs.push_back(std::uniform_real_distribution<double>(-mag, mag)(rng));
  }
  inputs.push_back(1e300);
  inputs.push_back(-1e300);
  int bad = 0;
  for (double v : inputs) {
    const std::uint16_t want = table.round_signed(v);
    const std::uint16_t got = reference::detail::from_double<T>(v).bits;
    if (got != want && ++bad <= 5)
      ADD_FAILURE() << std::hexfloat << v << ": got bits 0x" << std::hex << got << ", want 0x" << want;
  }
  EXPECT_EQ(bad, 0);
}

TEST(ReferenceRounding, HalfIsRoundedOnceFromDouble) { check_rounding<half>(); }
TEST(ReferenceRounding, Bfloat16IsRoundedOnceFromDouble) { check_rounding<bfloat16>(); }

// The case double rounding gets wrong, explicitly: 1 + 2^-11 + 2^-40 is above the halfway point
// between the halves 1 and 1 + 2^-10, so it rounds up; through float it would first become exactly
// 1 + 2^-11 (a tie) and then round to even, down to 1.
TEST(ReferenceRounding, NoDoubleRoundingExample) {
  const double v = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(static_cast<float>(half(static_cast<float>(v))), 1.0f);  // the twice-rounded answer
  EXPECT_EQ(static_cast<float>(reference::detail::from_double<half>(v)), 1.0f + 0x1p-10f);
}

TEST(ReferenceRounding, FloatIsCorrectlyRoundedWithoutOverflowUB) {
  const double fmax = std::numeric_limits<float>::max();
  EXPECT_EQ(reference::detail::from_double<float>(1e300), std::numeric_limits<float>::infinity());
  EXPECT_EQ(reference::detail::from_double<float>(-1e300), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(reference::detail::from_double<float>(fmax + 0x1p102),
            std::numeric_limits<float>::max());  // below half an ulp
  EXPECT_EQ(reference::detail::from_double<float>(fmax + 0x1p103),
            std::numeric_limits<float>::infinity());                      // tie -> even (inf)
  EXPECT_EQ(reference::detail::from_double<float>(1.0 + 0x1p-24), 1.0f);  // tie -> even
  EXPECT_EQ(reference::detail::from_double<float>(1.0 + 0x1p-24 + 0x1p-50), 1.0f + 0x1p-23f);
  EXPECT_TRUE(std::isnan(reference::detail::from_double<float>(std::nan(""))));
  EXPECT_TRUE(std::isnan(static_cast<float>(reference::detail::from_double<half>(std::nan("")))));
}

}  // namespace
