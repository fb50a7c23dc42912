// view_as / try_view_as / is_dense_in against PyTorch 1.13 (fixtures/density.txt), hand tables,
// and brute-force addressing: every element's address must be data + sum(coord[d] * stride[d]).
#include <memfmt/tensor/from_strided.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "../common/coords.hpp"
#include "../common/expect_error.hpp"

namespace {

using memfmt::errc;
using dims = std::vector<std::int64_t>;

std::int64_t numel_of(const dims& s) {
  std::int64_t n = 1;
  for (auto x : s) n *= x;
  return n;
}

// Elements a buffer needs for every stride-addressed element to be in range (strides >= 0 here).
std::int64_t span_of(const dims& sizes, const dims& strides) {
  if (numel_of(sizes) == 0) return 0;
  std::int64_t span = 1;
  for (std::size_t d = 0; d < sizes.size(); ++d) span += (sizes[d] - 1) * strides[d];
  return span;
}

// Calls f(coord) for every coordinate of `sizes` (row-major), coord as a std::array of Rank.
template <int Rank, class F>
void for_each_coord(const dims& sizes, F&& f) {
  std::array<std::int64_t, Rank> e{};
  std::copy_n(sizes.begin(), Rank, e.begin());
  memfmt_test::for_each_coord(e, [&](const std::array<std::int64_t, Rank>& c) { f(c); });
}

// Every element of `v` sits where the raw strides say it does.
template <class V, class T>
void expect_addresses_match_strides(const V& v, const T* base, const dims& sizes, const dims& strides) {
  constexpr int rank = V::rank;
  ASSERT_EQ(v.data(), base);
  for (int d = 0; d < rank; ++d) ASSERT_EQ(v.extent(d), sizes[static_cast<std::size_t>(d)]);
  std::int64_t mismatches = 0;
  for_each_coord<rank>(sizes, [&](const std::array<std::int64_t, rank>& c) {
    std::int64_t off = 0;
    for (int d = 0; d < rank; ++d) off += c[static_cast<std::size_t>(d)] * strides[static_cast<std::size_t>(d)];
    if (&v(c) != base + off) ++mismatches;
  });
  EXPECT_EQ(mismatches, 0) << "sizes " << memfmt::detail::dims_to_string(sizes) << " strides "
                           << memfmt::detail::dims_to_string(strides);
}

using memfmt_test::error_message;

// ---- PyTorch 1.13 fixture -------------------------------------------------------------------

struct fixture_row {
  int rank = 0;
  dims sizes, strides;
  bool contiguous = false, channels_last = false;
};

dims parse_dims(const std::string& s) {
  dims out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoll(item));
  return out;
}

std::vector<fixture_row> load_fixture() {
  std::ifstream in(std::string(MEMFMT_INTEROP_FIXTURES) + "/density.txt");
  std::vector<fixture_row> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    std::string f[5];
    for (auto& x : f) std::getline(ss, x, ';');
    fixture_row r;
    r.rank = std::stoi(f[0]);
    r.sizes = parse_dims(f[1]);
    r.strides = parse_dims(f[2]);
    r.contiguous = f[3] == "1";
    r.channels_last = f[4] == "1";
    rows.push_back(r);
  }
  return rows;
}

template <class First, class Last>
void check_fixture_rank(const std::vector<fixture_row>& rows, int* checked, int* empty_torch_disagrees) {
  namespace fs = memfmt::detail::from_strided;
  for (const auto& r : rows) {
    if (r.rank != First::rank) continue;
    ++*checked;
    SCOPED_TRACE("sizes " + memfmt::detail::dims_to_string(r.sizes) + " strides " +
                 memfmt::detail::dims_to_string(r.strides));
    const bool empty = numel_of(r.sizes) == 0;
    // The exact torch predicate, empty tensors included.
    EXPECT_EQ(fs::torch_is_contiguous<First>(fs::ref(r.sizes), fs::ref(r.strides)), r.contiguous);
    EXPECT_EQ(fs::torch_is_contiguous<Last>(fs::ref(r.sizes), fs::ref(r.strides)), r.channels_last);
    // The typed layer: the same, except that an empty tensor is dense in both formats.
    EXPECT_EQ(memfmt::is_dense_in<First>(r.sizes, r.strides), r.contiguous);
    EXPECT_EQ(memfmt::is_dense_in<Last>(r.sizes, r.strides), empty || r.channels_last);
    if (empty && !r.channels_last) ++*empty_torch_disagrees;

    std::vector<float> buf(static_cast<std::size_t>(span_of(r.sizes, r.strides)) + 1);
    float* base = buf.data();
    const auto v_first = memfmt::try_view_as<First>(base, r.sizes, r.strides);
    const auto v_last = memfmt::try_view_as<Last>(base, r.sizes, r.strides);
    ASSERT_EQ(v_first.has_value(), r.contiguous);
    ASSERT_EQ(v_last.has_value(), empty || r.channels_last);
    if (v_first) expect_addresses_match_strides(*v_first, base, r.sizes, r.strides);
    if (v_last) expect_addresses_match_strides(*v_last, base, r.sizes, r.strides);
    if (!r.contiguous) {
      const std::string msg =
          error_message([&] { memfmt::view_as<First>(base, r.sizes, r.strides); }, errc::format_mismatch);
      EXPECT_NE(msg.find(std::string("not dense in ") + First::name), std::string::npos) << msg;
      if (r.channels_last)
        EXPECT_NE(msg.find(std::string("they are dense in ") + Last::name), std::string::npos) << msg;
      else EXPECT_NE(msg.find("not dense in any format"), std::string::npos) << msg;
    }
  }
}

TEST(FromStridedFixture, MatchesTorchIsContiguous) {
  const auto rows = load_fixture();
  ASSERT_GT(rows.size(), 1000u) << "fixture " MEMFMT_INTEROP_FIXTURES "/density.txt missing or short";
  int checked4 = 0, checked5 = 0, empty4 = 0, empty5 = 0;
  check_fixture_rank<memfmt::nchw, memfmt::nhwc>(rows, &checked4, &empty4);
  check_fixture_rank<memfmt::ncdhw, memfmt::ndhwc>(rows, &checked5, &empty5);
  EXPECT_GT(checked4, 1000);
  EXPECT_GT(checked5, 1000);
  // The documented difference is real: torch 1.13 calls some empty tensors not channels-last.
  EXPECT_GT(empty4 + empty5, 0);
}

// ---- hand tables ----------------------------------------------------------------------------

struct case_ {
  const char* what;
  dims sizes, strides;
  bool first, last;  // dense in the channels-first / channels-last format of the rank
};

// NCHW strides of (N, C, H, W) and NHWC strides, written out from their definitions.
const std::vector<case_> cases4 = {
    {"nchw packed", {2, 3, 4, 5}, {60, 20, 5, 1}, true, false},
    {"nhwc packed", {2, 3, 4, 5}, {60, 1, 15, 3}, false, true},
    {"size-0 batch, nchw strides", {0, 3, 4, 5}, {60, 20, 5, 1}, true, true},
    {"size-0 channel, junk strides", {2, 0, 4, 5}, {7, 0, 3, 1000}, true, true},
    {"all size-1, junk strides", {1, 1, 1, 1}, {9, 8, 7, 6}, true, true},
    {"N1HW nchw strides", {2, 1, 4, 5}, {20, 20, 5, 1}, true, true},
    {"N1HW torch-exported strides", {2, 1, 4, 5}, {20, 1, 5, 1}, true, true},
    {"NC11 nchw strides", {2, 3, 1, 1}, {3, 1, 1, 1}, true, true},
    {"NC11 junk spatial strides", {2, 3, 1, 1}, {3, 1, 99, 77}, true, true},
    {"N111", {4, 1, 1, 1}, {1, 1, 1, 1}, true, true},
    {"1CHW nhwc, junk N stride", {1, 3, 4, 5}, {5, 1, 15, 3}, false, true},
    {"padded rows (W slice)", {2, 3, 4, 5}, {96, 32, 8, 1}, false, false},
    {"sliced channels", {2, 2, 4, 5}, {60, 20, 5, 1}, false, false},
    {"nhwc sliced channels", {2, 2, 4, 5}, {60, 1, 15, 3}, false, false},
    {"permuted H<->W", {2, 3, 4, 5}, {60, 20, 1, 4}, false, false},
    {"permuted N innermost", {2, 3, 4, 5}, {1, 40, 10, 2}, false, false},
    {"expanded batch", {2, 3, 4, 5}, {0, 20, 5, 1}, false, false},
    {"expanded channel nhwc", {2, 3, 4, 5}, {20, 0, 5, 1}, false, false},
    {"overlapping rows", {2, 3, 4, 5}, {48, 16, 4, 1}, false, false},
    {"all unit strides", {2, 3, 4, 5}, {1, 1, 1, 1}, false, false},
};
const std::vector<case_> cases5 = {
    {"ncdhw packed", {2, 3, 2, 3, 4}, {72, 24, 12, 4, 1}, true, false},
    {"ndhwc packed", {2, 3, 2, 3, 4}, {72, 1, 36, 12, 3}, false, true},
    {"size-0", {2, 3, 0, 3, 4}, {1, 2, 3, 4, 5}, true, true},
    {"N1DHW", {2, 1, 2, 3, 4}, {24, 24, 12, 4, 1}, true, true},
    {"NC111", {2, 3, 1, 1, 1}, {3, 1, 5, 5, 5}, true, true},
    {"N1111", {3, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, true, true},
    {"padded", {2, 3, 2, 3, 4}, {144, 48, 24, 8, 1}, false, false},
    {"permuted D<->H", {2, 3, 2, 3, 4}, {72, 24, 4, 8, 1}, false, false},
    {"expanded D", {2, 3, 2, 3, 4}, {72, 24, 0, 4, 1}, false, false},
    {"overlapping", {2, 3, 2, 3, 4}, {60, 20, 10, 4, 1}, false, false},
};

template <class First, class Last>
void run_table(const std::vector<case_>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(memfmt::is_dense_in<First>(c.sizes, c.strides), c.first);
    EXPECT_EQ(memfmt::is_dense_in<Last>(c.sizes, c.strides), c.last);
    std::vector<float> buf(static_cast<std::size_t>(span_of(c.sizes, c.strides)) + 1);
    if (c.first) {
      expect_addresses_match_strides(memfmt::view_as<First>(buf.data(), c.sizes, c.strides), buf.data(), c.sizes,
                                     c.strides);
    } else {
      error_message([&] { memfmt::view_as<First>(buf.data(), c.sizes, c.strides); }, errc::format_mismatch);
      EXPECT_FALSE(memfmt::try_view_as<First>(buf.data(), c.sizes, c.strides).has_value());
    }
    if (c.last) {
      expect_addresses_match_strides(memfmt::view_as<Last>(buf.data(), c.sizes, c.strides), buf.data(), c.sizes,
                                     c.strides);
    } else {
      error_message([&] { memfmt::view_as<Last>(buf.data(), c.sizes, c.strides); }, errc::format_mismatch);
      EXPECT_FALSE(memfmt::try_view_as<Last>(buf.data(), c.sizes, c.strides).has_value());
    }
  }
}

TEST(FromStridedTable, Rank4) { run_table<memfmt::nchw, memfmt::nhwc>(cases4); }
TEST(FromStridedTable, Rank5) { run_table<memfmt::ncdhw, memfmt::ndhwc>(cases5); }

// Ambiguous shapes: both formats give a view, and the two views agree on every element address.
template <class First, class Last>
void check_both_views_agree(const dims& sizes, const dims& strides) {
  SCOPED_TRACE("sizes " + memfmt::detail::dims_to_string(sizes) + " strides " +
               memfmt::detail::dims_to_string(strides));
  std::vector<float> buf(static_cast<std::size_t>(span_of(sizes, strides)) + 1);
  const auto a = memfmt::view_as<First>(buf.data(), sizes, strides);
  const auto b = memfmt::view_as<Last>(buf.data(), sizes, strides);
  EXPECT_EQ(a.extents(), b.extents());
  EXPECT_EQ(a.numel(), b.numel());
  std::int64_t visited = 0, differ = 0;
  constexpr int rank = First::rank;
  for_each_coord<rank>(sizes, [&](const std::array<std::int64_t, rank>& c) {
    ++visited;
    if (&a(c) != &b(c)) ++differ;
  });
  EXPECT_EQ(visited, numel_of(sizes));
  EXPECT_EQ(differ, 0);
}

TEST(FromStridedAmbiguous, BothFormatsSameAddresses) {
  using memfmt::ncdhw;
  using memfmt::nchw;
  using memfmt::ndhwc;
  using memfmt::nhwc;
  check_both_views_agree<nchw, nhwc>({3, 1, 4, 5}, {20, 20, 5, 1});  // N1HW, nchw strides
  check_both_views_agree<nchw, nhwc>({3, 1, 4, 5}, {20, 1, 5, 1});   // N1HW, torch-exported
  check_both_views_agree<nchw, nhwc>({3, 6, 1, 1}, {6, 1, 6, 6});    // NC11, nhwc strides
  check_both_views_agree<nchw, nhwc>({3, 6, 1, 1}, {6, 1, 1, 1});    // NC11, nchw strides
  check_both_views_agree<nchw, nhwc>({5, 1, 1, 1}, {1, 1, 1, 1});    // N111
  check_both_views_agree<nchw, nhwc>({1, 1, 1, 1}, {0, 0, 0, 0});    // one element
  check_both_views_agree<nchw, nhwc>({0, 3, 4, 5}, {60, 20, 5, 1});  // empty
  check_both_views_agree<ncdhw, ndhwc>({2, 1, 2, 3, 4}, {24, 24, 12, 4, 1});
  check_both_views_agree<ncdhw, ndhwc>({2, 5, 1, 1, 1}, {5, 1, 5, 5, 5});
  check_both_views_agree<ncdhw, ndhwc>({2, 0, 1, 1, 1}, {0, 0, 0, 0, 0});
}

// A non-ambiguous shape is dense in one format only: the two formats disagree on addresses.
TEST(FromStridedAmbiguous, NonAmbiguousShapeDenseInExactlyOne) {
  const dims sizes = {2, 3, 4, 5};
  EXPECT_TRUE(memfmt::is_dense_in<memfmt::nchw>(sizes, {60, 20, 5, 1}));
  EXPECT_FALSE(memfmt::is_dense_in<memfmt::nhwc>(sizes, {60, 20, 5, 1}));
  EXPECT_FALSE(memfmt::is_dense_in<memfmt::nchw>(sizes, {60, 1, 15, 3}));
  EXPECT_TRUE(memfmt::is_dense_in<memfmt::nhwc>(sizes, {60, 1, 15, 3}));
}

// ---- strided_desc overload ------------------------------------------------------------------

TEST(FromStridedDesc, ChecksDtypeThenDensity) {
  std::vector<double> buf(120);
  const memfmt::strided_desc d{{2, 3, 4, 5}, {60, 1, 15, 3}, memfmt::dtype::float64};
  expect_addresses_match_strides(memfmt::view_as<memfmt::nhwc>(buf.data(), d), buf.data(), d.sizes, d.strides);
  const std::string wrong_fmt =
      error_message([&] { memfmt::view_as<memfmt::nchw>(buf.data(), d); }, errc::format_mismatch);
  EXPECT_NE(wrong_fmt.find("dense in nhwc"), std::string::npos) << wrong_fmt;

  std::vector<float> fbuf(120);
  const std::string msg =
      error_message([&] { memfmt::view_as<memfmt::nhwc>(fbuf.data(), d); }, errc::unsupported_dtype);
  EXPECT_NE(msg.find("float64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3, 4, 5]"), std::string::npos) << msg;
  // const elements match their non-const dtype
  const float* cbuf = fbuf.data();
  const memfmt::strided_desc df{{2, 3, 4, 5}, {60, 20, 5, 1}, memfmt::dtype::float32};
  EXPECT_EQ(memfmt::view_as<memfmt::nchw>(cbuf, df).data(), cbuf);
}

// ---- error paths ----------------------------------------------------------------------------

void expect_contains(const std::string& msg, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
}

TEST(FromStridedErrors, WrongRank) {
  std::vector<float> buf(64);
  std::string m = error_message(
      [&] {
        memfmt::view_as<memfmt::nchw>(buf.data(), {2, 3, 4}, {12, 4, 1});
      },
      errc::invalid_argument);
  expect_contains(m, {"view_as<nchw>", "4 sizes", "got 3", "[2, 3, 4]"});
  m = error_message(
      [&] {
        memfmt::view_as<memfmt::ndhwc>(buf.data(), {1, 2, 3, 4}, {24, 1, 8, 2});
      },
      errc::invalid_argument);
  expect_contains(m, {"view_as<ndhwc>", "5 sizes", "got 4", "[1, 2, 3, 4]"});
  EXPECT_FALSE(memfmt::is_dense_in<memfmt::nchw>({2, 3, 4}, {12, 4, 1}));
  EXPECT_FALSE(memfmt::try_view_as<memfmt::nchw>(buf.data(), {2, 3, 4}, {12, 4, 1}).has_value());
}

TEST(FromStridedErrors, LengthMismatch) {
  std::vector<float> buf(64);
  const std::string m = error_message(
      [&] {
        memfmt::view_as<memfmt::nhwc>(buf.data(), {1, 2, 2, 2}, {8, 1, 4});
      },
      errc::invalid_argument);
  expect_contains(m, {"[1, 2, 2, 2]", "[8, 1, 4]", "differ in length", "4 vs 3"});
  EXPECT_FALSE(memfmt::is_dense_in<memfmt::nhwc>({1, 2, 2, 2}, {8, 1, 4}));
}

TEST(FromStridedErrors, NegativeSize) {
  std::vector<float> buf(64);
  const std::string m = error_message(
      [&] {
        memfmt::view_as<memfmt::nchw>(buf.data(), {2, -3, 4, 5}, {60, 20, 5, 1});
      },
      errc::invalid_argument);
  expect_contains(m, {"negative size", "[2, -3, 4, 5]"});
  EXPECT_FALSE(memfmt::try_view_as<memfmt::nchw>(buf.data(), {2, -3, 4, 5}, {60, 20, 5, 1}).has_value());
}

TEST(FromStridedErrors, Overflow) {
  float f = 0;
  const std::int64_t big = std::int64_t{1} << 40;
  std::string m = error_message(
      [&] {
        memfmt::view_as<memfmt::nchw>(&f, {big, big, 1, 1}, {big, 1, 1, 1});
      },
      errc::overflow);
  expect_contains(m, {"overflows 64 bits", "[1099511627776, 1099511627776, 1, 1]"});
  // 2^62 elements fit in int64, their bytes (8 each) do not.
  double g = 0;
  const std::int64_t h = std::int64_t{1} << 31;
  m = error_message([&] { memfmt::view_as<memfmt::nchw>(&g, {h, h, 1, 1}, {h, 1, 1, 1}); }, errc::overflow);
  expect_contains(m, {"8 bytes", "[2147483648, 2147483648, 1, 1]"});
  EXPECT_FALSE(memfmt::try_view_as<memfmt::nchw>(&g, {h, h, 1, 1}, {h, 1, 1, 1}).has_value());
}

// An empty tensor of huge extents: the typed view stores the dense strides of its sizes (zero
// counted as 1), which would be 2^62 * 2^62; refused, naming the sizes, instead of wrapping.
TEST(FromStridedErrors, EmptyTensorWhoseDenseStridesOverflow) {
  float f = 0;
  const std::int64_t q = std::int64_t{1} << 62;
  const std::string m = error_message(
      [&] {
        memfmt::view_as<memfmt::nchw>(&f, {0, q, q, q}, {q, q, q, 1});
      },
      errc::overflow);
  expect_contains(
      m, {"view_as<nchw>", "[0, 4611686018427387904, 4611686018427387904, 4611686018427387904]", "overflows 64 bits"});
  EXPECT_FALSE(memfmt::try_view_as<memfmt::nhwc>(&f, {0, q, q, q}, {q, 1, q, q}).has_value());
  EXPECT_FALSE(memfmt::is_dense_in<memfmt::nchw>({0, q, q, q}, {q, q, q, 1}));
  // Within the limit (2^60 elements of 4 bytes as dense strides) it works, with PyTorch's
  // (clamped) strides.
  const std::int64_t h = std::int64_t{1} << 30;
  const auto v = memfmt::view_as<memfmt::nchw>(&f, {0, h, h, 1}, {1, 1, 1, 1});
  EXPECT_EQ(v.numel(), 0);
  EXPECT_EQ(v.stride(0), h * h);
}

TEST(FromStridedErrors, NullData) {
  float* null = nullptr;
  const std::string m = error_message(
      [&] {
        memfmt::view_as<memfmt::nhwc>(null, {1, 2, 2, 2}, {8, 1, 4, 2});
      },
      errc::null_pointer);
  expect_contains(m, {"null data", "[1, 2, 2, 2]"});
  // No element, nothing to read: a null pointer is fine.
  const auto v = memfmt::view_as<memfmt::nhwc>(null, {0, 2, 2, 2}, {8, 1, 4, 2});
  EXPECT_EQ(v.data(), nullptr);
  EXPECT_EQ(v.numel(), 0);
}

TEST(FromStridedErrors, Misaligned) {
  alignas(8) unsigned char raw[64] = {};
  float* bad = reinterpret_cast<float*>(raw + 2);
  const std::string m = error_message(
      [&] {
        memfmt::view_as<memfmt::nchw>(bad, {1, 1, 2, 2}, {4, 4, 2, 1});
      },
      errc::misaligned);
  expect_contains(m, {"not aligned to 4 bytes", "[1, 1, 2, 2]"});
  EXPECT_FALSE(memfmt::try_view_as<memfmt::nchw>(bad, {1, 1, 2, 2}, {4, 4, 2, 1}).has_value());
  // The same bytes are fine for a 1-byte element type.
  std::uint8_t* bytes = raw + 3;
  EXPECT_EQ(memfmt::view_as<memfmt::nchw>(bytes, {1, 1, 2, 2}, {4, 4, 2, 1}).data(), bytes);
}

TEST(FromStridedErrors, FormatMismatchNamesEverything) {
  std::vector<float> buf(256);
  std::string m = error_message(
      [&] {
        memfmt::view_as<memfmt::nhwc>(buf.data(), {2, 3, 4, 5}, {60, 20, 5, 1});
      },
      errc::format_mismatch);
  expect_contains(
      m, {"view_as<nhwc>", "[2, 3, 4, 5]", "[60, 20, 5, 1]", "not dense in nhwc", "channels_last", "dense in nchw"});
  m = error_message(
      [&] {
        memfmt::view_as<memfmt::nchw>(buf.data(), {2, 3, 4, 5}, {60, 20, 1, 4});
      },
      errc::format_mismatch);
  expect_contains(m, {"view_as<nchw>", "[60, 20, 1, 4]", "not dense in nchw", "not dense in any format"});
  m = error_message(
      [&] {
        memfmt::view_as<memfmt::ncdhw>(buf.data(), {2, 3, 2, 3, 4}, {72, 1, 36, 12, 3});
      },
      errc::format_mismatch);
  expect_contains(m, {"view_as<ncdhw>", "[72, 1, 36, 12, 3]", "dense in ndhwc", "channels_last_3d"});
}

}  // namespace
