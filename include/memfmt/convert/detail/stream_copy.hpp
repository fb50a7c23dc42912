// memfmt/convert/detail/stream_copy.hpp - contiguous copies with non-temporal stores.
//
// Non-temporal stores write whole cache lines without first reading them (no write-allocate), which
// is what lets a large copy or transpose reach memcpy's bandwidth. Only full, aligned 64-byte lines
// are streamed; the unaligned head and tail use ordinary stores. Callers end a burst with
// stream_fence() so the data is globally visible before other threads read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace memfmt::detail {

inline void stream_fence() noexcept {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

#if defined(__AVX512F__)
// One 64-byte vector; Stream: a non-temporal store (dst 64-byte aligned).
template <bool Stream>
inline void store_zmm(unsigned char* dst, __m512i v) noexcept {
  if constexpr (Stream) _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), v);
  else _mm512_storeu_si512(dst, v);
}
#endif

#if defined(__SSE2__)
// `lines` whole 64-byte lines, non-temporally (d 64-byte aligned, s any alignment).
inline void stream_lines(unsigned char* d, const unsigned char* s, std::size_t lines) noexcept {
  for (std::size_t i = 0; i < lines; ++i, d += 64, s += 64) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d), _mm512_loadu_si512(s));
#elif defined(__AVX__)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32)));
#else
    for (int k = 0; k < 4; ++k)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16 * k),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * k)));
#endif
  }
}
#endif

inline void stream_copy(void* dst, const void* src, std::size_t bytes) noexcept {
#if defined(__SSE2__)
  auto* d = static_cast<unsigned char*>(dst);
  auto* s = static_cast<const unsigned char*>(src);
  if (bytes < 256) {
    std::memcpy(d, s, bytes);
    return;
  }
  const std::size_t head = (64 - reinterpret_cast<std::uintptr_t>(d) % 64) % 64;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const std::size_t lines = bytes / 64;
  stream_lines(d, s, lines);
  d += 64 * lines;
  s += 64 * lines;
  std::memcpy(d, s, bytes % 64);
#else
  std::memcpy(dst, src, bytes);
#endif
}

}  // namespace memfmt::detail
