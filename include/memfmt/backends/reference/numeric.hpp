// memfmt/backends/reference/numeric.hpp - element types of the reference backend and their rounding.
//
// The reference computes in double and rounds once, at the end, to the element type. For half and
// bfloat16 a double -> float -> 16-bit chain would round twice (and can be off by one ulp at ties),
// so the double is first rounded to float *to odd* (truncate, then set the sticky last bit when
// inexact): float has more than 2 spare bits over either 16-bit type, which makes the second,
// round-to-nearest-even step exact as if done directly from the double.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "../../dtype.hpp"

namespace memfmt::reference {

// The element types the reference backend computes with.
template <class T>
inline constexpr bool is_reference_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

namespace detail {

template <class T>
constexpr void check_element_type() {
  static_assert(is_reference_type_v<T>, "memfmt::reference: T must be float, double, half or bfloat16");
}

// acc + a * b, rounded once. Sums of products are written with it because compilers fuse a * b + acc
// into an FMA in some loops and not in others (a vectorised in-order reduction keeps the two
// roundings), which would make one format's result differ in the last bit from another's.
inline double mul_add(double a, double b, double acc) noexcept { return std::fma(a, b, acc); }

template <class T>
inline double to_double(T v) noexcept {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else if constexpr (std::is_same_v<T, float>) {
    return static_cast<double>(v);
  } else {
    return static_cast<double>(static_cast<float>(v));  // half/bfloat16 -> float is exact
  }
}

// Correctly rounded double -> float without the undefined behaviour of casting an out-of-range
// double (IEEE: values at or past FLT_MAX + half an ulp round to infinity, the rest to FLT_MAX).
inline float double_to_float(double v) noexcept {
  constexpr double max_f = static_cast<double>(std::numeric_limits<float>::max());
  constexpr double overflow_at = max_f + 0x1p103;  // FLT_MAX + half an ulp (2^104 / 2)
  if (std::isfinite(v) && std::fabs(v) > max_f) {
    const float big =
        std::fabs(v) >= overflow_at ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::max();
    return v < 0 ? -big : big;
  }
  return static_cast<float>(v);
}

// double -> float rounded to odd: exact values pass, inexact ones truncate toward zero and get
// their lowest mantissa bit set. Out-of-range values become +-FLT_MAX (odd), which every 16-bit
// type then rounds to infinity as the direct rounding would.
inline float double_to_float_round_odd(double v) noexcept {
  if (std::isnan(v)) return std::numeric_limits<float>::quiet_NaN();
  constexpr double max_f = static_cast<double>(std::numeric_limits<float>::max());
  if (std::isfinite(v) && std::fabs(v) > max_f)
    return v < 0 ? -std::numeric_limits<float>::max() : std::numeric_limits<float>::max();
  float f = static_cast<float>(v);
  if (static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);  // truncate
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1u;  // sticky: "something was dropped"
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round a double to T once (round to nearest, ties to even).
template <class T>
inline T from_double(double v) noexcept {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else if constexpr (std::is_same_v<T, float>) {
    return double_to_float(v);
  } else {
    T r;
    r.bits = T::from_float(double_to_float_round_odd(v));
    return r;
  }
}

}  // namespace detail
}  // namespace memfmt::reference
