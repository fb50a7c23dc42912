// memfmt/backends/cpu/permuted_copy.hpp - a permuted copy (layers/permuted_copy.hpp) on host
// memory, for the oneDNN backend's slices and rearrangements: oneDNN's reorder moves strided reads
// element by element (BM_slice/.../w_step2 in bench_conv).
//
// A batch of whole-matrix transposes goes to memfmt::convert. Otherwise the compacted copy's
// innermost dim is a row: one block copy where both sides are contiguous,
// vector permutes for a source stride of 2 (YOLOv5's Focus phases), a strided loop otherwise. The
// rows, indexed over the other dims, are shared out with OpenMP in contiguous ranges
// (thread_shares.hpp), each written by one thread; every element moves once, so any thread count
// gives the same bytes.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "../../convert/convert.hpp"
#include "../../error.hpp"
#include "../../format/tags.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../../layers/permuted_copy.hpp"
#include "thread_shares.hpp"

namespace memfmt::cpu {
namespace permuted_copy_detail {

// Copies smaller than this many elements in all are not worth a thread team.
inline constexpr std::int64_t parallel_min_elements = std::int64_t{1} << 15;

// dst[i] = src[2 i]: 8 elements at a time from two vectors of 8 (one permute instruction with
// AVX-512; GCC at -O2 leaves the plain loop scalar).
template <class E>
void copy_evens(const E* src, E* dst, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
  typedef E vec8 __attribute__((vector_size(8 * sizeof(E))));
  for (; i + 8 <= n; i += 8) {
    vec8 a, b;
    std::memcpy(&a, src + 2 * i, sizeof a);
    std::memcpy(&b, src + 2 * i + 8, sizeof b);
    const vec8 r = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
    std::memcpy(dst + i, &r, sizeof r);
  }
#endif
  for (; i < n; ++i) dst[i] = src[2 * i];
}

template <class E>
void copy_row(const E* src, E* dst, std::int64_t n, std::int64_t from, std::int64_t to) {
  if (from == 1 && to == 1 && n <= 4) {  // a few channels (an RGB image's): no call per row
    for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
  } else if (from == 1 && to == 1) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(E));
  } else if (from == 2 && to == 1) {
    copy_evens(src, dst, n);
  } else {
    for (std::int64_t i = 0; i < n; ++i) dst[i * to] = src[i * from];
  }
}

// Rows [r0, r1) of compacted copy c (rank >= 1): the row index is split over the outer dims once,
// then advanced like an odometer.
template <class E>
void copy_rows(const permuted_copy& c, const E* from, E* to, std::int64_t r0, std::int64_t r1) {
  const int last = c.rank - 1;
  std::array<std::int64_t, 6> index{};
  std::int64_t src = 0, dst = 0, rest = r0;
  for (int d = last - 1; d >= 0; --d) {
    const auto u = static_cast<std::size_t>(d);
    index[u] = rest % c.extents[u];
    rest /= c.extents[u];
    src += index[u] * c.from[u];
    dst += index[u] * c.to[u];
  }
  const auto l = static_cast<std::size_t>(last);
  for (std::int64_t r = r0; r < r1; ++r) {
    copy_row(from + src, to + dst, c.extents[l], c.from[l], c.to[l]);
    for (int d = last - 1; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      src += c.from[u];
      dst += c.to[u];
      if (++index[u] < c.extents[u]) break;
      src -= c.from[u] * c.extents[u];
      dst -= c.to[u] * c.extents[u];
      index[u] = 0;
    }
  }
}

// A batch of whole-matrix transposes, [B, P, Q] with y's rows contiguous and x's columns (a
// channels-first transpose of H and W, a channels-last channel shuffle), runs as memfmt::convert's
// cache-blocked (C x spatial) transpose: x read as NCHW [B, Q, P, 1], y written as NHWC. The row
// loop below moves such copies element by element (BM_transpose/.../nchw in bench_conv).
template <class E>
bool run_as_transposes(const permuted_copy& c, const E* from, E* to) {
  if (c.rank != 2 && c.rank != 3) return false;
  const std::size_t k = c.rank == 3 ? 1 : 0;
  const std::int64_t p = c.extents[k], q = c.extents[k + 1];
  if (c.from[k] != 1 || c.from[k + 1] != p || c.to[k] != q || c.to[k + 1] != 1) return false;
  if (c.rank == 3 && (c.from[0] != p * q || c.to[0] != p * q)) return false;  // within the span: no overflow
  const std::int64_t b = c.rank == 3 ? c.extents[0] : 1;
  convert(tensor_view<const E, nchw>(from, {b, q, p, 1}), tensor_view<E, nhwc>(to, {b, q, p, 1}));
  return true;
}

template <class E>
void run(const permuted_copy& c, const E* from, E* to) {
  if (c.rank == 0) {  // one element
    *to = *from;
    return;
  }
  if (run_as_transposes(c, from, to)) return;
  std::int64_t rows = 1;
  for (int d = 0; d + 1 < c.rank; ++d) rows *= c.extents[static_cast<std::size_t>(d)];
  for_each_thread_share(rows, c.numel() >= parallel_min_elements,
                        [&](std::int64_t r0, std::int64_t r1) { copy_rows(c, from, to, r0, r1); });
}

}  // namespace permuted_copy_detail

// Runs m (element strides; within the buffers, which must not overlap) on elements of
// `element_bytes` (1, 2, 4 or 8) from `from` into `to`.
inline void run_permuted_copy(const permuted_copy& m, std::size_t element_bytes, const void* from, void* to) {
  const permuted_copy c = m.compacted();
  if (c.numel() == 0) return;
  using namespace permuted_copy_detail;
  switch (element_bytes) {
    case 1: return run(c, static_cast<const std::uint8_t*>(from), static_cast<std::uint8_t*>(to));
    case 2: return run(c, static_cast<const std::uint16_t*>(from), static_cast<std::uint16_t*>(to));
    case 4: return run(c, static_cast<const std::uint32_t*>(from), static_cast<std::uint32_t*>(to));
    case 8: return run(c, static_cast<const std::uint64_t*>(from), static_cast<std::uint64_t*>(to));
    default:
      detail::fail(errc::unsupported_dtype,
                   "run_permuted_copy: elements of " + std::to_string(element_bytes) + " bytes (1, 2, 4 or 8 only)");
  }
}

}  // namespace memfmt::cpu
