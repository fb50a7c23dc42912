// Layout and typed-view behaviour against brute force: offsets of packed layouts equal the
// row-major linearisation of the format's memory order, strides equal PyTorch's rule
// (computed independently here), and checked construction accepts exactly the format-ordered,
// non-overlapping strides.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <set>
#include <vector>

#include "memfmt/format/layout.hpp"
#include "memfmt/tensor/host_tensor.hpp"
#include "memfmt/tensor/relabel.hpp"
#include "memfmt/tensor/tensor_view.hpp"
#include "../common/coords.hpp"

using memfmt_test::for_each_coord;

namespace {

using memfmt::layout;
using memfmt::ncdhw;
using memfmt::nchw;
using memfmt::ndhwc;
using memfmt::nhwc;

// Independent truth: the offset of `coord` when memory is the row-major array over `order`.
template <std::size_t R>
std::int64_t row_major_offset(const std::array<std::int64_t, R>& e, const std::array<int, R>& order,
                              const std::array<std::int64_t, R>& coord) {
  std::int64_t off = 0;
  for (std::size_t i = 0; i < R; ++i) off = off * e[order[i]] + coord[order[i]];
  return off;
}

template <class F>
void check_packed_bijection(const typename layout<F>::extents_type& e) {
  const auto m = layout<F>::packed(e);
  std::set<std::int64_t> seen;
  for_each_coord(e, [&](const auto& c) {
    const auto off = m(c);
    EXPECT_EQ(off, row_major_offset(e, F::order, c));
    seen.insert(off);
  });
  const auto n = m.numel();
  EXPECT_EQ(static_cast<std::int64_t>(seen.size()), n);
  EXPECT_EQ(m.required_span_size(), n);  // packed: every offset in [0, n) used once
  EXPECT_TRUE(m.is_packed());
  EXPECT_EQ(m.stride(layout<F>::unit_dim), 1);
}

TEST(Layout, PackedIsBijectiveRowMajorInFormatOrder) {
  for (std::int64_t n : {1, 2}) {
    for (std::int64_t c : {1, 3, 4}) {
      for (std::int64_t h : {1, 2, 5}) {
        for (std::int64_t w : {1, 3}) {
          check_packed_bijection<nchw>({n, c, h, w});
          check_packed_bijection<nhwc>({n, c, h, w});
          check_packed_bijection<ncdhw>({n, c, 2, h, w});
          check_packed_bijection<ndhwc>({n, c, 2, h, w});
        }
      }
    }
  }
}

// PyTorch's dense strides: stride[order[i]] = prod over later positions of max(size, 1).
template <std::size_t R>
std::array<std::int64_t, R> torch_dense_strides(const std::array<std::int64_t, R>& e, const std::array<int, R>& order) {
  std::array<std::int64_t, R> s{};
  std::int64_t acc = 1;
  for (std::size_t i = R; i-- > 0;) {
    s[order[i]] = acc;
    acc *= std::max<std::int64_t>(e[order[i]], 1);
  }
  return s;
}

TEST(Layout, PackedStridesMatchTorchIncludingSizeZeroAndOne) {
  const std::vector<std::array<std::int64_t, 4>> shapes = {{2, 3, 4, 5}, {2, 1, 4, 5}, {2, 3, 1, 1}, {0, 3, 4, 5},
                                                           {2, 0, 4, 5}, {2, 3, 0, 5}, {1, 1, 1, 1}};
  for (const auto& e : shapes) {
    EXPECT_EQ(layout<nchw>::packed(e).strides(), torch_dense_strides(e, nchw::order));
    EXPECT_EQ(layout<nhwc>::packed(e).strides(), torch_dense_strides(e, nhwc::order));
  }
  // Spot values written out by hand (torch: torch.empty(2,3,4,5).to(memory_format=torch.channels_last).stride()).
  EXPECT_EQ(layout<nhwc>::packed({2, 3, 4, 5}).strides(), (std::array<std::int64_t, 4>{60, 1, 15, 3}));
  EXPECT_EQ(layout<ndhwc>::packed({2, 3, 4, 5, 6}).strides(), (std::array<std::int64_t, 5>{360, 1, 90, 18, 3}));
}

TEST(Layout, EmptyTensorHasZeroSpan) {
  EXPECT_EQ(layout<nhwc>::packed({0, 3, 4, 5}).required_span_size(), 0);
  EXPECT_EQ(layout<nchw>().required_span_size(), 0);
  EXPECT_EQ(layout<nchw>().numel(), 0);
}

TEST(Layout, StridedAcceptsPaddedSlicesAndKeepsOffsets) {
  // A C-slice [.., 2:5, ..] of an NHWC (2, 8, 4, 5) buffer: strides (160, 1, 40, 8).
  const auto big = layout<nhwc>::packed({2, 8, 4, 5});
  const auto m = layout<nhwc>::strided({2, 3, 4, 5}, big.strides());
  EXPECT_FALSE(m.is_packed());
  for_each_coord<4>({2, 3, 4, 5}, [&](const auto& c) {
    auto cb = c;
    cb[1] += 2;
    EXPECT_EQ(m(c) + 2, big(cb));
  });
  EXPECT_EQ(m.required_span_size(), 1 * 160 + 2 * 1 + 3 * 40 + 4 * 8 + 1);
}

TEST(Layout, StridedRejectsWrongOrderOverlapAndNonUnitInner) {
  const std::array<std::int64_t, 4> e{2, 3, 4, 5};
  // NCHW strides read as NHWC: the innermost (C) stride is 20, not 1.
  EXPECT_THROW(layout<nhwc>::strided(e, layout<nchw>::packed(e).strides()), memfmt::error);
  // Overlap: H stride smaller than W extent * W stride.
  EXPECT_THROW(layout<nchw>::strided(e, {60, 20, 4, 1}), memfmt::error);
  // Negative size.
  EXPECT_THROW(layout<nchw>::strided({2, -1, 4, 5}, {20, 20, 5, 1}), memfmt::error);
  try {
    (void)layout<nhwc>::strided(e, {60, 20, 5, 1});
    FAIL() << "expected memfmt::error";
  } catch (const memfmt::error& err) {
    EXPECT_EQ(err.code(), memfmt::errc::format_mismatch);
    const std::string msg = err.what();
    EXPECT_NE(msg.find("[2, 3, 4, 5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[60, 20, 5, 1]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nhwc"), std::string::npos) << msg;
  }
}

TEST(Layout, StridedIgnoresStridesOfSizeOneDims) {
  // Like PyTorch, a size-1 dimension's stride does not matter: N1HW with a junk C stride is NCHW-dense.
  const auto m = layout<nchw>::strided({2, 1, 4, 5}, {20, 777, 5, 1});
  EXPECT_TRUE(m.is_packed());
  EXPECT_EQ(m, layout<nchw>::packed({2, 1, 4, 5}));
}

TEST(TensorView, IndexesThroughLayoutAndConvertsToConstOnly) {
  memfmt::host_tensor<float, nhwc> t({2, 3, 4, 5});
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(i);
  memfmt::nhwc_view<float> v = t;  // owning -> view of the same format: implicit
  memfmt::nhwc_view<const float> cv = v;
  EXPECT_EQ(cv.batch(), 2);
  EXPECT_EQ(cv.channels(), 3);
  EXPECT_EQ(cv.spatial(0), 4);
  EXPECT_EQ(cv.spatial(1), 5);
  EXPECT_EQ(cv.spatial_numel(), 20);
  EXPECT_EQ(cv(1, 2, 3, 4), static_cast<float>(60 + 2 + 3 * 15 + 4 * 3));
  v(0, 1, 0, 0) = -1.f;
  EXPECT_EQ(t.data()[1], -1.f);
  EXPECT_EQ(cv.span_bytes(), 120 * sizeof(float));
  static_assert(!std::is_convertible_v<memfmt::nhwc_view<float>, memfmt::nchw_view<float>>);
  static_assert(!std::is_convertible_v<memfmt::nhwc_view<const float>, memfmt::nhwc_view<float>>);
}

TEST(HostTensor, ZeroedAlignedMoveOnlyAndCloneIsDeep) {
  memfmt::host_tensor<double, ndhwc> t({1, 2, 3, 4, 5});
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % 64, 0u);
  EXPECT_TRUE(std::all_of(t.data(), t.data() + t.numel(), [](double x) { return x == 0.0; }));
  t(0, 1, 2, 3, 4) = 7.0;
  auto u = t.clone();
  u(0, 1, 2, 3, 4) = 8.0;
  EXPECT_EQ(t(0, 1, 2, 3, 4), 7.0);
  auto moved = std::move(u);
  EXPECT_EQ(moved(0, 1, 2, 3, 4), 8.0);
  static_assert(!std::is_copy_constructible_v<memfmt::host_tensor<float, nchw>>);
  memfmt::host_tensor<float, nchw> empty({0, 3, 4, 5});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.data(), nullptr);
}

TEST(HostTensor, OverflowAndNegativeSizesAreErrors) {
  const std::int64_t big = std::int64_t{1} << 40;
  try {
    memfmt::host_tensor<float, nchw> t({big, big, 2, 2});
    FAIL();
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), memfmt::errc::overflow);
    EXPECT_NE(std::string(e.what()).find(std::to_string(big)), std::string::npos);
  }
  EXPECT_THROW((memfmt::host_tensor<float, nchw>({1, -2, 2, 2})), memfmt::error);
}

// Extents whose dense strides do not fit are refused before anything is computed from them (under
// UBSan, a product formed first would be reported even though the constructor then throws).
TEST(HostTensor, ExtentsPastTheDenseStrideLimitAreRefusedFirst) {
  const std::int64_t q = std::int64_t{1} << 62;
  try {
    memfmt::host_tensor<float, nchw> t({q, q, 4, 4});
    FAIL();
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), memfmt::errc::overflow);
    EXPECT_NE(std::string(e.what()).find("[4611686018427387904, 4611686018427387904, 4, 4]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((memfmt::host_tensor<float, nhwc>({0, q, q, 1})), memfmt::error);
  EXPECT_THROW((layout<nchw>::packed_checked({0, q, q, q}, "test")), memfmt::error);
  const auto ok = layout<nchw>::packed_checked({0, 3, 4, 5}, "test");
  EXPECT_EQ(ok, layout<nchw>::packed({0, 3, 4, 5}));
}

// The checked factory refuses strides whose span does not fit, so required_span_size() and
// numel() of what it returns always fit (it used to accept these and answer a negative span).
TEST(Layout, StridedRefusesSpansPast64Bits) {
  const std::int64_t max = INT64_MAX, q = std::int64_t{1} << 62;
  try {
    layout<nchw>::strided({3, 3, 3, 4}, {max, q, 4, 1});
    FAIL();
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), memfmt::errc::overflow);
    const std::string m = e.what();
    EXPECT_NE(m.find("[3, 3, 3, 4]"), std::string::npos) << m;
    EXPECT_NE(m.find("[9223372036854775807, 4611686018427387904, 4, 1]"), std::string::npos) << m;
  }
  EXPECT_THROW(layout<nhwc>::strided({2, 4, 2, q}, {0, 1, 0, 4}), memfmt::error);
  // At the edge: a span of exactly 2^62 + 1 elements is fine and computed exactly.
  const auto m = layout<nchw>::strided({2, 1, 1, 1}, {q, 1, 1, 1});
  EXPECT_EQ(m.required_span_size(), q + 1);
  EXPECT_EQ(m.numel(), 2);
  // relabel goes through the same factory.
  memfmt::nchw_view<float> padded(nullptr, layout<nchw>::strided({2, 1, 1, 3}, {q, 3, 3, 1}));
  EXPECT_EQ(memfmt::relabel<nhwc>(padded).stride(0), q);
}

// relabel: zero-copy exactly when every element keeps its address.
template <class From, class To>
void expect_same_addresses(const typename layout<From>::extents_type& e) {
  memfmt::host_tensor<int, From> t(e);
  auto v = t.view();
  auto r = memfmt::relabel<To>(v);
  EXPECT_EQ(r.data(), v.data());
  for_each_coord(e, [&](const auto& c) { EXPECT_EQ(&r(c), &v(c)); });
}

TEST(Relabel, AmbiguousShapesAreZeroCopy) {
  expect_same_addresses<nchw, nhwc>({2, 1, 4, 5});  // N1HW
  expect_same_addresses<nhwc, nchw>({2, 1, 4, 5});
  expect_same_addresses<nchw, nhwc>({2, 7, 1, 1});  // NC11
  expect_same_addresses<nhwc, nchw>({2, 7, 1, 1});
  expect_same_addresses<nchw, nhwc>({1, 1, 1, 1});  // N111
  expect_same_addresses<ncdhw, ndhwc>({2, 1, 2, 3, 4});
  expect_same_addresses<ndhwc, ncdhw>({2, 5, 1, 1, 1});
  memfmt::host_tensor<float, nchw> empty({0, 3, 4, 5});
  EXPECT_EQ(memfmt::relabel<nhwc>(empty.view()).numel(), 0);
}

TEST(Relabel, RejectsUnambiguousShapesAndPaddedUnitDim) {
  memfmt::host_tensor<float, nchw> t({2, 3, 4, 5});
  EXPECT_THROW(memfmt::relabel<nhwc>(t.view()), memfmt::error);
  // C == 1 but the NHWC view is a channel slice of a wider buffer: W's stride is 8, so in NCHW
  // terms the innermost stride is not 1 and the bytes differ.
  memfmt::host_tensor<float, nhwc> wide({2, 8, 4, 5});
  memfmt::nhwc_view<float> slice(wide.data() + 3, layout<nhwc>::strided({2, 1, 4, 5}, wide.mapping().strides()));
  EXPECT_THROW(memfmt::relabel<nchw>(slice), memfmt::error);
}

}  // namespace
