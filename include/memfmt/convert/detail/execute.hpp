// memfmt/convert/detail/execute.hpp - runs a copy_plan: blocking, threads, streaming stores.
//
// Three shapes of plan:
//  * copy:      the innermost destination dimension is also unit-stride in the source -> row copies
//               (one flat run for dense same-format data);
//  * transpose: another dimension is unit-stride in the source -> 2-D transposes of (rows x cols)
//               planes. With AVX-512 (BW), zmm_transpose.hpp writes whole destination lines
//               from registers (non-temporal for large outputs) when destination rows are >= 64
//               bytes and there are at least a tile of them (16 / E), in row or column strips
//               chosen by the pitch of the side they scatter over; when streaming is wanted but
//               destination rows are dense and not whole lines (H*W = 49, or 30 x 30, or as few
//               as 16 / E positions), zmm_short_rows.hpp's pipelined panels go through a
//               per-thread stage. Plain stores into rows whose lines fall in one or two L1 sets
//               (small tensors with C = 1024-2048 to NHWC, 32x32 planes to NCHW) go through a
//               per-thread stage a block at a time (run_staged_blocks).
//               Otherwise the blocked kernels of transpose_kernels.hpp run: for C = 2..4 the
//               AVX-512 group shuffles, streamed straight from registers when the destination
//               blocks are aligned; else (no AVX-512, unaligned) AVX2 / scalar kernels through the
//               staging buffer;
//  * gather:    no unit-stride source dimension (broadcast, step slices) -> strided element loop.
// Work is cut into items (outer index x strip or block) split into contiguous ranges, one per thread
// (the short-row path's threads claim chunks as they go).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "../options.hpp"
#include "copy_plan.hpp"
#include "cpu_tuning.hpp"
#include "prefetch.hpp"
#include "stream_copy.hpp"
#include "transpose_kernels.hpp"
#include "zmm_short_rows.hpp"
#include "zmm_transpose.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace memfmt::detail {

// Block sizes can be overridden at compile time for tuning experiments.
#ifndef MEMFMT_CONVERT_STAGE_BYTES
#define MEMFMT_CONVERT_STAGE_BYTES (32 << 10)
#endif
#ifndef MEMFMT_CONVERT_BLOCK_COL_BYTES
#define MEMFMT_CONVERT_BLOCK_COL_BYTES (4 << 10)
#endif

struct convert_tuning {
  static constexpr std::int64_t stream_threshold_bytes = std::int64_t{4} << 20;  // output size
  static constexpr std::int64_t min_bytes_per_thread = std::int64_t{256} << 10;
  static constexpr std::int64_t stage_bytes = MEMFMT_CONVERT_STAGE_BYTES;          // per-thread block
  static constexpr std::int64_t block_col_bytes = MEMFMT_CONVERT_BLOCK_COL_BYTES;  // longest row segment of a block
  static constexpr std::int64_t min_stream_run_bytes = 256;  // shorter destination runs use plain stores
  static constexpr std::int64_t max_short_row_panel_bytes = std::int64_t{256} << 10;  // one line of channels
  static constexpr std::int64_t copy_chunk_bytes = std::int64_t{1} << 20;
};

inline int resolve_threads(int requested, std::int64_t bytes, std::int64_t items) noexcept {
#if defined(_OPENMP)
  std::int64_t nt = requested > 0 ? requested : omp_get_max_threads();
  const std::int64_t by_bytes = bytes / convert_tuning::min_bytes_per_thread;
  if (nt > by_bytes) nt = by_bytes;
  if (nt > items) nt = items;
  return nt < 1 ? 1 : static_cast<int>(nt);
#else
  (void)requested;
  (void)bytes;
  (void)items;
  return 1;
#endif
}

// body(thread_index, team_size) on each thread of a team of up to `threads` (OpenMP may give
// fewer), for work that the threads share out themselves.
template <class Body>
void run_team(int threads, const Body& body) {
#if defined(_OPENMP)
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    body(omp_get_thread_num(), omp_get_num_threads());
    return;
  }
#endif
  (void)threads;
  body(0, 1);
}

// body(first_item, last_item, thread_index) over contiguous, near-equal ranges of [0, items).
template <class Body>
void parallel_items(int threads, std::int64_t items, const Body& body) {
  run_team(threads, [&](int t, int k) {
    const std::int64_t q = items / k, r = items % k;
    const std::int64_t first = t * q + (t < r ? t : r);
    body(first, first + q + (t < r ? 1 : 0), t);
  });
}

// Outer dimensions of a plan, decoded from a flat index (last listed varies fastest).
struct outer_dims {
  int count = 0;
  copy_dim dims[copy_plan::max_rank] = {};
  std::int64_t total = 1;

  outer_dims(const copy_plan& p, int skip_a, int skip_b) noexcept {
    for (int d = 0; d < p.rank; ++d)
      if (d != skip_a && d != skip_b) {
        dims[count++] = p.dims[d];
        total *= p.dims[d].size;
      }
  }
  // Whether every destination plane of dst (E-byte elements) starts on a 64-byte line.
  bool dst_planes_on_lines(const unsigned char* dst, std::int64_t e) const noexcept {
    bool on = reinterpret_cast<std::uintptr_t>(dst) % 64 == 0;
    for (int d = 0; d < count; ++d) on = on && (dims[d].dst_stride * e) % 64 == 0;
    return on;
  }
  void offsets(std::int64_t flat, std::int64_t& src_off, std::int64_t& dst_off) const noexcept {
    src_off = 0;
    dst_off = 0;
    for (int d = count - 1; d >= 0; --d) {
      const std::int64_t i = flat % dims[d].size;
      flat /= dims[d].size;
      src_off += i * dims[d].src_stride;
      dst_off += i * dims[d].dst_stride;
    }
  }
};

struct aligned_free {
  void operator()(unsigned char* p) const noexcept { std::free(p); }
};
// Staging for one call, a block per thread, each allocated and first touched by the thread that
// uses it, and kept for that thread's later calls (it only grows, and is freed when the thread
// exits). Allocating it per call costs tens of microseconds, a tenth of a 6 MB conversion on 2
// threads; a block in the calling thread's memory runs another thread's panels several times
// slower when the two sit on different dies
// (`bench_convert --benchmark_filter='nhwc_to_nchw/.*/32x2048x7x7/threads:2'`).
// A thread that cannot get its block does no work, and check() then throws std::bad_alloc.
class team_staging {
 public:
  explicit team_staging(std::int64_t bytes_each) noexcept : bytes_((bytes_each + 63) / 64 * 64) {}
  // The calling thread's block (64-byte aligned), or nullptr when none was asked for or the
  // allocation failed (recorded for check()).
  unsigned char* get() noexcept {
    if (bytes_ == 0) return nullptr;
    struct buffer {
      std::unique_ptr<unsigned char, aligned_free> data;
      std::int64_t bytes = 0;
    };
    thread_local buffer kept;
    if (kept.bytes < bytes_) {
      kept.data.reset();
      kept.bytes = 0;
      void* p = std::aligned_alloc(64, static_cast<std::size_t>(bytes_));
      if (!p) {
        failed_.store(true, std::memory_order_relaxed);
        return nullptr;
      }
      kept.data.reset(static_cast<unsigned char*>(p));
      kept.bytes = bytes_;
    }
    return kept.data.get();
  }
  bool wanted() const noexcept { return bytes_ > 0; }
  // After the team: throws if a thread went without its block.
  void check() const {
    if (failed_.load(std::memory_order_relaxed)) throw std::bad_alloc();
  }

 private:
  std::int64_t bytes_;
  std::atomic<bool> failed_{false};
};

template <std::size_t E>
void run_copy(const copy_plan& p, int inner, const unsigned char* src, unsigned char* dst, const convert_options& opt) {
  constexpr std::int64_t e = static_cast<std::int64_t>(E);
  const outer_dims outer(p, inner, -1);
  const std::int64_t len = p.dims[inner].size;
  const std::int64_t total_bytes = p.numel * e;
  const bool streaming = opt.allow_streaming_stores && total_bytes >= convert_tuning::stream_threshold_bytes &&
                         len * e >= convert_tuning::min_stream_run_bytes;
  // A single long run is cut into chunks so threads share it.
  const std::int64_t chunk = outer.total == 1 ? convert_tuning::copy_chunk_bytes / e : len;
  const std::int64_t chunks_per_row = (len + chunk - 1) / chunk;
  const std::int64_t items = outer.total * chunks_per_row;
  const int threads = resolve_threads(opt.num_threads, total_bytes, items);
  parallel_items(threads, items, [&](std::int64_t first, std::int64_t last, int) {
    for (std::int64_t it = first; it < last; ++it) {
      std::int64_t so = 0, dof = 0;
      outer.offsets(it / chunks_per_row, so, dof);
      const std::int64_t c0 = (it % chunks_per_row) * chunk;
      const std::int64_t n = len - c0 < chunk ? len - c0 : chunk;
      const unsigned char* s = src + (so + c0) * e;
      unsigned char* d = dst + (dof + c0) * e;
      if (streaming) stream_copy(d, s, static_cast<std::size_t>(n * e));
      else std::memcpy(d, s, static_cast<std::size_t>(n * e));
    }
    if (streaming) stream_fence();
  });
}

#if MEMFMT_CONVERT_HAVE_ZMM_TILES
// Streaming into destination rows that are dense but not whole lines (a panel's rows are one
// contiguous run, e.g. NHWC->NCHW with H*W = 49): zmm_short_rows.hpp's pipelined panels. While a
// panel is transposed into one of the thread's two stages, the previous stage is streamed out,
// the next panel is prefetched into L1 and the thread's next plane into the level
// convert_options::prefetch names.
//  * A panel is up to four source lines of channels wide (two for 1- and 2-byte elements), so
//    that a stage stays within short_row_stage_bytes and both fit in L1 (longer rows take one
//    line, and their stage is in L2). Other widths are slower on
//    `bench_convert --benchmark_filter='nhwc_to_nchw/.*/32x2048x7x7/threads:1'`.
//  * With stage_stream::burst the previous stage goes out in one burst after the panel's
//    kernels, where L1 holds both stages; cpu_tuning.hpp says which caches want that.
//  * The next panel is prefetched into L1 only where L1 holds it beside the two stages, and not
//    for 1- and 2-byte elements on planes of at most 64 positions, whose 16 positions per kernel
//    call, 4 KiB apart, fill an L1 set on their own; on longer panels it is what keeps the reads
//    in flight.
//  * Threads claim chunks from a shared counter as they go, each one chunk ahead so that it can
//    prefetch it: with fixed ranges, a thread that the machine holds up keeps the other waiting.
//    A chunk is a plane, or with fewer than four planes per thread a part of one; then only the
//    next panel is prefetched (a part's channels are not one run).
template <std::size_t E>
void run_short_rows(const copy_plan& p, int row_dim, int col_dim, const unsigned char* src, unsigned char* dst,
                    const convert_options& opt) {
  constexpr std::int64_t e = static_cast<std::int64_t>(E);
  const outer_dims outer(p, row_dim, col_dim);
  const std::int64_t rows = p.dims[row_dim].size, cols = p.dims[col_dim].size;
  const std::int64_t sb = p.dims[col_dim].src_stride * e;
  // A panel covers every position, or on planes too long for a one-line panel's stage, one of
  // `spans` equal runs of positions: its rows then go out as that many runs.
  const std::int64_t spans =
      (64 * cols + convert_tuning::max_short_row_panel_bytes - 1) / convert_tuning::max_short_row_panel_bytes;
  const std::int64_t span = (cols + spans - 1) / spans;
  std::int64_t lines = short_row_stage_bytes / (64 * span);
  const std::int64_t max_lines = E <= 2 ? 2 : 4;
  lines = lines < 1 ? 1 : lines > max_lines ? max_lines : lines;
  const std::int64_t panel = lines * 64 / e, panel_bytes = panel * span * e;
  const bool prefetch_near = (E >= 4 || cols > 64) && 3 * panel_bytes <= l1d_bytes();
  const bool burst = stage_bursts(opt) && 2 * panel_bytes <= l1d_bytes();
  const prefetch_into far = far_prefetch_level(opt);
  const std::int64_t panels = (rows + panel - 1) / panel * spans;  // a band of channels x a span
  const std::int64_t plane_span = (cols - 1) * sb + rows * e;      // bytes from a plane's first element
  const std::int64_t full_calls = short_rows_calls<E>(panel, span);
  const int threads = resolve_threads(opt.num_threads, p.numel * e, outer.total * panels);
  std::int64_t parts = (4 * threads + outer.total - 1) / outer.total;  // chunks per plane
  parts = parts < 1 ? 1 : parts > panels ? panels : parts;
  const std::int64_t chunk_panels = (panels + parts - 1) / parts;
  parts = (panels + chunk_panels - 1) / chunk_panels;
  const std::int64_t chunks = outer.total * parts;
  team_staging staging(2 * panel_bytes);
  struct chunk_at {  // chunk -> source and destination offsets of its plane, its panels
    std::int64_t so = 0, dof = 0, first = 0, last = 0;
  };
  auto locate = [&](std::int64_t k) {
    chunk_at c;
    outer.offsets(k / parts, c.so, c.dof);
    c.first = (k % parts) * chunk_panels;
    c.last = c.first + chunk_panels < panels ? c.first + chunk_panels : panels;
    return c;
  };
  struct panel_at {  // panel -> its first channel and position, their counts
    std::int64_t c0 = 0, p0 = 0, h = 0, len = 0;
  };
  auto place = [&](std::int64_t pi) {
    panel_at q;
    q.c0 = pi / spans * panel;
    q.p0 = pi % spans * span;
    q.h = rows - q.c0 < panel ? rows - q.c0 : panel;
    q.len = cols - q.p0 < span ? cols - q.p0 : span;
    return q;
  };
  auto source = [&](std::int64_t so, const panel_at& q) { return src + (so + q.c0) * e + q.p0 * sb; };
  std::atomic<std::int64_t> claimed{0};
  run_team(threads, [&](int, int) {
    unsigned char* const mine = staging.get();
    if (!mine) return;
    unsigned char* stages[2] = {mine, mine + panel_bytes};
    int which = 0;
    stage_streamer out;     // the previous panel, streamed out during this one
    linear_prefetch ahead;  // the next plane
    std::int64_t k = claimed.fetch_add(1, std::memory_order_relaxed);
    chunk_at c = k < chunks ? locate(k) : chunk_at{};
    while (k < chunks) {
      const std::int64_t k_next = claimed.fetch_add(1, std::memory_order_relaxed);
      const chunk_at n = k_next < chunks ? locate(k_next) : chunk_at{};
      if (k_next < chunks && parts == 1) ahead.start(src + n.so * e, plane_span, panels * full_calls, far);
      for (std::int64_t pi = c.first; pi < c.last; ++pi) {
        const panel_at q = place(pi);
        const std::int64_t calls = short_rows_calls<E>(q.h, q.len);
        segment_prefetch near;  // the next panel: of this chunk, or the first of the next
        if (prefetch_near && (pi + 1 < c.last || k_next < chunks)) {
          const bool here = pi + 1 < c.last;
          const panel_at qn = place(here ? pi + 1 : n.first);
          near.start(source(here ? c.so : n.so, qn), qn.h * e, sb, qn.len, calls);
        }
        unsigned char* stage = stages[which];
        which ^= 1;
        transpose_short_rows_panel<E>(source(c.so, q), sb, q.h, q.len, stage, [&](std::int64_t call) {
          if (prefetch_near) near.step();
          ahead.step();
          if (!burst) out.advance(call + 1, calls);
        });
        out.finish();  // the previous stage, or what is left of it
        unsigned char* d = dst + (c.dof + q.c0 * cols + q.p0) * e;
        if (spans == 1) out.start(d, stage, q.h * cols * e);
        else out.start(d, stage, q.len * e, q.h, cols * e, q.len * e);
      }
      k = k_next;
      c = n;  // located once, for its prefetches
    }
    out.finish();
    stream_fence();
  });
  staging.check();
}

// Plain stores (no streaming) scattered over destination rows whose lines all fall in one or two
// L1 sets (NCHW->NHWC of 7x7 planes with C = 2048, NHWC->NCHW of 32x32 planes with C = 64) evict
// one another's write-allocate fills. So blocks of up to 64 destination rows and 32 KiB are
// transposed into a per-thread stage (`blocking` as for the whole plane, the next block
// prefetched as a next strip), and the stage's rows are copied out in order: two to three times
// faster from L2/L3 (`MEMFMT_BENCH_WARM=1 bench_convert --benchmark_filter='1x2048x7x7/'`). Row
// strips (rows outer) write whole rows already, and stay direct.
template <std::size_t E>
void run_staged_blocks(const copy_plan& p, int row_dim, int col_dim, const unsigned char* src, unsigned char* dst,
                       const convert_options& opt, const zmm_blocking& blocking) {
  constexpr std::int64_t e = static_cast<std::int64_t>(E), w = zmm_square<E>;
  const outer_dims outer(p, row_dim, col_dim);
  const std::int64_t rows = p.dims[row_dim].size, cols = p.dims[col_dim].size;
  const std::int64_t srs = p.dims[col_dim].src_stride, drs = p.dims[row_dim].dst_stride;
  // Blocks of br x bc, the last of each side overlapping the one before (rewriting the same
  // values); rows >= a tile and cols >= a square (run_transpose_zmm's conditions).
  const std::int64_t n_rb = (rows + 63) / 64;
  const std::int64_t br = (rows + n_rb - 1) / n_rb;
  std::int64_t bc = convert_tuning::stage_bytes / (br * e);
  bc -= bc % w;
  bc = bc < w ? w : bc > cols ? cols : bc;
  const std::int64_t n_cb = (cols + bc - 1) / bc;
  const std::int64_t pitch = (bc * e) % 512 == 0 ? bc + 64 / e : bc;  // stage rows, elements
  team_staging staging(br * pitch * e);
  const std::int64_t strips = zmm_strip_count<E>(br, bc, blocking);
  const std::int64_t items = outer.total * n_rb * n_cb;
  const int threads = resolve_threads(opt.num_threads, p.numel * e, items);
  struct block_at {
    const unsigned char* src = nullptr;
    unsigned char* dst = nullptr;
  };
  auto locate = [&](std::int64_t it) {
    const std::int64_t rb = it % n_rb, cb = it / n_rb % n_cb;
    const std::int64_t r0 = rb * br + br <= rows ? rb * br : rows - br;
    const std::int64_t c0 = cb * bc + bc <= cols ? cb * bc : cols - bc;
    std::int64_t so = 0, dof = 0;
    outer.offsets(it / n_rb / n_cb, so, dof);
    return block_at{src + (so + c0 * srs + r0) * e, dst + (dof + r0 * drs + c0) * e};
  };
  parallel_items(threads, items, [&](std::int64_t first, std::int64_t last, int) {
    unsigned char* const stage = staging.get();
    if (!stage) return;
    block_at b = first < last ? locate(first) : block_at{};
    for (std::int64_t it = first; it < last; ++it) {
      const block_at n = it + 1 < last ? locate(it + 1) : block_at{};  // located once, for its prefetch
      for (std::int64_t k = 0; k < strips; ++k) {
        zmm_next_strip next;
        next.src = k + 1 < strips ? b.src : n.src;
        next.strip = k + 1 < strips ? k + 1 : 0;
        transpose_strip_zmm<E, false>(b.src, srs, stage, pitch, br, bc, blocking, k, next);
      }
      for (std::int64_t r = 0; r < br; ++r)
        std::memcpy(b.dst + r * drs * e, stage + r * pitch * e, static_cast<std::size_t>(bc * e));
      b = n;
    }
  });
  staging.check();
}

// Whole-line AVX-512 path (zmm_transpose.hpp). Returns false when the plan does not suit it: a side
// shorter than a square (C = 2..4 go through group shuffles), or streaming wanted into destination
// rows that are neither aligned to the tiles nor dense short rows (run_short_rows).
template <std::size_t E>
bool run_transpose_zmm(const copy_plan& p, int row_dim, int col_dim, const unsigned char* src, unsigned char* dst,
                       const convert_options& opt) {
  constexpr std::int64_t e = static_cast<std::int64_t>(E), w = zmm_square<E>;
  const outer_dims outer(p, row_dim, col_dim);
  const std::int64_t rows = p.dims[row_dim].size, cols = p.dims[col_dim].size;
  const std::int64_t srs = p.dims[col_dim].src_stride, drs = p.dims[row_dim].dst_stride;
  const std::int64_t sb = srs * e, db = drs * e;  // pitches in bytes
  const std::int64_t total_bytes = p.numel * e;
  const bool aligned = db % 64 == 0 && outer.dst_planes_on_lines(dst, e);
  const bool streaming = opt.allow_streaming_stores && total_bytes >= convert_tuning::stream_threshold_bytes;
  // Streaming into unaligned destination rows: when they are dense (a panel of them is one
  // contiguous run, e.g. NHWC->NCHW with H*W = 49, or a run per row on longer planes), the
  // pipelined panels, which run planes such as 55 x 55 at twice the blocked path's speed or more.
  // Small planes (n <= H*W < a square, e.g. 3 x 3 in bf16) take narrow row groups there.
  if (streaming && !aligned) {
    if (drs != cols || rows < w || cols < zmm_row_group<E>::n) return false;
    run_short_rows<E>(p, row_dim, col_dim, src, dst, opt);
    return true;
  }
  // The tiles need a square of destination columns and a tile of destination rows: planes smaller
  // than a square to NHWC (H*W = 9 in fp32 and bf16, 25 and 49 in int8) go in tiles and a tail,
  // where the blocked path is up to several times slower.
  if (cols < w || rows < zmm_tile<E>::rows) return false;
  // A strip is a square thick (some column strips four, below): w source rows read end to end
  // (columns outer) or w destination rows written end to end (rows outer).
  //  * Scattering one line to each destination row is slow when their pitch is a multiple of
  //    512 bytes (the lines crowd a few L1 sets). Then, if the source pitch is not (or is
  //    larger), rows go outer: whole destination rows are written in order and the source is
  //    gathered, a segment per source row, the next strip's segments prefetched
  //    (`bench_convert --benchmark_filter='nchw_to_nhwc/.*/(32x1024x14x14|32x512x28x28)/'`).
  //    Not for short source rows (H*W = 49: 196 bytes), which a 4 x 4 block reads whole where
  //    gathering would split every segment over two lines; nor when the gathered pitch is the
  //    smaller multiple of 512.
  //  * Otherwise column strips are read end to end, in blocks 16 squares long that prefetch the
  //    next block, and scattered: gathering from 64 channel rows is slower
  //    (`--benchmark_filter='(32x64x112x112|256x64x56x56)/'`).
  //    A strip that is one block (at most 16 squares of rows) streaming to rows a multiple of
  //    512 bytes apart is four squares wide, so each destination row gets four lines per strip
  //    (`--benchmark_filter='nhwc_to_nchw/.*/32x64x112x112/'`).
  //  * A source pitch that is not whole lines would make column strips read split lines: 4 x 4
  //    blocks then.
  zmm_blocking b;
  b.ahead = far_prefetch_level(opt);
  b.rows_outer = db % 512 == 0 && rows * e > 256 && (sb % 512 != 0 || db < sb);
  if (b.rows_outer) {
    b.br = w;
    b.bc = cols - cols % w;
  } else if (sb % 64 == 0) {  // whole-line source rows
    b.br = 16 * w;
    b.bc = streaming && rows <= b.br && db % 512 == 0 ? 4 * w : w;
  } else {
    b.br = b.bc = 4 * w;
  }
  // Staged (run_staged_blocks): plain stores into destination rows that all fall in one or two L1
  // sets (a pitch that is a multiple of 2 KiB), more than 16 to a set among the rows of a block.
  // Where the rows spread over more sets, direct stores are faster.
  if (!streaming && !b.rows_outer && db % 2048 == 0 && rows_per_l1_set(db, rows < b.br ? rows : b.br) > 16) {
    run_staged_blocks<E>(p, row_dim, col_dim, src, dst, opt, b);
    return true;
  }
  const std::int64_t strips = zmm_strip_count<E>(rows, cols, b);
  const std::int64_t items = outer.total * strips;
  const int threads = resolve_threads(opt.num_threads, total_bytes, items);
  // Row strips of 1- and 2-byte elements also prefetch the thread's next plane in address order,
  // spread over this plane's square columns: their gathers of 64-byte segments from rows a few
  // lines apart leave DRAM pages half used otherwise
  // (`bench_convert --benchmark_filter='nchw_to_nhwc/bf16/(32x1024x14x14|32x512x28x28)/'`).
  // 4-byte elements' own prefetches suffice; the extra stream slows them.
  const bool plane_ahead = b.rows_outer && E <= 2;
  const std::int64_t plane_span = (cols - 1) * sb + rows * e;  // bytes from a plane's first element
  const std::int64_t ahead_steps = strips * (cols / w);
  parallel_items(threads, items, [&](std::int64_t first, std::int64_t last, int) {
    linear_prefetch ahead;
    for (std::int64_t it = first; it < last; ++it) {
      std::int64_t so = 0, dof = 0;
      outer.offsets(it / strips, so, dof);
      const unsigned char* s = src + so * e;
      unsigned char* d = dst + dof * e;
      if (plane_ahead && it % strips == 0 && it + strips < last) {
        std::int64_t nso = 0, ndo = 0;
        outer.offsets(it / strips + 1, nso, ndo);
        ahead.start(src + nso * e, plane_span, ahead_steps, b.ahead);
      }
      zmm_next_strip next;  // where this thread goes next, for prefetches that run ahead
      next.ahead = plane_ahead ? &ahead : nullptr;
      if (it + 1 < last) {
        std::int64_t nso = 0, ndo = 0;
        outer.offsets((it + 1) / strips, nso, ndo);
        next.src = src + nso * e;
        next.strip = (it + 1) % strips;
      }
      if (streaming) transpose_strip_zmm<E, true>(s, srs, d, drs, rows, cols, b, it % strips, next);
      else transpose_strip_zmm<E, false>(s, srs, d, drs, rows, cols, b, it % strips, next);
    }
    if (streaming) stream_fence();
  });
  return true;
}
#endif

template <std::size_t E>
void run_transpose(const copy_plan& p, int row_dim, int col_dim, const unsigned char* src, unsigned char* dst,
                   const convert_options& opt) {
  constexpr std::int64_t e = static_cast<std::int64_t>(E);
  const outer_dims outer(p, row_dim, col_dim);
#if MEMFMT_CONVERT_HAVE_ZMM_TILES
  if (run_transpose_zmm<E>(p, row_dim, col_dim, src, dst, opt)) return;
#endif
  // Destination rows run along row_dim (contiguous along col_dim); source rows the other way.
  const std::int64_t rows = p.dims[row_dim].size, cols = p.dims[col_dim].size;
  const std::int64_t srs = p.dims[col_dim].src_stride, drs = p.dims[row_dim].dst_stride;
  const std::int64_t total_bytes = p.numel * e;

  std::int64_t bc = convert_tuning::block_col_bytes / e;
  if (bc > cols) bc = cols;
  // Staging rows whose byte stride is a multiple of 1 KiB alias in L1 (4K aliasing, set conflicts):
  // pad them by a cache line.
  std::int64_t stage_stride = 0, br = 0;
  auto fit_rows = [&] {
    stage_stride = (bc * e) % 1024 == 0 ? bc + 64 / e : bc;
    br = convert_tuning::stage_bytes / (stage_stride * e);
  };
  fit_rows();
  // Blocks of at least 32 rows where the plane has them: with 4 KiB block rows a stage held 7
  // (fp32) or 15 (int8), and the rows past the last whole tile went through scalar code.
  while (br < 32 && br < rows && bc * e > 512) {
    bc /= 2;
    fit_rows();
  }
  if (br >= 16) br -= br % 16;  // whole tiles
  if (br > rows) br = rows;
  if (br < 1) br = 1;
  // Each destination run (a block row, or the whole block when rows are dense) must span
  // enough lines for streaming to pay.
  const std::int64_t run_bytes = (drs == bc ? br * bc : bc) * e;
  const bool streaming = opt.allow_streaming_stores && total_bytes >= convert_tuning::stream_threshold_bytes &&
                         run_bytes >= convert_tuning::min_stream_run_bytes;

  // C = 2..4 to or from dense runs (the stem's C = 3): the group shuffles produce whole lines, so
  // with every block of the destination 64-byte aligned they are streamed straight from registers
  // rather than through the staging buffer (interleaved blocks of a multiple of 64 rows).
  const bool planes_on_lines = outer.dst_planes_on_lines(dst, e);
  bool direct = false;
  if constexpr (group_shuffle_available<E>) {
    const bool interleaved = drs == cols && cols >= 2 && cols <= 4 && bc == cols;
    const bool deinterleaved =
        srs == rows && rows >= 2 && rows <= 4 && br == rows && (drs * e) % 64 == 0 && (bc * e) % 64 == 0;
    direct = streaming && planes_on_lines && (deinterleaved || (interleaved && br >= 64));
    if (direct && interleaved) br -= br % 64;
  }
  // With AVX2 (and no AVX-512, which takes these planes above) and an aligned destination, whole
  // lines are streamed straight from registers (transpose_lines) instead of staging each block:
  // the staging copy costs up to a third of the speed of the named shapes in an AVX2 build of
  // bench_convert.
  bool lines = false;
#if defined(__AVX2__)
  lines = streaming && !direct && planes_on_lines && (drs * e) % 64 == 0 && (bc * e) % 64 == 0 &&
          br >= lane_tile<E>::tile_rows;
#endif
  const std::int64_t n_cb = (cols + bc - 1) / bc, n_rb = (rows + br - 1) / br;
  const std::int64_t items = outer.total * n_cb * n_rb;
  const int threads = resolve_threads(opt.num_threads, total_bytes, items);
  team_staging staging(streaming && !direct && !lines ? convert_tuning::stage_bytes : 0);

  parallel_items(threads, items, [&](std::int64_t first, std::int64_t last, int) {
    unsigned char* const stage = staging.get();
    if (staging.wanted() && !stage) return;
    for (std::int64_t it = first; it < last; ++it) {
      const std::int64_t rb = it % n_rb, cb = (it / n_rb) % n_cb;
      std::int64_t so = 0, dof = 0;
      outer.offsets(it / n_rb / n_cb, so, dof);
      const std::int64_t r0 = rb * br, c0 = cb * bc;
      const std::int64_t h = rows - r0 < br ? rows - r0 : br;
      const std::int64_t w = cols - c0 < bc ? cols - c0 : bc;
      const unsigned char* s = src + (so + c0 * srs + r0) * e;
      unsigned char* d = dst + (dof + r0 * drs + c0) * e;
      if (!streaming) {
        transpose_block<E>(s, srs, d, drs, h, w);
        continue;
      }
      if (direct) {
        transpose_group<E, true>(s, srs, d, drs, h, w);
        continue;
      }
#if defined(__AVX2__)
      if (lines) {
        transpose_lines<E>(s, srs, d, drs, h, w);
        continue;
      }
#endif
      const std::int64_t ws = w == bc ? stage_stride : w;
      transpose_block<E>(s, srs, stage, ws, h, w);
      if (drs == w && ws == w) {
        stream_copy(d, stage, static_cast<std::size_t>(h * w * e));
      } else {
        for (std::int64_t r = 0; r < h; ++r)
          stream_copy(d + r * drs * e, stage + r * ws * e, static_cast<std::size_t>(w * e));
      }
    }
    if (streaming) stream_fence();
  });
  staging.check();
}

template <std::size_t E>
void run_gather(const copy_plan& p, const unsigned char* src, unsigned char* dst, const convert_options& opt) {
  using U = element_bits_t<E>;
  const int inner = p.rank - 1;
  const outer_dims outer(p, inner, -1);
  const std::int64_t n = p.dims[inner].size, ss = p.dims[inner].src_stride, ds = p.dims[inner].dst_stride;
  const int threads = resolve_threads(opt.num_threads, p.numel * static_cast<std::int64_t>(E), outer.total);
  parallel_items(threads, outer.total, [&](std::int64_t first, std::int64_t last, int) {
    for (std::int64_t it = first; it < last; ++it) {
      std::int64_t so = 0, dof = 0;
      outer.offsets(it, so, dof);
      const U* s = reinterpret_cast<const U*>(src) + so;
      U* d = reinterpret_cast<U*>(dst) + dof;
      for (std::int64_t k = 0; k < n; ++k) d[k * ds] = s[k * ss];
    }
  });
}

template <std::size_t E>
void execute_plan(const copy_plan& p, const void* src_v, void* dst_v, const convert_options& opt) {
  if (p.numel == 0) return;
  const auto* src = static_cast<const unsigned char*>(src_v);
  auto* dst = static_cast<unsigned char*>(dst_v);
  const int inner = p.rank - 1;  // innermost destination dimension
  if (p.dims[inner].dst_stride == 1 && p.dims[inner].src_stride == 1) return run_copy<E>(p, inner, src, dst, opt);
  if (p.dims[inner].dst_stride == 1) {
    int unit_src = -1;  // the longest other dimension that is unit-stride in the source
    for (int d = 0; d < inner; ++d)
      if (p.dims[d].src_stride == 1 && (unit_src < 0 || p.dims[d].size > p.dims[unit_src].size)) unit_src = d;
    if (unit_src >= 0) return run_transpose<E>(p, unit_src, inner, src, dst, opt);
  }
  run_gather<E>(p, src, dst, opt);
}

}  // namespace memfmt::detail
