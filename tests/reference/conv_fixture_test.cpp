// The reference convolution against PyTorch (float64) fixtures, for every element type and several
// format combinations. The fixture inputs are exact in every type and their products and sums are
// exact in double, so the PyTorch results are exact: a backend that accumulates in double and
// rounds once must land within half an ulp of T.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fixtures.hpp"
#include "memfmt/backends/reference/backend.hpp"

namespace {

using namespace memfmt;
using namespace memfmt::testing;

template <int SpatialRank>
conv_params params_of(const fixture_case& fc) {
  conv_params p;
  for (int i = 0; i < SpatialRank; ++i) {
    p.stride[i] = fc.integer("stride" + std::to_string(i));
    p.padding[i] = fc.integer("padding" + std::to_string(i));
    p.dilation[i] = fc.integer("dilation" + std::to_string(i));
  }
  p.groups = fc.integer("groups");
  return p;
}

constexpr double half_ulp = 0.5;  // correct rounding of an exact result

template <class T, class XF, class WF, class YF, class Backend = reference::backend>
void check_conv_case(const fixture_case& fc) {
  SCOPED_TRACE(fc.name + " x=" + XF::name + " w=" + WF::name + " y=" + YF::name);
  constexpr int rank = XF::rank;
  const conv_params p = params_of<rank - 2>(fc);
  const bool bias = fc.integer("bias") != 0;
  const auto x = to_tensor<T, XF>(fc.tensor("x"));
  const auto w = to_tensor<T, WF>(fc.tensor("w"));
  const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
  const std::vector<T> b = bias ? to_vector<T>(fc.tensor("b")) : std::vector<T>{};
  Backend be;

  auto y = nan_tensor<T, YF>(to_extents<rank>(fc.tensor("y")));
  be.template conv_forward<T>(x.const_view(), w.const_view(), bias ? b.data() : nullptr, y.view(), p);
  expect_tensor_close("y", y, fc.tensor("y"), half_ulp, 0.0);

  auto dx = nan_tensor<T, XF>(x.extents());
  be.template conv_backward_data<T>(dy.const_view(), w.const_view(), dx.view(), p);
  expect_tensor_close("dx", dx, fc.tensor("dx"), half_ulp, 0.0);

  auto dw = nan_tensor<T, WF>(w.extents());
  std::vector<T> db(static_cast<std::size_t>(w.extent(0)), T(std::numeric_limits<float>::quiet_NaN()));
  be.template conv_backward_weights<T>(x.const_view(), dy.const_view(), dw.view(), bias ? db.data() : nullptr, p);
  expect_tensor_close("dw", dw, fc.tensor("dw"), half_ulp, 0.0);
  if (bias) {
    expect_close(
        std::string("db (") + float_traits<T>::name + ")", static_cast<std::int64_t>(db.size()),
        [&](std::int64_t i) { return to_f64(db[static_cast<std::size_t>(i)]); }, fc.tensor("db").data,
        [](std::int64_t, double v) { return half_ulp * ulp<T>(v); });
  }
}

template <class T>
class ReferenceConvFixtures : public ::testing::Test {};
using ElementTypes = ::testing::Types<double, float, half, bfloat16>;
TYPED_TEST_SUITE(ReferenceConvFixtures, ElementTypes);

TYPED_TEST(ReferenceConvFixtures, Conv2dAllFormatCombinations) {
  using T = TypeParam;
  const auto cases = load_fixtures("conv2d.bin");
  ASSERT_GE(cases.size(), 10u);
  for (const auto& fc : cases) {
    ASSERT_EQ(fc.op, "conv2d");
    check_conv_case<T, nchw, nchw, nchw>(fc);
    check_conv_case<T, nhwc, nhwc, nhwc>(fc);
    check_conv_case<T, nchw, nhwc, nhwc>(fc);
    check_conv_case<T, nhwc, nchw, nchw>(fc);
    if constexpr (std::is_same_v<T, double>) {  // the remaining mixes, once
      check_conv_case<T, nchw, nchw, nhwc>(fc);
      check_conv_case<T, nhwc, nhwc, nchw>(fc);
      check_conv_case<T, nchw, nhwc, nchw>(fc);
      check_conv_case<T, nhwc, nchw, nhwc>(fc);
    }
  }
}

TYPED_TEST(ReferenceConvFixtures, Conv3dBothFormats) {
  using T = TypeParam;
  const auto cases = load_fixtures("conv3d.bin");
  ASSERT_GE(cases.size(), 4u);
  for (const auto& fc : cases) {
    ASSERT_EQ(fc.op, "conv3d");
    check_conv_case<T, ncdhw, ncdhw, ncdhw>(fc);
    check_conv_case<T, ndhwc, ndhwc, ndhwc>(fc);
    check_conv_case<T, ncdhw, ndhwc, ndhwc>(fc);
    check_conv_case<T, ndhwc, ncdhw, ncdhw>(fc);
  }
}

// The fixtures are not trivially satisfied: an all-zero or shifted result would fail them.
TEST(ReferenceConvFixtures, FixturesAreNonTrivial) {
  for (const char* file : {"conv2d.bin", "conv3d.bin"})
    for (const auto& fc : load_fixtures(file)) {
      EXPECT_GT(max_abs(fc.tensor("y").data), 0.5) << fc.name;
      EXPECT_GT(max_abs(fc.tensor("dx").data), 0.5) << fc.name;
      EXPECT_GT(max_abs(fc.tensor("dw").data), 0.5) << fc.name;
    }
}

// Strided (padded) views: the same results when x lives inside a larger buffer with padded rows and
// y has padded channels, and the padding is never written.
TEST(ReferenceConvStrided, PaddedViewsGiveTheFixtureResults) {
  const auto cases = load_fixtures("conv2d.bin");
  const fixture_case* fc = nullptr;
  for (const auto& c : cases)
    if (c.name == "everything") fc = &c;
  ASSERT_NE(fc, nullptr);
  const conv_params p = params_of<2>(*fc);
  const auto xe = to_extents<4>(fc->tensor("x"));
  const auto ye = to_extents<4>(fc->tensor("y"));
  const auto xd = to_tensor<double, nchw>(fc->tensor("x"));
  const auto w = to_tensor<double, nhwc>(fc->tensor("w"));
  const auto b = to_vector<double>(fc->tensor("b"));

  // x: NCHW with W padded by 3 and H padded by 2.
  const std::int64_t wp = xe[3] + 3, hp = xe[2] + 2;
  std::vector<double> xbuf(static_cast<std::size_t>(xe[0] * xe[1] * hp * wp), 1e300);
  const auto xl = layout<nchw>::strided(xe, {xe[1] * hp * wp, hp * wp, wp, 1});
  for_each_coord(
      xe, [&](const auto& c, std::int64_t) { xbuf[static_cast<std::size_t>(xl(c))] = xd(c[0], c[1], c[2], c[3]); });
  // y: NHWC with C padded by 5.
  const std::int64_t cp = ye[1] + 5;
  std::vector<double> ybuf(static_cast<std::size_t>(ye[0] * ye[2] * ye[3] * cp), -7.0);
  const auto yl = layout<nhwc>::strided(ye, {ye[2] * ye[3] * cp, 1, ye[3] * cp, cp});

  reference::conv_forward<double>(tensor_view<const double, nchw>(xbuf.data(), xl), w.const_view(), b.data(),
                                  tensor_view<double, nhwc>(ybuf.data(), yl), p);
  std::vector<double> got(fc->tensor("y").data.size());
  std::vector<bool> is_data(ybuf.size(), false);
  for_each_coord(ye, [&](const auto& c, std::int64_t i) {
    got[static_cast<std::size_t>(i)] = ybuf[static_cast<std::size_t>(yl(c))];
    is_data[static_cast<std::size_t>(yl(c))] = true;
  });
  expect_close(
      "padded y", static_cast<std::int64_t>(got.size()),
      [&](std::int64_t i) { return got[static_cast<std::size_t>(i)]; }, fc->tensor("y").data,
      [](std::int64_t, double) { return 0.0; });
  for (std::size_t i = 0; i < ybuf.size(); ++i) {
    if (!is_data[i]) {
      ASSERT_EQ(ybuf[i], -7.0) << "padding element " << i << " was written";
    }
  }
}

}  // namespace
