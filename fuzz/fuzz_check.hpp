// Shared pieces of the fuzz targets: a property check that stops the fuzzer with a message, and a
// brute-force enumeration of the offsets of small strided tensors (the independent truth the
// targets compare against).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "memfmt/error.hpp"

namespace memfmt_fuzz {

using dims = std::vector<std::int64_t>;

// A property that failed: print it and abort, which libFuzzer reports as a crash with the input.
[[noreturn]] inline void property_failed(const std::string& what) {
  std::fprintf(stderr, "memfmt fuzz: property violated: %s\n", what.c_str());
  std::abort();
}
inline void require(bool ok, const std::string& what) {
  if (!ok) property_failed(what);
}

// The reader's answer, or nullopt when it refused the input with a memfmt::error (what malformed
// input should get).
template <class F>
auto accepted(F&& read) -> std::optional<decltype(read())> {
  try {
    return read();
  } catch (const memfmt::error&) {
    return std::nullopt;
  }
}

// A step that must succeed on what a reader accepted (writing it, reading
// the writer's output back).
template <class F>
auto must(const char* what, F&& step) -> decltype(step()) {
  try {
    return step();
  } catch (const memfmt::error& e) {
    memfmt_fuzz::property_failed(std::string(what) + " failed: " + e.what());
  }
}

inline std::string describe(const dims& sizes, const dims& strides) {
  return "sizes " + memfmt::detail::dims_to_string(sizes) + " strides " + memfmt::detail::dims_to_string(strides);
}

// Element count when it is at most `limit` (sizes >= 0), else -1: what brute force can enumerate.
inline std::int64_t small_numel(const dims& sizes, std::int64_t limit) {
  std::int64_t n = 1;
  for (auto s : sizes) {
    if (s == 0) return 0;
  }
  for (auto s : sizes) {
    if (s > limit) return -1;
    n *= s;
    if (n > limit) return -1;
  }
  return n;
}

// Calls f(coord, offset) for every coordinate in row-major order; offset = sum(coord * stride).
// Only for tensors small_numel() accepts, with strides whose offsets fit (|stride| < 2^40).
template <class F>
void for_each_offset(const dims& sizes, const dims& strides, F&& f) {
  const std::size_t rank = sizes.size();
  for (auto s : sizes)
    if (s == 0) return;
  dims c(rank, 0);
  while (true) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < rank; ++d) off += c[d] * strides[d];
    f(c, off);
    std::size_t d = rank;
    while (d > 0) {
      --d;
      if (++c[d] < sizes[d]) break;
      c[d] = 0;
      if (d == 0) return;
    }
    if (rank == 0) return;
  }
}

// Row-major index of coordinate c over the dimensions in `order` (outermost first): the offset
// of c in data dense in that order.
inline std::int64_t linear_index(const dims& sizes, const dims& c, const std::vector<std::size_t>& order) {
  std::int64_t i = 0;
  for (auto d : order) i = i * sizes[d] + c[d];
  return i;
}

// True when the offsets of (sizes, strides) are exactly {0, ..., numel - 1}: non-overlapping and
// dense, by enumeration. `numel` must come from small_numel().
inline bool offsets_are_a_permutation(const dims& sizes, const dims& strides, std::int64_t numel) {
  std::vector<char> seen(static_cast<std::size_t>(numel), 0);
  bool ok = true;
  for_each_offset(sizes, strides, [&](const dims&, std::int64_t off) {
    if (off < 0 || off >= numel || seen[static_cast<std::size_t>(off)]) ok = false;
    else seen[static_cast<std::size_t>(off)] = 1;
  });
  return ok;
}

}  // namespace memfmt_fuzz
