// memfmt/backends/cudnn/channel_padding.hpp - zero-padding channels up to a tensor-core multiple.
//
// Tensor-core convolution kernels want C (and K) to be a multiple of 8 for fp16/bf16 and 4 for
// TF32 (NVIDIA's convolution performance guide); a 3-channel stem misses that. Padding the input's
// and the weight's C with zeros leaves the convolution unchanged - the extra channels multiply zero
// weights by zero inputs. This header is the host-side math, usable and tested without cuDNN:
// the padded shape, the 2-D copy that performs the pad (what the backend hands to cudaMemcpy2DAsync
// after zeroing the destination), and an element-by-element reference of the same operation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "../../dtype.hpp"
#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"

namespace memfmt::cudnn {

// The channel multiple tensor cores want for a storage type: 8 (fp16, bf16), 4 (fp32 via TF32),
// 1 otherwise (no tensor-core path: never pad).
constexpr std::int64_t tensor_core_channel_multiple(dtype t) noexcept {
  return (t == dtype::float16 || t == dtype::bfloat16) ? 8 : (t == dtype::float32 ? 4 : 1);
}

constexpr std::int64_t round_up(std::int64_t v, std::int64_t m) noexcept { return m <= 1 ? v : (v + m - 1) / m * m; }

// Extents with the channel dimension (logical index 1) raised to `padded_channels`.
template <std::size_t R>
std::array<std::int64_t, R> with_channels(std::array<std::int64_t, R> e, std::int64_t padded_channels) noexcept {
  e[1] = padded_channels;
  return e;
}

// The pad of a dense tensor as one 2-D copy: `rows` rows of `row_bytes` bytes, read every
// `src_pitch` bytes and written every `dst_pitch` bytes, into a destination of `dst_bytes` bytes
// that is zeroed first. Channels-last: one row per (n, spatial) of C elements. Channels-first: one
// row per image of C * spatial elements (the padding channels are whole planes at the end).
struct pad_copy {
  std::size_t rows = 0;
  std::size_t row_bytes = 0;
  std::size_t src_pitch = 0;
  std::size_t dst_pitch = 0;
  std::size_t dst_bytes = 0;
};

template <class F>
pad_copy pad_copy_for(const std::array<std::int64_t, F::rank>& extents, std::int64_t padded_channels,
                      std::size_t elem_size) {
  const std::int64_t c = extents[1];
  if (padded_channels < c || c < 0)
    memfmt::detail::fail(errc::invalid_argument, "channel padding: padded channels " + std::to_string(padded_channels) +
                                                     " < channels of " + memfmt::detail::dims_to_string(extents));
  std::int64_t spatial = 1;
  for (int d = 2; d < F::rank; ++d) spatial *= extents[static_cast<std::size_t>(d)];
  const std::int64_t n = extents[0];
  pad_copy pc;
  if (F::channels_last) {
    pc.rows = static_cast<std::size_t>(n * spatial);
    pc.row_bytes = static_cast<std::size_t>(c) * elem_size;
    pc.src_pitch = pc.row_bytes;
    pc.dst_pitch = static_cast<std::size_t>(padded_channels) * elem_size;
  } else {
    pc.rows = static_cast<std::size_t>(n);
    pc.row_bytes = static_cast<std::size_t>(c * spatial) * elem_size;
    pc.src_pitch = pc.row_bytes;
    pc.dst_pitch = static_cast<std::size_t>(padded_channels * spatial) * elem_size;
  }
  pc.dst_bytes = pc.rows * pc.dst_pitch;
  return pc;
}

// The reverse copy (padded -> original): the same rows, pitches swapped, nothing zeroed.
inline pad_copy unpad_copy_of(const pad_copy& pc) noexcept {
  pad_copy u = pc;
  u.src_pitch = pc.dst_pitch;
  u.dst_pitch = pc.src_pitch;
  u.dst_bytes = pc.rows * pc.src_pitch;
  return u;
}

// What cudaMemsetAsync + cudaMemcpy2DAsync do with `pc`, on host memory (the CPU model of the
// device pad; `zero_first` is false for unpadding).
inline void apply_pad_copy_host(const void* src, void* dst, const pad_copy& pc, bool zero_first = true) noexcept {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (zero_first && pc.dst_bytes) std::memset(d, 0, pc.dst_bytes);
  for (std::size_t r = 0; r < pc.rows; ++r)
    if (pc.row_bytes) std::memcpy(d + r * pc.dst_pitch, s + r * pc.src_pitch, pc.row_bytes);
}

namespace detail {
template <std::size_t R, class Fn>
void for_each_coord(const std::array<std::int64_t, R>& e, Fn&& fn) {
  for (std::size_t d = 0; d < R; ++d)
    if (e[d] <= 0) return;
  std::array<std::int64_t, R> i{};
  for (;;) {
    fn(i);
    std::size_t d = R;
    while (d > 0) {
      --d;
      if (++i[d] < e[d]) break;
      i[d] = 0;
      if (d == 0) return;
    }
  }
}
}  // namespace detail

// Element-by-element reference: dst(n, c, ...) = src(n, c, ...) for c < C, 0 for C <= c < C'.
// Works for any strides (the independent truth the 2-D copy is tested against).
template <class T, class F>
void pad_channels_reference(tensor_view<const T, F> src, tensor_view<T, F> dst) {
  auto se = src.extents();
  auto de = dst.extents();
  for (int d = 0; d < F::rank; ++d)
    if (d != 1 && se[static_cast<std::size_t>(d)] != de[static_cast<std::size_t>(d)])
      memfmt::detail::fail(errc::shape_mismatch, "pad_channels_reference: source " +
                                                     memfmt::detail::dims_to_string(se) + " and destination " +
                                                     memfmt::detail::dims_to_string(de) +
                                                     " differ outside the channel dimension");
  if (de[1] < se[1])
    memfmt::detail::fail(errc::shape_mismatch,
                         "pad_channels_reference: destination " + memfmt::detail::dims_to_string(de) +
                             " has fewer channels than source " + memfmt::detail::dims_to_string(se));
  detail::for_each_coord(de, [&](const std::array<std::int64_t, F::rank>& i) { dst(i) = i[1] < se[1] ? src(i) : T{}; });
}

}  // namespace memfmt::cudnn
