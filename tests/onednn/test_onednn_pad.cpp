// Spatial padding on the oneDNN backend (memfmt's CPU kernels, cpu/pad.hpp) against the reference
// backend: the forward only moves elements, so it must match bit for bit; the backward of reflect
// and replicate sums in float where the reference sums in double, so it matches within rounding.
#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <memfmt/backends/cpu/pad.hpp>
#include <memfmt/backends/onednn/backend.hpp>
#include <memfmt/backends/reference/pad.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "../common/coords.hpp"
#include "../common/expect_error.hpp"
#include "onednn_test_util.hpp"

namespace {

using namespace memfmt;
using onednn_test::all_close;
using onednn_test::fill;

// Every element of got has the bits of the same logical element of want.
template <class T, class F1, class F2>
::testing::AssertionResult same_bits(tensor_view<const T, F1> got, tensor_view<const T, F2> want) {
  if (got.extents() != want.extents()) return ::testing::AssertionFailure() << "extents differ";
  std::int64_t bad = 0;
  std::ostringstream first;
  memfmt_test::for_each_coord(got.extents(), [&](const typename layout<F1>::extents_type& c) {
    const T g = got(c), w = want(c);
    if (std::memcmp(&g, &w, sizeof(T)) != 0 && bad++ == 0)
      first << "first at " << memfmt::detail::dims_to_string(c) << ": got " << onednn_test::to_d(g) << ", want "
            << onednn_test::to_d(w);
  });
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " elements differ; " << first.str();
}

std::string describe(const pad_params& p) {
  const char* mode = p.mode == pad_mode::constant ? "constant" : p.mode == pad_mode::reflect ? "reflect" : "replicate";
  return std::string(mode) + " begin " + memfmt::detail::dims_to_string(p.begin) + " end " +
         memfmt::detail::dims_to_string(p.end);
}

// Forward and backward of x (format XF, sizes e) padded into y (format YF) by p, through the
// oneDNN backend and the reference.
template <class T, class XF, class YF>
void check_pad(onednn::backend& b, const typename layout<XF>::extents_type& e, const pad_params& p) {
  SCOPED_TRACE(std::string(XF::name) + " -> " + YF::name + " " + std::string(to_string(dtype_of_v<T>)) + " sizes " +
               memfmt::detail::dims_to_string(e) + " " + describe(p));
  const auto ye = pad_output_extents(e, p);
  host_tensor<T, XF> x(e), dx(e), dx_ref(e);
  host_tensor<T, YF> y(ye), y_ref(ye), dy(ye);
  fill(x, 61, -3.f, 3.f);
  fill(dy, 62);
  fill(y, 63);  // stale values the kernel must overwrite
  b.pad_forward<T>(x.const_view(), y.view(), p);
  reference::pad_forward<T, XF, YF>(x.const_view(), y_ref.view(), p);
  EXPECT_TRUE(same_bits<T>(y.const_view(), y_ref.const_view())) << "forward";

  fill(dx, 64);
  b.pad_backward<T>(dy.const_view(), dx.view(), p);
  reference::pad_backward<T, YF, XF>(dy.const_view(), dx_ref.view(), p);
  if (p.mode == pad_mode::constant) {
    EXPECT_TRUE(same_bits<T>(dx.const_view(), dx_ref.const_view())) << "backward (a crop)";
  } else {
    // At most (max side + 1) terms per dim reach one input element.
    std::int64_t terms = 1;
    for (int i = 0; i < XF::rank - 2; ++i) terms *= 1 + std::max(p.begin[i], p.end[i]);
    EXPECT_TRUE(all_close<T>(dx.const_view(), dx_ref.const_view(), static_cast<double>(terms))) << "backward";
  }
}

pad_params make(pad_mode mode, spatial3 begin, spatial3 end, double value = 0.0) {
  pad_params p;
  p.mode = mode;
  p.begin = begin;
  p.end = end;
  p.value = value;
  return p;
}

// The cases of one rank: odd sizes, asymmetric pads, zero pads, pads past 1 (past the extent where
// the mode allows it), no samples or no channels.
template <class T, class XF, class YF>
void check_all_modes(onednn::backend& b) {
  for (const pad_mode mode : {pad_mode::constant, pad_mode::reflect, pad_mode::replicate}) {
    const bool reflect = mode == pad_mode::reflect;
    if constexpr (XF::rank == 4) {
      check_pad<T, XF, YF>(b, {2, 3, 5, 7}, make(mode, {2, 1, 0}, {0, 3, 0}, -1.5));
      check_pad<T, XF, YF>(b, {1, 5, 3, 4}, make(mode, {0, 0, 0}, {0, 0, 0}));
      check_pad<T, XF, YF>(b, {0, 3, 2, 2}, make(mode, {1, 1, 0}, {1, 0, 0}));  // no samples
      check_pad<T, XF, YF>(b, {2, 0, 2, 2}, make(mode, {1, 1, 0}, {0, 1, 0}));  // no channels
      check_pad<T, XF, YF>(b, {2, 1, 4, 3},
                           make(mode, reflect ? spatial3{3, 2, 0} : spatial3{6, 0, 0},
                                reflect ? spatial3{1, 0, 0} : spatial3{2, 5, 0}, 0.1));
    } else {
      check_pad<T, XF, YF>(b, {2, 3, 4, 5, 3}, make(mode, {1, 0, 2}, {2, 3, 0}, 2.0));
      check_pad<T, XF, YF>(b, {1, 2, 3, 3, 5}, make(mode, {0, 0, 0}, {0, 0, 0}));
      check_pad<T, XF, YF>(
          b, {1, 3, 3, 2, 4},
          make(mode, reflect ? spatial3{2, 1, 3} : spatial3{4, 3, 0}, reflect ? spatial3{0, 1, 2} : spatial3{0, 2, 5}));
    }
  }
}

template <class T>
void check_type() {
  // Pad moves elements only: bfloat16 runs even where oneDNN cannot compute in it.
  onednn::backend b;
  check_all_modes<T, nchw, nchw>(b);
  check_all_modes<T, nchw, nhwc>(b);
  check_all_modes<T, nhwc, nchw>(b);
  check_all_modes<T, nhwc, nhwc>(b);
  check_all_modes<T, ncdhw, ncdhw>(b);
  check_all_modes<T, ncdhw, ndhwc>(b);
  check_all_modes<T, ndhwc, ncdhw>(b);
  check_all_modes<T, ndhwc, ndhwc>(b);
}

TEST(OnednnPad, FloatEveryModeFormatAndRankMatchesReference) { check_type<float>(); }
TEST(OnednnPad, Bfloat16EveryModeFormatAndRankMatchesReference) { check_type<bfloat16>(); }

// Enough rows and elements for the rows to be shared out among threads (when built with OpenMP).
TEST(OnednnPad, LargeTensorsMatchReference) {
  onednn::backend b;
  for (const pad_mode mode : {pad_mode::constant, pad_mode::reflect, pad_mode::replicate}) {
    const pad_params p = make(mode, {3, 2, 0}, {1, 4, 0}, 0.5);
    check_pad<float, nchw, nchw>(b, {4, 24, 13, 17}, p);
    check_pad<float, nhwc, nhwc>(b, {4, 24, 13, 17}, p);
    check_pad<bfloat16, nhwc, nhwc>(b, {3, 32, 11, 9}, p);
    check_pad<float, ndhwc, ndhwc>(b, {2, 16, 5, 7, 9}, make(mode, {1, 2, 3}, {2, 0, 1}));
  }
}

// Padded (sliced) layouts: the kernels copy runs one by one instead of whole rows.
template <class XF, class YF>
void check_strided(const typename layout<XF>::extents_type& e, const pad_params& p) {
  SCOPED_TRACE(std::string(XF::name) + " -> " + YF::name + " strided " + describe(p));
  const auto ye = pad_output_extents(e, p);
  const auto xl = memfmt_test::padded_layout<XF>(e, 3);
  const auto yl = memfmt_test::padded_layout<YF>(ye, 2);
  std::vector<float> xb(static_cast<std::size_t>(xl.required_span_size())), dxb(xb.size()),
      yb(static_cast<std::size_t>(yl.required_span_size())), dyb(yb.size());
  fill(xb.data(), static_cast<std::int64_t>(xb.size()), 71);
  fill(dyb.data(), static_cast<std::int64_t>(dyb.size()), 72);
  const tensor_view<float, XF> x(xb.data(), xl), dx(dxb.data(), xl);
  const tensor_view<float, YF> y(yb.data(), yl), dy(dyb.data(), yl);
  host_tensor<float, XF> dx_ref(e);
  host_tensor<float, YF> y_ref(ye);
  cpu::pad_forward<float, XF, YF>(x, y, p);
  reference::pad_forward<float, XF, YF>(x, y_ref.view(), p);
  EXPECT_TRUE(same_bits<float>(tensor_view<const float, YF>(y), y_ref.const_view())) << "forward";
  cpu::pad_backward<float, YF, XF>(dy, dx, p);
  reference::pad_backward<float, YF, XF>(dy, dx_ref.view(), p);
  EXPECT_TRUE(all_close<float>(tensor_view<const float, XF>(dx), dx_ref.const_view(), 9.0)) << "backward";
}

TEST(OnednnPad, StridedLayoutsMatchReference) {
  for (const pad_mode mode : {pad_mode::constant, pad_mode::reflect, pad_mode::replicate}) {
    const pad_params p = make(mode, {2, 1, 0}, {1, 2, 0}, 3.0);
    check_strided<nchw, nchw>({2, 3, 4, 5}, p);
    check_strided<nhwc, nhwc>({2, 3, 4, 5}, p);
    check_strided<nhwc, nchw>({2, 3, 4, 5}, p);
    check_strided<ndhwc, ndhwc>({1, 3, 3, 4, 5}, make(mode, {1, 2, 1}, {2, 1, 2}));
  }
}

// Bad arguments: the same code and message as the reference.
TEST(OnednnPad, ErrorsMatchReference) {
  onednn::backend b;
  auto same_error = [](auto&& ours, auto&& ref, errc code) {
    const std::string want = memfmt_test::error_message(ref, code);
    EXPECT_EQ(memfmt_test::error_message(ours, code), want);
  };
  host_tensor<float, nhwc> x({1, 2, 3, 4}), y({1, 2, 6, 4}), y_bad({1, 2, 5, 4});
  const pad_params reflect = make(pad_mode::reflect, {3, 0, 0}, {0, 0, 0});  // 3 >= H = 3
  same_error([&] { b.pad_forward<float>(x.const_view(), y.view(), reflect); },
             [&] { reference::pad_forward<float, nhwc, nhwc>(x.const_view(), y.view(), reflect); },
             errc::invalid_argument);
  same_error([&] { b.pad_backward<float>(y.const_view(), x.view(), reflect); },
             [&] { reference::pad_backward<float, nhwc, nhwc>(y.const_view(), x.view(), reflect); },
             errc::invalid_argument);
  const pad_params constant = make(pad_mode::constant, {3, 0, 0}, {0, 0, 0});
  same_error([&] { b.pad_forward<float>(x.const_view(), y_bad.view(), constant); },
             [&] { reference::pad_forward<float, nhwc, nhwc>(x.const_view(), y_bad.view(), constant); },
             errc::shape_mismatch);
  same_error([&] { b.pad_backward<float>(y_bad.const_view(), x.view(), constant); },
             [&] { reference::pad_backward<float, nhwc, nhwc>(y_bad.const_view(), x.view(), constant); },
             errc::shape_mismatch);
  // Element types other than float and bfloat16 are refused as by every oneDNN layer.
  host_tensor<double, nhwc> xd({1, 2, 3, 4}), yd({1, 2, 6, 4});
  memfmt_test::expect_error([&] { b.pad_forward<double>(xd.const_view(), yd.view(), constant); },
                            errc::unsupported_dtype, {"onednn::pad_forward", "float64"});
}

TEST(OnednnPad, SupportAnswersYes) {
  onednn::backend b;
  op_query q;
  q.op = layer_kind::pad;
  q.type = dtype::float32;
  q.format = format_family::channels_last;
  q.rank = 5;
  q.padding = pad_mode::reflect;
  q.backward = true;
  EXPECT_TRUE(b.support(q).supported) << b.support(q).reason;
}

}  // namespace
