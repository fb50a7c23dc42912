// memfmt/backends/cpu/channel_vectors.hpp - dense views as [N][positions][C] for the CPU kernels
// that work on each position's C values (layer norm, channel reductions).
//
// A dense view (channels-first or channels-last, no padding) is a position stride and a channel
// stride. Channels-last kernels read each position's contiguous C values; channels-first kernels
// read a block of contiguous positions at a time, channel by channel, so both stream memory in
// order. Positions (over all samples) are cut into chunks whose size depends only on the shape, so
// per-chunk partial results combine in the same order for any number of threads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../tensor/tensor_view.hpp"
#include "../reference/view_access.hpp"

namespace memfmt::cpu::channel_vectors {

// A view seen as [N][positions][C] with one stride per level; dense when positions and channels
// tile the sample exactly (channels-first: position stride 1, channel stride P; channels-last: C, 1).
struct dense_layout {
  bool ok = false;
  std::int64_t sample = 0, position = 0, channel = 0;
};

// Strides of size-1 dims are not read, so views that differ only there count as dense.
template <class T, class F>
dense_layout dense_layout_of(const tensor_view<T, F>& v) noexcept {
  const auto e = reference::detail::extents5(v);
  const auto s = reference::detail::strides5(v);
  const auto fits = [&](std::int64_t position, std::int64_t channel) {
    return (e.w == 1 || s.w == position) && (e.h == 1 || s.h == position * e.w) &&
           (e.d == 1 || s.d == position * e.w * e.h) && (e.c == 1 || s.c == channel);
  };
  const std::int64_t positions = e.d * e.h * e.w;
  dense_layout l;
  l.sample = s.n;
  if (fits(e.c, 1)) l.ok = true, l.position = e.c, l.channel = 1;
  else if (fits(1, positions)) l.ok = true, l.position = 1, l.channel = positions;
  return l;
}

inline bool same_layout(const dense_layout& a, const dense_layout& b) noexcept {
  return a.ok && b.ok && a.position == b.position && a.channel == b.channel;
}

// Positions (over all samples) per chunk, and the block of contiguous positions a channels-first
// pass keeps its running sums for.
inline constexpr std::int64_t chunk_positions = 256;
inline constexpr std::int64_t block = 64;

struct shape {
  std::int64_t n, positions, c;
  std::int64_t total() const noexcept { return n * positions; }
  std::int64_t chunks() const noexcept { return (total() + chunk_positions - 1) / chunk_positions; }
};

// Calls fn(n, p0, len) for runs of at most `block` positions of one sample within chunk k.
template <class Fn>
void for_each_run(const shape& s, std::int64_t k, Fn&& fn) {
  const std::int64_t end = std::min(s.total(), (k + 1) * chunk_positions);
  for (std::int64_t q = k * chunk_positions; q < end;) {
    const std::int64_t n = q / s.positions, p = q % s.positions;
    const std::int64_t len = std::min({block, s.positions - p, end - q});
    fn(n, p, len);
    q += len;
  }
}

template <class T, class F>
shape shape_of(const tensor_view<T, F>& v) noexcept {
  const auto e = reference::detail::extents5(v);
  return {e.n, e.d * e.h * e.w, e.c};
}

}  // namespace memfmt::cpu::channel_vectors
