// memfmt/convert/detail/cpu_tuning.hpp - the kernels' choices that depend on the CPU's caches.
//
// Two choices (convert_options::prefetch and ::stage, options.hpp) go one way or the other by
// 0.2-0.5 of memcpy depending on how much L1 the work in progress leaves free:
//  * far prefetches (squares a block or strip ahead, a thread's next plane) into L1 pay where they
//    fit beside the lines being transposed, and evict those lines where they do not;
//  * a short-row stage streamed out a slice per kernel call keeps memory busy while the next panel
//    is transposed, but where L1 is tight the non-temporal stores cost in alternating with the
//    kernels' loads, and one burst after the kernels is faster.
// Both are decided by one rule: L1 data cache >= 48 KiB, i.e. room for the two stages of a
// short-row panel (2 x short_row_stage_bytes) and as much again of prefetched lines, gets far
// prefetches into L1 and slices; a smaller (or unknown) L1 gets L2 and bursts. Cores with 32 KiB
// L1d and with 48 KiB L1d (and 1 or 2 MiB of L2) were measured to want these opposite settings on
// `bench_convert --benchmark_filter='(32x64x112x112|32x256x56x56|256x64x56x56|32x2048x7x7)/threads:1'`
// (MEMFMT_BENCH_PREFETCH and MEMFMT_BENCH_STAGE force each setting). Only the AVX-512 kernels
// (builds for CPUs with AVX-512 BW) make these choices; AVX2 and baseline builds ignore them.
#pragma once

#include <cstdint>

#include "../options.hpp"
#include "cache_geometry.hpp"
#include "prefetch.hpp"

namespace memfmt::detail {

// The largest stage of one short-row panel (run_short_rows keeps two, double-buffered).
inline constexpr std::int64_t short_row_stage_bytes = std::int64_t{16} << 10;
// The smallest L1 data cache that gets far prefetches into L1 and stages streamed in slices.
inline constexpr std::int64_t l1d_for_l1_prefetch = 3 * short_row_stage_bytes;

inline far_prefetch far_prefetch_for(const cache_geometry& g) noexcept {
  return g.l1d_bytes >= l1d_for_l1_prefetch ? far_prefetch::l1 : far_prefetch::l2;
}
inline stage_stream stage_stream_for(const cache_geometry& g) noexcept {
  return g.l1d_bytes >= l1d_for_l1_prefetch ? stage_stream::slices : stage_stream::burst;
}

// The options with `automatic` replaced by what this machine's caches imply.
inline far_prefetch resolve(far_prefetch p) noexcept {
  return p == far_prefetch::automatic ? far_prefetch_for(detected_cache_geometry()) : p;
}
inline stage_stream resolve(stage_stream s) noexcept {
  return s == stage_stream::automatic ? stage_stream_for(detected_cache_geometry()) : s;
}

// The cache level a far prefetch names, for prefetch_line.
inline prefetch_into far_prefetch_level(const convert_options& opt) noexcept {
  return resolve(opt.prefetch) == far_prefetch::l1 ? prefetch_into::l1 : prefetch_into::l2;
}
inline bool stage_bursts(const convert_options& opt) noexcept { return resolve(opt.stage) == stage_stream::burst; }

}  // namespace memfmt::detail
