// convert(view, view): every element size and format pair against a naive index-by-index
// reference (tensor_view::operator(), i.e. the core layout math), plus round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "convert_test_util.hpp"
#include "memfmt/convert/convert.hpp"
#include "memfmt/tensor/host_tensor.hpp"

using namespace memfmt;
using convert_test::padded_tensor;

namespace {

struct case_options {
  std::int64_t src_pad = 0, src_offset = 0, dst_pad = 0, dst_offset = 0;
};

// The index of the first element of `got` whose bits differ from `want`'s, and how many differ.
template <class T>
std::pair<std::int64_t, std::int64_t> first_difference(const T* got, const T* want, std::int64_t size) {
  if (size == 0 || std::memcmp(got, want, static_cast<std::size_t>(size) * sizeof(T)) == 0) return {-1, 0};
  std::int64_t bad = 0, first = -1;
  for (std::int64_t k = 0; k < size; ++k)
    if (!convert_test::same_bits(got[k], want[k]) && bad++ == 0) first = k;
  return {first, bad};
}

// Converts src into dst, a view into buffer[0, size) whose elements already hold a pattern, once
// per option, and checks every element of the buffer: the converted ones against the
// index-by-index reference (tensor_view::operator(), i.e. the core layout math), the others
// (padding, between rows) unchanged. The reference is computed once for all the options, and the
// buffer holds its pattern again before each conversion.
template <class T, class From, class To>
void check_into(const tensor_view<T, From>& src, const tensor_view<T, To>& dst, T* buffer, std::int64_t size,
                const std::vector<convert_options>& opts) {
  const std::vector<T> before(buffer, buffer + size);
  std::vector<T> expected = before;
  const tensor_view<T, To> expected_view(expected.data() + (dst.data() - buffer), dst.mapping());
  convert_test::for_each_index(dst.extents(), [&](const auto& i) { expected_view(i) = src(i); });
  for (const convert_options& opt : opts) {
    std::copy(before.begin(), before.end(), buffer);
    convert(src, dst, opt);
    const auto [first, bad] = first_difference(buffer, expected.data(), size);
    ASSERT_EQ(bad, 0) << From::name << "->" << To::name << " sizeof " << sizeof(T) << " extents "
                      << detail::dims_to_string(dst.extents()) << " src strides "
                      << detail::dims_to_string(src.mapping().strides()) << " dst strides "
                      << detail::dims_to_string(dst.mapping().strides()) << " threads " << opt.num_threads
                      << " streaming " << opt.allow_streaming_stores << " prefetch " << to_string(opt.prefetch)
                      << " stage " << to_string(opt.stage) << " first wrong buffer index " << first;
  }
}
// The same into the whole of a tensor's buffer, filled with a pattern first.
template <class T, class From, class To, class BufferFormat>
void check_into(const tensor_view<T, From>& src, const tensor_view<T, To>& dst, host_tensor<T, BufferFormat>& buffer,
                const std::vector<convert_options>& opts) {
  for (std::int64_t k = 0; k < buffer.numel(); ++k)
    buffer.data()[k] = convert_test::pattern<T>(static_cast<std::uint64_t>(k), 6);
  check_into(src, dst, buffer.data(), buffer.numel(), opts);
}

// Converts a patterned From tensor into To (padded views, offset into their buffers) and checks
// every element of the destination buffer, and that the source is unchanged.
template <class T, class From, class To>
void check_convert(const std::array<std::int64_t, From::rank>& e, const case_options& c,
                   const std::vector<convert_options>& opts) {
  padded_tensor<T, From> src(e, c.src_pad, c.src_offset);
  padded_tensor<T, To> dst(e, c.dst_pad, c.dst_offset);
  convert_test::fill(src.view, 7);
  const std::vector<T> src_before = src.buffer;
  check_into(src.view, dst.view, dst.buffer.data(), static_cast<std::int64_t>(dst.buffer.size()), opts);
  for (std::size_t k = 0; k < src_before.size(); ++k)
    ASSERT_TRUE(convert_test::same_bits(src.buffer[k], src_before[k])) << "source modified at " << k;
}

const std::vector<std::array<std::int64_t, 4>>& shapes_4d() {
  static const std::vector<std::array<std::int64_t, 4>> s = {
      {1, 1, 1, 1},    {2, 3, 5, 7},   {1, 17, 3, 63}, {3, 1, 7, 7},    {2, 16, 8, 8}, {2, 32, 9, 17},
      {1, 64, 17, 19}, {2, 3, 31, 33}, {1, 7, 1, 1},   {1, 2048, 7, 7}, {2, 63, 4, 9}, {1, 2, 17, 17},
      {1, 4, 16, 1},   {4, 128, 1, 3}, {0, 3, 4, 5},   {2, 0, 3, 3},    {2, 3, 0, 3},  {1, 33, 16, 16}};
  return s;
}
const std::vector<std::array<std::int64_t, 5>>& shapes_5d() {
  static const std::vector<std::array<std::int64_t, 5>> s = {{1, 1, 1, 1, 1},  {2, 3, 3, 5, 7}, {1, 17, 2, 3, 9},
                                                             {1, 64, 4, 4, 5}, {2, 1, 3, 3, 3}, {1, 32, 1, 1, 1},
                                                             {0, 2, 2, 2, 2},  {1, 16, 3, 8, 8}};
  return s;
}

const std::vector<case_options>& layouts() {
  static const std::vector<case_options> l = {{0, 0, 0, 0}, {3, 5, 0, 0}, {0, 0, 2, 1}, {1, 3, 5, 7}};
  return l;
}

template <class T, class From, class To>
void check_all_4d_or_5d() {
  std::vector<convert_options> opts;
  for (int threads : {1, 2})
    for (bool streaming : {true, false}) opts.push_back({threads, streaming});
  if constexpr (From::rank == 4)
    for (const auto& e : shapes_4d())
      for (const auto& c : layouts()) check_convert<T, From, To>(e, c, opts);
  else
    for (const auto& e : shapes_5d())
      for (const auto& c : layouts()) check_convert<T, From, To>(e, c, opts);
}

template <class T>
class ConvertTyped : public ::testing::Test {};
using element_types =
    ::testing::Types<std::uint8_t, std::int16_t, half, bfloat16, float, std::int32_t, double, std::int64_t>;
TYPED_TEST_SUITE(ConvertTyped, element_types);

TYPED_TEST(ConvertTyped, NchwToNhwc) { check_all_4d_or_5d<TypeParam, nchw, nhwc>(); }
TYPED_TEST(ConvertTyped, NhwcToNchw) { check_all_4d_or_5d<TypeParam, nhwc, nchw>(); }
TYPED_TEST(ConvertTyped, NchwToNchw) { check_all_4d_or_5d<TypeParam, nchw, nchw>(); }
TYPED_TEST(ConvertTyped, NhwcToNhwc) { check_all_4d_or_5d<TypeParam, nhwc, nhwc>(); }
TYPED_TEST(ConvertTyped, NcdhwToNdhwc) { check_all_4d_or_5d<TypeParam, ncdhw, ndhwc>(); }
TYPED_TEST(ConvertTyped, NdhwcToNcdhw) { check_all_4d_or_5d<TypeParam, ndhwc, ncdhw>(); }
TYPED_TEST(ConvertTyped, NcdhwToNcdhw) { check_all_4d_or_5d<TypeParam, ncdhw, ncdhw>(); }
TYPED_TEST(ConvertTyped, NdhwcToNdhwc) { check_all_4d_or_5d<TypeParam, ndhwc, ndhwc>(); }

// Round trip NCHW -> NHWC -> NCHW is the identity, bit for bit, including NaN payloads.
TYPED_TEST(ConvertTyped, RoundTripIsIdentity) {
  using T = TypeParam;
  for (const auto& e : shapes_4d()) {
    host_tensor<T, nchw> a(e);
    host_tensor<T, nhwc> b(e);
    host_tensor<T, nchw> c(e);
    for (std::int64_t k = 0; k < a.numel(); ++k)
      a.data()[k] = convert_test::pattern<T>(static_cast<std::uint64_t>(k), 3);
    convert(a.view(), b.view());
    convert(b.view(), c.view(), convert_options{1, false});
    if (a.numel() > 0) {
      ASSERT_EQ(std::memcmp(a.data(), c.data(), a.size_bytes()), 0) << detail::dims_to_string(e);
    }
  }
}

// Tensors large enough (> 4 MB of output) to take the streaming-store path, in every direction,
// dense and padded, with 1 and 2 threads.
template <class T>
void check_large() {
  const std::array<std::int64_t, 4> shapes[] = {{2, 64, 96, 96}, {1, 3, 700, 701}, {2, 1000, 7, 7}};
  const std::vector<convert_options> opts = {{1, true}, {2, true}};
  for (const auto& e : shapes)
    for (const auto& c : {case_options{0, 0, 0, 0}, case_options{1, 2, 3, 4}}) {
      check_convert<T, nchw, nhwc>(e, c, opts);
      check_convert<T, nhwc, nchw>(e, c, opts);
      check_convert<T, nchw, nchw>(e, c, opts);
    }
}
TEST(ConvertLargeStreaming, Float) { check_large<float>(); }
TEST(ConvertLargeStreaming, Bfloat16) { check_large<bfloat16>(); }
TEST(ConvertLargeStreaming, Int8) { check_large<std::int8_t>(); }

// 64-byte aligned dense tensors (host_tensor) past the streaming threshold, so the AVX-512 path
// stores whole lines straight from registers (or, when destination rows are not whole lines, as
// for H*W = 49 to NCHW, through staged panels); sides that are not multiples of a tile leave
// scalar edges. Every element is checked against the index-by-index view reference; the
// destination starts as a different pattern, so an element never written is caught.
template <class T, class From, class To>
void check_aligned(const std::array<std::int64_t, 4>& e, const std::vector<convert_options>& opts) {
  host_tensor<T, From> a(e);
  for (std::int64_t k = 0; k < a.numel(); ++k)
    a.data()[k] = convert_test::pattern<T>(static_cast<std::uint64_t>(k), 11);
  host_tensor<T, To> b(e);
  check_into(a.view(), b.view(), b, opts);
}
// To NHWC, H*W = 49 and 50 leave one and two destination rows past the last whole tile (gathered),
// 83 x 85 and 97 x 99 three or more for 1- to 4-byte elements (an overlapping tile).
// {9, 256, 24, 40}, {3, 256, 14, 14} and {2, 256, 7, 14} to NHWC have destination rows of C * E =
// 512-2048 bytes for 2- to 8-byte elements (a multiple of 512) and source rows of other pitches,
// whole lines or not, so they run in row strips of whole destination rows that gather and
// prefetch across strips and planes (not bf16 at H*W = 98: source rows of 196 bytes keep 4 x 4
// blocks). Past the last whole tile, H*W = 196 leaves 4 rows in bf16 (a tile overlapping the one
// before) and H*W = 98 two in fp32 (gathered). C = 3 and 4 with aligned planes stream the group
// shuffles straight from registers ({5, 4, 7, 9836} in fp32: a partial vector at the end of each
// plane). Planes smaller than a square to NHWC go in tiles and a tail: H*W = 9 (one gathered row
// in fp32, a tile overlapping the one before in bf16, blocked code for int8), 25 (int8: 16-row
// tiles and an overlapping one) and 5 x 7 (fp64: 2-row tiles and a gathered row); each also
// checks its way back, where the planes of 9 and 25 positions take overlapping edge tiles.
template <class T>
void check_aligned_large() {
  const std::array<std::int64_t, 4> shapes[] = {
      {2, 64, 96, 96},   {11, 2048, 7, 7},  {3, 48, 83, 85}, {1, 130, 97, 99}, {41, 1024, 5, 10},
      {9, 256, 24, 40},  {2, 3, 512, 704},  {5, 4, 7, 9836}, {3, 256, 14, 14}, {2, 256, 7, 14},
      {457, 1024, 3, 3}, {165, 1024, 5, 5}, {61, 1216, 5, 7}};
  std::vector<convert_options> opts;
  for (int threads : {1, 2})
    for (bool streaming : {true, false}) opts.push_back({threads, streaming});
  for (const auto& e : shapes) {
    check_aligned<T, nchw, nhwc>(e, opts);
    check_aligned<T, nhwc, nchw>(e, opts);
  }
}
// NHWC->NCHW with destination rows that are not whole lines (H*W = 49, 25, 81, 196, 289) past the
// streaming threshold goes through pipelined panels of up to four source lines of channels (two for
// 1- and 2-byte elements; zmm_short_rows.hpp), their stages streamed out in one burst each where
// two fit in L1 (up to H*W = 196 with 32 KiB) or spread over the next panel's kernel calls: both,
// by running every case under every forced tuning (far prefetches into L1 or L2, stages in bursts
// or slices; cpu_tuning.hpp), each of which must give the same bytes. The
// channel counts leave a last panel of fewer channels (and a partial last line), or a single
// partial panel (C = 20); H*W not a multiple of a row group makes the last group overlap the one
// before; H*W = 196, 289 and 1225 take one-line panels (1225: a stage larger than L1, and the next
// panel prefetched for every element size); H*W = 5625 and 8463 are too long for one panel's stage,
// so panels cover two or three spans of positions, their rows streamed as separate runs (odd
// lengths: every run starts and ends inside a line). Aligned host tensors, and padded views with an
// unaligned destination start (partial lines at both ends of every panel) and a source pitch wider
// than C; 2 threads claim planes as they go (an odd count). With fewer than four planes per thread
// (N = 1 and 3, 2 and 3 threads), the threads claim parts of planes.
// Planes of fewer than two row groups take narrow groups: one (H*W = 8 in bf16) or two overlapping
// (H*W = 9 in bf16; 25 in int8, with C = 80). (1-byte elements need H*W >= 16 for this path, the
// others 16 / E; smaller planes check their other path.)
// Every forced setting of the two cache-dependent choices (options.hpp).
constexpr std::pair<far_prefetch, stage_stream> every_tuning[] = {{far_prefetch::l1, stage_stream::burst},
                                                                  {far_prefetch::l1, stage_stream::slices},
                                                                  {far_prefetch::l2, stage_stream::burst},
                                                                  {far_prefetch::l2, stage_stream::slices}};
// Streaming options of every tuning, each with either thread count.
std::vector<convert_options> every_tuning_with(int threads_a, int threads_b) {
  std::vector<convert_options> opts;
  for (int threads : {threads_a, threads_b})
    for (const auto& [prefetch, stage] : every_tuning) opts.push_back({threads, true, prefetch, stage});
  return opts;
}

template <class T>
void check_short_rows() {
  const std::array<std::int64_t, 3> planes[] = {{1001, 7, 7}, {20, 5, 5},   {70, 9, 9},   {300, 14, 14},
                                                {37, 17, 17}, {40, 35, 35}, {65, 75, 75}, {66, 91, 93},
                                                {77, 3, 3},   {100, 2, 4},  {80, 5, 5}};
  for (const auto& pl : planes) {
    const std::int64_t plane_bytes = pl[0] * pl[1] * pl[2] * static_cast<std::int64_t>(sizeof(T));
    const std::int64_t n = (std::int64_t{4} << 20) / plane_bytes + 1;
    const std::array<std::int64_t, 4> e = {n | 1, pl[0], pl[1], pl[2]};
    check_aligned<T, nhwc, nchw>(e, every_tuning_with(1, 2));
    check_convert<T, nhwc, nchw>(e, case_options{5, 0, 0, 3}, every_tuning_with(1, 2));
  }
  for (const std::int64_t n : {1, 3}) {
    const std::int64_t c = (std::int64_t{4} << 20) / (n * 81 * static_cast<std::int64_t>(sizeof(T))) + 37;
    const std::array<std::int64_t, 4> e = {n, c, 9, 9};
    check_aligned<T, nhwc, nchw>(e, every_tuning_with(2, 3));
    check_convert<T, nhwc, nchw>(e, case_options{5, 0, 0, 3}, every_tuning_with(2, 3));
  }
}
// Destination rows 1 KiB apart (a multiple of 512 bytes, wider than the rows), few of them per
// plane and whole-line source rows: the AVX-512 path's column strips are then four squares wide,
// and 100 columns leave a partial last strip and edge columns. NHWC->NCHW: 64 channel rows of
// 10 x 10 positions; NCHW->NHWC: 8 x 8 position rows of 100 channels. 64-byte aligned buffers,
// streaming (N past the threshold) and not.
template <class T, class From, class To>
void check_pitched(std::int64_t n, const convert_options& opt) {
  constexpr std::int64_t pitch = 1024 / static_cast<std::int64_t>(sizeof(T));
  const bool to_nchw = std::is_same_v<To, nchw>;
  const std::array<std::int64_t, 4> e =
      to_nchw ? std::array<std::int64_t, 4>{n, 64, 10, 10} : std::array<std::int64_t, 4>{n, 100, 8, 8};
  // The destination buffer: a dense tensor whose rows are `pitch` elements long.
  host_tensor<T, To> buffer(to_nchw ? std::array<std::int64_t, 4>{n, 64, 1, pitch}
                                    : std::array<std::int64_t, 4>{n, pitch, 8, 8});
  const std::array<std::int64_t, 4> strides = to_nchw ? std::array<std::int64_t, 4>{64 * pitch, pitch, 10, 1}
                                                      : std::array<std::int64_t, 4>{64 * pitch, 1, 8 * pitch, pitch};
  host_tensor<T, From> src(e);
  convert_test::fill(src.view(), 5);
  check_into(src.view(), tensor_view<T, To>(buffer.data(), layout<To>::strided(e, strides)), buffer, {opt});
}
template <class T>
void check_pitched_rows() {
  const std::int64_t n_stream = (std::int64_t{4} << 20) / (6400 * static_cast<std::int64_t>(sizeof(T))) + 3;
  for (int threads : {1, 2})
    for (bool streaming : {true, false}) {
      const convert_options opt{threads, streaming};
      const std::int64_t n = streaming ? n_stream : 3;
      check_pitched<T, nhwc, nchw>(n, opt);
      check_pitched<T, nchw, nhwc>(n, opt);
    }
}
TEST(ConvertPitchedRows, Float) { check_pitched_rows<float>(); }
TEST(ConvertPitchedRows, Bfloat16) { check_pitched_rows<bfloat16>(); }
TEST(ConvertPitchedRows, Uint8) { check_pitched_rows<std::uint8_t>(); }
TEST(ConvertPitchedRows, Double) { check_pitched_rows<double>(); }

// Plain stores (no streaming) scattered over destination rows that share L1 sets go through a
// stage a block at a time (run_staged_blocks): blocks of up to 64 rows and 32 KiB, the last block
// of each side overlapping the one before. NCHW->NHWC of 7x7 planes with C = 2048 (destination
// rows 2-16 KiB apart; 2048 columns are not a whole number of blocks for any element size) and of
// 7x9 with C = 1024; NHWC->NCHW of 32x32 and 16x32 planes (C = 64 and 40; 512 columns split with
// an overlap for 2- and 4-byte elements). NCHW->NHWC of 130 positions (10 x 13) from channel rows
// 2 KiB apart takes three row blocks, the last overlapping. Dense and padded sources, 1 and 2
// threads. (The streaming-off variants of the other tests take this path too.)
template <class T>
void check_staged_blocks() {
  using V = std::array<std::int64_t, 4>;
  for (int threads : {1, 2}) {
    const convert_options opt{threads, false};
    for (const V& e : {V{2, 2048, 7, 7}, V{1, 1024, 7, 9}})
      for (const auto& c : {case_options{0, 0, 0, 0}, case_options{3, 5, 0, 0}})
        check_convert<T, nchw, nhwc>(e, c, {opt});
    for (const V& e : {V{2, 64, 32, 32}, V{3, 40, 16, 32}})
      for (const auto& c : {case_options{0, 0, 0, 0}, case_options{3, 5, 0, 0}})
        check_convert<T, nhwc, nchw>(e, c, {opt});
    constexpr std::int64_t pitch = 2048 / static_cast<std::int64_t>(sizeof(T));
    const V e{2, 1024, 10, 13};
    host_tensor<T, nchw> src_buffer(V{2, 1024, 1, pitch});
    convert_test::fill(src_buffer.view(), 8);
    const tensor_view<T, nchw> src(src_buffer.data(), layout<nchw>::strided(e, V{1024 * pitch, pitch, 13, 1}));
    host_tensor<T, nhwc> dst(e);
    check_into(src, dst.view(), dst, {opt});
  }
}
TEST(ConvertStagedBlocks, Float) { check_staged_blocks<float>(); }
TEST(ConvertStagedBlocks, Bfloat16) { check_staged_blocks<bfloat16>(); }
TEST(ConvertStagedBlocks, Uint8) { check_staged_blocks<std::uint8_t>(); }
TEST(ConvertStagedBlocks, Double) { check_staged_blocks<double>(); }

TEST(ConvertShortRows, Float) { check_short_rows<float>(); }
TEST(ConvertShortRows, Bfloat16) { check_short_rows<bfloat16>(); }
TEST(ConvertShortRows, Uint8) { check_short_rows<std::uint8_t>(); }
TEST(ConvertShortRows, Double) { check_short_rows<double>(); }

TEST(ConvertAlignedStreaming, Float) { check_aligned_large<float>(); }
TEST(ConvertAlignedStreaming, Bfloat16) { check_aligned_large<bfloat16>(); }
TEST(ConvertAlignedStreaming, Uint8) { check_aligned_large<std::uint8_t>(); }
TEST(ConvertAlignedStreaming, Double) { check_aligned_large<double>(); }

// Ambiguous shapes (C == 1, or all spatial extents 1): NCHW and NHWC are the same bytes.
TEST(ConvertAmbiguous, SameBytesBothWays) {
  for (const std::array<std::int64_t, 4>& e : {std::array<std::int64_t, 4>{3, 1, 5, 7}, {4, 9, 1, 1}, {1, 1, 1, 1}}) {
    host_tensor<float, nchw> a(e);
    host_tensor<float, nhwc> b(e);
    for (std::int64_t k = 0; k < a.numel(); ++k) a.data()[k] = static_cast<float>(k) * 0.5f;
    convert(a.view(), b.view());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size_bytes()), 0) << detail::dims_to_string(e);
  }
}

}  // namespace
