// memfmt/convert/detail/zmm_short_rows.hpp - transposes into destination rows that are not whole
// cache lines (NHWC->NCHW with H*W = 49: rows of 196 or 98 bytes; or 30 x 30, 55 x 55), in
// software-pipelined panels.
//
// A panel is up to four source lines wide (P channels; two for 1- and 2-byte elements; one for
// planes of more than 128 positions) and covers every position of the plane, so its P destination
// rows are one contiguous run. (Planes too long for a one-line panel's stage, more than 4096
// positions, are cut into spans of positions, and a panel's rows then go out as P runs.) Three
// streams run through each panel at once, spread over its kernel calls, so the core keeps
// transposing while memory works:
//   * zmm_row_group kernels transpose g positions x one source line into a stage (L1, or L2 for
//     long rows);
//   * the previous panel's stage is streamed out (stage_streamer: non-temporal whole lines), a
//     slice per call, or in one burst after the kernels (convert_options::stage, cpu_tuning.hpp);
//   * the next plane's source is prefetched in address order (linear_prefetch, into the level
//     convert_options::prefetch names), which keeps the hardware prefetchers and DRAM pages busy
//     as a sequential read would, and the next panel's lines again into L1 (segment_prefetch; see
//     run_short_rows for where): mostly cache hits, but they recover the lines that other work on
//     a busy machine evicted in between.
// Cold, the reads limit it; from L2, the kernels' loads do (not the shuffles): a wide group's 16
// lines are 4 KiB apart, share one L1 set and evict each other's fills. Copying a panel to a
// padded buffer first costs what it saves, as does a stage of whole-line rows (packing them for
// the stream-out); masked stores are slower than extracts.
#pragma once

#include <cstdint>
#include <cstring>

#include "prefetch.hpp"
#include "stream_copy.hpp"
#include "zmm_transpose.hpp"

namespace memfmt::detail {

#if MEMFMT_CONVERT_HAVE_ZMM_TILES

// Source rows (positions) x one 64-byte line (64 / E channels) -> 64 / E stage rows, written at
// stage + channel * pitch. `valid` masks the line's bytes (a partial last line of channels: the
// masked-off bytes are never read and load as zero).
// In-lane unpack rounds leave lane q of v[j] holding channel q * n + bit_reverse(j) for n
// positions (n = 16 / E). wide() takes 2n positions and joins the lanes of two such groups with a
// cross-lane permute into one 32-byte store per channel; narrow() takes n positions, one 16-byte
// store per channel, for the tail of a plane (a wide tail group would rewrite more of the group
// before it: slower on `bench_convert --benchmark_filter='nhwc_to_nchw/f32/32x2048x7x7/'`).
// Extracts are the maskz forms: GCC 12 warns on the plain ones and casts.
template <std::size_t E>
struct zmm_row_group {
  using tile = zmm_tile<E>;
  static constexpr int n = tile::n;

  static void lanes(const unsigned char* src, std::int64_t sb, __mmask64 valid, __m512i (&v)[n]) noexcept {
#pragma GCC unroll 16
    for (int k = 0; k < n; ++k) v[k] = _mm512_maskz_loadu_epi8(valid, src + k * sb);
    if constexpr (E == 1) tile::template round<1>(v);
    if constexpr (E <= 2) tile::template round<2>(v);
    if constexpr (E <= 4) tile::template round<4>(v);
    tile::template round<8>(v);
  }
  static void wide(const unsigned char* src, std::int64_t sb, __mmask64 valid, unsigned char* stage,
                   std::int64_t pitch) noexcept {
    __m512i v[n], u[n];
    lanes(src, sb, valid, v);
    lanes(src + n * sb, sb, valid, u);
    // Lanes (v.q, u.q) side by side: positions 0..n-1 and n..2n-1 of one channel per 256-bit half.
    const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i hi = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
#pragma GCC unroll 16
    for (int j = 0; j < n; ++j) {
      const __m512i x = _mm512_permutex2var_epi32(v[j], lo, u[j]), y = _mm512_permutex2var_epi32(v[j], hi, u[j]);
      unsigned char* p = stage + tile::bit_reverse(j) * pitch;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_maskz_extracti64x4_epi64(0xF, x, 0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + n * pitch), _mm512_maskz_extracti64x4_epi64(0xF, x, 1));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 2 * n * pitch), _mm512_maskz_extracti64x4_epi64(0xF, y, 0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 3 * n * pitch), _mm512_maskz_extracti64x4_epi64(0xF, y, 1));
    }
  }
  static void narrow(const unsigned char* src, std::int64_t sb, __mmask64 valid, unsigned char* stage,
                     std::int64_t pitch) noexcept {
    __m512i v[n];
    lanes(src, sb, valid, v);
#pragma GCC unroll 16
    for (int j = 0; j < n; ++j) {
      unsigned char* p = stage + tile::bit_reverse(j) * pitch;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_maskz_extracti32x4_epi32(0xF, v[j], 0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p + n * pitch), _mm512_maskz_extracti32x4_epi32(0xF, v[j], 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 2 * n * pitch), _mm512_maskz_extracti32x4_epi32(0xF, v[j], 2));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 3 * n * pitch), _mm512_maskz_extracti32x4_epi32(0xF, v[j], 3));
    }
  }
};

// One panel: channels [0, h) (h <= lines * 64 / E) of a source plane whose positions are sb bytes
// apart, all `cols` (>= n) positions, into stage rows of cols elements: wide groups, then the
// tail as one group ending at the last position (narrow if at most n remain), overlapping the
// group before it (rewriting the same values) instead of scalar code. between() runs after every
// kernel call, with the call's index.
template <std::size_t E, class Between>
void transpose_short_rows_panel(const unsigned char* src, std::int64_t sb, std::int64_t h, std::int64_t cols,
                                unsigned char* stage, const Between& between) noexcept {
  using group = zmm_row_group<E>;
  constexpr std::int64_t e = static_cast<std::int64_t>(E), lw = 64 / e, n = group::n;
  const std::int64_t lines = (h + lw - 1) / lw, pitch = cols * e;
  std::int64_t call = 0;
  auto run = [&](std::int64_t p0, bool wide) {
    for (std::int64_t l = 0; l < lines; ++l, ++call) {
      const std::int64_t bytes = (h - l * lw < lw ? h - l * lw : lw) * e;
      const __mmask64 valid = bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1;
      const unsigned char* s = src + p0 * sb + l * 64;
      unsigned char* st = stage + (l * lw * cols + p0) * e;
      if (wide) group::wide(s, sb, valid, st, pitch);
      else group::narrow(s, sb, valid, st, pitch);
      between(call);
    }
  };
  if (cols < 2 * n) {  // a small plane (H*W = 9 in bf16): one narrow group, or two overlapping
    run(0, false);
    if (cols > n) run(cols - n, false);
    return;
  }
  std::int64_t p0 = 0;
  for (; p0 + 2 * n <= cols; p0 += 2 * n) run(p0, true);
  if (p0 < cols) run(cols - p0 <= n ? cols - n : cols - 2 * n, cols - p0 > n);
}

// Kernel calls of a panel of h channels (for spreading the other streams over them).
template <std::size_t E>
inline std::int64_t short_rows_calls(std::int64_t h, std::int64_t cols) noexcept {
  constexpr std::int64_t lw = 64 / static_cast<std::int64_t>(E), g = 2 * zmm_row_group<E>::n;
  const std::int64_t groups = cols >= g ? (cols + g - 1) / g : cols > g / 2 ? 2 : 1;
  return ((h + lw - 1) / lw) * groups;
}

// Streams a finished stage to its destination in slices: whole aligned lines non-temporally, the
// partial lines at either end of a run (unaligned destinations) with plain stores. A stage is one
// run, or `runs` of them (a panel over part of each row): then it goes a run per slice.
struct stage_streamer {
  void start(unsigned char* d, const unsigned char* s, std::int64_t run_bytes, std::int64_t run_count = 1,
             std::int64_t d_pitch = 0, std::int64_t s_pitch = 0) noexcept {
    dst0 = d;
    stage0 = s;
    bytes = run_bytes;
    runs = run_count;
    dpitch = d_pitch;
    spitch = s_pitch;
    run = 0;
    open();
  }
  // Up to k / of of the whole.
  void advance(std::int64_t k, std::int64_t of) noexcept {
    if (runs > 1) {
      const std::int64_t target = of > 0 ? runs * k / of : runs;
      while (run < target) close();
      return;
    }
    if (run < runs) stream_to(of > 0 ? lines * k / of : lines);
  }
  void finish() noexcept {
    while (run < runs) close();
  }

 private:
  unsigned char* dst0 = nullptr;
  const unsigned char* stage0 = nullptr;
  std::int64_t bytes = 0, runs = 0, run = 0, dpitch = 0, spitch = 0;
  unsigned char* dst = nullptr;  // the current run
  const unsigned char* stage = nullptr;
  std::int64_t head = 0, lines = 0, done = 0, tail = 0;

  void open() noexcept {
    dst = dst0 + run * dpitch;
    stage = stage0 + run * spitch;
    head = static_cast<std::int64_t>((64 - reinterpret_cast<std::uintptr_t>(dst) % 64) % 64);
    if (head > bytes) head = bytes;
    lines = (bytes - head) / 64;
    tail = bytes - head - 64 * lines;
    done = 0;
    std::memcpy(dst, stage, static_cast<std::size_t>(head));
  }
  void stream_to(std::int64_t target) noexcept {
    if (target <= done) return;
    const std::int64_t off = head + 64 * done;
    stream_lines(dst + off, stage + off, static_cast<std::size_t>(target - done));
    done = target;
  }
  void close() noexcept {
    stream_to(lines);
    const std::int64_t off = head + 64 * lines;
    std::memcpy(dst + off, stage + off, static_cast<std::size_t>(tail));
    if (++run < runs) open();
  }
};

#endif  // MEMFMT_CONVERT_HAVE_ZMM_TILES

}  // namespace memfmt::detail
