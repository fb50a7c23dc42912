// memfmt/convert/cuda/tile_plan.hpp - the index math of the CUDA format-conversion kernel.
//
// The kernel (convert.cuh) moves every image's (C) x (spatial) plane through a shared-memory tile:
// a block reads a tile along the source's unit-stride dimension, synchronises, and writes it along
// the destination's unit-stride dimension. Everything a thread computes - which tile a block works
// on, which elements a thread reads and writes in each loop iteration, bounds, vector groups - is
// here, as plain C++ (MEMFMT_HOST_DEVICE, no CUDA headers), so CPU tests can replay a launch.
//
// Vocabulary: `s` is the flattened spatial index (d, h, w) in row-major order; the plan merges
// spatial dimensions that are contiguous in both tensors, so for dense data s is one stride. An
// element group is `count` elements consecutive in memory that one thread moves with one aligned
// access of count * element-size bytes: along the fast dimension (C or s), or, on a "flat" side
// whose tile region is one contiguous run, along that run and across its lines.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "../../config.hpp"
#include "../../format/layout.hpp"

namespace memfmt::cuda::detail {

inline constexpr int block_threads = 256;
inline constexpr int max_vector_bytes = 16;
inline constexpr int max_spatial_rank = 3;
inline constexpr std::int64_t max_grid_blocks = 2147483647;  // CUDA's gridDim.x limit

// A tile carries 16 KiB: each of the block's 256 threads reads 64 bytes of it, as four 16-byte
// loads issued together before the barrier (read_tile_part). Smaller tiles, fewer loads at a time
// or fewer registers are no faster: the generic index math is the cost (80 registers, 3 blocks per
// SM). Dense tensors of opposite formats therefore take dense_transpose.hpp's kernel, about twice
// as fast (`bench_convert_cuda`); this one covers the rest (padded views, copies, unaligned bases,
// sides shorter than 16).
inline constexpr int tile_bytes = 16384;
inline constexpr int loads_in_flight = 4;
MEMFMT_HOST_DEVICE constexpr int tile_area(int elem_bytes) noexcept { return tile_bytes / elem_bytes; }
// Channels of a tile when C and H*W are both large: 128, 64, 64, 32 for 1, 2, 4, 8-byte elements
// (the rest of the area is positions: 128, 128, 64, 64). make_plan narrows a tile to the power of
// two >= C when C is smaller (a tile over C = 3 would otherwise leave most rows empty and need many
// more blocks, ten times slower), and shortens it, up to
// 4x wider, when H*W is smaller (49 positions in a tile of 128).
MEMFMT_HOST_DEVICE constexpr int tile_channels(int elem_bytes) noexcept {
  return elem_bytes == 1 ? 128 : elem_bytes == 8 ? 32 : 64;
}
inline constexpr int max_widening = 4;
// Shared-memory slots of a tile: tile_c rows of tile_s positions plus one slot of padding (column
// reads then hit distinct banks): area + tile_c, and tile_c <= max_widening * tile_channels.
MEMFMT_HOST_DEVICE constexpr int tile_slots(int elem_bytes) noexcept {
  return tile_area(elem_bytes) + max_widening * tile_channels(elem_bytes);
}

// One tensor's element strides: N, C and the merged spatial dimensions (outermost first).
struct side_strides {
  std::int64_t n;
  std::int64_t c;
  std::int64_t spatial[max_spatial_rank];
};

struct convert_plan {
  std::int64_t batch;
  std::int64_t channels;
  std::int64_t spatial_numel;
  int spatial_rank;  // merged spatial dimensions, 0..3 (0: every spatial extent is 1)
  std::int64_t spatial_extent[max_spatial_rank];
  side_strides src;
  side_strides dst;
  bool read_along_channels;   // the source is channels-last: reads run along C
  bool write_along_channels;  // the destination is channels-last: writes run along C
  bool read_flat;             // reads run over a tile's whole region, one contiguous run (see flat_width)
  bool write_flat;
  int read_vec;  // elements per read group (1, or a power of two up to 16 bytes)
  int write_vec;
  int elem_bytes;
  int tile_c;  // channels of a tile (a power of two; see tile_channels)
  int tile_s;  // positions of a tile: tile_area(elem_bytes) / tile_c
  std::int64_t tiles_c;
  std::int64_t tiles_s;
  std::int64_t total_tiles;  // batch * tiles_c * tiles_s
};

// ---- per-element offsets ----

MEMFMT_HOST_DEVICE std::int64_t spatial_offset(const convert_plan& p, const side_strides& side,
                                               std::int64_t s) noexcept {
  std::int64_t off = 0;
  for (int j = p.spatial_rank - 1; j > 0; --j) {
    const std::int64_t e = p.spatial_extent[j];
    const std::int64_t q = s / e;
    off += (s - q * e) * side.spatial[j];
    s = q;
  }
  if (p.spatial_rank > 0) off += s * side.spatial[0];  // the outermost needs no division
  return off;
}

MEMFMT_HOST_DEVICE std::int64_t element_offset(const convert_plan& p, const side_strides& side, std::int64_t n,
                                               std::int64_t c, std::int64_t s) noexcept {
  return n * side.n + c * side.c + spatial_offset(p, side, s);
}

// ---- block -> tile ----

struct tile_origin {
  std::int64_t n;
  std::int64_t c0;
  std::int64_t s0;
};

// Tile i of the launch: spatial tiles vary fastest, so neighbouring blocks touch neighbouring memory.
MEMFMT_HOST_DEVICE tile_origin tile_at(const convert_plan& p, std::int64_t i) noexcept {
  const std::int64_t ts = i % p.tiles_s;
  const std::int64_t rest = i / p.tiles_s;
  const std::int64_t tc = rest % p.tiles_c;
  return tile_origin{rest / p.tiles_c, tc * p.tile_c, ts * p.tile_s};
}

// ---- thread -> element groups ----

inline constexpr int no_wrap = 1 << 30;  // beyond any tile side

struct element_group {
  bool active;          // false: beyond the tensor's extents, or no group for this thread
  bool along_channels;  // the group's elements are consecutive in C (else in s)
  int count;            // elements in the group
  int c_local;          // tile coordinates of the group's first element
  int s_local;
  int wrap;             // a flat group goes on at the next line where its fast coordinate reaches
                        // this (C or H*W); no_wrap for the others
  std::int64_t offset;  // element offset of the first element in the tensor it belongs to
};

// Loop iterations a thread needs to cover a tile with groups of `vec` elements.
MEMFMT_HOST_DEVICE int group_iterations(const convert_plan& p, int vec) noexcept {
  const int groups = p.tile_c * p.tile_s / vec;
  return (groups + block_threads - 1) / block_threads;
}

// Group `iteration * block_threads + thread` of a tile: consecutive threads take consecutive
// groups along the fast dimension, so a warp's accesses are contiguous (coalesced) in memory.
// A flat side's tile region is one contiguous run (all of C, or all of H*W, with the next line
// right behind): its groups follow the run and may span lines, so they can be wide even where C
// or H*W is not a multiple of the vector (C = 3, H*W = 49).
MEMFMT_HOST_DEVICE element_group group_at(const convert_plan& p, const tile_origin& t, const side_strides& side,
                                          bool along_channels, bool flat, int vec, int thread, int iteration) noexcept {
  element_group g{};
  g.along_channels = along_channels;
  g.count = vec;
  g.wrap = no_wrap;
  if (flat) {
    const std::int64_t lines = along_channels ? p.spatial_numel - t.s0 : p.channels - t.c0;
    const int extent = static_cast<int>(along_channels ? p.channels : p.spatial_numel);  // <= a tile side
    const int line_cap = along_channels ? p.tile_s : p.tile_c;
    const int run = extent * static_cast<int>(lines < line_cap ? lines : line_cap);
    const int first = (iteration * block_threads + thread) * vec;
    if (first >= run) return g;  // the plan makes every run a multiple of vec
    g.c_local = along_channels ? first % extent : first / extent;
    g.s_local = along_channels ? first / extent : first % extent;
    g.wrap = extent;
    g.active = true;
    g.offset = t.n * side.n + (along_channels ? t.s0 * p.channels : t.c0 * p.spatial_numel) + first;
    return g;
  }
  const int per_line = (along_channels ? p.tile_c : p.tile_s) / vec;
  const int lines = along_channels ? p.tile_s : p.tile_c;
  const int index = iteration * block_threads + thread;
  if (index >= per_line * lines) return g;
  const int line = index / per_line;
  const int pos = index % per_line * vec;
  g.c_local = along_channels ? pos : line;
  g.s_local = along_channels ? line : pos;
  const std::int64_t c = t.c0 + g.c_local;
  const std::int64_t s = t.s0 + g.s_local;
  // The plan picks vec > 1 only when the fast extent is a multiple of vec, so a group is either
  // entirely inside the tensor or entirely outside: checking its first element is enough.
  if (c >= p.channels || s >= p.spatial_numel) return g;
  g.active = true;
  g.offset = element_offset(p, side, t.n, c, s);
  return g;
}

MEMFMT_HOST_DEVICE element_group read_group(const convert_plan& p, const tile_origin& t, int thread,
                                            int iteration) noexcept {
  return group_at(p, t, p.src, p.read_along_channels, p.read_flat, p.read_vec, thread, iteration);
}
MEMFMT_HOST_DEVICE element_group write_group(const convert_plan& p, const tile_origin& t, int thread,
                                             int iteration) noexcept {
  return group_at(p, t, p.dst, p.write_along_channels, p.write_flat, p.write_vec, thread, iteration);
}

// Shared-tile slots of a group's Count elements; the tile is stored [c_local][s_local] with a
// padded pitch. Steps along the group (wrapping to the next line for a flat group) rather than
// dividing per element.
template <int Count>
MEMFMT_HOST_DEVICE void group_slots(const convert_plan& p, const element_group& g, int (&slot)[Count]) noexcept {
  int c = g.c_local, s = g.s_local;
  for (int k = 0; k < Count; ++k) {
    slot[k] = c * (p.tile_s + 1) + s;
    int& fast = g.along_channels ? c : s;
    int& slow = g.along_channels ? s : c;
    if (++fast == g.wrap) {
      fast = 0;
      ++slow;
    }
  }
}

// ---- data movement (Word: an unsigned integer of the element size) ----

struct alignas(16) bytes16 {
  std::uint32_t w[4];
};
struct alignas(8) bytes8 {
  std::uint32_t w[2];
};
template <int Bytes>
struct access_type;
template <>
struct access_type<16> {
  using type = bytes16;
};
template <>
struct access_type<8> {
  using type = bytes8;
};
template <>
struct access_type<4> {
  using type = std::uint32_t;
};
template <>
struct access_type<2> {
  using type = std::uint16_t;
};
template <>
struct access_type<1> {
  using type = std::uint8_t;
};

// One aligned access of Bytes bytes between memory and registers (a 128-bit ld/st for 16 on the GPU).
// On the host (the CPU tests replay the kernels' functions) a misaligned access aborts, as it
// would fault on the device: a replay that passes has aligned every access it made.
template <int Bytes, class Word>
MEMFMT_HOST_DEVICE void load_bytes(const Word* from, Word* regs) noexcept {
  using access = typename access_type<Bytes>::type;
#if MEMFMT_IN_DEVICE_CODE
  const access v = *reinterpret_cast<const access*>(from);
#else
  if (reinterpret_cast<std::uintptr_t>(from) % alignof(access) != 0) std::abort();
  access v;
  std::memcpy(&v, from, Bytes);
#endif
  std::memcpy(regs, &v, Bytes);
}
template <int Bytes, class Word>
MEMFMT_HOST_DEVICE void store_bytes(const Word* regs, Word* to) noexcept {
  using access = typename access_type<Bytes>::type;
  access v;
  std::memcpy(&v, regs, Bytes);
#if MEMFMT_IN_DEVICE_CODE
  *reinterpret_cast<access*>(to) = v;
#else
  if (reinterpret_cast<std::uintptr_t>(to) % alignof(access) != 0) std::abort();
  std::memcpy(to, &v, Bytes);
#endif
}

// Elements in a group of Bytes bytes (at least 1 so every case below instantiates; the switch
// only reaches a case when count * sizeof(Word) == Bytes).
template <int Bytes, class Word>
inline constexpr int group_count_v = Bytes / static_cast<int>(sizeof(Word)) > 0 ? Bytes / static_cast<int>(sizeof(Word))
                                                                                : 1;

// Calls f(std::integral_constant<int, count>{}): a phase's group size, which the plan knows at run
// time, as a compile-time constant for the loops below (so their registers stay registers).
template <class Word, class F>
MEMFMT_HOST_DEVICE void with_group_count(int count, F&& f) noexcept {
  switch (count * static_cast<int>(sizeof(Word))) {
    case 16: f(std::integral_constant<int, group_count_v<16, Word>>{}); break;
    case 8: f(std::integral_constant<int, group_count_v<8, Word>>{}); break;
    case 4: f(std::integral_constant<int, group_count_v<4, Word>>{}); break;
    case 2: f(std::integral_constant<int, group_count_v<2, Word>>{}); break;
    default: f(std::integral_constant<int, 1>{}); break;
  }
}

// Phase 1 of a tile, one thread, groups of Count elements: source -> shared tile. The loads of
// loads_in_flight groups are issued before any of them is written to the tile, so they wait for
// memory together rather than one after another.
template <int Count, class Word>
MEMFMT_HOST_DEVICE void read_groups(const convert_plan& p, const tile_origin& t, int thread, const Word* src,
                                    Word* tile) noexcept {
  constexpr int bytes = Count * static_cast<int>(sizeof(Word));
  const int iterations = group_iterations(p, Count);
  for (int first = 0; first < iterations; first += loads_in_flight) {
    element_group g[loads_in_flight];
    Word regs[loads_in_flight][Count] = {};
    MEMFMT_UNROLL
    for (int u = 0; u < loads_in_flight; ++u) {
      g[u] = first + u < iterations ? read_group(p, t, thread, first + u) : element_group{};
      if (g[u].active) load_bytes<bytes>(src + g[u].offset, regs[u]);
    }
    MEMFMT_UNROLL
    for (int u = 0; u < loads_in_flight; ++u)
      if (g[u].active) {
        int slot[Count];
        group_slots(p, g[u], slot);
        for (int k = 0; k < Count; ++k) tile[slot[k]] = regs[u][k];
      }
  }
}

template <class Word>
MEMFMT_HOST_DEVICE void read_tile_part(const convert_plan& p, const tile_origin& t, int thread, const Word* src,
                                       Word* tile) noexcept {
  with_group_count<Word>(p.read_vec, [&](auto count) { read_groups<decltype(count)::value>(p, t, thread, src, tile); });
}

// Phase 2 of a tile, one thread (after a barrier), groups of Count elements: shared tile -> destination.
template <int Count, class Word>
MEMFMT_HOST_DEVICE void write_groups(const convert_plan& p, const tile_origin& t, int thread, const Word* tile,
                                     Word* dst) noexcept {
  const int iterations = group_iterations(p, Count);
  for (int it = 0; it < iterations; ++it) {
    const element_group g = write_group(p, t, thread, it);
    if (!g.active) continue;
    Word regs[Count];
    int slot[Count];
    group_slots(p, g, slot);
    for (int k = 0; k < Count; ++k) regs[k] = tile[slot[k]];
    store_bytes<Count* static_cast<int>(sizeof(Word))>(regs, dst + g.offset);
  }
}

template <class Word>
MEMFMT_HOST_DEVICE void write_tile_part(const convert_plan& p, const tile_origin& t, int thread, const Word* tile,
                                        Word* dst) noexcept {
  with_group_count<Word>(p.write_vec,
                         [&](auto count) { write_groups<decltype(count)::value>(p, t, thread, tile, dst); });
}

// ---- host: the plan and the launch configuration ----

// Largest group (in elements) whose every access is aligned and contiguous for one tensor: the
// base address and every stride other than the unit one are multiples of the group, and so is
// the unit-stride extent (so groups never straddle a row or the end of the data).
inline int vector_width(const convert_plan& p, const side_strides& side, bool channels_last, std::uintptr_t addr,
                        int elem_bytes) noexcept {
  for (int bytes = max_vector_bytes; bytes >= 2 * elem_bytes; bytes /= 2) {
    const int v = bytes / elem_bytes;
    if (addr % static_cast<std::uintptr_t>(bytes) != 0 || (channels_last ? p.tile_c : p.tile_s) % v != 0) continue;
    const auto fits = [v](std::int64_t stride, std::int64_t extent) { return extent <= 1 || stride % v == 0; };
    bool ok = fits(side.n, p.batch);
    if (channels_last) {
      ok = ok && p.channels % v == 0;  // C has unit stride in a channels-last layout
      for (int j = 0; j < p.spatial_rank; ++j) ok = ok && fits(side.spatial[j], p.spatial_extent[j]);
    } else {
      const int inner = p.spatial_rank - 1;
      ok = ok && inner >= 0 && side.spatial[inner] == 1 && p.spatial_extent[inner] % v == 0;
      ok = ok && fits(side.c, p.channels);
      for (int j = 0; j < inner; ++j) ok = ok && fits(side.spatial[j], p.spatial_extent[j]);
    }
    if (ok) return v;
  }
  return 1;
}

// Largest group (in elements) for a flat side, 0 when the side is not flat. A side is flat when a
// tile spans its whole unit-stride extent and the next line follows right behind it (C then
// positions of a dense channels-last side; H*W then channels of a dense channels-first side with
// one merged spatial dimension), so a tile's region is one run. Every run start and length must
// be a multiple of the group (then no group straddles the end of a run).
inline int flat_width(const convert_plan& p, const side_strides& side, bool channels_last, std::uintptr_t addr,
                      int elem_bytes) noexcept {
  if (p.spatial_rank != 1) return 0;
  const bool flat = channels_last ? p.tiles_c == 1 && side.spatial[0] == p.channels
                                  : p.tiles_s == 1 && side.spatial[0] == 1 && side.c == p.spatial_numel;
  if (!flat) return 0;
  const std::int64_t extent = channels_last ? p.channels : p.spatial_numel;  // of one line
  const std::int64_t lines = channels_last ? p.spatial_numel : p.channels;
  const std::int64_t tile_lines = channels_last ? p.tile_s : p.tile_c;
  for (int bytes = max_vector_bytes; bytes >= 2 * elem_bytes; bytes /= 2) {
    const int v = bytes / elem_bytes;
    if (addr % static_cast<std::uintptr_t>(bytes) != 0) continue;
    if (p.batch > 1 && side.n % v != 0) continue;
    if ((extent * tile_lines) % v != 0 || (extent * (lines % tile_lines)) % v != 0) continue;
    return v;
  }
  return 1;
}

// The plan for converting `src` into `dst` (extents already checked equal). Spatial dimensions of
// extent 1 are dropped and neighbours contiguous in both tensors are merged.
template <class From, class To>
convert_plan make_plan(const layout<From>& src, const layout<To>& dst, std::uintptr_t src_addr, std::uintptr_t dst_addr,
                       int elem_bytes) noexcept {
  static_assert(From::rank == To::rank, "make_plan: formats of the same rank");
  convert_plan p{};
  p.batch = src.extent(0);
  p.channels = src.extent(1);
  p.src.n = src.stride(0);
  p.src.c = src.stride(1);
  p.dst.n = dst.stride(0);
  p.dst.c = dst.stride(1);
  int r = 0;
  for (int d = 2; d < From::rank; ++d) {
    const std::int64_t e = src.extent(d);
    if (e == 1) continue;
    const std::int64_t ss = src.stride(d);
    const std::int64_t ds = dst.stride(d);
    if (r > 0 && p.src.spatial[r - 1] == ss * e && p.dst.spatial[r - 1] == ds * e) {
      p.spatial_extent[r - 1] *= e;  // contiguous with the outer one in both tensors: one dimension
      p.src.spatial[r - 1] = ss;
      p.dst.spatial[r - 1] = ds;
    } else {
      p.spatial_extent[r] = e;
      p.src.spatial[r] = ss;
      p.dst.spatial[r] = ds;
      ++r;
    }
  }
  p.spatial_rank = r;
  p.spatial_numel = 1;
  for (int j = 0; j < r; ++j) p.spatial_numel *= p.spatial_extent[j];
  p.read_along_channels = From::channels_last;
  p.write_along_channels = To::channels_last;
  p.elem_bytes = elem_bytes;
  const int area = tile_area(elem_bytes), wide = tile_channels(elem_bytes);
  p.tile_c = wide;
  while (p.tile_c > 1 && p.tile_c / 2 >= p.channels) p.tile_c /= 2;  // few channels: narrower
  p.tile_s = area / p.tile_c;
  if (p.channels > wide)  // many channels, few positions: shorter and wider
    while (p.tile_s > area / (max_widening * wide) && p.tile_s / 2 >= p.spatial_numel) p.tile_s /= 2;
  p.tile_c = area / p.tile_s;
  p.tiles_c = (p.channels + p.tile_c - 1) / p.tile_c;
  p.tiles_s = (p.spatial_numel + p.tile_s - 1) / p.tile_s;
  p.total_tiles = p.batch * p.tiles_c * p.tiles_s;
  p.read_vec = vector_width(p, p.src, From::channels_last, src_addr, elem_bytes);
  p.write_vec = vector_width(p, p.dst, To::channels_last, dst_addr, elem_bytes);
  // A flat side takes its run's groups where they are wider than the line's.
  const int read_flat = flat_width(p, p.src, From::channels_last, src_addr, elem_bytes);
  const int write_flat = flat_width(p, p.dst, To::channels_last, dst_addr, elem_bytes);
  p.read_flat = read_flat > p.read_vec;
  p.write_flat = write_flat > p.write_vec;
  if (p.read_flat) p.read_vec = read_flat;
  if (p.write_flat) p.write_vec = write_flat;
  return p;
}

// Blocks to launch: one per tile up to CUDA's limit; the kernel's grid-stride loop covers the rest.
// (The dense and narrow kernels of dense_transpose.hpp size their grids with the same rule.)
inline std::int64_t grid_blocks(std::int64_t work, std::int64_t limit = max_grid_blocks) noexcept {
  return work < limit ? work : limit;
}
inline std::int64_t grid_blocks(const convert_plan& p, std::int64_t limit = max_grid_blocks) noexcept {
  return grid_blocks(p.total_tiles, limit);
}

}  // namespace memfmt::cuda::detail
