// oneDNN backend reductions over C (memfmt's CPU kernel, backends/cpu/channel_reduce.hpp) vs the
// reference backend: every reduction forward and backward, 2-D and 3-D, both formats (the kernel's
// two loop orders) and mixed ones, float and bfloat16, shapes that split into several chunks, NaN
// and ties, the same bits for any thread count, and errors.
#include <memfmt/backends/cpu/channel_reduce.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <memfmt/backends/dnnl/backend.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "../common/expect_error.hpp"
#include "dnnl_test_util.hpp"

namespace {

using namespace memfmt;
using dnnl_test::all_close;
using dnnl_test::fill;

template <class F>
using ext = typename layout<F>::extents_type;

template <class F>
ext<F> reduced(ext<F> e) {
  e[1] = 1;
  return e;
}

std::vector<reduce_op> all_ops() {
  std::vector<reduce_op> ops;
  for (int k = 0; k < reduce_op_count; ++k) ops.push_back(static_cast<reduce_op>(k));
  return ops;
}

// Both backends sum in double and round once, so the tolerance is that of a reduction over C
// stored in T; l2's gradient divides by y, which is at least |x_c|.
template <class T, class XF, class YF>
void check_reduce(onednn::backend& b, const ext<XF>& e, reduce_op op) {
  SCOPED_TRACE(std::string(XF::name) + " -> " + std::string(YF::name) + " " + std::string(to_string(dtype_of_v<T>)) +
               " " + to_string(op) + " sizes " + memfmt::detail::dims_to_string(e));
  const channel_reduce_params p{op};
  const double c = static_cast<double>(e[1]);
  host_tensor<T, XF> x(e), dx(e), dx_ref(e);
  host_tensor<T, YF> y(reduced<XF>(e)), y_ref(reduced<XF>(e)), dy(reduced<XF>(e));
  fill(x, 81, -2.f, 3.f);
  fill(dy, 82);
  reference::channel_reduce_forward<T, XF, YF>(x.const_view(), y_ref.view(), p);
  b.channel_reduce_forward(x.const_view(), y.view(), p);
  const double magnitude = op == reduce_op::sum_square ? 9.0 : 3.0;
  EXPECT_TRUE(all_close<T>(y.const_view(), y_ref.const_view(), c, magnitude)) << "y";
  reference::channel_reduce_backward<T, XF, YF, YF, XF>(x.const_view(), y_ref.const_view(), dy.const_view(),
                                                        dx_ref.view(), p);
  b.channel_reduce_backward(x.const_view(), y_ref.const_view(), dy.const_view(), dx.view(), p);
  EXPECT_TRUE(all_close<T>(dx.const_view(), dx_ref.const_view(), 1.0, 6.0)) << "dx";
}

template <class T>
void run_grid() {
  onednn::backend b;
  for (reduce_op op : all_ops()) {
    // Small odd shapes: one chunk; both dense layouts and the mixed ones.
    check_reduce<T, nchw, nchw>(b, {2, 6, 3, 5}, op);
    check_reduce<T, nhwc, nhwc>(b, {2, 6, 3, 5}, op);
    check_reduce<T, nchw, nhwc>(b, {2, 6, 3, 5}, op);
    check_reduce<T, nhwc, nchw>(b, {2, 6, 3, 5}, op);
    check_reduce<T, ncdhw, ncdhw>(b, {2, 4, 3, 2, 3}, op);
    check_reduce<T, ndhwc, ndhwc>(b, {2, 4, 3, 2, 3}, op);
    // More positions than a chunk, chunks that end inside a sample, channels-first runs of a whole
    // block and a remainder; C = 1.
    check_reduce<T, nchw, nchw>(b, {3, 5, 13, 17}, op);
    check_reduce<T, nhwc, nhwc>(b, {3, 5, 13, 17}, op);
    check_reduce<T, ndhwc, ndhwc>(b, {1, 8, 6, 8, 16}, op);
    check_reduce<T, nhwc, nhwc>(b, {2, 1, 4, 3}, op);
    check_reduce<T, nchw, nchw>(b, {2, 1, 4, 3}, op);
  }
  ASSERT_GT((cpu::channel_vectors::shape{3, 13 * 17, 5}.chunks()), 2);
}

TEST(DnnlChannelReduce, SupportSaysYes) {
  const onednn::backend b;
  for (int rank : {4, 5}) {
    op_query q;
    q.op = op_kind::channel_reduce;
    q.type = dtype::float32;
    q.rank = rank;
    q.backward = true;
    EXPECT_TRUE(b.support(q).supported) << b.support(q).reason;
  }
}

TEST(DnnlChannelReduce, GridFloat) { run_grid<float>(); }

TEST(DnnlChannelReduce, GridBfloat16) {
  onednn::backend b;
  host_tensor<bfloat16, nhwc> x({2, 4, 2, 2}), y({2, 1, 2, 2});
  const std::string unsupported = dnnl_test::refused_on_this_cpu<bfloat16>("onednn::channel_reduce_forward", [&] {
    b.channel_reduce_forward(x.const_view(), y.view(), channel_reduce_params{});
  });
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
    b.channel_reduce_forward(x.const_view(), y.view(), channel_reduce_params{op});
    EXPECT_TRUE(std::isnan(y.view()(ext<F>{0, 0, 0, 0}))) << to_string(op);
  }
  b.channel_reduce_forward(x.const_view(), y.view(), channel_reduce_params{reduce_op::max});
  EXPECT_EQ(y.view()(ext<F>{0, 0, 0, 1}), 3.f);
  dy.view()(ext<F>{0, 0, 0, 1}) = 1.f;
  b.channel_reduce_backward(x.const_view(), y.const_view(), dy.const_view(), dx.view(),
                            channel_reduce_params{reduce_op::max});
  const float want[] = {0.5f, 0.f, 0.5f, 0.f};
  for (std::int64_t c = 0; c < 4; ++c) EXPECT_EQ(dx.view()(ext<F>{0, c, 0, 1}), want[c]) << "channel " << c;
}

TEST(DnnlChannelReduce, NanWinsAndTiesShare) {
  nan_and_ties<nchw>();
  nan_and_ties<nhwc>();
}

// Each output depends on its own position only: 1, 2 and 7 threads give the same bits.
template <class F>
std::vector<float> reduce_results() {
  host_tensor<float, F> x({3, 12, 24, 40}), dx({3, 12, 24, 40});
  host_tensor<float, F> y({3, 1, 24, 40}), dy({3, 1, 24, 40});
  fill(x, 91);
  fill(dy, 92);
  std::vector<float> out;
  for (reduce_op op : all_ops()) {
    cpu::channel_reduce_forward(x.const_view(), y.view(), channel_reduce_params{op});
    cpu::channel_reduce_backward(x.const_view(), y.const_view(), dy.const_view(), dx.view(), channel_reduce_params{op});
    out.insert(out.end(), y.data(), y.data() + y.numel());
    out.insert(out.end(), dx.data(), dx.data() + dx.numel());
  }
  return out;
}

TEST(DnnlChannelReduce, SameBitsForAnyThreadCount) {
  dnnl_test::expect_same_bits_for_any_thread_count(reduce_results<nchw>, "nchw");
  dnnl_test::expect_same_bits_for_any_thread_count(reduce_results<nhwc>, "nhwc");
}

TEST(DnnlChannelReduce, EmptyBatch) {
  onednn::backend b;
  const host_tensor<float, nhwc> x({0, 4, 3, 3}), dy({0, 1, 3, 3});
  host_tensor<float, nhwc> y({0, 1, 3, 3}), dx({0, 4, 3, 3});
  EXPECT_NO_THROW(b.channel_reduce_forward(x.const_view(), y.view(), channel_reduce_params{reduce_op::max}));
  EXPECT_NO_THROW(b.channel_reduce_backward(x.const_view(), y.const_view(), dy.const_view(), dx.view(),
                                            channel_reduce_params{reduce_op::max}));
}

TEST(DnnlChannelReduce, Errors) {
  onednn::backend b;
  host_tensor<float, nhwc> x({2, 6, 2, 2}), y({2, 1, 2, 2}), y_bad({2, 6, 2, 2}), dx_bad({2, 6, 2, 1}),
      none({2, 0, 2, 2});
  memfmt_test::expect_error([&] { b.channel_reduce_forward(x.const_view(), y_bad.view(), channel_reduce_params{}); },
                            errc::shape_mismatch, {"channel_reduce_forward", "output y"});
  memfmt_test::expect_error([&] { b.channel_reduce_forward(none.const_view(), y.view(), channel_reduce_params{}); },
                            errc::invalid_argument, {"channel_reduce", "no channels to reduce", "[2, 0, 2, 2]"});
  memfmt_test::expect_error(
      [&] { b.channel_reduce_forward(x.const_view(), y.view(), channel_reduce_params{static_cast<reduce_op>(9)}); },
      errc::invalid_argument, {"channel_reduce_forward", "unknown reduction 9"});
  memfmt_test::expect_error(
      [&] {
        b.channel_reduce_backward(x.const_view(), y.const_view(), y.const_view(), dx_bad.view(),
                                  channel_reduce_params{});
      },
      errc::shape_mismatch, {"channel_reduce_backward", "input gradient dx"});
  memfmt_test::expect_error(
      [&] {
        host_tensor<double, nhwc> xd({1, 2, 1, 1}), yd({1, 1, 1, 1});
        b.channel_reduce_forward(xd.const_view(), yd.view(), channel_reduce_params{});
      },
      errc::unsupported_dtype, {"onednn::channel_reduce_forward", "float64"});
}

}  // namespace
