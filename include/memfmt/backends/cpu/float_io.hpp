// memfmt/backends/cpu/float_io.hpp - element I/O through float for the CPU kernels.
//
// The fast CPU kernels compute 16-bit data in float: each element widens to float on the way in
// (exact) and rounds to nearest even on the way out. One pair of functions spells that for float,
// half and bfloat16, so every kernel rounds its outputs the same way.
#pragma once

#include <type_traits>

#include "../../dtype.hpp"

namespace memfmt::cpu {

// The element types stored through float: float itself and the 16-bit floating types.
template <class T>
inline constexpr bool is_float_io_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// v as a float: exact for each of these types.
template <class T>
float to_float(T v) noexcept {
  static_assert(is_float_io_type_v<T>, "memfmt::cpu::to_float: T must be float, half or bfloat16");
  return static_cast<float>(v);
}

// v rounded to T (to nearest even; float itself is returned as it is).
template <class T>
T from_float(float v) noexcept {
  static_assert(is_float_io_type_v<T>, "memfmt::cpu::from_float: T must be float, half or bfloat16");
  return T(v);
}

}  // namespace memfmt::cpu
