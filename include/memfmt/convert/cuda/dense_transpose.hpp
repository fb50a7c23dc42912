// memfmt/convert/cuda/dense_transpose.hpp - the CUDA conversion's fast path: both tensors dense.
//
// A dense channels-first <-> channels-last conversion is a batch of N row-major transposes,
// [R][K] -> [K][R], with (R, K) = (C, S) from channels-first and (S, C) from channels-last (S: the
// number of positions). Then all a thread computes is a base offset per tile and a fixed stride
// per access: tile_plan.hpp's general kernel (any strides, padded views, copies) spends most of
// its instructions on index math (80 registers, 3 blocks per SM) and runs these shapes at about
// half the speed of this one (`bench_convert_cuda`).
//
// A square tile is rows() x cols() elements. Each of its 8 warps loads whole tile rows (32 lanes x
// VK elements, one access each, along K) into registers, issuing all its loads before the first
// shared-memory store, and after the barrier stores whole tile columns (32 lanes x VR elements,
// gathered down the column, along R). The shared tile has an odd pitch so that the gathers of a
// warp spread over the banks. Short rows on one side go as runs instead (dense_mode, below).
// Everything here is plain C++ (MEMFMT_HOST_DEVICE): the CPU tests replay every thread of a launch.
#pragma once

#include <cstdint>
#include <cstring>

#include "../../config.hpp"
#include "tile_plan.hpp"

namespace memfmt::cuda::detail {

inline constexpr int dense_warps = 8;
inline constexpr std::int64_t dense_min_side = 16;
inline constexpr int dense_threads = dense_warps * 32;

// The widest vectors of the dense path, in elements, per element size: loads along K, stores
// along R. A square tile is (32 * store) x (32 * load) elements, 16-33 KiB (a run tile 8-33 KiB),
// and a thread holds rows() / 8 loads of up to 16 bytes in registers.
MEMFMT_HOST_DEVICE constexpr int dense_max_load_vec(int elem_bytes) noexcept { return elem_bytes == 8 ? 2 : 4; }
MEMFMT_HOST_DEVICE constexpr int dense_max_store_vec(int elem_bytes) noexcept { return elem_bytes >= 4 ? 2 : 4; }

// Visits k = first, first + step, ... below total as fn(k, k / d, k % d), stepping the division
// instead of repeating it.
template <class Fn>
MEMFMT_HOST_DEVICE void for_each_divmod(int first, int step, int total, int d, Fn&& fn) noexcept {
  const int step_q = step / d, step_r = step % d;
  int q = first / d, r = first % d;
#if MEMFMT_IN_DEVICE_CODE
#pragma unroll 4
#endif
  for (int k = first; k < total; k += step) {
    fn(k, q, r);
    q += step_q;
    r += step_r;
    if (r >= d) {
      r -= d;
      ++q;
    }
  }
}

// The V elements of a run from element (along, across) on, the narrow side fastest, as
// fn(j, along, across).
template <int V, class Fn>
MEMFMT_HOST_DEVICE void for_vector_elements(int narrow, int along, int across, Fn&& fn) noexcept {
  MEMFMT_UNROLL
  for (int j = 0; j < V; ++j) {
    fn(j, along, across);
    if (++across == narrow) {
      across = 0;
      ++along;
    }
  }
}

// How a tile meets memory. Square tiles: a warp loads a tile row (32 x VK elements along K) and
// stores a tile column (32 x VR along R). Where destination rows are short (R <= dense_run_side,
// e.g. 7x7 maps towards channels-first) and not a whole number of tile columns, a tile spans all
// of R instead, so that its destination is one contiguous run, stored in VR-element vectors across
// row ends (run_r), which square tiles would leave partly empty
// (`bench_convert_cuda --benchmark_filter='nhwc_to_nchw/.*/32x2048x7x7'`,
// `--benchmark_filter='nchw_to_nhwc/bf16/32x64x112x112'`). Short source rows gain nothing from
// the same shape (a run loaded across row ends: each lane scatters its vector's elements into
// the shared tile, 4 words apart from the next lane's). So where source rows are short and odd
// (K <= 64: 7x7, 5x5, 3x3x3 maps towards channels-last; square tiles load them an element a
// lane), a tile spans all of K and keeps its source run as it is in shared memory (run_k):
// vectors in, vectors out, and the column gathers of the store phase step K (odd) elements,
// which spreads them over the banks.
enum dense_mode : int { dense_square = 0, dense_run_r = 1, dense_run_k = 2 };
inline constexpr int dense_run_side = 64;

template <int Elem, int VK, int VR, int Mode = dense_square>
struct dense_tile {
  static constexpr int rows = Mode == dense_run_r ? dense_run_side : 32 * VR;  // along R
  static constexpr int cols = Mode == dense_run_k ? dense_run_side : 32 * VK;  // along K
  static constexpr int pitch = cols + 1;             // odd: a warp's column gather hits many banks
  static constexpr int loads = rows / dense_warps;   // per thread, VK elements each (not run_k)
  static constexpr int stores = cols / dense_warps;  // per thread, VR elements each (not run_r)
  static constexpr int slots = rows * pitch;         // shared-memory elements
};

// A batch of row-major [R][K] -> [K][R] transposes (as_batched_transpose): what both plans below
// start from.
struct batched_transpose {
  std::int64_t batch = 0;
  std::int64_t rows = 0;  // R: source rows, destination columns
  std::int64_t cols = 0;  // K: source columns, destination rows
};

struct dense_plan : batched_transpose {
  int load_vec = 1;   // VK
  int store_vec = 1;  // VR
  int mode = dense_square;
  std::int64_t tiles_r = 0, tiles_k = 0, total_tiles = 0;
};

// Dense tensors of opposite formats as a batch of row-major [R][K] -> [K][R] transposes, (R, K) =
// (C, S) from channels-first and (S, C) from channels-last; all zero when they are not that (a
// tensor not packed, or the same format on both sides).
template <class From, class To>
batched_transpose as_batched_transpose(const layout<From>& src, const layout<To>& dst) noexcept {
  if (From::channels_last == To::channels_last || !src.is_packed() || !dst.is_packed()) return {};
  std::int64_t positions = 1;
  for (int d = 2; d < From::rank; ++d) positions *= src.extent(d);
  return {src.extent(0), From::channels_last ? positions : src.extent(1),
          From::channels_last ? src.extent(1) : positions};
}

// The plan for a dense conversion, or one with total_tiles == 0 when the dense path does not
// apply (a tensor not packed, the same format on both sides, or nothing to move). Vectors are as
// wide as the alignment of the base address and of every row allows.
template <class From, class To>
dense_plan make_dense_plan(const layout<From>& src, const layout<To>& dst, std::uintptr_t src_addr,
                           std::uintptr_t dst_addr, int elem_bytes) noexcept {
  dense_plan p;
  static_cast<batched_transpose&>(p) = as_batched_transpose(src, dst);
  // A tile is 32-128 elements on a side: with fewer than dense_min_side rows or columns most of it
  // idles (`bench_convert_cuda --benchmark_filter=64x3x224x224`). Those take make_narrow_plan's path.
  if (p.batch == 0 || p.rows < dense_min_side || p.cols < dense_min_side) return dense_plan{};
  // The widest vector or none: the kernel is instantiated for these two widths only.
  const auto aligned = [elem_bytes](std::uintptr_t addr, int vec) {
    return addr % static_cast<std::uintptr_t>(vec * elem_bytes) == 0;
  };
  const int vk = dense_max_load_vec(elem_bytes), vr = dense_max_store_vec(elem_bytes);
  p.load_vec = aligned(src_addr, vk) && p.cols % vk == 0 ? vk : 1;
  p.store_vec = aligned(dst_addr, vr) && p.rows % vr == 0 ? vr : 1;
  // Short destination rows that square tiles would leave partly empty go as runs (dense_mode), with
  // the widest vectors only: a run of a whole matrix is whole vectors, and every tile's part of it
  // starts on one (a tile is 32 x VK columns, a multiple of any vector).
  if (p.rows <= dense_run_side && p.rows % (32 * p.store_vec) != 0 && p.load_vec == vk && aligned(dst_addr, vr) &&
      p.rows * p.cols % vr == 0) {
    p.mode = dense_run_r;
    p.store_vec = vr;
  } else if (p.cols <= dense_run_side && p.cols % 2 == 1 && p.store_vec == vr && aligned(src_addr, vk) &&
             p.rows * p.cols % vk == 0) {
    p.mode = dense_run_k;
    p.load_vec = vk;
  }
  const std::int64_t tile_r = p.mode == dense_run_r ? dense_run_side : 32 * p.store_vec;
  const std::int64_t tile_k = p.mode == dense_run_k ? dense_run_side : 32 * p.load_vec;
  p.tiles_r = (p.rows + tile_r - 1) / tile_r;
  p.tiles_k = (p.cols + tile_k - 1) / tile_k;
  p.total_tiles = p.batch * p.tiles_r * p.tiles_k;
  return p;
}

struct dense_origin {
  std::int64_t base;  // element offset of the matrix (b * R * K)
  std::int64_t r0, k0;
};

// Tile i: columns fastest, so neighbouring blocks read neighbouring source memory.
MEMFMT_HOST_DEVICE dense_origin dense_tile_at(const dense_plan& p, std::int64_t i, int tile_r, int tile_k) noexcept {
  const std::int64_t tk = i % p.tiles_k;
  const std::int64_t rest = i / p.tiles_k;
  const std::int64_t tr = rest % p.tiles_r;
  const std::int64_t b = rest / p.tiles_r;
  return dense_origin{b * p.rows * p.cols, tr * tile_r, tk * tile_k};
}

// Phase 1, one thread: its tile rows from the source into registers, then into the shared tile.
// Rows and column vectors beyond the matrix are skipped (K is a multiple of VK, so a vector is
// wholly inside or outside). run_k: the tile's source run, copied into the shared tile unchanged
// (the run's length is a multiple of VK).
template <int Elem, int VK, int VR, int Mode = dense_square, class Word>
MEMFMT_HOST_DEVICE void dense_read(const dense_plan& p, const dense_origin& o, int thread, const Word* src,
                                   Word* tile) noexcept {
  using T = dense_tile<Elem, VK, VR, Mode>;
  if constexpr (Mode == dense_run_k) {  // the tile's rows are one run: copied as it is
    const std::int64_t left = p.rows - o.r0;
    const int n = static_cast<int>((left < T::rows ? left : T::rows) * p.cols);
    const Word* run = src + o.base + o.r0 * p.cols;
#if MEMFMT_IN_DEVICE_CODE
#pragma unroll 4
#endif
    for (int e = thread * VK; e < n; e += dense_threads * VK) {
      Word w[VK];
      load_bytes<VK * Elem>(run + e, w);
      store_bytes<VK * Elem>(w, tile + e);
    }
    return;
  }
  using access = typename access_type<VK * Elem>::type;
  const int warp = thread / 32, lane = thread % 32;
  const std::int64_t k = o.k0 + lane * VK;
  const bool col_in = k < p.cols;
  std::int64_t at = o.base + (o.r0 + warp) * p.cols + k;
  const std::int64_t step = dense_warps * p.cols;
  access regs[T::loads] = {};
  MEMFMT_UNROLL
  for (int i = 0; i < T::loads; ++i) {
    if (col_in && o.r0 + warp + i * dense_warps < p.rows)
      load_bytes<VK * Elem>(src + at, reinterpret_cast<Word*>(&regs[i]));
    at += step;
  }
  MEMFMT_UNROLL
  for (int i = 0; i < T::loads; ++i) {
    Word w[VK];
    std::memcpy(w, &regs[i], sizeof(w));
    Word* slot = tile + (warp + i * dense_warps) * T::pitch + lane * VK;
    MEMFMT_UNROLL
    for (int j = 0; j < VK; ++j) slot[j] = w[j];
  }
}

// Phase 2, one thread (after the barrier): tile columns, gathered down the shared tile, to the
// destination rows. (Shared slots of skipped loads hold stale values, and are never stored.)
// run_r: the tile's destination run, VR elements a lane, across row ends.
template <int Elem, int VK, int VR, int Mode = dense_square, class Word>
MEMFMT_HOST_DEVICE void dense_write(const dense_plan& p, const dense_origin& o, int thread, const Word* tile,
                                    Word* dst) noexcept {
  using T = dense_tile<Elem, VK, VR, Mode>;
  if constexpr (Mode == dense_run_r) {
    const std::int64_t left = p.cols - o.k0;
    const int cols = left < T::cols ? static_cast<int>(left) : T::cols, r = static_cast<int>(p.rows);
    Word* run = dst + o.base + o.k0 * p.rows;
    for_each_divmod(thread * VR, dense_threads * VR, cols * r, r, [&](int e, int c, int rr) {
      Word w[VR];
      for_vector_elements<VR>(r, c, rr, [&](int j, int cc, int r2) { w[j] = tile[r2 * T::pitch + cc]; });
      store_bytes<VR * Elem>(w, run + e);
    });
    return;
  }
  const int warp = thread / 32, lane = thread % 32;
  const int pitch = Mode == dense_run_k ? static_cast<int>(p.cols) : T::pitch;  // run_k: the run's rows
  const std::int64_t r = o.r0 + lane * VR;
  if (r >= p.rows) return;  // R is a multiple of VR: a vector is wholly inside or outside
  std::int64_t at = o.base + (o.k0 + warp) * p.rows + r;
  const std::int64_t step = dense_warps * p.rows;
  MEMFMT_UNROLL
  for (int i = 0; i < T::stores; ++i) {
    const int kk = warp + i * dense_warps;
    if (o.k0 + kk >= p.cols) break;
    Word w[VR];
    MEMFMT_UNROLL
    for (int j = 0; j < VR; ++j) w[j] = tile[(lane * VR + j) * pitch + kk];
    store_bytes<VR * Elem>(w, dst + at);
    at += step;
  }
}

// ---- one narrow side: fewer than dense_min_side channels (C = 3 images) or positions ----
//
// A square tile would idle there. Instead a block takes `span` indices of the long side, all of
// the narrow side with them, through a shared tile [narrow][span]: along the long side, narrow
// runs of `span` elements each; across it, one contiguous run of span * narrow elements. Both
// phases are coalesced: consecutive threads take consecutive vectors of whichever run they move.
// (Moving elements straight from source to destination would leave one side strided, at half
// the speed on `bench_convert_cuda --benchmark_filter=64x3x224x224`.)
//
// 1- and 2-byte elements move through global memory in 16-byte vectors, where both bases are
// 16-byte aligned and the long side is a whole number of vectors (then so is every row and run of
// a block, and each starts on a vector). The shared tile takes them whole along the long side and
// element by element across it; 1-byte elements skip the tile (the register path below). One
// element per access would move only 32 or 64 bytes per warp instruction, at a third to a half of
// the speed (`bench_convert_cuda --benchmark_filter='(i8|bf16)/64x3x224x224'`). 4- and 8-byte
// elements already fill a 128-byte transaction per warp, and vectors do not help them.
// A 32 KiB tile is faster than 8 or 16 KiB for bf16 and ties elsewhere.
inline constexpr int narrow_tile_bytes = 32768;
inline constexpr int narrow_vector_bytes = 16;

struct narrow_plan : batched_transpose {
  bool narrow_rows = false;       // R is the narrow side (else K)
  int narrow = 0;                 // its extent, < dense_min_side
  std::int64_t wide = 0;          // the long side's extent
  int vec = 1;                    // elements per global access: 16 bytes' worth, or 1
  int span = 0;                   // long-side indices per block (a multiple of vec)
  std::int64_t chunks = 0;        // blocks per matrix
  std::int64_t total_blocks = 0;  // 0: this path does not apply
};

template <class From, class To>
narrow_plan make_narrow_plan(const layout<From>& src, const layout<To>& dst, std::uintptr_t src_addr,
                             std::uintptr_t dst_addr, int elem_bytes) noexcept {
  narrow_plan p;
  static_cast<batched_transpose&>(p) = as_batched_transpose(src, dst);
  const std::int64_t narrow = p.rows < p.cols ? p.rows : p.cols;
  if (p.batch == 0 || narrow == 0 || narrow >= dense_min_side) return narrow_plan{};
  p.narrow_rows = p.rows < p.cols;
  p.narrow = static_cast<int>(narrow);
  p.wide = p.narrow_rows ? p.cols : p.rows;
  const int v = narrow_vector_bytes / elem_bytes;
  const auto aligned = [](std::uintptr_t addr) { return addr % narrow_vector_bytes == 0; };
  p.vec = elem_bytes < 4 && aligned(src_addr) && aligned(dst_addr) && p.wide % v == 0 ? v : 1;
  const int span_cap = 4 * dense_threads * p.vec;  // at most four accesses per thread and row
  p.span = narrow_tile_bytes / elem_bytes / p.narrow;
  if (p.span > span_cap) p.span = span_cap;
  p.span -= p.span % p.vec;
  p.chunks = (p.wide + p.span - 1) / p.span;
  p.total_blocks = p.batch * p.chunks;
  return p;
}

// The part of the long side that block `block` covers, and the element offset of its matrix.
struct narrow_origin {
  std::int64_t base, first;
  int count;  // <= span, a multiple of the plan's vec
};
MEMFMT_HOST_DEVICE narrow_origin narrow_at(const narrow_plan& p, std::int64_t block) noexcept {
  narrow_origin o;
  o.base = block / p.chunks * p.rows * p.cols;
  o.first = block % p.chunks * p.span;
  const std::int64_t left = p.wide - o.first;
  o.count = left < p.span ? static_cast<int>(left) : p.span;
  return o;
}

// Phase 1, one thread: source -> shared tile [narrow][span], V elements (the plan's vec) per access.
template <int V, class Word>
MEMFMT_HOST_DEVICE void narrow_read(const narrow_plan& p, const narrow_origin& o, int thread, const Word* src,
                                    Word* tile) noexcept {
  constexpr int bytes = V * static_cast<int>(sizeof(Word));
  if (p.narrow_rows) {  // source rows are the narrow side: `narrow` runs along the long side
    const int per_row = o.count / V;
    for_each_divmod(thread, dense_threads, p.narrow * per_row, per_row, [&](int, int row, int vector) {
      Word w[V];
      load_bytes<bytes>(src + o.base + row * p.cols + o.first + vector * V, w);
      store_bytes<bytes>(w, tile + row * p.span + vector * V);
    });
  } else {  // the source block is one run: long side outer, narrow side inner
    const Word* run = src + o.base + o.first * p.cols;
    for_each_divmod(thread * V, dense_threads * V, o.count * p.narrow, p.narrow, [&](int e, int along, int across) {
      Word w[V];
      load_bytes<bytes>(run + e, w);
      for_vector_elements<V>(p.narrow, along, across, [&](int j, int a, int c) { tile[c * p.span + a] = w[j]; });
    });
  }
}

// Phase 2, one thread (after the barrier): shared tile -> destination.
template <int V, class Word>
MEMFMT_HOST_DEVICE void narrow_write(const narrow_plan& p, const narrow_origin& o, int thread, const Word* tile,
                                     Word* dst) noexcept {
  constexpr int bytes = V * static_cast<int>(sizeof(Word));
  if (p.narrow_rows) {  // the destination block is one run: long side outer, narrow side inner
    Word* run = dst + o.base + o.first * p.rows;
    for_each_divmod(thread * V, dense_threads * V, o.count * p.narrow, p.narrow, [&](int e, int along, int across) {
      Word w[V];
      for_vector_elements<V>(p.narrow, along, across, [&](int j, int a, int c) { w[j] = tile[c * p.span + a]; });
      store_bytes<bytes>(w, run + e);
    });
  } else {  // destination rows are the narrow side
    const int per_row = o.count / V;
    for_each_divmod(thread, dense_threads, p.narrow * per_row, per_row, [&](int, int row, int vector) {
      Word w[V];
      load_bytes<bytes>(tile + row * p.span + vector * V, w);
      store_bytes<bytes>(w, dst + o.base + row * p.rows + o.first + vector * V);
    });
  }
}

// ---- 1-byte elements on the narrow path: in registers ----
//
// Where the narrow path would take 16-byte vectors of 1-byte elements, a thread instead takes a
// unit of 16 long-side indices with all N narrow ones: N aligned 16-byte vectors along the long
// side (one per narrow index) and one aligned run of 16 * N bytes across it. It interleaves (or
// deinterleaves) the bytes in registers; N is a template argument (1-15), so every shift is a
// constant. Through the shared tile each byte would cost a shared access and its index steps
// (a third slower on `bench_convert_cuda --benchmark_filter=i8/64x3x224x224`).
// Consecutive units are consecutive runs, so a warp's 32 units own 512 * N contiguous bytes of the
// run side. Loads from it go straight to registers (each 16-byte load of a warp spans 16 * N bytes
// per lane, and the cache serves the rest). Stores to it go through a per-warp staging area, so
// that each store instruction of the warp covers 512 contiguous bytes (stores straight from
// registers are a quarter slower on
// `bench_convert_cuda --benchmark_filter=nchw_to_nhwc/i8/64x3x224x224`).
inline constexpr int narrow_byte_threads = 128;  // the staging area is 16 * N bytes per thread

// Bytes as 32-bit words, 4 per 16-byte vector: byte i of a vector is byte i % 4 of word i / 4.
MEMFMT_HOST_DEVICE constexpr std::uint32_t byte_of(std::uint32_t word, int i) noexcept {
  return (word >> (8 * i)) & 0xffu;
}

// rows[c] holds 16 consecutive long-side indices of narrow index c; run is the same 16 * N bytes
// with the narrow index fastest (run byte i = rows[i % N] byte i / N).
template <int N>
MEMFMT_HOST_DEVICE void interleave_bytes(const std::uint32_t (&rows)[N][4], std::uint32_t (&run)[N][4]) noexcept {
  MEMFMT_UNROLL
  for (int w = 0; w < 4 * N; ++w) {
    std::uint32_t v = 0;
    MEMFMT_UNROLL
    for (int b = 0; b < 4; ++b) {
      const int i = 4 * w + b, at = i / N;
      v |= byte_of(rows[i % N][at / 4], at % 4) << (8 * b);
    }
    run[w / 4][w % 4] = v;
  }
}
template <int N>
MEMFMT_HOST_DEVICE void deinterleave_bytes(const std::uint32_t (&run)[N][4], std::uint32_t (&rows)[N][4]) noexcept {
  MEMFMT_UNROLL
  for (int c = 0; c < N; ++c) {
    MEMFMT_UNROLL
    for (int w = 0; w < 4; ++w) {
      std::uint32_t v = 0;
      MEMFMT_UNROLL
      for (int b = 0; b < 4; ++b) {
        const int i = (4 * w + b) * N + c;
        v |= byte_of(run[i / 16][i % 16 / 4], i % 4) << (8 * b);
      }
      rows[c][w] = v;
    }
  }
}

// Units of a 1-byte narrow plan with 16-byte vectors. Unit u's run starts at byte 16 * N * u of
// the run-side tensor (its rows at u / (wide / 16) * N * wide + u % (wide / 16) * 16 + c * wide).
MEMFMT_HOST_DEVICE constexpr std::int64_t narrow_byte_units(const narrow_plan& p) noexcept {
  return p.batch * (p.wide / 16);
}
MEMFMT_HOST_DEVICE std::int64_t narrow_byte_row_start(const narrow_plan& p, std::int64_t u) noexcept {
  const std::int64_t per_matrix = p.wide / 16;
  return u / per_matrix * p.narrow * p.wide + u % per_matrix * 16;
}

// Source rows -> one run (NCHW -> NHWC with C < 16), phase 1, one lane: unit u's run into the
// lane's 16 * N bytes of the warp's staging area.
template <int N>
MEMFMT_HOST_DEVICE void narrow_bytes_stage_run(const narrow_plan& p, std::int64_t u, const std::uint8_t* src,
                                               std::uint8_t* lane_stage) noexcept {
  const std::uint8_t* row = src + narrow_byte_row_start(p, u);
  std::uint32_t rows[N][4], run[N][4];
  MEMFMT_UNROLL
  for (int c = 0; c < N; ++c) load_bytes<16>(row + c * p.wide, reinterpret_cast<std::uint8_t*>(rows[c]));
  interleave_bytes<N>(rows, run);
  MEMFMT_UNROLL
  for (int k = 0; k < N; ++k) store_bytes<16>(reinterpret_cast<const std::uint8_t*>(run[k]), lane_stage + 16 * k);
}
// Phase 2, one lane (after the warp's phase 1): 16-byte chunks lane, lane + 32, ... of the warp's
// 512 * N staged bytes (units first .. first + 31) to the destination, skipping units past the end.
template <int N>
MEMFMT_HOST_DEVICE void narrow_bytes_store_run(std::int64_t first, std::int64_t units, int lane,
                                               const std::uint8_t* warp_stage, std::uint8_t* dst) noexcept {
  MEMFMT_UNROLL
  for (int k = 0; k < N; ++k) {
    const int chunk = 32 * k + lane;
    if (first + chunk / N >= units) break;
    std::uint8_t v[16];
    load_bytes<16>(warp_stage + 16 * chunk, v);
    store_bytes<16>(v, dst + 16 * N * first + 16 * chunk);
  }
}

// One run -> rows (NHWC -> NCHW with C < 16), one thread's unit u.
template <int N>
MEMFMT_HOST_DEVICE void narrow_bytes_unit_to_rows(const narrow_plan& p, std::int64_t u, const std::uint8_t* src,
                                                  std::uint8_t* dst) noexcept {
  std::uint32_t rows[N][4], run[N][4];
  MEMFMT_UNROLL
  for (int k = 0; k < N; ++k) load_bytes<16>(src + 16 * N * u + 16 * k, reinterpret_cast<std::uint8_t*>(run[k]));
  deinterleave_bytes<N>(run, rows);
  std::uint8_t* row = dst + narrow_byte_row_start(p, u);
  MEMFMT_UNROLL
  for (int c = 0; c < N; ++c) store_bytes<16>(reinterpret_cast<const std::uint8_t*>(rows[c]), row + c * p.wide);
}

}  // namespace memfmt::cuda::detail
