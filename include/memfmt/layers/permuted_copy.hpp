// memfmt/layers/permuted_copy.hpp - a copy that moves each element once and computes nothing,
// described by an index space and two sets of strides.
//
// Rearrangements (rearrange.hpp) and slices (slice.hpp) are such copies: an index space of up to 6
// dims and, per dim, the element stride in the source and in the destination, y[i . to] =
// x[i . from]. Backends run it their own way (a oneDNN reorder, 2-D copies on a CUDA stream).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "../detail/checked.hpp"

namespace memfmt {

struct permuted_copy {
  int rank = 0;
  std::array<std::int64_t, 6> extents{}, from{}, to{};

  // The dims in use: `rank` itself (@pre 0 <= rank <= 6), clamped so that every loop below is
  // bounded by the arrays' size in a way the compiler can see (GCC 12 at -O3 otherwise warns that
  // an inlined sort may index past them).
  std::size_t dims() const noexcept { return static_cast<std::size_t>(std::clamp(rank, 0, 6)); }

  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (std::size_t d = 0; d < dims(); ++d) n *= extents[d];
    return n;
  }
  // The copy the other way: the backward pass, dx[i . from] = dy[i . to].
  permuted_copy reversed() const noexcept {
    permuted_copy r = *this;
    std::swap(r.from, r.to);
    return r;
  }
  // The same copy with size-1 dims dropped, the rest ordered by destination stride (writes in
  // order) and neighbours contiguous in both source and destination merged: fewer, longer loops (a
  // channels-first channel shuffle becomes copies of whole planes).
  permuted_copy compacted() const noexcept {
    const std::size_t n = dims();
    // Dims by descending destination stride, ties in their order: an insertion sort of <= 6 entries.
    std::array<std::size_t, 6> order{0, 1, 2, 3, 4, 5};
    for (std::size_t k = 1; k < n; ++k)
      for (std::size_t j = k; j > 0 && to[order[j - 1]] < to[order[j]]; --j) std::swap(order[j - 1], order[j]);
    permuted_copy c;
    for (std::size_t d = 0; d < n; ++d) {
      const std::size_t i = order[d];
      if (extents[i] == 1) continue;
      if (c.rank > 0) {
        const auto last = static_cast<std::size_t>(c.rank - 1);
        std::int64_t from_span = 0, to_span = 0;
        if (!detail::mul_overflows(from[i], extents[i], &from_span) &&
            !detail::mul_overflows(to[i], extents[i], &to_span) && c.from[last] == from_span && c.to[last] == to_span) {
          c.extents[last] *= extents[i];
          c.from[last] = from[i];
          c.to[last] = to[i];
          continue;
        }
      }
      const auto j = static_cast<std::size_t>(c.rank++);
      c.extents[j] = extents[i];
      c.from[j] = from[i];
      c.to[j] = to[i];
    }
    return c;
  }
};

// Whether two copies move every element alike (their compacted forms agree).
inline bool same_copy(const permuted_copy& a, const permuted_copy& b) noexcept {
  const permuted_copy x = a.compacted(), y = b.compacted();
  if (x.rank != y.rank) return false;
  for (std::size_t d = 0; d < static_cast<std::size_t>(x.rank); ++d)
    if (x.extents[d] != y.extents[d] || x.from[d] != y.from[d] || x.to[d] != y.to[d]) return false;
  return true;
}

}  // namespace memfmt
