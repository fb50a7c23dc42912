// CPU replay of the CUDA conversion's paths for dense tensors (memfmt/convert/cuda/dense_transpose.hpp).
//
// For each case we build the plan the host code builds and run the kernel's own per-thread
// functions on real bytes, tile by tile: dense_read (or, with a narrow side, narrow_read) for all
// 256 threads, the barrier, dense_write (narrow_write) for all 256; or, for 1-byte elements in
// 16-byte vectors on the narrow path, the register path's functions warp by warp. Then we compare
// with an independent truth: the naive mapping
// dst[layout<To>(n, c, ...)] == src[layout<From>(n, c, ...)]. Canaries around the destination and
// around the shared tile catch out-of-bounds writes; 8-byte elements carry their source offset,
// so a wrong mapping cannot pass by a coincidence of values.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "memfmt/convert/cuda/dense_transpose.hpp"
#include "memfmt/format/layout.hpp"
#include "../common/coords.hpp"

using memfmt_test::for_each_coord;

namespace {

using namespace memfmt;
namespace cd = memfmt::cuda::detail;

constexpr int canary = 64;  // elements before and after each buffer

template <class Word>
Word pattern(std::int64_t i) {
  if constexpr (sizeof(Word) == 8) return static_cast<Word>(i);
  return static_cast<Word>(static_cast<std::uint64_t>(i) * 2654435761u >> 7);
}

// Runs one tile with the kernel's functions for the plan's vector widths and mode.
template <class Word, int VK, int VR, int Mode = cd::dense_square>
void run_tile(const cd::dense_plan& p, std::int64_t i, const Word* src, Word* dst, std::vector<Word>& shared) {
  constexpr int e = static_cast<int>(sizeof(Word));
  using T = cd::dense_tile<e, VK, VR, Mode>;
  shared.assign(T::slots + 2 * canary, Word(0x5a));
  Word* tile = shared.data() + canary;
  const cd::dense_origin o = cd::dense_tile_at(p, i, T::rows, T::cols);
  for (int t = 0; t < cd::dense_threads; ++t) cd::dense_read<e, VK, VR, Mode>(p, o, t, src, tile);
  for (int t = 0; t < cd::dense_threads; ++t) cd::dense_write<e, VK, VR, Mode>(p, o, t, tile, dst);
  for (int k = 0; k < canary; ++k) {
    ASSERT_EQ(shared[static_cast<std::size_t>(k)], Word(0x5a)) << "shared tile underrun";
    ASSERT_EQ(shared[static_cast<std::size_t>(canary + T::slots + k)], Word(0x5a)) << "shared tile overrun";
  }
}

template <class Word>
void run_plan(const cd::dense_plan& p, const Word* src, Word* dst) {
  constexpr int e = static_cast<int>(sizeof(Word));
  constexpr int vk = cd::dense_max_load_vec(e), vr = cd::dense_max_store_vec(e);
  std::vector<Word> shared;
  for (std::int64_t i = 0; i < p.total_tiles; ++i) {
    if (p.mode == cd::dense_run_r) run_tile<Word, vk, vr, cd::dense_run_r>(p, i, src, dst, shared);
    else if (p.mode == cd::dense_run_k) run_tile<Word, vk, vr, cd::dense_run_k>(p, i, src, dst, shared);
    else if (p.load_vec == vk && p.store_vec == vr) run_tile<Word, vk, vr>(p, i, src, dst, shared);
    else if (p.load_vec == vk) run_tile<Word, vk, 1>(p, i, src, dst, shared);
    else if (p.store_vec == vr) run_tile<Word, 1, vr>(p, i, src, dst, shared);
    else run_tile<Word, 1, 1>(p, i, src, dst, shared);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// 1-byte elements in 16-byte vectors take the register path: every unit, warp by warp (stage,
// then store, for rows -> run), for the plan's N.
template <int N>
void replay_bytes_n(const cd::narrow_plan& q, const std::uint8_t* s, std::uint8_t* d) {
  const std::int64_t units = cd::narrow_byte_units(q);
  std::vector<std::uint8_t> stage(32 * 16 * N + 2 * canary, 0x5a);
  for (std::int64_t first = 0; first < units; first += 32) {
    if (q.narrow_rows) {
      for (int lane = 0; lane < 32 && first + lane < units; ++lane)
        cd::narrow_bytes_stage_run<N>(q, first + lane, s, stage.data() + canary + 16 * N * lane);
      for (int lane = 0; lane < 32; ++lane) cd::narrow_bytes_store_run<N>(first, units, lane, stage.data() + canary, d);
    } else {
      for (int lane = 0; lane < 32 && first + lane < units; ++lane)
        cd::narrow_bytes_unit_to_rows<N>(q, first + lane, s, d);
    }
  }
  for (int k = 0; k < canary; ++k) {
    ASSERT_EQ(stage[static_cast<std::size_t>(k)], 0x5a) << "staging underrun";
    ASSERT_EQ(stage[stage.size() - 1 - static_cast<std::size_t>(k)], 0x5a) << "staging overrun";
  }
}
template <int... N>
void replay_bytes(const cd::narrow_plan& q, const std::uint8_t* s, std::uint8_t* d, std::integer_sequence<int, N...>) {
  using replay_fn = void (*)(const cd::narrow_plan&, const std::uint8_t*, std::uint8_t*);
  const replay_fn by_narrow[] = {&replay_bytes_n<N + 1>...};
  by_narrow[q.narrow - 1](q, s, d);
}

// How many cases took each path and vector width (so that a test can insist each was reached).
struct replay_counts {
  int vector = 0, narrow = 0, narrow_vector = 0, run_r = 0, run_k = 0;
};

// One case: From -> To over extents `e`, the bases offset by `misalign` elements.
template <class Word, class From, class To>
void check_case(const typename layout<From>::extents_type& e, int misalign, replay_counts& counts) {
  const std::string name = std::string(From::name) + "->" + To::name + " " + memfmt::detail::dims_to_string(e) +
                           " elem " + std::to_string(sizeof(Word)) + " misalign " + std::to_string(misalign);
  SCOPED_TRACE(name);
  const layout<From> ls = layout<From>::packed(e);
  const layout<To> ld = layout<To>::packed(e);
  const auto n = static_cast<std::size_t>(ls.required_span_size());
  std::vector<Word> src(n + 2 * canary + 2), dst(n + 2 * canary + 2, Word(0x77));
  Word* s = src.data() + canary + misalign;
  Word* d = dst.data() + canary + misalign;
  for (std::size_t i = 0; i < n; ++i) s[i] = pattern<Word>(static_cast<std::int64_t>(i));
  const auto sa = reinterpret_cast<std::uintptr_t>(s), da = reinterpret_cast<std::uintptr_t>(d);
  const cd::dense_plan p = cd::make_dense_plan(ls, ld, sa, da, static_cast<int>(sizeof(Word)));
  const cd::narrow_plan q = cd::make_narrow_plan(ls, ld, sa, da, static_cast<int>(sizeof(Word)));
  ASSERT_NE(p.total_tiles > 0, q.total_blocks > 0) << "exactly one of the two paths takes a dense case";
  if (q.total_blocks > 0) {
    ++counts.narrow;
    ASSERT_LE(static_cast<std::size_t>(q.narrow) * static_cast<std::size_t>(q.span) * sizeof(Word),
              static_cast<std::size_t>(cd::narrow_tile_bytes));
    // 16-byte vectors only where every access of every block is aligned: the bases, the long
    // side (so every row and run) and the span.
    constexpr int v = cd::narrow_vector_bytes / static_cast<int>(sizeof(Word));
    bool q_done = false;
    if (q.vec == v) {
      ++counts.narrow_vector;
      EXPECT_EQ(sa % cd::narrow_vector_bytes, 0u);
      EXPECT_EQ(da % cd::narrow_vector_bytes, 0u);
      EXPECT_EQ(q.wide % v, 0);
      EXPECT_EQ(q.span % v, 0);
    } else {
      ASSERT_EQ(q.vec, 1);
    }
    std::vector<Word> shared;
    if constexpr (sizeof(Word) == 1) {
      if (q.vec == v) {
        replay_bytes(q, s, d, std::make_integer_sequence<int, static_cast<int>(cd::dense_min_side) - 1>{});
        q_done = true;
      }
    }
    for (std::int64_t b = 0; !q_done && b < q.total_blocks; ++b) {
      shared.assign(cd::narrow_tile_bytes / sizeof(Word) + 2 * canary, Word(0x5a));
      Word* tile = shared.data() + canary;
      const cd::narrow_origin o = cd::narrow_at(q, b);
      if (q.vec == v) {
        for (int t = 0; t < cd::dense_threads; ++t) cd::narrow_read<v>(q, o, t, s, tile);
        for (int t = 0; t < cd::dense_threads; ++t) cd::narrow_write<v>(q, o, t, tile, d);
      } else {
        for (int t = 0; t < cd::dense_threads; ++t) cd::narrow_read<1>(q, o, t, s, tile);
        for (int t = 0; t < cd::dense_threads; ++t) cd::narrow_write<1>(q, o, t, tile, d);
      }
      for (int k = 0; k < canary; ++k) {
        ASSERT_EQ(shared[static_cast<std::size_t>(k)], Word(0x5a)) << "narrow tile underrun";
        ASSERT_EQ(shared[shared.size() - 1 - static_cast<std::size_t>(k)], Word(0x5a)) << "narrow tile overrun";
      }
    }
  }
  // The vectors the plan picked are aligned at the base and at every row start.
  const auto elem = static_cast<std::uintptr_t>(sizeof(Word));
  EXPECT_EQ(sa % (static_cast<std::uintptr_t>(p.load_vec) * elem), 0u);
  EXPECT_EQ(da % (static_cast<std::uintptr_t>(p.store_vec) * elem), 0u);
  // Square tiles need whole vectors in every row; a run needs them in the whole matrix.
  EXPECT_EQ((p.mode == cd::dense_run_k ? p.rows * p.cols : p.cols) % p.load_vec, 0);
  EXPECT_EQ((p.mode == cd::dense_run_r ? p.rows * p.cols : p.rows) % p.store_vec, 0);
  if (p.mode == cd::dense_run_k) {
    EXPECT_LE(p.cols, cd::dense_run_side);
    EXPECT_EQ(p.cols % 2, 1);
  }
  if (p.mode == cd::dense_run_r) {
    EXPECT_LE(p.rows, cd::dense_run_side);
  }
  if (p.total_tiles > 0 && p.mode == cd::dense_run_r) ++counts.run_r;
  if (p.total_tiles > 0 && p.mode == cd::dense_run_k) ++counts.run_k;
  if (p.load_vec > 1 || p.store_vec > 1) ++counts.vector;
  if (p.total_tiles > 0) run_plan<Word>(p, s, d);
  if (::testing::Test::HasFatalFailure()) return;
  std::int64_t wrong = 0;
  for_each_coord(e, [&](const auto& c) {
    if (d[ld(c)] != s[ls(c)] && ++wrong <= 5)
      ADD_FAILURE() << "at " << memfmt::detail::dims_to_string(c) << ": dst offset " << ld(c) << " src offset "
                    << ls(c);
  });
  EXPECT_EQ(wrong, 0);
  for (int k = 0; k < canary + misalign; ++k) ASSERT_EQ(dst[static_cast<std::size_t>(k)], Word(0x77)) << "underrun";
  for (std::size_t k = canary + static_cast<std::size_t>(misalign) + n; k < dst.size(); ++k)
    ASSERT_EQ(dst[k], Word(0x77)) << "overrun";
}

template <class Word>
void check_all() {
  replay_counts counts;
  // Dense tiles; then narrow sides: 3, 5, 13 or 15 channels, 1, 3, 4 or 9 positions (long sides
  // over several blocks, and long sides of whole 16-byte vectors, included).
  const std::array<std::int64_t, 4> shapes[] = {
      {2, 16, 5, 7},  {1, 64, 8, 8},   {3, 130, 3, 11},  {2, 256, 7, 7}, {1, 17, 4, 4},   {2, 20, 9, 9},
      {2, 33, 65, 1}, {1, 128, 16, 8}, {1, 300, 1, 129}, {2, 16, 4, 4},  {2, 3, 5, 7},    {1, 3, 40, 41},
      {2, 15, 33, 3}, {1, 17, 1, 1},   {3, 1100, 2, 2},  {2, 1, 9, 9},   {1, 13, 40, 40}, {2, 3, 64, 96},
      {1, 5, 32, 32}, {1, 2048, 3, 1}, {2, 48, 1, 1}};
  for (int misalign : {0, 1})
    for (const auto& e : shapes) {
      check_case<Word, nchw, nhwc>(e, misalign, counts);
      check_case<Word, nhwc, nchw>(e, misalign, counts);
    }
  // Short rows (16-64 elements) as runs: 7x7 maps both ways, 4x4, 8x8 (towards channels-first, 1-
  // and 2-byte elements), an odd 5x11 (55); the last tile partial (C = 200).
  for (const std::array<std::int64_t, 4> e :
       {std::array<std::int64_t, 4>{2, 200, 7, 7}, {1, 64, 4, 4}, {3, 200, 8, 8}, {2, 96, 5, 11}, {1, 48, 4, 16}}) {
    check_case<Word, nchw, nhwc>(e, 0, counts);
    check_case<Word, nhwc, nchw>(e, 0, counts);
  }
  // Every narrow side, 1-15, both ways (channels, then positions), over long sides of whole
  // 16-byte vectors for every element size.
  for (std::int64_t narrow = 1; narrow < cd::dense_min_side; ++narrow) {
    check_case<Word, nchw, nhwc>({2, narrow, 4, 8}, 0, counts);
    check_case<Word, nhwc, nchw>({2, narrow, 4, 8}, 0, counts);
    check_case<Word, nchw, nhwc>({2, 32, narrow, 1}, 0, counts);
    check_case<Word, nhwc, nchw>({2, 32, 1, narrow}, 0, counts);
  }
  for (const std::array<std::int64_t, 5> e :
       {std::array<std::int64_t, 5>{2, 16, 3, 5, 7}, {1, 256, 2, 4, 8}, {2, 3, 4, 5, 6}, {1, 3, 4, 16, 16}}) {
    check_case<Word, ncdhw, ndhwc>(e, 0, counts);
    check_case<Word, ndhwc, ncdhw>(e, 0, counts);
  }
  EXPECT_GT(counts.vector, 10) << "the replay should exercise the vector widths";
  EXPECT_GT(counts.narrow, 10) << "the replay should exercise the narrow path";
  EXPECT_GT(counts.run_r, 0) << "the replay should exercise runs of short destination rows";
  EXPECT_GT(counts.run_k, 0) << "the replay should exercise runs of short source rows";
  if (sizeof(Word) < 4) EXPECT_GT(counts.narrow_vector, 3) << "the replay should exercise the narrow path's vectors";
  else EXPECT_EQ(counts.narrow_vector, 0) << "4- and 8-byte elements take one per access";
}

TEST(CudaDenseTranspose, ReplayOneByteElements) { check_all<std::uint8_t>(); }
TEST(CudaDenseTranspose, ReplayTwoByteElements) { check_all<std::uint16_t>(); }
TEST(CudaDenseTranspose, ReplayFourByteElements) { check_all<std::uint32_t>(); }
TEST(CudaDenseTranspose, ReplayEightByteElements) { check_all<std::uint64_t>(); }

// The dense path takes dense tensors of opposite formats only; everything else goes to the
// general kernel.
TEST(CudaDenseTranspose, RefusesWhatItDoesNotCover) {
  const std::array<std::int64_t, 4> e{2, 24, 5, 5};
  const auto packed_cf = layout<nchw>::packed(e);
  const auto packed_cl = layout<nhwc>::packed(e);
  EXPECT_GT(cd::make_dense_plan(packed_cf, packed_cl, 0, 0, 4).total_tiles, 0);
  EXPECT_EQ(cd::make_dense_plan(packed_cf, packed_cf, 0, 0, 4).total_tiles, 0);  // a copy
  EXPECT_EQ(cd::make_dense_plan(memfmt_test::padded_layout<nchw>(e, 3), packed_cl, 0, 0, 4).total_tiles, 0);
  EXPECT_EQ(cd::make_dense_plan(packed_cf, memfmt_test::padded_layout<nhwc>(e, 2), 0, 0, 4).total_tiles, 0);
  const std::array<std::int64_t, 4> empty{0, 24, 5, 5};
  EXPECT_EQ(cd::make_dense_plan(layout<nchw>::packed(empty), layout<nhwc>::packed(empty), 0, 0, 4).total_tiles, 0);
  // A side shorter than dense_min_side (C = 3 images, 2x2 maps) takes the narrow path, which
  // likewise takes dense tensors of opposite formats only.
  const std::array<std::int64_t, 4> rgb{8, 3, 224, 224}, tiny{8, 64, 2, 2};
  EXPECT_EQ(cd::make_dense_plan(layout<nchw>::packed(rgb), layout<nhwc>::packed(rgb), 0, 0, 4).total_tiles, 0);
  EXPECT_EQ(cd::make_dense_plan(layout<nhwc>::packed(tiny), layout<nchw>::packed(tiny), 0, 0, 4).total_tiles, 0);
  const auto narrow = [](const auto& from, const auto& to, std::uintptr_t addr, int elem) {
    return cd::make_narrow_plan(from, to, addr, addr, elem);
  };
  // One element per access (fp32; or a base off 16 bytes): 32 KiB / 4 bytes / 3 channels = 2730
  // positions per block, at most 4 per thread and channel.
  const auto rgb_plan = narrow(layout<nchw>::packed(rgb), layout<nhwc>::packed(rgb), 0, 4);
  EXPECT_TRUE(rgb_plan.narrow_rows);
  EXPECT_EQ(rgb_plan.vec, 1);
  EXPECT_EQ(rgb_plan.span, 1024);
  EXPECT_EQ(rgb_plan.chunks, 49);  // 50176 positions
  EXPECT_EQ(rgb_plan.total_blocks, 8 * 49);
  EXPECT_EQ(narrow(layout<nchw>::packed(rgb), layout<nhwc>::packed(rgb), 2, 2).vec, 1);
  EXPECT_EQ(narrow(layout<nchw>::packed(rgb), layout<nhwc>::packed(rgb), 2, 2).span, 1024);
  // 16-byte vectors for 1- and 2-byte elements: spans of whole vectors (5461 -> 5456 bf16, 10922 ->
  // 10912 int8); not where the long side is not whole vectors (50175 positions), nor with one base
  // misaligned.
  const auto rgb_vec = narrow(layout<nchw>::packed(rgb), layout<nhwc>::packed(rgb), 0, 2);
  EXPECT_EQ(rgb_vec.vec, 8);
  EXPECT_EQ(rgb_vec.span, 5456);
  EXPECT_EQ(narrow(layout<nhwc>::packed(rgb), layout<nchw>::packed(rgb), 0, 1).vec, 16);
  EXPECT_EQ(narrow(layout<nhwc>::packed(rgb), layout<nchw>::packed(rgb), 0, 1).span, 10912);
  const std::array<std::int64_t, 4> rgb_odd{8, 3, 223, 225};
  EXPECT_EQ(narrow(layout<nchw>::packed(rgb_odd), layout<nhwc>::packed(rgb_odd), 0, 2).vec, 1);
  EXPECT_EQ(cd::make_narrow_plan(layout<nchw>::packed(rgb), layout<nhwc>::packed(rgb), 0, 8, 2).vec, 1);
  const auto tiny_plan = narrow(layout<nhwc>::packed(tiny), layout<nchw>::packed(tiny), 0, 4);
  EXPECT_TRUE(tiny_plan.narrow_rows);  // NHWC -> NCHW: rows are the 4 positions
  EXPECT_EQ(narrow(layout<nchw>::packed(e), layout<nhwc>::packed(e), 0, 4).total_blocks, 0);  // wide: tiles
  EXPECT_EQ(narrow(layout<nchw>::packed(rgb), layout<nchw>::packed(rgb), 0, 4).total_blocks, 0);
  EXPECT_EQ(narrow(memfmt_test::padded_layout<nchw>(rgb, 3), layout<nhwc>::packed(rgb), 0, 4).total_blocks, 0);
  // Vector widths follow alignment and row lengths: C = 66 rows of fp32 NHWC->NCHW load 1 element,
  // 256 positions store 2; a base off by one element loads 1 too.
  // (mode, load_vec, store_vec, tiles_r, tiles_k) of a plan.
  const auto expect_plan = [](const cd::dense_plan& q, int mode, int load_vec, int store_vec, std::int64_t tiles_r,
                              std::int64_t tiles_k) {
    EXPECT_EQ(q.mode, mode);
    EXPECT_EQ(q.load_vec, load_vec);
    EXPECT_EQ(q.store_vec, store_vec);
    EXPECT_EQ(q.tiles_r, tiles_r);
    EXPECT_EQ(q.tiles_k, tiles_k);
  };
  const std::array<std::int64_t, 4> odd{1, 66, 16, 16};
  const auto pl = cd::make_dense_plan(layout<nhwc>::packed(odd), layout<nchw>::packed(odd), 0, 0, 4);
  EXPECT_EQ(pl.rows, 256);
  EXPECT_EQ(pl.cols, 66);
  expect_plan(pl, cd::dense_square, 1, 2, 4, 3);
  const std::array<std::int64_t, 4> even{1, 128, 16, 16};
  EXPECT_EQ(cd::make_dense_plan(layout<nhwc>::packed(even), layout<nchw>::packed(even), 4, 0, 4).load_vec, 1);
  EXPECT_EQ(cd::make_dense_plan(layout<nhwc>::packed(even), layout<nchw>::packed(even), 16, 0, 4).load_vec, 4);
  // Short rows: 7x7 maps towards channels-first go as runs of destination rows (all 49 positions
  // in one tile, 128 channels a tile); towards channels-last, as runs of source rows (64 channels
  // a tile).
  const std::array<std::int64_t, 4> r50{32, 2048, 7, 7};
  expect_plan(cd::make_dense_plan(layout<nhwc>::packed(r50), layout<nchw>::packed(r50), 0, 0, 4), cd::dense_run_r, 4, 2,
              1, 16);
  expect_plan(cd::make_dense_plan(layout<nchw>::packed(r50), layout<nhwc>::packed(r50), 0, 0, 4), cd::dense_run_k, 4, 2,
              32, 1);
  // Even short source rows stay square (8x8 = 64 positions towards channels-last), as does a
  // source base off its vectors.
  const std::array<std::int64_t, 4> r8{2, 256, 8, 8};
  EXPECT_EQ(cd::make_dense_plan(layout<nchw>::packed(r8), layout<nhwc>::packed(r8), 0, 0, 4).mode, cd::dense_square);
  EXPECT_EQ(cd::make_dense_plan(layout<nchw>::packed(r50), layout<nhwc>::packed(r50), 4, 0, 4).mode, cd::dense_square);
  // Not as runs: a destination base off its vectors; rows that fill square tiles exactly (8x8 = 64
  // positions, fp32: 32 x 2 per tile).
  EXPECT_EQ(cd::make_dense_plan(layout<nhwc>::packed(r50), layout<nchw>::packed(r50), 0, 4, 4).mode, cd::dense_square);
  EXPECT_EQ(cd::make_dense_plan(layout<nhwc>::packed(r8), layout<nchw>::packed(r8), 0, 0, 4).mode, cd::dense_square);
}

}  // namespace
