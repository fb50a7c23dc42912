// memfmt/backends/cudnn/strided_copy.hpp - rearrangements, slices, concatenation and format
// conversion of device tensors as 2-D copies (cudaMemcpy2DAsync), so no kernel needs compiling.
//
// A 2-D copy moves `height` rows of `width` contiguous bytes between two pitches. A permuted copy
// (a rearrangement, a slice, a part of a concatenation) becomes rows of the dims contiguous in both
// tensors, one 2-D copy per index of the dims left over. A format conversion transposes (C,
// positions) per sample: one copy of single elements per sample and channel, or per sample and
// position, whichever is fewer - a fallback; memfmt::cuda::convert (nvcc) is the fast path.
// The plans are plain data, so the host tests replay them on host memory against memfmt::convert.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../../layers/permuted_copy.hpp"
#include "status.hpp"

namespace memfmt::cudnn {

struct copy_2d {
  std::size_t dst_offset = 0, src_offset = 0;  // bytes from the base pointers
  std::size_t dst_pitch = 0, src_pitch = 0;    // bytes between rows
  std::size_t width = 0, height = 0;           // bytes per row, rows
};

// A packed tensor as (samples, channels, positions) and its element size.
struct packed_shape {
  std::int64_t n = 0, c = 0, s = 1;
  std::size_t element_bytes = 0;
  bool channels_last = false;
};

// The copies converting a packed tensor from `from.channels_last` to the other format.
inline std::vector<copy_2d> format_conversion_copies(const packed_shape& from) {
  const auto es = from.element_bytes;
  const auto n = static_cast<std::size_t>(from.n), c = static_cast<std::size_t>(from.c),
             s = static_cast<std::size_t>(from.s);
  std::vector<copy_2d> out;
  const std::size_t sample = c * s * es;
  // Element (c, s) of a sample: channels-first at (c * S + s), channels-last at (s * C + c).
  const auto cf = [&](std::size_t ci, std::size_t si) { return (ci * s + si) * es; };
  const auto cl = [&](std::size_t ci, std::size_t si) { return (si * c + ci) * es; };
  for (std::size_t i = 0; i < n; ++i) {
    if (c <= s) {  // per channel: its S elements, dense in channels-first, C apart in channels-last
      for (std::size_t ci = 0; ci < c; ++ci) {
        copy_2d k;
        k.width = es;
        k.height = s;
        const std::size_t first_cf = i * sample + cf(ci, 0), first_cl = i * sample + cl(ci, 0);
        k.src_offset = from.channels_last ? first_cl : first_cf;
        k.dst_offset = from.channels_last ? first_cf : first_cl;
        k.src_pitch = from.channels_last ? c * es : es;
        k.dst_pitch = from.channels_last ? es : c * es;
        out.push_back(k);
      }
    } else {  // per position: its C elements, dense in channels-last, S apart in channels-first
      for (std::size_t si = 0; si < s; ++si) {
        copy_2d k;
        k.width = es;
        k.height = c;
        const std::size_t first_cf = i * sample + cf(0, si), first_cl = i * sample + cl(0, si);
        k.src_offset = from.channels_last ? first_cl : first_cf;
        k.dst_offset = from.channels_last ? first_cf : first_cl;
        k.src_pitch = from.channels_last ? es : s * es;
        k.dst_pitch = from.channels_last ? s * es : es;
        out.push_back(k);
      }
    }
  }
  return out;
}

// The 2-D copies of a permuted copy (a rearrangement or a slice, layers/permuted_copy.hpp) of
// elements of `element_bytes`: rows of the dims contiguous in both tensors (or single elements),
// along the largest remaining dim, one copy per index of the others.
inline std::vector<copy_2d> permuted_copies(const permuted_copy& m, std::size_t element_bytes) {
  const permuted_copy c = m.compacted();
  std::vector<copy_2d> out;
  if (c.numel() == 0) return out;
  const auto es = element_bytes;
  const auto bytes = [es](std::int64_t v) { return static_cast<std::size_t>(v) * es; };
  const auto at = [](const std::array<std::int64_t, 6>& a, int d) { return a[static_cast<std::size_t>(d)]; };
  const int last = c.rank - 1;
  const int inner = last >= 0 && at(c.from, last) == 1 && at(c.to, last) == 1 ? last : -1;  // contiguous in both
  int rows = -1;
  for (int d = 0; d < c.rank; ++d)
    if (d != inner && (rows < 0 || at(c.extents, d) > at(c.extents, rows))) rows = d;
  copy_2d k;
  k.width = inner >= 0 ? bytes(at(c.extents, inner)) : es;
  k.height = rows >= 0 ? static_cast<std::size_t>(at(c.extents, rows)) : 1;
  k.src_pitch = rows >= 0 ? bytes(at(c.from, rows)) : k.width;
  k.dst_pitch = rows >= 0 ? bytes(at(c.to, rows)) : k.width;
  // Every index of the other dims, last fastest.
  std::array<std::int64_t, 6> i{};
  for (;;) {
    std::int64_t src = 0, dst = 0;
    for (int d = 0; d < c.rank; ++d) {
      const auto u = static_cast<std::size_t>(d);
      src += i[u] * c.from[u];
      dst += i[u] * c.to[u];
    }
    k.src_offset = bytes(src);
    k.dst_offset = bytes(dst);
    out.push_back(k);
    int d = c.rank - 1;
    for (; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      if (d == inner || d == rows) continue;
      if (++i[u] < c.extents[u]) break;
      i[u] = 0;
    }
    if (d < 0) return out;
  }
}

// Queues the copy on `stream` (device to device).
inline void run_copy(const copy_2d& k, void* dst, const void* src, cudaStream_t stream) {
  if (k.width == 0 || k.height == 0) return;
  check_cuda(cudaMemcpy2DAsync(static_cast<unsigned char*>(dst) + k.dst_offset, k.dst_pitch,
                               static_cast<const unsigned char*>(src) + k.src_offset, k.src_pitch, k.width, k.height,
                               cudaMemcpyDeviceToDevice, stream),
             "cudaMemcpy2DAsync (strided copy)");
}

}  // namespace memfmt::cudnn
