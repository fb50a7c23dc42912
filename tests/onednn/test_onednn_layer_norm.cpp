// oneDNN backend layer norm over C (memfmt's CPU kernel, backends/cpu/layer_norm.hpp) vs the
// reference backend: forward (y, saved mean and invstd) and backward (dx, dgamma, dbeta) with and
// without gamma / beta, 2-D and 3-D, both formats (the kernel's two loop orders) and mixed ones
// (the reference loops), float and bfloat16, shapes that split into several chunks, a large mean,
// the same bits for any thread count, and errors.
#include <memfmt/backends/cpu/layer_norm.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <memfmt/backends/onednn/backend.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "../common/expect_error.hpp"
#include "onednn_test_util.hpp"

namespace {

using namespace memfmt;
using onednn_test::all_close;
using onednn_test::arrays_close;
using onednn_test::fill;

// Both backends compute in double and round once: the tolerance is the one of a reduction over C
// stored in T; dgamma / dbeta reduce over N * positions values.
template <class T, class XF, class YF>
void check_ln(onednn::backend& b, const typename layout<XF>::extents_type& e, bool affine, float lo = -2.f,
              float hi = 3.f) {
  SCOPED_TRACE(std::string(XF::name) + " -> " + std::string(YF::name) + " " + std::string(to_string(dtype_of_v<T>)) +
               " sizes " + memfmt::detail::dims_to_string(e) + (affine ? " affine" : ""));
  const std::int64_t c = e[1];
  host_tensor<T, XF> x(e), dx(e), dx_ref(e);
  host_tensor<T, YF> y(e), y_ref(e), dy(e);
  fill(x, 71, lo, hi);
  fill(dy, 72);
  const std::int64_t positions = x.numel() / c;
  const auto cs = static_cast<std::size_t>(c), ps = static_cast<std::size_t>(positions);
  std::vector<float> gamma(cs), beta(cs), sm(ps), si(ps), sm_ref(ps), si_ref(ps);
  std::vector<float> dg(cs, 7.f), db(cs, 7.f), dg_ref(cs, 7.f), db_ref(cs, 7.f);
  fill(gamma.data(), c, 73, 0.5f, 1.5f);
  fill(beta.data(), c, 74);
  layer_norm_params p;
  p.epsilon = 1e-6;
  const float* g = affine ? gamma.data() : nullptr;
  const double m = static_cast<double>(c), count = static_cast<double>(positions);

  reference::layer_norm_forward<T, XF, YF>(x.view(), y_ref.view(), g, affine ? beta.data() : nullptr, sm_ref.data(),
                                           si_ref.data(), p);
  b.layer_norm_forward(x.const_view(), y.view(), g, affine ? beta.data() : nullptr, sm.data(), si.data(), p);
  EXPECT_TRUE(all_close<T>(y.const_view(), y_ref.const_view(), m, 4.0)) << "y";
  EXPECT_TRUE(arrays_close(sm.data(), sm_ref.data(), positions, m, 4.0)) << "saved_mean";
  for (std::size_t i = 0; i < ps; ++i)
    EXPECT_NEAR(si[i] / si_ref[i], 1.0, onednn_test::tolerance<float>(1.0, m)) << "saved_invstd " << i;

  reference::layer_norm_backward<T, XF, YF, XF>(x.view(), dy.view(), dx_ref.view(), g, sm_ref.data(), si_ref.data(),
                                                affine ? dg_ref.data() : nullptr, affine ? db_ref.data() : nullptr, p);
  b.layer_norm_backward(x.const_view(), dy.const_view(), dx.view(), g, sm_ref.data(), si_ref.data(),
                        affine ? dg.data() : nullptr, affine ? db.data() : nullptr, p);
  double max_invstd = 1.0;
  for (float v : si_ref) max_invstd = std::max(max_invstd, static_cast<double>(v));
  EXPECT_TRUE(all_close<T>(dx.const_view(), dx_ref.const_view(), m, 4.0 * max_invstd)) << "dx";
  EXPECT_TRUE(arrays_close(dg.data(), dg_ref.data(), c, count, 4.0)) << "dgamma";
  EXPECT_TRUE(arrays_close(db.data(), db_ref.data(), c, count, 1.0)) << "dbeta";
  if (!affine) {
    for (std::size_t i = 0; i < cs; ++i) EXPECT_EQ(dg[i], 7.f) << "dgamma was null: untouched";
  }
}

template <class T>
void run_grid() {
  onednn::backend b;
  for (bool affine : {true, false}) {
    // Small odd shapes: one chunk; both dense layouts and the mixed ones.
    check_ln<T, nchw, nchw>(b, {2, 6, 3, 5}, affine);
    check_ln<T, nhwc, nhwc>(b, {2, 6, 3, 5}, affine);
    check_ln<T, nchw, nhwc>(b, {2, 6, 3, 5}, affine);
    check_ln<T, nhwc, nchw>(b, {2, 6, 3, 5}, affine);
    check_ln<T, ncdhw, ncdhw>(b, {2, 4, 3, 2, 3}, affine);
    check_ln<T, ndhwc, ndhwc>(b, {2, 4, 3, 2, 3}, affine);
    check_ln<T, ndhwc, ncdhw>(b, {2, 4, 3, 2, 3}, affine);
    // More positions than a chunk, chunks that end inside a sample, and channels-first runs of a
    // whole block and a remainder; C = 1.
    check_ln<T, nchw, nchw>(b, {3, 5, 13, 17}, affine);
    check_ln<T, nhwc, nhwc>(b, {3, 5, 13, 17}, affine);
    check_ln<T, ncdhw, ncdhw>(b, {1, 8, 6, 8, 16}, affine);
    check_ln<T, ndhwc, ndhwc>(b, {1, 8, 6, 8, 16}, affine);
    check_ln<T, nhwc, nhwc>(b, {2, 1, 4, 3}, affine);
    check_ln<T, nchw, nchw>(b, {2, 1, 4, 3}, affine);
  }
  ASSERT_GT((cpu::layer_norm_detail::shape{3, 13 * 17, 5}.chunks()), 2);
}

TEST(OnednnLayerNorm, SupportSaysYes) {
  const onednn::backend b;
  for (int rank : {4, 5}) {
    op_query q;
    q.op = layer_kind::layer_norm;
    q.type = dtype::float32;
    q.rank = rank;
    q.backward = true;
    EXPECT_TRUE(b.support(q).supported) << b.support(q).reason;
  }
}

TEST(OnednnLayerNorm, GridFloat) { run_grid<float>(); }

TEST(OnednnLayerNorm, GridBfloat16) {
  onednn::backend b;
  host_tensor<bfloat16, nhwc> x({2, 4, 2, 2}), y({2, 4, 2, 2});
  std::vector<float> s(4), t(4), sm(8), si(8, 1.f), dg(4), db(4);
  layer_norm_params p;
  onednn_test::refused_on_this_cpu<bfloat16>("onednn::layer_norm_backward", [&] {
    b.layer_norm_backward(x.const_view(), y.const_view(), y.view(), s.data(), sm.data(), si.data(), dg.data(),
                          db.data(), p);
  });
  const std::string unsupported = onednn_test::refused_on_this_cpu<bfloat16>("onednn::layer_norm_forward", [&] {
    b.layer_norm_forward(x.const_view(), y.view(), s.data(), t.data(), sm.data(), si.data(), p);
  });
  if (!unsupported.empty()) GTEST_SKIP() << unsupported;
  run_grid<bfloat16>();
}

// x = 1e4 + noise of width 1: a one-pass or float variance would lose it.
TEST(OnednnLayerNorm, LargeMean) {
  onednn::backend b;
  for (bool affine : {true, false}) {
    check_ln<float, nchw, nchw>(b, {2, 12, 24, 40}, affine, 1e4f - 0.5f, 1e4f + 0.5f);
    check_ln<float, nhwc, nhwc>(b, {2, 12, 24, 40}, affine, 1e4f - 0.5f, 1e4f + 0.5f);
  }
}

// Chunks and their reduction order depend on the shape only: 1, 2 and 7 threads give the same bits.
template <class F>
std::vector<float> layer_norm_results() {
  return onednn_test::norm_step_results<F>(3 * 24 * 40, -1.f, 2.f, [](auto& x, auto& y, auto& dx, auto... v) {
    const auto [g, b, m, s, dg, db] = std::make_tuple(v...);
    cpu::layer_norm_forward(x.const_view(), y.view(), g, b, m, s, layer_norm_params{});
    cpu::layer_norm_backward(x.const_view(), y.const_view(), dx.view(), g, m, s, dg, db, layer_norm_params{});
  });
}

TEST(OnednnLayerNorm, SameBitsForAnyThreadCount) {
  onednn_test::expect_same_bits_for_any_thread_count(layer_norm_results<nchw>, "nchw");
  onednn_test::expect_same_bits_for_any_thread_count(layer_norm_results<nhwc>, "nhwc");
}

// An empty x reads no statistics (null is fine) and its gradient sums are zero.
TEST(OnednnLayerNorm, EmptyInput) {
  onednn::backend b;
  const layer_norm_params p;
  for (const host_tensor<float, nhwc>::extents_type& e :
       {host_tensor<float, nhwc>::extents_type{0, 4, 3, 3}, {2, 4, 0, 3}}) {
    const host_tensor<float, nhwc> x(e), dy(e);
    host_tensor<float, nhwc> y(e), dx(e);
    EXPECT_NO_THROW(b.layer_norm_forward(x.const_view(), y.view(), nullptr, nullptr, nullptr, nullptr, p));
    std::vector<float> dg(4, 7.5f), db(4, -3.25f);
    EXPECT_NO_THROW(b.layer_norm_backward(x.const_view(), dy.const_view(), dx.view(), nullptr, nullptr, nullptr,
                                          dg.data(), db.data(), p));
    for (std::size_t c = 0; c < dg.size(); ++c) {
      EXPECT_EQ(dg[c], 0.f) << "dgamma[" << c << "]";
      EXPECT_EQ(db[c], 0.f) << "dbeta[" << c << "]";
    }
  }
}

TEST(OnednnLayerNorm, Errors) {
  onednn::backend b;
  host_tensor<float, nhwc> x({2, 6, 2, 2}), y({2, 6, 2, 2}), y_bad({2, 6, 2, 1});
  std::vector<float> sm(8), si(8);
  layer_norm_params p;
  EXPECT_EQ(memfmt_test::error_code(
                [&] { b.layer_norm_forward(x.const_view(), y_bad.view(), nullptr, nullptr, sm.data(), si.data(), p); }),
            errc::shape_mismatch);
  memfmt_test::expect_error(
      [&] { b.layer_norm_forward(x.const_view(), y.view(), nullptr, nullptr, nullptr, si.data(), p); },
      errc::null_pointer, {"layer_norm_forward", "saved_mean or saved_invstd is null", "(8)"});
  p.epsilon = -1.0;
  EXPECT_EQ(memfmt_test::error_code([&] {
              b.layer_norm_backward(x.const_view(), y.const_view(), y.view(), nullptr, sm.data(), si.data(), nullptr,
                                    nullptr, p);
            }),
            errc::invalid_argument);
  memfmt_test::expect_error(
      [&] {
        host_tensor<double, nhwc> xd({1, 2, 1, 1}), yd({1, 2, 1, 1});
        std::vector<double> a(1), c(1);
        b.layer_norm_forward(xd.const_view(), yd.view(), nullptr, nullptr, a.data(), c.data(), layer_norm_params{});
      },
      errc::unsupported_dtype, {"onednn::layer_norm_forward", "float64"});
}

}  // namespace
