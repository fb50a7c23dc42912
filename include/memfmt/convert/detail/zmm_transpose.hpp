// memfmt/convert/detail/zmm_transpose.hpp - AVX-512 plane transpose that writes whole lines.
//
//   transpose_strip_zmm<E, Stream>(src, srs, dst, drs, rows, cols, blocking, strip):
//       dst[r * drs + c] = src[c * srs + r]   over one strip of a plane (strides in elements)
//
// The tile: each 128-bit lane of a zmm register holds an n x n block (n = 16 / E) and log2(n)
// rounds of in-lane unpacks transpose all four lanes at once. Lane q is loaded from source rows
// q*n .. q*n+n-1, so each output register is 64 contiguous bytes of one destination row: with a
// 64-byte aligned destination pitch every store is one whole cache line, and with Stream it is a
// non-temporal store straight from the register (no write-allocate read, no staging copy).
// Two- and four-byte elements use full square kernels instead (32 x 32 and 16 x 16; each source
// line loaded once).
//
// A plane is walked in W x W squares (W = 64 / E): a square reads W source segments of 64 bytes
// and writes W destination lines. Strips (the unit of threading) are one square thick (or four,
// for some column strips: see run_transpose_zmm): W source rows read end to end (columns outer)
// or W destination rows written end to end (rows outer, in passes of 16 rows or one square).
// Blocks of 16 squares software-prefetch the source of the next block. Sides that are not whole
// tiles are finished with masked stores (columns), and gathers (one or two rows) or one more tile
// overlapping the last whole one (more rows); scalar code only for the corner.
#pragma once

#include <cstddef>
#include <cstdint>

#include "element_bits.hpp"
#include "lane_unpack.hpp"
#include "prefetch.hpp"
#include "stream_copy.hpp"
#include "transpose_scalar.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#define MEMFMT_CONVERT_HAVE_ZMM_TILES 1
#else
#define MEMFMT_CONVERT_HAVE_ZMM_TILES 0
#endif

namespace memfmt::detail {

#if MEMFMT_CONVERT_HAVE_ZMM_TILES

template <std::size_t E>
struct zmm_tile {
  static constexpr int n = static_cast<int>(16 / E);  // elements of one 128-bit lane
  static constexpr int rows = n;                      // destination rows per tile
  static constexpr int cols = 4 * n;                  // destination columns per tile: 64 bytes

  static constexpr int bit_reverse(int j) noexcept { return lane_unpack_row<E>(j); }
  template <int W>
  static __m512i lo(__m512i a, __m512i b) noexcept {
    if constexpr (W == 1) return _mm512_unpacklo_epi8(a, b);
    else if constexpr (W == 2) return _mm512_unpacklo_epi16(a, b);
    // (full-mask maskz forms: GCC 12's plain 32/64-bit unpacks trip -Wuninitialized)
    else if constexpr (W == 4) return _mm512_maskz_unpacklo_epi32(0xFFFF, a, b);
    else return _mm512_maskz_unpacklo_epi64(0xFF, a, b);
  }
  template <int W>
  static __m512i hi(__m512i a, __m512i b) noexcept {
    if constexpr (W == 1) return _mm512_unpackhi_epi8(a, b);
    else if constexpr (W == 2) return _mm512_unpackhi_epi16(a, b);
    else if constexpr (W == 4) return _mm512_maskz_unpackhi_epi32(0xFFFF, a, b);
    else return _mm512_maskz_unpackhi_epi64(0xFF, a, b);
  }
  template <int W>
  static void round(__m512i (&v)[n]) noexcept {
    __m512i w[n];
#pragma GCC unroll 16
    for (int p = 0; p < n / 2; ++p) {
      w[p] = lo<W>(v[2 * p], v[2 * p + 1]);
      w[p + n / 2] = hi<W>(v[2 * p], v[2 * p + 1]);
    }
#pragma GCC unroll 16
    for (int p = 0; p < n; ++p) v[p] = w[p];
  }
  static __m128i load16(const unsigned char* p) noexcept {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  }
  // Byte strides: reads 4n source rows of 16 bytes, writes n destination rows of 64 bytes.
  template <bool Stream>
  static void run(const unsigned char* src, std::int64_t srs, unsigned char* dst, std::int64_t drs) noexcept {
    __m512i v[n];
#pragma GCC unroll 16
    for (int k = 0; k < n; ++k) {
      __m512i x = _mm512_zextsi128_si512(load16(src + k * srs));
      x = _mm512_inserti32x4(x, load16(src + (n + k) * srs), 1);
      x = _mm512_inserti32x4(x, load16(src + (2 * n + k) * srs), 2);
      v[k] = _mm512_inserti32x4(x, load16(src + (3 * n + k) * srs), 3);
    }
    if constexpr (E == 1) round<1>(v);
    if constexpr (E <= 2) round<2>(v);
    if constexpr (E <= 4) round<4>(v);
    round<8>(v);
#pragma GCC unroll 16
    for (int j = 0; j < n; ++j) {
      unsigned char* p = dst + bit_reverse(j) * drs;
      store_zmm<Stream>(p, v[j]);
    }
  }
};

// Register-level 16 x 16 four-byte transpose: o[m] holds element m of every r[k]. Unpacks by 32
// and 64 bits leave lane L of u[4i + j] holding row 4L + j, columns 4i..4i+3; a 4 x 4 transpose of
// 128-bit lanes gathers each row.
inline void zmm_transpose16x32(const __m512i (&r)[16], __m512i (&o)[16]) noexcept {
  __m512i t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_maskz_unpacklo_epi32(0xFFFF, r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_maskz_unpackhi_epi32(0xFFFF, r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_maskz_unpacklo_epi64(0xFF, t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_maskz_unpackhi_epi64(0xFF, t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_maskz_unpacklo_epi64(0xFF, t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_maskz_unpackhi_epi64(0xFF, t[4 * i + 1], t[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512i s0 = _mm512_maskz_shuffle_i32x4(0xFFFF, u[j], u[4 + j], 0x44);
    const __m512i s1 = _mm512_maskz_shuffle_i32x4(0xFFFF, u[j], u[4 + j], 0xEE);
    const __m512i s2 = _mm512_maskz_shuffle_i32x4(0xFFFF, u[8 + j], u[12 + j], 0x44);
    const __m512i s3 = _mm512_maskz_shuffle_i32x4(0xFFFF, u[8 + j], u[12 + j], 0xEE);
    o[j] = _mm512_maskz_shuffle_i32x4(0xFFFF, s0, s2, 0x88);
    o[4 + j] = _mm512_maskz_shuffle_i32x4(0xFFFF, s0, s2, 0xDD);
    o[8 + j] = _mm512_maskz_shuffle_i32x4(0xFFFF, s1, s3, 0x88);
    o[12 + j] = _mm512_maskz_shuffle_i32x4(0xFFFF, s1, s3, 0xDD);
  }
}

// Line k of a square further ahead (pf: its first source row; rows srs bytes apart, as in the
// square being loaded) into the far level (convert_options::prefetch). The square kernels issue
// these between their stores, once their own loads are out: a burst of them before the loads
// holds the miss buffers the loads need, and spread over the loads they delay them
// (`bench_convert --benchmark_filter='bf16/(256x64x56x56|32x64x112x112)/'`).
inline void prefetch_square_line(const unsigned char* pf, std::int64_t srs, int k, prefetch_into into) noexcept {
  if (!pf) return;
  prefetch_line(reinterpret_cast<std::uintptr_t>(pf + k * srs), into);
  if (srs % 64 != 0) prefetch_line(reinterpret_cast<std::uintptr_t>(pf + k * srs + 63), into);
}

// 16 x 16 four-byte elements from 16 whole source lines. Every source line is loaded once (the
// tile kernel touches each line four times, which misses L1 when the source pitch is a multiple
// of 4 KiB and the 16 lines share a set). pf: a square to prefetch meanwhile (or null).
struct zmm_square32 {
  template <bool Stream>
  static void run(const unsigned char* src, std::int64_t srs, unsigned char* dst, std::int64_t drs,
                  const unsigned char* pf = nullptr, prefetch_into into = prefetch_into::l2) noexcept {
    __m512i r[16], o[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) r[k] = _mm512_loadu_si512(src + k * srs);
    zmm_transpose16x32(r, o);
#pragma GCC unroll 16
    for (int m = 0; m < 16; ++m) {
      unsigned char* p = dst + m * drs;
      store_zmm<Stream>(p, o[m]);
      prefetch_square_line(pf, srs, m, into);
    }
  }
};

// 32 x 32 two-byte elements from 32 whole source lines: 16-bit unpacks of neighbouring source
// rows make 4-byte pairs, and two 16 x 16 four-byte transposes finish it (lo: destination rows
// 8 (q / 4) + q % 4, hi: the same + 4). Every source line is loaded once. pf: as for zmm_square32.
struct zmm_square16 {
  template <bool Stream>
  static void run(const unsigned char* src, std::int64_t srs, unsigned char* dst, std::int64_t drs,
                  const unsigned char* pf = nullptr, prefetch_into into = prefetch_into::l2) noexcept {
    __m512i lo[16], hi[16], o[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      const __m512i a = _mm512_loadu_si512(src + 2 * i * srs), b = _mm512_loadu_si512(src + (2 * i + 1) * srs);
      lo[i] = _mm512_unpacklo_epi16(a, b);
      hi[i] = _mm512_unpackhi_epi16(a, b);
    }
    auto put = [&](int row, __m512i v) {
      unsigned char* p = dst + row * drs;
      store_zmm<Stream>(p, v);
    };
    zmm_transpose16x32(lo, o);
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q) {
      put(8 * (q / 4) + q % 4, o[q]);
      prefetch_square_line(pf, srs, q, into);
    }
    zmm_transpose16x32(hi, o);
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q) {
      put(8 * (q / 4) + q % 4 + 4, o[q]);
      prefetch_square_line(pf, srs, 16 + q, into);
    }
  }
};

// One 64-byte destination segment of a row past the last whole tile: element r of the 64 / E
// source rows starting at p = &src[c][r], sb bytes apart, by 4-byte gathers (8-byte for E = 8).
// For E < 4 each word ends at the element (it starts E * (4 / E - 1) bytes before p, so r must
// be at least 4 / E - 1) and its top element is kept. Offsets are 32-bit: the caller checks that
// 63 * sb fits.
template <std::size_t E>
inline __m512i gather_row_segment(const unsigned char* p, std::int64_t sb) noexcept {
  // (masked forms with a zero source: GCC 12 warns on the plain gathers and casts)
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(static_cast<int>(sb)));
  const __m512i zero = _mm512_setzero_si512();
  auto words = [&](const unsigned char* q) { return _mm512_mask_i32gather_epi32(zero, 0xFFFF, idx, q, 1); };
  if constexpr (E == 8) {
    return _mm512_mask_i32gather_epi64(zero, 0xFF, _mm512_maskz_extracti64x4_epi64(0xF, idx, 0), p, 1);
  } else if constexpr (E == 4) {
    return words(p);
  } else if constexpr (E == 2) {
    const __m512i odd = _mm512_setr_epi32(0x00030001, 0x00070005, 0x000B0009, 0x000F000D, 0x00130011, 0x00170015,
                                          0x001B0019, 0x001F001D, 0x00230021, 0x00270025, 0x002B0029, 0x002F002D,
                                          0x00330031, 0x00370035, 0x003B0039, 0x003F003D);
    return _mm512_permutex2var_epi16(words(p - 2), odd, words(p - 2 + 16 * sb));
  } else {
    auto quarter = [&](int q) {
      return _mm512_maskz_cvtepi32_epi8(0xFFFF, _mm512_maskz_srli_epi32(0xFFFF, words(p - 3 + 16 * q * sb), 24));
    };
    __m512i v = _mm512_zextsi128_si512(quarter(0));
    v = _mm512_inserti32x4(v, quarter(1), 1);
    v = _mm512_inserti32x4(v, quarter(2), 2);
    return _mm512_inserti32x4(v, quarter(3), 3);
  }
}

// Side of the square a block is made of, in elements: 64 bytes.
template <std::size_t E>
inline constexpr std::int64_t zmm_square = 64 / static_cast<std::int64_t>(E);

// How a plane is cut: blocks of br x bc elements (multiples of a square), walked in strips.
struct zmm_blocking {
  std::int64_t br = 0, bc = 0;              // block rows, block columns (destination orientation)
  bool rows_outer = true;                   // strips are block rows (else block columns)
  prefetch_into ahead = prefetch_into::l2;  // squares a block or strip ahead (convert_options::prefetch)
};

// The tiled part of a plane is rows - rows % tile::rows by cols - cols % square; the rest is edges.
template <std::size_t E>
inline std::int64_t zmm_strip_count(std::int64_t rows, std::int64_t cols, const zmm_blocking& b) noexcept {
  const std::int64_t rows_t = rows - rows % zmm_tile<E>::rows, cols_t = cols - cols % zmm_square<E>;
  return b.rows_outer ? (rows_t + b.br - 1) / b.br : (cols_t + b.bc - 1) / b.bc;
}

// Of n rows `pitch` bytes apart (a multiple of 64), how many share one of L1's 64 sets of 64-byte
// lines (pitch / 64 = k sets per row: n / (64 / gcd(k, 64)), all n when k is a multiple of 64).
// More than 8 (of 12 ways) makes a kernel that touches every row miss L1 on its own lines.
inline std::int64_t rows_per_l1_set(std::int64_t pitch, std::int64_t n) noexcept {
  const std::int64_t step = (pitch / 64) % 64;
  return step == 0 ? n : n * (step & -step) / 64;
}

// The strip a thread runs after this one (its plane's source and its index), so that the
// prefetches that run ahead of the current strip can continue into it; none when src is null.
// `ahead`, when set, is the thread's next plane, prefetched in address order a slice per square
// column of a rows-outer strip (see run_transpose_zmm).
struct zmm_next_strip {
  const unsigned char* src = nullptr;
  std::int64_t strip = 0;
  linear_prefetch* ahead = nullptr;
};

// One strip of a plane (rows, cols >= one square). Stream requires drs * E % 64 == 0 and a
// 64-byte aligned dst: every tile store is then one whole line.
template <std::size_t E, bool Stream>
void transpose_strip_zmm(const unsigned char* src, std::int64_t srs, unsigned char* dst, std::int64_t drs,
                         std::int64_t rows, std::int64_t cols, const zmm_blocking& b, std::int64_t strip,
                         zmm_next_strip next = {}) noexcept {
  using tile = zmm_tile<E>;
  constexpr std::int64_t e = static_cast<std::int64_t>(E), w = zmm_square<E>, th = tile::rows;
  const std::int64_t sb = srs * e, db = drs * e;  // byte strides
  const std::int64_t rows_t = rows - rows % th, cols_t = cols - cols % w;
  // The first of the w source segments (rows c.. c+w-1, elements r.. r+w-1) of one square of a
  // plane. Squares a block (or a strip) ahead are prefetched (into b.ahead) while a square
  // kernel loads its own (prefetch_square_line), or in one burst where no square kernel runs.
  auto square_at = [&](const unsigned char* plane, std::int64_t c, std::int64_t r) {
    return plane + (c * srs + r) * e;
  };
  auto prefetch_burst = [&](const unsigned char* p) {
    for (int k = 0; k < static_cast<int>(w); ++k) prefetch_square_line(p, sb, k, b.ahead);
  };
  // L1 has 64 sets of 64-byte lines: when the w source rows of a square map to so few sets that
  // more than 8 share one (a pitch that is a multiple of 2-4 KiB, e.g. NHWC with C = 2048), the
  // tile kernel's repeated visits to each line miss L1, so the segments are first copied, one
  // load per line, into a dense local square.
  const bool set_conflicts = sb % 64 == 0 && rows_per_l1_set(sb, w) > 8;
  // Every byte the tiles read from it is stored first (w whole rows); GCC cannot see that.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  alignas(64) unsigned char local[64 * 64];
  // Destination rows [r, r_end) (whole tiles) of square column c, prefetching the square pf (if
  // any); returns r_end.
  auto run_tiles = [&](std::int64_t r, std::int64_t r_end, std::int64_t c, const unsigned char* pf = nullptr) {
    if constexpr (E == 4)
      for (; r + w <= r_end; r += w, pf = nullptr)
        zmm_square32::run<Stream>(src + (c * srs + r) * e, sb, dst + (r * drs + c) * e, db, pf, b.ahead);
    if constexpr (E == 2)
      for (; r + w <= r_end; r += w, pf = nullptr)
        zmm_square16::run<Stream>(src + (c * srs + r) * e, sb, dst + (r * drs + c) * e, db, pf, b.ahead);
    if (pf) prefetch_burst(pf);
    if (r < r_end && set_conflicts) {
      const unsigned char* s0 = src + (c * srs + r) * e;
      const std::int64_t bytes = (r_end - r) * e;  // <= 64; masked-off bytes are never read
      const __mmask64 m = bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1;
      for (std::int64_t k = 0; k < w; ++k) _mm512_store_si512(local + 64 * k, _mm512_maskz_loadu_epi8(m, s0 + k * sb));
      for (std::int64_t q = 0; r < r_end; r += th, q += th * e)
        tile::template run<Stream>(local + q, 64, dst + (r * drs + c) * e, db);
      return r;
    }
    for (; r < r_end; r += th) tile::template run<Stream>(src + (c * srs + r) * e, sb, dst + (r * drs + c) * e, db);
    return r;
  };
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  // Columns [cols_t, cols) (fewer than a square) of rows [r_lo, r_hi) (whole tiles): the source
  // segments go into a zero-padded local square, a tile transposes it into a scratch tile, and
  // masked stores write only the real columns (plain stores: these lines are partial).
  auto edge_cols = [&](std::int64_t r_lo, std::int64_t r_hi) {
    const std::int64_t nc = cols - cols_t;
    if (nc == 0 || r_lo >= r_hi) return;
    alignas(64) unsigned char in[64 * 16] = {};
    alignas(64) unsigned char out[16 * 64];
    const __mmask64 m = (__mmask64{1} << (nc * e)) - 1;
    for (std::int64_t r = r_lo; r < r_hi; r += th) {
      for (std::int64_t k = 0; k < nc; ++k)
        _mm_store_si128(reinterpret_cast<__m128i*>(in + 16 * k), tile::load16(src + ((cols_t + k) * srs + r) * e));
      tile::template run<false>(in, 16, out, 64);
      for (std::int64_t j = 0; j < th; ++j)
        _mm512_mask_storeu_epi8(dst + ((r + j) * drs + cols_t) * e, m, _mm512_load_si512(out + 64 * j));
    }
  };
  // A block of a column strip, square column by square column; each square also prefetches its
  // counterpart dr rows further down, or past the last row the same place in the next strip (its
  // column cn), so the loads of the next block are in flight, across strips too. A strip that is
  // one block, over source rows with little or no gap between them (dense planes), prefetches the
  // next strip's source in address order instead, a slice per square (strip_ahead): squares of
  // split lines would fetch lines twice, and the address order keeps DRAM pages open
  // (`bench_convert --benchmark_filter='(nchw_to_nhwc/.*/32x2048x7x7|nhwc_to_nchw/.*/(32x64x112x112|256x64x56x56))/'`).
  linear_prefetch strip_ahead;
  bool strip_ahead_on = false;
  auto block = [&](std::int64_t r_lo, std::int64_t r_hi, std::int64_t c_lo, std::int64_t c_hi, std::int64_t dr,
                   std::int64_t cn) {
    for (std::int64_t c = c_lo; c < c_hi; c += w)
      for (std::int64_t r = r_lo; r < r_hi;) {
        const unsigned char* pf = nullptr;
        if ((r - r_lo) % w == 0) {
          if (r + dr < rows_t) pf = square_at(src, c, r + dr);
          else if (strip_ahead_on) strip_ahead.step();
          else if (next.src && cn + (c - c_lo) < cols_t)  // (short strips: the same rows, one strip ahead)
            pf = square_at(next.src, cn + (c - c_lo), r + dr - rows_t < rows_t ? r + dr - rows_t : r);
        }
        r = run_tiles(r, r + w < r_hi ? r + w : r_hi, c, pf);
      }
  };
  // Rows outer: a block is written in passes of destination rows (all its columns, then the
  // next rows), so few destination lines are being filled at once while the block's source
  // lines stay in L1/L2: 16 rows in flight for the 16-byte-segment tiles (fewer or more fill the
  // write-combining buffers less well), one square for the whole-square kernels (2- and 4-byte
  // elements; `bench_convert --benchmark_filter='nchw_to_nhwc/.*/(32x1024x14x14|32x512x28x28)/'`).
  // Each square column also prefetches the one a block (bc) further along the rows, or past the
  // last column, the same place in the next strip (whose first row is rn).
  auto block_by_rows = [&](std::int64_t r_lo, std::int64_t r_hi, std::int64_t c_lo, std::int64_t c_hi,
                           std::int64_t rn) {
    constexpr std::int64_t pass = E == 2 ? w : th > 16 ? th : 16;
    for (std::int64_t p0 = r_lo; p0 < r_hi; p0 += pass) {
      const std::int64_t p1 = r_hi - p0 < pass ? r_hi : p0 + pass;
      for (std::int64_t c = c_lo; c < c_hi; c += w) {
        const unsigned char* pf = nullptr;  // the first square ahead goes with this pass's kernel
        if (p0 == r_lo) {
          if (next.ahead) next.ahead->step();
          // The squares ahead: from row r0 of square column ca of `plane`, r_hi - r_lo rows.
          const unsigned char* plane = nullptr;
          std::int64_t ca = 0, r0 = 0;
          if (c + b.bc < cols_t) {
            plane = src;
            ca = c + b.bc;
            r0 = r_lo;
          } else if (next.src && rn + (r_hi - r_lo) <= rows_t) {
            plane = next.src;
            ca = c + b.bc - cols_t < cols_t ? c + b.bc - cols_t : c;
            r0 = rn;
          }
          if (plane) {
            pf = square_at(plane, ca, r0);
            for (std::int64_t q = w; q < r_hi - r_lo; q += w) prefetch_burst(square_at(plane, ca, r0 + q));
          }
        }
        run_tiles(p0, p1, c, pf);
      }
    }
  };
  // The rows past the last whole tile, over columns [c_lo, c_hi). One or two rows are gathered,
  // a segment at a time; more get one more tile ending at the last row, overlapping the one
  // before (rewriting the same values). Gathering beats the overlapping tile for one or two
  // rows, which would store th - 1 lines a second time to memory
  // (`bench_convert --benchmark_filter='nchw_to_nhwc/.*/32x2048x7x7/'`, the 49th row).
  const bool gather_tail = rows - rows_t <= 2 && rows_t >= th && 63 * sb <= std::int64_t{0x7fffffff};
  auto tail_rows = [&](std::int64_t c_lo, std::int64_t c_hi) {
    if (rows == rows_t) return;
    if (gather_tail) {
      for (std::int64_t c = c_lo; c < c_hi; c += w)
        for (std::int64_t r = rows_t; r < rows; ++r)
          store_zmm<Stream>(dst + (r * drs + c) * e, gather_row_segment<E>(src + (c * srs + r) * e, sb));
      return;
    }
    for (std::int64_t c = c_lo; c < c_hi; c += w) run_tiles(rows - th, rows, c);
  };
  if (b.rows_outer) {
    const std::int64_t r_lo = strip * b.br, r_hi = rows_t - r_lo < b.br ? rows_t : r_lo + b.br;
    for (std::int64_t c_lo = 0; c_lo < cols_t; c_lo += b.bc) {
      const std::int64_t c_hi = cols_t - c_lo < b.bc ? cols_t : c_lo + b.bc;
      block_by_rows(r_lo, r_hi, c_lo, c_hi, next.strip * b.br);
    }
    edge_cols(r_lo, r_hi);
    if (r_hi == rows_t) {
      tail_rows(0, cols_t);
      transpose_scalar<E>(src + (cols_t * srs + rows_t) * e, srs, dst + (rows_t * drs + cols_t) * e, drs, rows - rows_t,
                          cols - cols_t);
    }
    return;
  }
  const std::int64_t c_lo = strip * b.bc, c_hi = cols_t - c_lo < b.bc ? cols_t : c_lo + b.bc;
  if (rows_t <= b.br && next.src && sb <= 2 * rows * e) {
    const std::int64_t cn = next.strip * b.bc, nc = cols_t - cn < b.bc ? cols_t - cn : b.bc;
    strip_ahead_on = true;
    strip_ahead.start(next.src + cn * sb, (nc - 1) * sb + rows * e, (c_hi - c_lo) / w * ((rows_t + w - 1) / w),
                      b.ahead);
  }
  for (std::int64_t r_lo = 0; r_lo < rows_t; r_lo += b.br)
    block(r_lo, rows_t - r_lo < b.br ? rows_t : r_lo + b.br, c_lo, c_hi, b.br, next.strip * b.bc);
  tail_rows(c_lo, c_hi);
  if (c_hi == cols_t) {
    edge_cols(0, rows_t);
    transpose_scalar<E>(src + (cols_t * srs + rows_t) * e, srs, dst + (rows_t * drs + cols_t) * e, drs, rows - rows_t,
                        cols - cols_t);
  }
}

#endif  // MEMFMT_CONVERT_HAVE_ZMM_TILES

}  // namespace memfmt::detail
