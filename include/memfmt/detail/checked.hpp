// memfmt/detail/checked.hpp - overflow-checked size arithmetic for host-side validation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "../error.hpp"

namespace memfmt::detail {

// a * b, or nullopt-like failure through `ok`.
inline bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t* out) noexcept {
  return __builtin_mul_overflow(a, b, out);
}

// Product of sizes; throws invalid_argument for a negative size and overflow past int64.
template <class Range>
std::int64_t checked_numel(const Range& sizes, const char* what) {
  std::int64_t n = 1;
  bool zero = false;
  for (auto s : sizes) {
    if (s < 0) fail(errc::invalid_argument, std::string(what) + ": negative size in sizes " + dims_to_string(sizes));
    if (s == 0) zero = true;
  }
  if (zero) return 0;
  for (auto s : sizes) {
    if (mul_overflows(n, static_cast<std::int64_t>(s), &n))
      fail(errc::overflow, std::string(what) + ": element count of sizes " + dims_to_string(sizes) +
                               " overflows 64 bits");
  }
  return n;
}

inline std::size_t checked_bytes(std::int64_t numel, std::size_t elem_size, const char* what) {
  std::int64_t bytes = 0;
  if (mul_overflows(numel, static_cast<std::int64_t>(elem_size), &bytes) ||
      static_cast<std::uint64_t>(bytes) > std::numeric_limits<std::size_t>::max())
    fail(errc::overflow, std::string(what) + ": " + std::to_string(numel) + " elements of " +
                             std::to_string(elem_size) + " bytes overflow the address space");
  return static_cast<std::size_t>(bytes);
}

}  // namespace memfmt::detail
