// CPU replay of the CUDA conversion kernel's index math (memfmt/convert/cuda/tile_plan.hpp).
//
// For each case we build the plan and grid the host code builds, then run every block, every tile
// of its grid-stride loop, every thread and every loop iteration, with the barrier between the
// read and write phases, and compare against an independent truth: the naive mapping
// layout<To>(n, c, ...) <- layout<From>(n, c, ...). Two replays:
//   * index level: each destination element is written exactly once, with the right source
//     offset, padding is never written, shared-tile slots stay in bounds and are written before
//     they are read, vector accesses are aligned;
//   * data level: the kernel's own per-thread functions (read_tile_part / write_tile_part) move
//     real bytes of every element size.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "memfmt/convert/cuda/tile_plan.hpp"
#include "memfmt/convert/cuda/validate.hpp"
#include "memfmt/format/layout.hpp"
#include "memfmt/tensor/tensor_view.hpp"
#include "../common/coords.hpp"
#include "../common/expect_error.hpp"

using memfmt_test::error_message;
using memfmt_test::for_each_coord;
using memfmt_test::padded_layout;

namespace {

using namespace memfmt;
namespace cd = memfmt::cuda::detail;

template <std::size_t R>
std::string case_name(const std::array<std::int64_t, R>& e, const char* from, const char* to, int elem, int pad,
                      int misalign_src, int misalign_dst, std::int64_t grid_limit) {
  return std::string(from) + "->" + to + " sizes " + memfmt::detail::dims_to_string(e) + " elem " +
         std::to_string(elem) + " pad (src*100+dst) " + std::to_string(pad) + " misalign " +
         std::to_string(misalign_src) + "/" + std::to_string(misalign_dst) + " grid limit " +
         std::to_string(grid_limit);
}

// The shared-tile slot of element k of a group, computed directly (the kernel steps through them,
// group_slots, which the data-level replay runs): the tile is [c_local][s_local] with a pitch of
// tile_s + 1, and a flat group wraps to the next line where its fast coordinate reaches g.wrap.
int reference_slot(const cd::convert_plan& p, const cd::element_group& g, int k) {
  int c = g.c_local, s = g.s_local;
  int& fast = g.along_channels ? c : s;
  int& slow = g.along_channels ? s : c;
  fast += k;
  slow += fast / g.wrap;
  fast %= g.wrap;
  return c * (p.tile_s + 1) + s;
}

struct replay_stats {
  std::int64_t vector_reads = 0;
  std::int64_t vector_writes = 0;
  std::int64_t tiles = 0;
  unsigned group_sizes = 0;  // bit k: a group of 2^k elements was used
  int flat_reads = 0;        // cases whose plan reads (writes) whole-tile runs
  int flat_writes = 0;
};

// Index-level replay. Source "values" are source offsets; the destination records what each
// element received and how often.
template <class From, class To>
replay_stats replay_indices(const layout<From>& src, const layout<To>& dst, int elem, std::uintptr_t src_addr,
                            std::uintptr_t dst_addr, std::int64_t grid_limit, const std::string& name) {
  SCOPED_TRACE(name);
  replay_stats stats;
  const cd::convert_plan p = cd::make_plan(src, dst, src_addr, dst_addr, elem);
  stats.flat_reads = p.read_flat;
  stats.flat_writes = p.write_flat;
  const std::int64_t blocks = cd::grid_blocks(p, grid_limit);
  const std::int64_t src_span = src.required_span_size();
  const std::int64_t dst_span = dst.required_span_size();
  std::vector<int> writes(static_cast<std::size_t>(dst_span), 0);
  std::vector<std::int64_t> received(static_cast<std::size_t>(dst_span), -1);
  const int slots = cd::tile_slots(elem);
  // Tile geometry: the whole area; narrowed to the power of two >= C for few channels, else
  // shortened (at most max_widening times) to the power of two >= H*W for few positions.
  const int wide = cd::tile_channels(elem);
  EXPECT_EQ(p.tile_c * p.tile_s, cd::tile_area(elem));
  EXPECT_EQ(p.tile_c & (p.tile_c - 1), 0) << "tile_c " << p.tile_c << " is not a power of two";
  if (p.channels <= wide)
    EXPECT_TRUE(p.tile_c >= p.channels && (p.tile_c == 1 || p.tile_c / 2 < p.channels))
        << "tile_c " << p.tile_c << " for C = " << p.channels << ": not the smallest power of two >= C";
  else
    EXPECT_TRUE(p.tile_c <= cd::max_widening * wide &&
                (p.tile_s == cd::tile_area(elem) / (cd::max_widening * wide) || p.tile_s / 2 < p.spatial_numel))
        << "tile " << p.tile_c << " x " << p.tile_s << " for C = " << p.channels << ", H*W = " << p.spatial_numel
        << ": not the shortest tile >= H*W within the widening limit";
  EXPECT_LE(p.tile_c * (p.tile_s + 1), slots);
  EXPECT_LE(blocks, grid_limit);
  EXPECT_EQ(p.total_tiles > 0, blocks > 0);
  std::vector<std::int64_t> tile(static_cast<std::size_t>(slots));
  bool failed = false;
  auto check = [&](bool ok, const char* what, const cd::tile_origin& t, int thread, int it) {
    if (!ok && !failed) {
      ADD_FAILURE() << what << " at tile (n " << t.n << ", c0 " << t.c0 << ", s0 " << t.s0 << ") thread " << thread
                    << " iteration " << it;
      failed = true;
    }
    return ok;
  };
  for (std::int64_t b = 0; b < blocks; ++b) {
    for (std::int64_t i = b; i < p.total_tiles; i += blocks) {  // the kernel's grid-stride loop
      ++stats.tiles;
      const cd::tile_origin t = cd::tile_at(p, i);
      std::fill(tile.begin(), tile.end(), -1);  // a slot read before it is written shows up as -1
      for (int thread = 0; thread < cd::block_threads; ++thread) {
        for (int it = 0; it < cd::group_iterations(p, p.read_vec); ++it) {
          const cd::element_group g = cd::read_group(p, t, thread, it);
          if (!g.active) continue;
          const std::uintptr_t bytes = static_cast<std::uintptr_t>(g.count) * static_cast<std::uintptr_t>(elem);
          check((src_addr + static_cast<std::uintptr_t>(g.offset) * elem) % bytes == 0, "misaligned read", t, thread,
                it);
          if (g.count > 1) ++stats.vector_reads;
          stats.group_sizes |= static_cast<unsigned>(g.count);
          for (int k = 0; k < g.count; ++k) {
            const int slot = reference_slot(p, g, k);
            const std::int64_t off = g.offset + k;
            if (!check(slot >= 0 && slot < slots && slot % (p.tile_s + 1) < p.tile_s, "tile slot out of range", t,
                       thread, it) ||
                !check(off >= 0 && off < src_span, "read outside the source", t, thread, it) ||
                !check(tile[slot] == -1, "tile slot written twice", t, thread, it))
              return stats;
            tile[slot] = off;
          }
        }
      }
      // __syncthreads()
      for (int thread = 0; thread < cd::block_threads; ++thread) {
        for (int it = 0; it < cd::group_iterations(p, p.write_vec); ++it) {
          const cd::element_group g = cd::write_group(p, t, thread, it);
          if (!g.active) continue;
          const std::uintptr_t bytes = static_cast<std::uintptr_t>(g.count) * static_cast<std::uintptr_t>(elem);
          check((dst_addr + static_cast<std::uintptr_t>(g.offset) * elem) % bytes == 0, "misaligned write", t, thread,
                it);
          if (g.count > 1) ++stats.vector_writes;
          stats.group_sizes |= static_cast<unsigned>(g.count);
          for (int k = 0; k < g.count; ++k) {
            const int slot = reference_slot(p, g, k);
            const std::int64_t off = g.offset + k;
            if (!check(slot >= 0 && slot < slots, "tile slot out of range", t, thread, it) ||
                !check(tile[slot] != -1, "tile slot read before it was written", t, thread, it) ||
                !check(off >= 0 && off < dst_span, "write outside the destination", t, thread, it))
              return stats;
            ++writes[static_cast<std::size_t>(off)];
            received[static_cast<std::size_t>(off)] = tile[slot];
          }
        }
      }
    }
  }
  EXPECT_EQ(stats.tiles, p.total_tiles) << "the grid-stride loop must visit every tile once";
  // Truth: the naive mapping, element by element.
  std::int64_t expected_writes = 0;
  std::int64_t bad = 0;
  for_each_coord(src.extents(), [&](const auto& c) {
    ++expected_writes;
    const auto d = static_cast<std::size_t>(dst(c));
    if (writes[d] != 1 || received[d] != src(c)) {
      if (bad++ < 5)
        ADD_FAILURE() << "destination element " << memfmt::detail::dims_to_string(c) << " written " << writes[d]
                      << " times, holds source offset " << received[d] << ", expected " << src(c);
    }
  });
  std::int64_t total_writes = 0;
  for (int w : writes) total_writes += w;
  EXPECT_EQ(total_writes, expected_writes) << "writes outside the logical elements (padding) or duplicates";
  return stats;
}

template <class Word>
struct aligned_buffer {
  // `misalign_elems` elements past a 64-byte boundary, to steer the vector-width choice.
  aligned_buffer(std::int64_t elems, int misalign_elems) {
    const std::size_t bytes = static_cast<std::size_t>(elems + misalign_elems + 1) * sizeof(Word);
    raw.reset(static_cast<Word*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
    data = raw.get() + misalign_elems;
  }
  struct free_deleter {
    void operator()(Word* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<Word, free_deleter> raw;
  Word* data;
};

// Data-level replay: the kernel's per-thread functions move real elements of size sizeof(Word).
template <class Word, class From, class To>
void replay_data(const layout<From>& src, const layout<To>& dst, int misalign_src, int misalign_dst,
                 std::int64_t grid_limit, const std::string& name) {
  SCOPED_TRACE(name);
  const std::int64_t src_span = src.required_span_size();
  const std::int64_t dst_span = dst.required_span_size();
  aligned_buffer<Word> sbuf(src_span, misalign_src);
  aligned_buffer<Word> dbuf(dst_span, misalign_dst);
  const Word sentinel = static_cast<Word>(0xA5A5A5A5A5A5A5A5ull);
  for (std::int64_t i = 0; i < dst_span; ++i) dbuf.data[i] = sentinel;
  // Distinct-looking values in every byte, so a lost or swapped byte shows.
  for (std::int64_t i = 0; i < src_span; ++i)
    sbuf.data[i] = static_cast<Word>(static_cast<std::uint64_t>(i + 1) * 0x9E3779B97F4A7C15ull);
  const cd::convert_plan p = cd::make_plan(src, dst, reinterpret_cast<std::uintptr_t>(sbuf.data),
                                           reinterpret_cast<std::uintptr_t>(dbuf.data), static_cast<int>(sizeof(Word)));
  const std::int64_t blocks = cd::grid_blocks(p, grid_limit);
  std::vector<Word> tile(static_cast<std::size_t>(cd::tile_slots(sizeof(Word))));
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t i = b; i < p.total_tiles; i += blocks) {
      const cd::tile_origin t = cd::tile_at(p, i);
      for (int thread = 0; thread < cd::block_threads; ++thread)
        cd::read_tile_part(p, t, thread, sbuf.data, tile.data());
      for (int thread = 0; thread < cd::block_threads; ++thread)
        cd::write_tile_part(p, t, thread, tile.data(), dbuf.data);
    }
  std::vector<bool> logical(static_cast<std::size_t>(dst_span), false);
  std::int64_t bad = 0;
  for_each_coord(src.extents(), [&](const auto& c) {
    logical[static_cast<std::size_t>(dst(c))] = true;
    if (dbuf.data[dst(c)] != sbuf.data[src(c)] && bad++ < 5)
      ADD_FAILURE() << "element " << memfmt::detail::dims_to_string(c) << " differs";
  });
  for (std::int64_t i = 0; i < dst_span; ++i)
    if (!logical[static_cast<std::size_t>(i)] && dbuf.data[i] != sentinel && bad++ < 5)
      ADD_FAILURE() << "padding element at offset " << i << " was overwritten";
}

constexpr std::array<std::array<std::int64_t, 4>, 19> shapes_4d = {{
    {2, 12, 3, 20},  // 4-element groups for every size
    {1, 6, 3, 10},   // 2-element groups
    {1, 1, 1, 1},   {1, 3, 7, 7},   {2, 17, 5, 9},  {3, 33, 1, 63},
    {1, 64, 8, 8},  {2, 7, 17, 33}, {1, 1, 13, 17},                // C == 1: ambiguous
    {3, 65, 1, 1},                                                 // every spatial extent 1: ambiguous
    {1, 128, 4, 4}, {2, 16, 2, 32}, {1, 63, 33, 2}, {0, 3, 4, 4},  // empty
    {2, 3, 0, 5},                                                  // empty spatial
    {1, 24, 3, 16}, {1, 130, 5, 1},                                // W == 1: the spatial unit dim is H
    {1, 8, 65, 64}, {2, 3, 45, 67},  // C = 3: tiles 4 channels wide and 256-1024 positions long, the last one partial
}};

constexpr std::array<std::array<std::int64_t, 5>, 10> shapes_5d = {{
    {1, 12, 2, 3, 20},
    {1, 3, 2, 5, 7},
    {2, 17, 3, 3, 3},
    {1, 64, 2, 4, 8},
    {1, 1, 3, 7, 17},
    {2, 33, 1, 1, 1},
    {1, 16, 4, 1, 8},
    {1, 40, 1, 3, 32},
    {1, 7, 5, 1, 1},
    {2, 32, 3, 3, 3},  // D*H*W = 27: single elements along a line, whole-tile runs 4-wide (fp32)
}};

template <class Word, class From, class To, std::size_t R>
void run_case(const std::array<std::int64_t, R>& e, int src_pad, int dst_pad, int mis_src, int mis_dst,
              std::int64_t grid_limit, replay_stats* total) {
  const auto src = padded_layout<From>(e, src_pad);
  const auto dst = padded_layout<To>(e, dst_pad);
  const int pad = src_pad * 100 + dst_pad;
  const int elem = static_cast<int>(sizeof(Word));
  const std::string name = case_name(e, From::name, To::name, elem, pad, mis_src, mis_dst, grid_limit);
  // Simulated addresses: 64-byte aligned plus a whole number of elements.
  const std::uintptr_t sa = 0x100000 + static_cast<std::uintptr_t>(mis_src * elem);
  const std::uintptr_t da = 0x900000 + static_cast<std::uintptr_t>(mis_dst * elem);
  const replay_stats s = replay_indices(src, dst, elem, sa, da, grid_limit, name);
  total->vector_reads += s.vector_reads;
  total->vector_writes += s.vector_writes;
  total->group_sizes |= s.group_sizes;
  total->flat_reads += s.flat_reads;
  total->flat_writes += s.flat_writes;
  replay_data<Word>(src, dst, mis_src, mis_dst, grid_limit, name);
}

template <class Word, class From, class To, std::size_t N, std::size_t R>
void run_shapes(const std::array<std::array<std::int64_t, R>, N>& shapes) {
  replay_stats total;
  for (const auto& e : shapes) {
    run_case<Word, From, To>(e, 0, 0, 0, 0, cd::max_grid_blocks, &total);  // packed, aligned
    run_case<Word, From, To>(e, 3, 4, 0, 1, 3, &total);                    // both padded, misaligned dst, 3 blocks
    run_case<Word, From, To>(e, 0, 2, 1, 0, 1, &total);                    // padded dst, misaligned src, one block
    run_case<Word, From, To>(e, 1, 0, 0, 0, 7, &total);                    // padded src, 7 blocks
    if (::testing::Test::HasFailure()) return;
  }
  // Vector groups are exercised in both phases, in every size from 1 element to 16 bytes.
  EXPECT_GT(total.vector_reads, 0);
  EXPECT_GT(total.vector_writes, 0);
  EXPECT_EQ(total.group_sizes, (16u / sizeof(Word)) * 2 - 1) << From::name << " -> " << To::name;
  // Whole-tile runs are taken on both sides of a transposition (C = 3 or H*W = 49 shapes, say).
  if (From::channels_last != To::channels_last) {
    EXPECT_GT(total.flat_reads, 0) << From::name << " -> " << To::name;
    EXPECT_GT(total.flat_writes, 0) << From::name << " -> " << To::name;
  }
}

template <class Word>
void run_all_pairs() {
  run_shapes<Word, nchw, nhwc>(shapes_4d);
  run_shapes<Word, nhwc, nchw>(shapes_4d);
  run_shapes<Word, nchw, nchw>(shapes_4d);
  run_shapes<Word, nhwc, nhwc>(shapes_4d);
  run_shapes<Word, ncdhw, ndhwc>(shapes_5d);
  run_shapes<Word, ndhwc, ncdhw>(shapes_5d);
  run_shapes<Word, ncdhw, ncdhw>(shapes_5d);
  run_shapes<Word, ndhwc, ndhwc>(shapes_5d);
}

TEST(CudaTilePlan, ReplayOneByteElements) { run_all_pairs<std::uint8_t>(); }
TEST(CudaTilePlan, ReplayTwoByteElements) { run_all_pairs<std::uint16_t>(); }
TEST(CudaTilePlan, ReplayFourByteElements) { run_all_pairs<std::uint32_t>(); }
TEST(CudaTilePlan, ReplayEightByteElements) { run_all_pairs<std::uint64_t>(); }

// The replay must notice a wrong mapping: corrupt one stride of the plan and expect failures.
TEST(CudaTilePlan, ReplayDetectsAWrongPlan) {
  const auto src = layout<nchw>::packed({2, 5, 3, 7});
  const auto dst = layout<nhwc>::packed({2, 5, 3, 7});
  cd::convert_plan p = cd::make_plan(src, dst, 0, 0, 4);
  p.dst.c += 1;  // writes land one element off for c > 0
  int mismatches = 0;
  for (std::int64_t i = 0; i < p.total_tiles; ++i) {
    const cd::tile_origin t = cd::tile_at(p, i);
    for (int thread = 0; thread < cd::block_threads; ++thread)
      for (int it = 0; it < cd::group_iterations(p, p.write_vec); ++it) {
        const cd::element_group g = cd::write_group(p, t, thread, it);
        if (!g.active) continue;
        const std::int64_t c = t.c0 + g.c_local;
        const std::int64_t s = t.s0 + g.s_local;
        if (g.offset != dst(t.n, c, s / 7, s % 7)) ++mismatches;
      }
  }
  EXPECT_GT(mismatches, 0);
}

// Tile shapes: C = 3 takes 4 channels and the rest of the area as positions (fp32: 1024), so
// the launch has 16x fewer tiles than with a 64 x 64 square; H*W = 49 takes 64 positions.
TEST(CudaTilePlan, TileShapesFollowSmallExtents) {
  const auto e = std::array<std::int64_t, 4>{64, 3, 224, 224};
  const auto p = cd::make_plan(layout<nchw>::packed(e), layout<nhwc>::packed(e), 0, 0, 4);
  EXPECT_EQ(p.tile_c, 4);
  EXPECT_EQ(p.tile_s, 1024);
  EXPECT_EQ(p.total_tiles, 64 * (224 * 224 / 1024));
  const auto b = cd::make_plan(layout<nhwc>::packed(e), layout<nchw>::packed(e), 0, 0, 1);
  EXPECT_EQ(b.tile_c, 4);
  EXPECT_EQ(b.tile_s, 4096);
  const auto one = cd::make_plan(layout<nchw>::packed({2, 1, 5, 5}), layout<nhwc>::packed({2, 1, 5, 5}), 0, 0, 8);
  EXPECT_EQ(one.tile_c, 1);
  EXPECT_EQ(one.tile_s, 2048);
  const auto square = cd::make_plan(layout<nchw>::packed({1, 64, 9, 9}), layout<nhwc>::packed({1, 64, 9, 9}), 0, 0, 4);
  EXPECT_EQ(square.tile_c, 64);  // C and H*W both fill the default 64 x 64
  EXPECT_EQ(square.tile_s, 64);
  const auto e7 = std::array<std::int64_t, 4>{32, 2048, 7, 7};
  const auto s16 = cd::make_plan(layout<nhwc>::packed(e7), layout<nchw>::packed(e7), 0, 0, 2);
  EXPECT_EQ(s16.tile_s, 64);  // 49 positions: half the default 128
  EXPECT_EQ(s16.tile_c, 128);
  const auto s8 = cd::make_plan(layout<nhwc>::packed(e7), layout<nchw>::packed(e7), 0, 0, 1);
  EXPECT_EQ(s8.tile_s, 64);
  EXPECT_EQ(s8.tile_c, 256);
  const auto flat = cd::make_plan(layout<nhwc>::packed({2, 300, 1, 1}), layout<nchw>::packed({2, 300, 1, 1}), 0, 0, 4);
  EXPECT_EQ(flat.tile_c, cd::max_widening * 64);  // H*W = 1: as wide as the shared tile allows
  EXPECT_EQ(flat.tile_s, 16);
}

// Vector widths, derived by hand from alignment, strides and extents.
TEST(CudaTilePlan, VectorWidthChoice) {
  {  // float NCHW W = 8 -> NHWC C = 64, aligned: 4-wide (16 B) reads and writes
    const auto p = cd::make_plan(layout<nchw>::packed({2, 64, 4, 8}), layout<nhwc>::packed({2, 64, 4, 8}), 64, 128, 4);
    EXPECT_EQ(p.read_vec, 4);
    EXPECT_EQ(p.write_vec, 4);
    EXPECT_EQ(p.spatial_rank, 1);  // H and W merged
    EXPECT_EQ(p.spatial_numel, 32);
  }
  {  // destination 4 bytes off a 16-byte boundary: scalar writes. H*W = 18: 2-wide along a line,
     // but the tile holds all 18 positions of its 64 channels, one run of 1152: 4-wide over it
    const auto p = cd::make_plan(layout<nchw>::packed({1, 64, 3, 6}), layout<nhwc>::packed({1, 64, 3, 6}), 0, 4, 4);
    EXPECT_EQ(p.read_vec, 4);
    EXPECT_TRUE(p.read_flat);
    EXPECT_EQ(p.write_vec, 1);
    EXPECT_FALSE(p.write_flat);
  }
  {  // half, C = 66: 2-wide (4 B) writes, along lines or runs alike (a last run of 66 * 25). H*W = 25:
     // scalar along a line; runs of 25 * 256 and 25 * 66 (tile 256 x 32) allow 2-wide
    const auto p = cd::make_plan(layout<nchw>::packed({1, 66, 5, 5}), layout<nhwc>::packed({1, 66, 5, 5}), 0, 0, 2);
    EXPECT_EQ(p.read_vec, 2);
    EXPECT_TRUE(p.read_flat);
    EXPECT_EQ(p.write_vec, 2);
    EXPECT_FALSE(p.write_flat);
  }
  {  // float C = 3 -> NHWC: a tile of 1024 positions is one run of 3072 elements: 4-wide writes
    const auto e = std::array<std::int64_t, 4>{2, 3, 224, 224};
    const auto p = cd::make_plan(layout<nchw>::packed(e), layout<nhwc>::packed(e), 0, 0, 4);
    EXPECT_EQ(p.read_vec, 4);
    EXPECT_FALSE(p.read_flat);
    EXPECT_EQ(p.write_vec, 4);
    EXPECT_TRUE(p.write_flat);
  }
  {  // bf16 H*W = 49 -> NCHW: 128 channels of 49 positions are one run: 8-wide writes
    const auto e = std::array<std::int64_t, 4>{2, 2048, 7, 7};
    const auto p = cd::make_plan(layout<nhwc>::packed(e), layout<nchw>::packed(e), 0, 0, 2);
    EXPECT_EQ(p.read_vec, 8);
    EXPECT_EQ(p.write_vec, 8);
    EXPECT_TRUE(p.write_flat);
    // Padded NCHW rows (row stride 8) break the run: back to single elements along the lines.
    const auto padded = layout<nchw>::strided(e, {2048 * 7 * 8, 7 * 8, 8, 1});
    const auto q = cd::make_plan(layout<nhwc>::packed(e), padded, 0, 0, 2);
    EXPECT_FALSE(q.write_flat);
    EXPECT_EQ(q.write_vec, 1);
  }
  {  // bytes, NHWC C = 48 -> 16-wide; padded NCHW rows of 32 with a row stride of 40: 8-wide
    const auto src = layout<nhwc>::packed({1, 48, 4, 32});
    const auto dst = layout<nchw>::strided({1, 48, 4, 32}, {48 * 4 * 40, 4 * 40, 40, 1});
    const auto p = cd::make_plan(src, dst, 0, 0, 1);
    EXPECT_EQ(p.read_vec, 16);
    EXPECT_EQ(p.write_vec, 8);
    EXPECT_EQ(p.spatial_rank, 2);  // rows padded in dst: H and W stay apart
  }
  {  // double: at most 2-wide
    const auto p =
        cd::make_plan(layout<ndhwc>::packed({1, 8, 2, 2, 2}), layout<ncdhw>::packed({1, 8, 2, 2, 2}), 0, 0, 8);
    EXPECT_EQ(p.read_vec, 2);
    EXPECT_EQ(p.write_vec, 2);
  }
}

// 64-bit shapes (no memory): the tile decomposition and offsets of the last tiles match the
// layouts, and a tile count beyond CUDA's grid limit is covered by the grid-stride loop.
TEST(CudaTilePlan, SixtyFourBitShapes) {
  const layout<nchw>::extents_type e = {16384, 1024, 1024, 1027};  // 1.8e13 elements
  const auto src = layout<nchw>::packed(e);
  const auto dst = layout<nhwc>::packed(e);
  const auto p = cd::make_plan(src, dst, 0, 0, 4);
  EXPECT_EQ(p.spatial_numel, 1024 * 1027);
  EXPECT_EQ(p.tile_c, 64);
  EXPECT_EQ(p.tile_s, 64);
  EXPECT_EQ(p.total_tiles, 16384LL * (1024 / 64) * ((1024 * 1027 + 63) / 64));
  EXPECT_GT(p.total_tiles, cd::max_grid_blocks);
  const std::int64_t blocks = cd::grid_blocks(p);
  EXPECT_EQ(blocks, cd::max_grid_blocks);
  // The last tile is reached by block (total - 1) % blocks after (total - 1) / blocks strides.
  const std::int64_t last = p.total_tiles - 1;
  const std::int64_t b = last % blocks;
  std::int64_t i = b;
  while (i + blocks < p.total_tiles) i += blocks;
  EXPECT_EQ(i, last);
  const cd::tile_origin t = cd::tile_at(p, last);
  EXPECT_EQ(t.n, 16383);
  EXPECT_EQ(t.c0, 1024 - 64);
  EXPECT_EQ(t.s0, (p.tiles_s - 1) * 64);
  for (std::int64_t tile : {last, last - 1, p.total_tiles / 2 + 12345, std::int64_t{0}}) {
    const cd::tile_origin o = cd::tile_at(p, tile);
    for (int thread : {0, 1, 31, 100, 255})
      for (int it = 0; it < cd::group_iterations(p, p.read_vec); ++it) {
        const cd::element_group r = cd::read_group(p, o, thread, it);
        const cd::element_group w = cd::write_group(p, o, thread, it);
        if (r.active) {
          const std::int64_t c = o.c0 + r.c_local;
          const std::int64_t s = o.s0 + r.s_local;
          EXPECT_EQ(r.offset, src(o.n, c, s / 1027, s % 1027));
        }
        if (w.active) {
          const std::int64_t c = o.c0 + w.c_local;
          const std::int64_t s = o.s0 + w.s_local;
          EXPECT_EQ(w.offset, dst(o.n, c, s / 1027, s % 1027));
        }
      }
  }
}

// ---- host validation (runs before any launch, so it is tested here without a GPU) ----

template <class T>
T* fake_pointer(std::uintptr_t addr) {
  return reinterpret_cast<T*>(addr);  // never dereferenced: validation only looks at addresses
}

TEST(CudaConvertValidation, ShapeMismatchNamesBothShapes) {
  const tensor_view<const float, nchw> src(fake_pointer<const float>(0x1000), {{1, 3, 4, 5}});
  const tensor_view<float, nhwc> dst(fake_pointer<float>(0x9000), {{1, 3, 5, 4}});
  const std::string msg = error_message([&] { cd::validate_convert(src, dst); }, errc::shape_mismatch);
  EXPECT_NE(msg.find("[1, 3, 4, 5]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 3, 5, 4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nchw -> nhwc"), std::string::npos) << msg;
}

TEST(CudaConvertValidation, NullPointers) {
  const tensor_view<const float, nchw> src(nullptr, {{1, 3, 4, 5}});
  const tensor_view<float, nhwc> dst(fake_pointer<float>(0x9000), {{1, 3, 4, 5}});
  EXPECT_NE(error_message([&] { cd::validate_convert(src, dst); }, errc::null_pointer).find("source"),
            std::string::npos);
  const tensor_view<const float, nchw> src2(fake_pointer<const float>(0x1000), {{1, 3, 4, 5}});
  const tensor_view<float, nhwc> dst2(nullptr, {{1, 3, 4, 5}});
  EXPECT_NE(error_message([&] { cd::validate_convert(src2, dst2); }, errc::null_pointer).find("destination"),
            std::string::npos);
  // Empty tensors need no data.
  const tensor_view<const float, nchw> e1(nullptr, {{0, 3, 4, 5}});
  const tensor_view<float, nhwc> e2(nullptr, {{0, 3, 4, 5}});
  EXPECT_EQ(cd::validate_convert(e1, e2), 0);
}

TEST(CudaConvertValidation, Misaligned) {
  const tensor_view<const double, ncdhw> src(fake_pointer<const double>(0x1004), {{1, 2, 3, 4, 5}});
  const tensor_view<double, ndhwc> dst(fake_pointer<double>(0x9000), {{1, 2, 3, 4, 5}});
  const std::string msg = error_message([&] { cd::validate_convert(src, dst); }, errc::misaligned);
  EXPECT_NE(msg.find("0x1004"), std::string::npos) << msg;
  EXPECT_NE(msg.find("8"), std::string::npos) << msg;
}

TEST(CudaConvertValidation, Overlap) {
  const tensor_view<const std::int16_t, nchw> src(fake_pointer<const std::int16_t>(0x1000), {{1, 3, 4, 5}});
  const tensor_view<std::int16_t, nhwc> dst(fake_pointer<std::int16_t>(0x1000 + 2 * 59), {{1, 3, 4, 5}});
  error_message([&] { cd::validate_convert(src, dst); }, errc::invalid_argument);
  // Adjacent buffers are fine.
  const tensor_view<std::int16_t, nhwc> next(fake_pointer<std::int16_t>(0x1000 + 2 * 60), {{1, 3, 4, 5}});
  EXPECT_EQ(cd::validate_convert(src, next), 60);
}

TEST(CudaConvertValidation, SizeAndSpanOverflow) {
  const std::int64_t big = std::int64_t{1} << 31;
  const tensor_view<const float, nchw> src(fake_pointer<const float>(0x1000), {{big, big, big, 1}});
  const tensor_view<float, nhwc> dst(fake_pointer<float>(0x9000), {{big, big, big, 1}});
  const std::string msg = error_message([&] { cd::validate_convert(src, dst); }, errc::overflow);
  EXPECT_NE(msg.find("[2147483648, 2147483648, 2147483648, 1]"), std::string::npos) << msg;
  // Few elements, but strides spanning more bytes than the address space.
  const auto wide = layout<nchw>::strided({3, 2, 2, 2}, {std::int64_t{1} << 61, 4, 2, 1});
  const tensor_view<const float, nchw> src2(fake_pointer<const float>(0x1000), wide);
  const tensor_view<float, nchw> dst2(fake_pointer<float>(0x9000), layout<nchw>::packed({3, 2, 2, 2}));
  const std::string msg2 = error_message([&] { cd::validate_convert(src2, dst2); }, errc::overflow);
  EXPECT_NE(msg2.find("4 bytes"), std::string::npos) << msg2;
}

}  // namespace
