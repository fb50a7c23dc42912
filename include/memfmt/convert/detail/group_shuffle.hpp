// memfmt/convert/detail/group_shuffle.hpp - AVX-512 interleave / de-interleave of 2..4 rows.
//
// The transposes where one side has only G = 2, 3 or 4 elements per row (the C = 3 stem to or from
// channels-last) are shuffles of G vectors into G vectors: output k, lane o takes lane el(k, o) of
// input vec(k, o). Each output is one two-source permute of inputs 0/1, plus (G > 2) a masked
// permute of input 2 or a blend with a permute of inputs 2/3. Index tables are built at compile
// time. Needs AVX512F (4- and 8-byte), AVX512BW (2-byte) or AVX512VBMI (1-byte) elements;
// group_shuffle_available<E> says whether this build has them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "stream_copy.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace memfmt::detail {

template <std::size_t E>
inline constexpr bool group_shuffle_available =
#if defined(__AVX512F__)
    (E == 4 || E == 8)
#if defined(__AVX512BW__)
    || E == 2
#endif
#if defined(__AVX512VBMI__)
    || E == 1
#endif
#else
    false
#endif
    ;

#if defined(__AVX512F__)

template <std::size_t E>
struct index_type_of;
template <>
struct index_type_of<1> {
  using type = std::uint8_t;
};
template <>
struct index_type_of<2> {
  using type = std::uint16_t;
};
template <>
struct index_type_of<4> {
  using type = std::uint32_t;
};
template <>
struct index_type_of<8> {
  using type = std::uint64_t;
};

// Tables for one shuffle: for output k, `low` indexes inputs 0/1 (lane + L for input 1), `high`
// inputs 2/3, `from_high` marks lanes taken from inputs 2/3.
template <std::size_t E, int G, bool Interleave>
struct group_tables {
  static constexpr int L = static_cast<int>(64 / E);
  using index_t = typename index_type_of<E>::type;
  alignas(64) index_t low[G][L] = {};
  alignas(64) index_t high[G][L] = {};
  std::uint64_t from_high[G] = {};

  constexpr group_tables() {
    for (int k = 0; k < G; ++k)
      for (int o = 0; o < L; ++o) {
        int vec = 0, lane = 0;
        if (Interleave) {  // out k lane o is flat element f = k*L + o = pixel * G + channel
          const int f = k * L + o;
          vec = f % G;
          lane = f / G;
        } else {  // out k (a channel) lane o is flat input element o*G + k
          const int f = o * G + k;
          vec = f / L;
          lane = f % L;
        }
        const int idx = lane + (vec % 2) * L;
        if (vec < 2) {
          low[k][o] = static_cast<index_t>(idx);
        } else {
          high[k][o] = static_cast<index_t>(G == 3 ? lane : idx);
          from_high[k] |= std::uint64_t{1} << o;
        }
      }
  }
};

template <std::size_t E>
struct zmm_ops;
template <>
struct zmm_ops<4> {
  static __m512i perm2(__m512i a, __m512i i, __m512i b) { return _mm512_permutex2var_epi32(a, i, b); }
  static __m512i mask_perm(__m512i s, std::uint64_t m, __m512i i, __m512i a) {
    return _mm512_mask_permutexvar_epi32(s, static_cast<__mmask16>(m), i, a);
  }
  static __m512i blend(std::uint64_t m, __m512i a, __m512i b) {
    return _mm512_mask_blend_epi32(static_cast<__mmask16>(m), a, b);
  }
};
template <>
struct zmm_ops<8> {
  static __m512i perm2(__m512i a, __m512i i, __m512i b) { return _mm512_permutex2var_epi64(a, i, b); }
  static __m512i mask_perm(__m512i s, std::uint64_t m, __m512i i, __m512i a) {
    return _mm512_mask_permutexvar_epi64(s, static_cast<__mmask8>(m), i, a);
  }
  static __m512i blend(std::uint64_t m, __m512i a, __m512i b) {
    return _mm512_mask_blend_epi64(static_cast<__mmask8>(m), a, b);
  }
};
#if defined(__AVX512BW__)
template <>
struct zmm_ops<2> {
  static __m512i perm2(__m512i a, __m512i i, __m512i b) { return _mm512_permutex2var_epi16(a, i, b); }
  static __m512i mask_perm(__m512i s, std::uint64_t m, __m512i i, __m512i a) {
    return _mm512_mask_permutexvar_epi16(s, static_cast<__mmask32>(m), i, a);
  }
  static __m512i blend(std::uint64_t m, __m512i a, __m512i b) {
    return _mm512_mask_blend_epi16(static_cast<__mmask32>(m), a, b);
  }
};
#endif
#if defined(__AVX512VBMI__)
template <>
struct zmm_ops<1> {
  static __m512i perm2(__m512i a, __m512i i, __m512i b) { return _mm512_permutex2var_epi8(a, i, b); }
  static __m512i mask_perm(__m512i s, std::uint64_t m, __m512i i, __m512i a) {
    return _mm512_mask_permutexvar_epi8(s, static_cast<__mmask64>(m), i, a);
  }
  static __m512i blend(std::uint64_t m, __m512i a, __m512i b) {
    return _mm512_mask_blend_epi8(static_cast<__mmask64>(m), a, b);
  }
};
#endif

template <std::size_t E, int G, bool Interleave>
inline void shuffle_group(const __m512i (&in)[G], __m512i (&out)[G]) noexcept {
  static constexpr group_tables<E, G, Interleave> t{};
  using ops = zmm_ops<E>;
  for (int k = 0; k < G; ++k) {
    __m512i r = ops::perm2(in[0], _mm512_load_si512(t.low[k]), in[1]);
    if constexpr (G == 3) r = ops::mask_perm(r, t.from_high[k], _mm512_load_si512(t.high[k]), in[2]);
    if constexpr (G == 4) r = ops::blend(t.from_high[k], r, ops::perm2(in[2], _mm512_load_si512(t.high[k]), in[3]));
    out[k] = r;
  }
}

// dst[r*G + c] = src[c*srs + r] for whole vectors of rows; returns the rows done.
template <std::size_t E, int G, bool Stream = false>
inline std::int64_t interleave_zmm(const unsigned char* src, std::int64_t srs, unsigned char* dst,
                                   std::int64_t rows) noexcept {
  constexpr std::int64_t L = 64 / E, e = static_cast<std::int64_t>(E);
  std::int64_t r0 = 0;
  for (; r0 + L <= rows; r0 += L) {
    __m512i in[G], out[G];
    for (int c = 0; c < G; ++c) in[c] = _mm512_loadu_si512(src + (c * srs + r0) * e);
    shuffle_group<E, G, true>(in, out);
    for (int k = 0; k < G; ++k) store_zmm<Stream>(dst + (r0 * G + k * L) * e, out[k]);
  }
  return r0;
}

// dst[r*drs + c] = src[c*G + r] for whole vectors of columns; returns the columns done.
template <std::size_t E, int G, bool Stream = false>
inline std::int64_t deinterleave_zmm(const unsigned char* src, unsigned char* dst, std::int64_t drs,
                                     std::int64_t cols) noexcept {
  constexpr std::int64_t L = 64 / E, e = static_cast<std::int64_t>(E);
  std::int64_t c0 = 0;
  for (; c0 + L <= cols; c0 += L) {
    __m512i in[G], out[G];
    for (int k = 0; k < G; ++k) in[k] = _mm512_loadu_si512(src + (c0 * G + k * L) * e);
    shuffle_group<E, G, false>(in, out);
    for (int r = 0; r < G; ++r) store_zmm<Stream>(dst + (r * drs + c0) * e, out[r]);
  }
  return c0;
}

#endif  // __AVX512F__

}  // namespace memfmt::detail
