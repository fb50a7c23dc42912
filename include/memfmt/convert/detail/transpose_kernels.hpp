// memfmt/convert/detail/transpose_kernels.hpp - out-of-place 2-D transposes of E-byte elements.
//
//   transpose_block<E>(src, src_row_stride, dst, dst_row_stride, rows, cols):
//       dst[r * dst_row_stride + c] = src[c * src_row_stride + r]   for r < rows, c < cols
//
// (strides in elements). NCHW->NHWC of one image is rows = H*W, cols = C; NHWC->NCHW is rows = C,
// cols = H*W. With AVX2 the bulk goes through an in-register tile transpose: each 256-bit register
// holds two independent square blocks (one per 128-bit lane), transposed with log2(16/E) rounds of
// unpack instructions, so no cross-lane shuffle is needed and every store is a 32-byte run of one
// destination row; edges of a quarter tile or more take one more tile, overlapping.
// transpose_lines pairs the tiles into whole 64-byte lines and streams them (AVX2 builds, aligned
// destinations). Few columns (C = 2..4 to channels-last) and few rows (C = 2..4 from channels-last)
// are interleave/de-interleave permutes (group_shuffle.hpp) with AVX-512. Everything else, and
// every target without AVX2, uses portable scalar code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "element_bits.hpp"
#include "group_shuffle.hpp"
#include "lane_unpack.hpp"
#include "prefetch.hpp"
#include "transpose_scalar.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace memfmt::detail {

// dst[r*C + c] = src[c*srs + r]: C source rows interleaved into one dense run. Stream: whole
// vectors are stored non-temporally (dst 64-byte aligned, group_shuffle_available<E>).
template <std::size_t E, int C, bool Stream = false>
inline void interleave(const unsigned char* src, std::int64_t srs, unsigned char* dst, std::int64_t rows) noexcept {
  using U = element_bits_t<E>;
  const U* __restrict s = reinterpret_cast<const U*>(src);
  U* __restrict d = reinterpret_cast<U*>(dst);
  std::int64_t r = 0;
#if defined(__AVX512F__)
  if constexpr (group_shuffle_available<E>) r = interleave_zmm<E, C, Stream>(src, srs, dst, rows);
#endif
  for (; r < rows; ++r)
    for (int c = 0; c < C; ++c) d[r * C + c] = s[c * srs + r];
}

// dst[r*drs + c] = src[c*R + r]: one dense run of R-element groups split into R rows (Stream: as
// for interleave, with the destination pitch a multiple of 64 bytes too).
template <std::size_t E, int R, bool Stream = false>
inline void deinterleave(const unsigned char* src, unsigned char* dst, std::int64_t drs, std::int64_t cols) noexcept {
  using U = element_bits_t<E>;
  const U* __restrict s = reinterpret_cast<const U*>(src);
  U* __restrict d = reinterpret_cast<U*>(dst);
  std::int64_t c = 0;
#if defined(__AVX512F__)
  if constexpr (group_shuffle_available<E>) c = deinterleave_zmm<E, R, Stream>(src, dst, drs, cols);
#endif
  for (; c < cols; ++c)
    for (int r = 0; r < R; ++r) d[r * drs + c] = s[c * R + r];
}

#if defined(__AVX2__)
template <std::size_t E>
struct lane_tile {
  static constexpr int n = static_cast<int>(16 / E);  // elements of one 128-bit lane
  static constexpr int tile_rows = n;                 // destination rows per tile
  static constexpr int tile_cols = 2 * n;             // destination columns per tile (32 bytes)

  static constexpr int bit_reverse(int j) noexcept { return lane_unpack_row<E>(j); }
  template <int W>
  static __m256i lo(__m256i a, __m256i b) noexcept {
    if constexpr (W == 1) return _mm256_unpacklo_epi8(a, b);
    else if constexpr (W == 2) return _mm256_unpacklo_epi16(a, b);
    else if constexpr (W == 4) return _mm256_unpacklo_epi32(a, b);
    else return _mm256_unpacklo_epi64(a, b);
  }
  template <int W>
  static __m256i hi(__m256i a, __m256i b) noexcept {
    if constexpr (W == 1) return _mm256_unpackhi_epi8(a, b);
    else if constexpr (W == 2) return _mm256_unpackhi_epi16(a, b);
    else if constexpr (W == 4) return _mm256_unpackhi_epi32(a, b);
    else return _mm256_unpackhi_epi64(a, b);
  }
  // One round of the perfect-shuffle network at element width W bytes.
  template <int W>
  static void round(__m256i (&v)[n]) noexcept {
    __m256i w[n];
    for (int p = 0; p < n / 2; ++p) {
      w[p] = lo<W>(v[2 * p], v[2 * p + 1]);
      w[p + n / 2] = hi<W>(v[2 * p], v[2 * p + 1]);
    }
    for (int p = 0; p < n; ++p) v[p] = w[p];
  }
  // Byte strides. Reads n source rows of 16 bytes for each lane; v[j] is destination row
  // bit_reverse(j), 32 bytes.
  static void transpose(const unsigned char* src, std::int64_t srs, __m256i (&v)[n]) noexcept {
    for (int k = 0; k < n; ++k) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k * srs));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + (n + k) * srs));
      v[k] = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
    }
    if constexpr (E == 1) round<1>(v);
    if constexpr (E <= 2) round<2>(v);
    if constexpr (E <= 4) round<4>(v);
    round<8>(v);
  }
  static void run(const unsigned char* src, std::int64_t srs, unsigned char* dst, std::int64_t drs) noexcept {
    __m256i v[n];
    transpose(src, srs, v);
    for (int j = 0; j < n; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + bit_reverse(j) * drs), v[j]);
  }
};
#endif

// The blocks where one side has 2..4 elements and the other is dense (interleave / deinterleave);
// returns false for any other block.
template <std::size_t E, bool Stream = false>
inline bool transpose_group(const unsigned char* src, std::int64_t srs, unsigned char* dst, std::int64_t drs,
                            std::int64_t rows, std::int64_t cols) noexcept {
  if (drs == cols) {
    switch (cols) {
      case 2: return interleave<E, 2, Stream>(src, srs, dst, rows), true;
      case 3: return interleave<E, 3, Stream>(src, srs, dst, rows), true;
      case 4: return interleave<E, 4, Stream>(src, srs, dst, rows), true;
      default: break;
    }
  }
  if (srs == rows) {
    switch (rows) {
      case 2: return deinterleave<E, 2, Stream>(src, dst, drs, cols), true;
      case 3: return deinterleave<E, 3, Stream>(src, dst, drs, cols), true;
      case 4: return deinterleave<E, 4, Stream>(src, dst, drs, cols), true;
      default: break;
    }
  }
  return false;
}

template <std::size_t E>
inline void transpose_block(const unsigned char* src, std::int64_t srs, unsigned char* dst, std::int64_t drs,
                            std::int64_t rows, std::int64_t cols) noexcept {
  if (rows <= 0 || cols <= 0) return;
  if (transpose_group<E>(src, srs, dst, drs, rows, cols)) return;
#if defined(__AVX2__)
  using tile = lane_tile<E>;
  const std::int64_t e = static_cast<std::int64_t>(E);
  // Tile origins along a side of n elements: whole tiles, then, when at least a quarter of a tile
  // is left, one more ending at the last element (overlapping the one before, rewriting the same
  // values), about twice as fast as scalar edges on small planes such as 5 x 5 and 7 x 7.
  // Returns where scalar code takes over; one column left of fp32's 8 (H*W = 9) stays scalar,
  // which is faster than a mostly overlapping tile.
  auto origins = [](std::int64_t n, std::int64_t t, const auto& f) {
    std::int64_t i = 0;
    for (; i + t <= n; i += t) f(i);
    if (i == n || n < t || 4 * (n - i) < t) return i;
    f(n - t);
    return n;
  };
  std::int64_t rows_done = 0;
  const std::int64_t cols_done = origins(cols, tile::tile_cols, [&](std::int64_t c0) {
    rows_done = origins(rows, tile::tile_rows, [&](std::int64_t r0) {
      tile::run(src + (c0 * srs + r0) * e, srs * e, dst + (r0 * drs + c0) * e, drs * e);
    });
  });
  // Right edge (columns past the tiles), then the bottom edge (all columns).
  transpose_scalar<E>(src + cols_done * srs * e, srs, dst + cols_done * e, drs, rows_done, cols - cols_done);
  transpose_scalar<E>(src + rows_done * e, srs, dst + rows_done * drs * e, drs, rows - rows_done, cols);
#else
  transpose_scalar<E>(src, srs, dst, drs, rows, cols);
#endif
}

#if defined(__AVX2__)
// Streams whole 64-byte destination lines without AVX-512: two lane tiles side by side (columns
// c0 and c0 + 2n) give n destination rows of 64 bytes, and each row's two halves are stored
// non-temporally one after the other (so the write-combining buffer fills the line). Meanwhile
// the next pair's source lines are prefetched, which keeps the reads of the transposed order in
// flight (an AVX2 build of `bench_convert --benchmark_filter='nhwc_to_nchw/bf16/256x64x56x56/'`).
// Columns past the last whole line and rows past the last tile go through transpose_block with
// plain stores.
// dst must be 64-byte aligned and drs * E a multiple of 64.
template <std::size_t E>
inline void transpose_lines(const unsigned char* src, std::int64_t srs, unsigned char* dst, std::int64_t drs,
                            std::int64_t rows, std::int64_t cols) noexcept {
  using tile = lane_tile<E>;
  constexpr std::int64_t e = static_cast<std::int64_t>(E), tr = tile::tile_rows, half = tile::tile_cols;
  const std::int64_t rows_t = rows - rows % tr, cols_t = cols - cols % (2 * half);
  for (std::int64_t c0 = 0; c0 < cols_t; c0 += 2 * half) {
    // The source of the next pair of tile columns, while this one is transposed.
    if (c0 + 2 * half < cols_t)
      for (std::int64_t k = 0; k < 2 * half; ++k) {
        const auto first = reinterpret_cast<std::uintptr_t>(src + ((c0 + 2 * half + k) * srs) * e);
        const std::uintptr_t end = first + static_cast<std::uintptr_t>(rows_t * e);
        for (std::uintptr_t line = first & ~std::uintptr_t{63}; line < end; line += 64) prefetch_line(line);
      }
    for (std::int64_t r0 = 0; r0 < rows_t; r0 += tr) {
      __m256i a[tile::n], b[tile::n];
      tile::transpose(src + (c0 * srs + r0) * e, srs * e, a);
      tile::transpose(src + ((c0 + half) * srs + r0) * e, srs * e, b);
      for (int j = 0; j < tile::n; ++j) {
        auto* p = reinterpret_cast<__m256i*>(dst + ((r0 + tile::bit_reverse(j)) * drs + c0) * e);
        _mm256_stream_si256(p, a[j]);
        _mm256_stream_si256(p + 1, b[j]);
      }
    }
  }
  transpose_block<E>(src + cols_t * srs * e, srs, dst + cols_t * e, drs, rows_t, cols - cols_t);
  transpose_block<E>(src + rows_t * e, srs, dst + rows_t * drs * e, drs, rows - rows_t, cols);
}
#endif

}  // namespace memfmt::detail
