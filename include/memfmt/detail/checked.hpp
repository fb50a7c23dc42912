// memfmt/detail/checked.hpp - the one place where size, stride, span and byte arithmetic is checked.
//
// Every public entry point that takes extents or strides computes products, sums, spans and byte
// counts through these helpers, so a value that does not fit in 64 bits is an errc::overflow that
// names the operands, never a wrapped integer. `what` names the caller and the quantity ("view_as:
// element count"); the helpers append the values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>

#include "../error.hpp"

namespace memfmt::detail {

// Non-throwing forms for code that reports in its own words (or tests several candidates).
inline bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t* out) noexcept {
  return __builtin_mul_overflow(a, b, out);
}
inline bool add_overflows(std::int64_t a, std::int64_t b, std::int64_t* out) noexcept {
  return __builtin_add_overflow(a, b, out);
}
inline bool sub_overflows(std::int64_t a, std::int64_t b, std::int64_t* out) noexcept {
  return __builtin_sub_overflow(a, b, out);
}

// data + byte_offset for an address: false when it fits in uintptr_t.
inline bool add_address_overflows(std::uintptr_t address, std::uint64_t offset, std::uintptr_t* out) noexcept {
  return __builtin_add_overflow(address, offset, out);
}

// Product of max(size, 1) over sizes >= 0: how far the strides of a dense layout of these sizes
// reach (size-0 and size-1 dimensions take a factor of 1, as at::empty's strides do). When it
// fits, every dense stride, the element count and the span of any dense layout fit too.
template <class Range>
bool dense_extent_overflows(const Range& sizes, std::int64_t* out) noexcept {
  std::int64_t n = 1;
  for (auto s : sizes) {
    const std::int64_t f = s > 1 ? static_cast<std::int64_t>(s) : 1;
    if (mul_overflows(n, f, &n)) return true;
  }
  *out = n;
  return false;
}

// Throwing forms: a * b, a + b, a - b, or errc::overflow naming both operands.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, const std::string& what) {
  std::int64_t r = 0;
  if (mul_overflows(a, b, &r))
    fail(errc::overflow, what + ": " + std::to_string(a) + " * " + std::to_string(b) + " overflows 64 bits");
  return r;
}
inline std::int64_t checked_add(std::int64_t a, std::int64_t b, const std::string& what) {
  std::int64_t r = 0;
  if (add_overflows(a, b, &r))
    fail(errc::overflow, what + ": " + std::to_string(a) + " + " + std::to_string(b) + " overflows 64 bits");
  return r;
}
inline std::int64_t checked_sub(std::int64_t a, std::int64_t b, const std::string& what) {
  std::int64_t r = 0;
  if (sub_overflows(a, b, &r))
    fail(errc::overflow, what + ": " + std::to_string(a) + " - " + std::to_string(b) + " overflows 64 bits");
  return r;
}

// The same with a context built only on failure (`what()` returns it): for validation that runs
// on every call of a layer.
template <class What, class = std::enable_if_t<std::is_invocable_r_v<std::string, What>>>
std::int64_t checked_add(std::int64_t a, std::int64_t b, const What& what) {
  std::int64_t r = 0;
  if (add_overflows(a, b, &r)) checked_add(a, b, what());
  return r;
}
template <class What, class = std::enable_if_t<std::is_invocable_r_v<std::string, What>>>
std::int64_t checked_mul(std::int64_t a, std::int64_t b, const What& what) {
  std::int64_t r = 0;
  if (mul_overflows(a, b, &r)) checked_mul(a, b, what());
  return r;
}

// Product of sizes; throws invalid_argument for a negative size and overflow past int64. A zero
// size makes the product 0 whatever the others are (an empty tensor of huge extents is valid).
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
      fail(errc::overflow,
           std::string(what) + ": element count of sizes " + dims_to_string(sizes) + " overflows 64 bits");
  }
  return n;
}

// dense_extent_overflows, throwing: invalid_argument for a negative size, overflow naming the sizes.
template <class Range>
std::int64_t checked_dense_extent(const Range& sizes, const std::string& what) {
  for (auto s : sizes)
    if (s < 0) fail(errc::invalid_argument, what + ": negative size in sizes " + dims_to_string(sizes));
  std::int64_t n = 0;
  if (dense_extent_overflows(sizes, &n))
    fail(errc::overflow, what + ": the dense strides of sizes " + dims_to_string(sizes) + " overflow 64 bits");
  return n;
}

// The number of elements from the lowest to the highest addressed element, inclusive:
// 1 + sum((size - 1) * |stride|), 0 for an empty tensor. Sizes must be >= 0; strides may be negative.
// Throws errc::overflow naming sizes and strides when any step does not fit.
// The non-throwing form for sizes >= 0: true when the span does not fit.
template <class Sizes, class Strides>
bool span_overflows(const Sizes& sizes, const Strides& strides, std::int64_t* out) noexcept {
  std::int64_t span = 1;
  auto st = std::begin(strides);
  bool ok = true;
  for (auto s : sizes) {
    if (s == 0) {
      *out = 0;
      return false;
    }
    const std::int64_t stride = static_cast<std::int64_t>(*st++);
    if (s == 1) continue;  // a size-1 dimension adds nothing, whatever its stride
    if (stride == std::numeric_limits<std::int64_t>::min()) {
      ok = false;
      continue;
    }
    const std::int64_t mag = stride < 0 ? -stride : stride;
    std::int64_t step = 0;
    if (mul_overflows(static_cast<std::int64_t>(s) - 1, mag, &step) || add_overflows(span, step, &span)) ok = false;
  }
  *out = span;
  return !ok;
}

template <class Sizes, class Strides>
std::int64_t checked_span(const Sizes& sizes, const Strides& strides, const char* what) {
  for (auto s : sizes)
    if (s < 0) fail(errc::invalid_argument, std::string(what) + ": negative size in sizes " + dims_to_string(sizes));
  std::int64_t span = 0;
  const bool overflowed = span_overflows(sizes, strides, &span);
  if (overflowed)
    fail(errc::overflow, std::string(what) + ": the span of sizes " + dims_to_string(sizes) + " with strides " +
                             dims_to_string(strides) + " overflows 64 bits");
  return span;
}

inline std::size_t checked_bytes(std::int64_t numel, std::size_t elem_size, const char* what) {
  std::int64_t bytes = 0;
  if (numel < 0) fail(errc::invalid_argument, std::string(what) + ": negative element count " + std::to_string(numel));
  if (mul_overflows(numel, static_cast<std::int64_t>(elem_size), &bytes) ||
      static_cast<std::uint64_t>(bytes) > std::numeric_limits<std::size_t>::max())
    fail(errc::overflow, std::string(what) + ": " + std::to_string(numel) + " elements of " +
                             std::to_string(elem_size) + " bytes overflow the address space");
  return static_cast<std::size_t>(bytes);
}

}  // namespace memfmt::detail
