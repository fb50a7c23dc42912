// memfmt/dtype.hpp - runtime element types and 16-bit float storage types.
//
// Conversion moves bytes, so it only cares about element size; backends care about the numeric
// type. `dtype` names both; `dtype_of<T>` maps a C++ element type to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "config.hpp"

namespace memfmt {

enum class dtype : std::uint8_t {
  float32,
  float64,
  float16,
  bfloat16,
  int8,
  uint8,
  int16,
  int32,
  int64,
  bool8,
};

constexpr std::size_t size_of(dtype t) noexcept {
  switch (t) {
    case dtype::float64:
    case dtype::int64: return 8;
    case dtype::float32:
    case dtype::int32: return 4;
    case dtype::float16:
    case dtype::bfloat16:
    case dtype::int16: return 2;
    case dtype::int8:
    case dtype::uint8:
    case dtype::bool8: return 1;
  }
  return 0;
}

constexpr std::string_view to_string(dtype t) noexcept {
  switch (t) {
    case dtype::float32: return "float32";
    case dtype::float64: return "float64";
    case dtype::float16: return "float16";
    case dtype::bfloat16: return "bfloat16";
    case dtype::int8: return "int8";
    case dtype::uint8: return "uint8";
    case dtype::int16: return "int16";
    case dtype::int32: return "int32";
    case dtype::int64: return "int64";
    case dtype::bool8: return "bool";
  }
  return "?";
}

constexpr bool is_floating(dtype t) noexcept {
  return t == dtype::float32 || t == dtype::float64 || t == dtype::float16 || t == dtype::bfloat16;
}

// IEEE binary16 storage. Arithmetic goes through float; the conversions round to nearest even.
struct half {
  std::uint16_t bits = 0;
  half() = default;
  explicit half(float f) noexcept : bits(from_float(f)) {}
  explicit operator float() const noexcept { return to_float(bits); }
  friend bool operator==(half a, half b) noexcept { return a.bits == b.bits; }
  friend bool operator!=(half a, half b) noexcept { return a.bits != b.bits; }

  static std::uint16_t from_float(float f) noexcept {
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    if (absx >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
    if (absx < 0x38800000u) {                                                    // subnormal or zero in half
      if (absx < 0x33000000u) return static_cast<std::uint16_t>(sign);
      const std::uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
      const int shift = 126 - static_cast<int>(absx >> 23);  // 14..24
      std::uint32_t r = mant >> shift;
      const std::uint32_t rem = mant & ((1u << shift) - 1u);
      const std::uint32_t halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
      return static_cast<std::uint16_t>(sign | r);
    }
    std::uint32_t r = ((absx >> 13) - (112u << 10));
    const std::uint32_t rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  static float to_float(std::uint16_t h) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t mant = h & 0x3ffu;
    std::uint32_t x;
    if (exp == 0) {
      if (mant == 0) {
        x = sign;
      } else {  // normalise the subnormal
        int e = -1;
        do {
          ++e;
          mant <<= 1;
        } while ((mant & 0x400u) == 0);
        x = sign | (static_cast<std::uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
      }
    } else if (exp == 31) {
      x = sign | 0x7f800000u | (mant << 13);
    } else {
      x = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
};

// bfloat16 storage: the top half of a float32, rounded to nearest even.
struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f) noexcept : bits(from_float(f)) {}
  explicit operator float() const noexcept { return to_float(bits); }
  friend bool operator==(bfloat16 a, bfloat16 b) noexcept { return a.bits == b.bits; }
  friend bool operator!=(bfloat16 a, bfloat16 b) noexcept { return a.bits != b.bits; }

  static std::uint16_t from_float(float f) noexcept {
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<std::uint16_t>(x >> 16);
  }
  static float to_float(std::uint16_t b) noexcept {
    const std::uint32_t x = static_cast<std::uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
};

template <class T>
struct dtype_of;  // undefined for unsupported element types: a compile error names T
template <>
struct dtype_of<float> : std::integral_constant<dtype, dtype::float32> {};
template <>
struct dtype_of<double> : std::integral_constant<dtype, dtype::float64> {};
template <>
struct dtype_of<half> : std::integral_constant<dtype, dtype::float16> {};
template <>
struct dtype_of<bfloat16> : std::integral_constant<dtype, dtype::bfloat16> {};
template <>
struct dtype_of<std::int8_t> : std::integral_constant<dtype, dtype::int8> {};
template <>
struct dtype_of<std::uint8_t> : std::integral_constant<dtype, dtype::uint8> {};
template <>
struct dtype_of<std::int16_t> : std::integral_constant<dtype, dtype::int16> {};
template <>
struct dtype_of<std::int32_t> : std::integral_constant<dtype, dtype::int32> {};
template <>
struct dtype_of<std::int64_t> : std::integral_constant<dtype, dtype::int64> {};
template <>
struct dtype_of<bool> : std::integral_constant<dtype, dtype::bool8> {};
template <class T>
struct dtype_of<const T> : dtype_of<T> {};

template <class T>
inline constexpr dtype dtype_of_v = dtype_of<T>::value;

// The parameter and statistics type of element type T (gamma, beta, running and saved statistics):
// double for double data, float for float, half and bfloat16 data, as in PyTorch and cuDNN.
template <class T>
using param_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

}  // namespace memfmt
