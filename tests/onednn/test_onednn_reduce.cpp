// oneDNN backend reductions (memfmt's CPU kernel, backends/cpu/reduce.hpp) vs the reference
// backend: every reduction forward and backward over C, spatial axes and both, 2-D and 3-D, both
// formats (the kernel's two loop orders) and mixed ones, padded views, float and bfloat16, rows
// longer than the kernel's block, NaN and ties, the same bits for any thread count, and errors.
#include <memfmt/backends/cpu/reduce.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <memfmt/backends/onednn/backend.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "../common/coords.hpp"
#include "../common/expect_error.hpp"
#include "onednn_test_util.hpp"

namespace {

using namespace memfmt;
using memfmt_test::for_each_coord;
using onednn_test::all_close;
using onednn_test::fill;

template <class F>
using ext = typename layout<F>::extents_type;

constexpr std::uint32_t c_axis = channel_axis_bit;

// Masks of the spatial axes of a rank: [2, 3] or [2, 3, 4].
constexpr std::uint32_t spatial_axes(int rank) { return ((1u << rank) - 1) & ~3u; }

std::vector<reduce_op> all_ops() {
  std::vector<reduce_op> ops;
  for (int k = 0; k < reduce_op_count; ++k) ops.push_back(static_cast<reduce_op>(k));
  return ops;
}

// Both backends sum in double and round once, so the tolerance is that of a reduction of `count`
// values stored in T; l2's gradient divides by y, which is at least |x_i|.
template <class T, class XF, class YF>
void check_reduce(onednn::backend& b, const ext<XF>& e, std::uint32_t axes, reduce_op op) {
  const reduce_params p{op, axes};
  SCOPED_TRACE(std::string(XF::name) + " -> " + std::string(YF::name) + " " + std::string(to_string(dtype_of_v<T>)) +
               " " + to_string(op) + " over " + axes_to_string(axes) + " sizes " + memfmt::detail::dims_to_string(e));
  const auto ye = reduce_output_extents(e, p);
  double count = 1.0;
  for (int d = 1; d < XF::rank; ++d)
    if (axes & axis_bit(d)) count *= static_cast<double>(e[static_cast<std::size_t>(d)]);
  host_tensor<T, XF> x(e), dx(e), dx_ref(e);
  host_tensor<T, YF> y(ye), y_ref(ye), dy(ye);
  fill(x, 81, -2.f, 3.f);
  fill(dy, 82);
  reference::reduce_forward<T, XF, YF>(x.const_view(), y_ref.view(), p);
  b.reduce_forward(x.const_view(), y.view(), p);
  const double magnitude = op == reduce_op::sum_square ? 9.0 : 3.0;
  EXPECT_TRUE(all_close<T>(y.const_view(), y_ref.const_view(), count, magnitude)) << "y";
  reference::reduce_backward<T, XF, YF, YF, XF>(x.const_view(), y_ref.const_view(), dy.const_view(), dx_ref.view(), p);
  b.reduce_backward(x.const_view(), y_ref.const_view(), dy.const_view(), dx.view(), p);
  EXPECT_TRUE(all_close<T>(dx.const_view(), dx_ref.const_view(), 1.0, 6.0)) << "dx";
}

template <class T>
void run_grid() {
  onednn::backend b;
  for (reduce_op op : all_ops()) {
    for (std::uint32_t axes : {c_axis, spatial_axes(4), axis_bit(2), axis_bit(3), c_axis | axis_bit(3), 14u}) {
      // Small odd shapes; both dense layouts and the mixed ones.
      check_reduce<T, nchw, nchw>(b, {2, 6, 3, 5}, axes, op);
      check_reduce<T, nhwc, nhwc>(b, {2, 6, 3, 5}, axes, op);
      check_reduce<T, nchw, nhwc>(b, {2, 6, 3, 5}, axes, op);
      check_reduce<T, nhwc, nchw>(b, {2, 6, 3, 5}, axes, op);
      // Rows longer than the kernel's block and a remainder (channels-first over C, channels-last
      // over spatial axes); C = 1 and an extent-1 spatial axis, whose reduction is no reduction.
      check_reduce<T, nchw, nchw>(b, {3, 5, 13, 27}, axes, op);
      check_reduce<T, nhwc, nhwc>(b, {2, 300, 3, 2}, axes, op);
      check_reduce<T, nhwc, nhwc>(b, {2, 1, 4, 3}, axes, op);
      check_reduce<T, nchw, nchw>(b, {2, 3, 1, 3}, axes, op);
    }
    for (std::uint32_t axes : {c_axis, spatial_axes(5), axis_bit(2), axis_bit(4), c_axis | axis_bit(3), 30u}) {
      check_reduce<T, ncdhw, ncdhw>(b, {2, 4, 3, 2, 3}, axes, op);
      check_reduce<T, ndhwc, ndhwc>(b, {2, 4, 3, 2, 3}, axes, op);
      check_reduce<T, ndhwc, ncdhw>(b, {1, 8, 6, 8, 16}, axes, op);
    }
  }
}

// Padded views on every side: the kernel walks any strides (the padding of dx keeps its value).
template <class XF, class YF>
void check_padded(const ext<XF>& e, std::uint32_t axes, reduce_op op) {
  const reduce_params p{op, axes};
  SCOPED_TRACE(std::string(XF::name) + " -> " + YF::name + " padded, " + to_string(op) + " over " +
               axes_to_string(axes));
  onednn::backend b;
  const auto ye = reduce_output_extents(e, p);
  const auto xl = memfmt_test::padded_layout<XF>(e, 3);
  const auto yl = memfmt_test::padded_layout<YF>(ye, 2);
  std::vector<float> xb(static_cast<std::size_t>(xl.required_span_size())), dxb(xb.size(), 7.f),
      yb(static_cast<std::size_t>(yl.required_span_size())), dyb(yb.size());
  fill(xb.data(), static_cast<std::int64_t>(xb.size()), 41);
  fill(dyb.data(), static_cast<std::int64_t>(dyb.size()), 42);
  const tensor_view<const float, XF> x(xb.data(), xl);
  const tensor_view<float, XF> dx(dxb.data(), xl);
  const tensor_view<float, YF> y(yb.data(), yl);
  const tensor_view<const float, YF> dy(dyb.data(), yl);
  host_tensor<float, YF> y_ref(ye);
  host_tensor<float, XF> dx_ref(e);
  b.reduce_forward(x, y, p);
  reference::reduce_forward<float, XF, YF>(x, y_ref.view(), p);
  EXPECT_TRUE(all_close<float>(tensor_view<const float, YF>(y), y_ref.const_view(), 30.0, 3.0)) << "forward";
  b.reduce_backward(x, tensor_view<const float, YF>(y), dy, dx, p);
  reference::reduce_backward<float, XF, YF, YF, XF>(x, tensor_view<const float, YF>(y), dy, dx_ref.view(), p);
  EXPECT_TRUE(all_close<float>(tensor_view<const float, XF>(dx), dx_ref.const_view(), 1.0, 6.0)) << "backward";
  std::vector<bool> element(dxb.size(), false);
  for_each_coord(e, [&](const auto& c) { element[static_cast<std::size_t>(xl(c))] = true; });
  for (std::size_t i = 0; i < dxb.size(); ++i) {
    if (!element[i]) {
      ASSERT_EQ(dxb[i], 7.f) << "padding at " << i;
    }
  }
}

TEST(OnednnReduce, PaddedViewsMatchReference) {
  for (reduce_op op : all_ops()) {
    check_padded<nchw, nchw>({2, 5, 6, 5}, c_axis, op);
    check_padded<nhwc, nhwc>({2, 5, 6, 5}, spatial_axes(4), op);
    check_padded<nhwc, nchw>({2, 5, 6, 5}, c_axis | axis_bit(2), op);
  }
}

TEST(OnednnReduce, SupportSaysYes) {
  const onednn::backend b;
  for (int rank : {4, 5}) {
    op_query q;
    q.op = layer_kind::reduce;
    q.type = dtype::float32;
    q.rank = rank;
    q.backward = true;
    EXPECT_TRUE(b.support(q).supported) << b.support(q).reason;
  }
}

TEST(OnednnReduce, GridFloat) { run_grid<float>(); }

TEST(OnednnReduce, GridBfloat16) {
  onednn::backend b;
  host_tensor<bfloat16, nhwc> x({2, 4, 2, 2}), y({2, 1, 2, 2});
  const std::string unsupported = onednn_test::refused_on_this_cpu<bfloat16>(
      "onednn::reduce_forward", [&] { b.reduce_forward(x.const_view(), y.view(), reduce_params{}); });
  if (!unsupported.empty()) GTEST_SKIP() << unsupported;
  run_grid<bfloat16>();
}

// A NaN wins max and min in both loop orders (PyTorch's amax / amin); equal maxima share the
// gradient equally (torch.amax's rule), so the shares add up to dy.
template <class F>
void nan_and_ties() {
  onednn::backend b;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  host_tensor<float, F> x({1, 4, 1, 2}), y({1, 1, 1, 2}), dy({1, 1, 1, 2}), dx({1, 4, 1, 2});
  const float column0[] = {1.f, static_cast<float>(nan), 5.f, -2.f}, column1[] = {3.f, -1.f, 3.f, 0.5f};
  for (std::int64_t c = 0; c < 4; ++c) {
    x.view()(ext<F>{0, c, 0, 0}) = column0[c];
    x.view()(ext<F>{0, c, 0, 1}) = column1[c];
  }
  for (reduce_op op : {reduce_op::max, reduce_op::min}) {
    b.reduce_forward(x.const_view(), y.view(), reduce_params{op});
    EXPECT_TRUE(std::isnan(y.view()(ext<F>{0, 0, 0, 0}))) << to_string(op);
  }
  b.reduce_forward(x.const_view(), y.view(), reduce_params{reduce_op::max});
  EXPECT_EQ(y.view()(ext<F>{0, 0, 0, 1}), 3.f);
  dy.view()(ext<F>{0, 0, 0, 1}) = 1.f;
  b.reduce_backward(x.const_view(), y.const_view(), dy.const_view(), dx.view(), reduce_params{reduce_op::max});
  const float want[] = {0.5f, 0.f, 0.5f, 0.f};
  for (std::int64_t c = 0; c < 4; ++c) EXPECT_EQ(dx.view()(ext<F>{0, c, 0, 1}), want[c]) << "channel " << c;
}

TEST(OnednnReduce, NanWinsAndTiesShare) {
  nan_and_ties<nchw>();
  nan_and_ties<nhwc>();
}

// Each output is computed by one thread in a fixed order: 1, 2 and 7 threads give the same bits.
template <class F>
std::vector<float> reduce_results() {
  const ext<F> e{3, 12, 24, 40};
  host_tensor<float, F> x(e), dx(e);
  fill(x, 91);
  std::vector<float> out;
  for (const std::uint32_t axes : {c_axis, spatial_axes(4), axis_bit(3), c_axis | axis_bit(2)})
    for (reduce_op op : all_ops()) {
      const reduce_params p{op, axes};
      host_tensor<float, F> y(reduce_output_extents(e, p)), dy(reduce_output_extents(e, p));
      fill(dy, 92);
      cpu::reduce_forward(x.const_view(), y.view(), p);
      cpu::reduce_backward(x.const_view(), y.const_view(), dy.const_view(), dx.view(), p);
      out.insert(out.end(), y.data(), y.data() + y.numel());
      out.insert(out.end(), dx.data(), dx.data() + dx.numel());
    }
  return out;
}

TEST(OnednnReduce, SameBitsForAnyThreadCount) {
  onednn_test::expect_same_bits_for_any_thread_count(reduce_results<nchw>, "nchw");
  onednn_test::expect_same_bits_for_any_thread_count(reduce_results<nhwc>, "nhwc");
}

TEST(OnednnReduce, EmptyBatch) {
  onednn::backend b;
  const host_tensor<float, nhwc> x({0, 4, 3, 3}), dy({0, 1, 3, 3});
  host_tensor<float, nhwc> y({0, 1, 3, 3}), dx({0, 4, 3, 3});
  EXPECT_NO_THROW(b.reduce_forward(x.const_view(), y.view(), reduce_params{reduce_op::max}));
  EXPECT_NO_THROW(
      b.reduce_backward(x.const_view(), y.const_view(), dy.const_view(), dx.view(), reduce_params{reduce_op::max}));
}

TEST(OnednnReduce, Errors) {
  onednn::backend b;
  host_tensor<float, nhwc> x({2, 6, 2, 2}), y({2, 1, 2, 2}), y_bad({2, 6, 2, 2}), dx_bad({2, 6, 2, 1}),
      none({2, 0, 2, 2});
  memfmt_test::expect_error([&] { b.reduce_forward(x.const_view(), y_bad.view(), reduce_params{}); },
                            errc::shape_mismatch, {"reduce_forward", "output y"});
  memfmt_test::expect_error([&] { b.reduce_forward(none.const_view(), y.view(), reduce_params{}); },
                            errc::invalid_argument, {"reduce over axes [1]", "axis 1 has no values", "[2, 0, 2, 2]"});
  for (const std::uint32_t axes : {0u, axis_bit(0) | c_axis, axis_bit(4)})
    memfmt_test::expect_error(
        [&] {
          b.reduce_forward(x.const_view(), y.view(), reduce_params{reduce_op::sum, axes});
        },
        errc::invalid_argument, {"reduce over axes " + axes_to_string(axes), "spatial axes (2 to 3)"});
  memfmt_test::expect_error(
      [&] { b.reduce_forward(x.const_view(), y.view(), reduce_params{static_cast<reduce_op>(9)}); },
      errc::invalid_argument, {"reduce_forward", "unknown reduction 9"});
  memfmt_test::expect_error(
      [&] { b.reduce_backward(x.const_view(), y.const_view(), y.const_view(), dx_bad.view(), reduce_params{}); },
      errc::shape_mismatch, {"reduce_backward", "input gradient dx"});
  memfmt_test::expect_error(
      [&] {
        host_tensor<double, nhwc> xd({1, 2, 1, 1}), yd({1, 1, 1, 1});
        b.reduce_forward(xd.const_view(), yd.view(), reduce_params{});
      },
      errc::unsupported_dtype, {"onednn::reduce_forward", "float64"});
}

}  // namespace
