// oneDNN backend group / instance norm (memfmt's CPU kernel, backends/cpu/group_norm.hpp) vs the
// reference backend: forward (y, saved mean and invstd) and backward (dx, dgamma, dbeta) with and
// without gamma / beta, groups 1, in between and C, 2-D and 3-D, both formats and mixed ones,
// float and bfloat16, shapes that split into several parallel chunks, and a large mean.
#include <memfmt/backends/cpu/group_norm.hpp>

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

struct gn_case {
  std::int64_t groups;
  bool affine;                // gamma, beta, dgamma and dbeta given (else all null)
  float lo = -2.f, hi = 3.f;  // range of x
};

// Both backends compute the statistics in double and round once, so the tolerance is the one of a
// reduction over the group (m values) stored in T; dgamma / dbeta reduce over N * spatial values.
template <class T, class XF, class YF>
void check_gn(onednn::backend& b, const typename layout<XF>::extents_type& e, const gn_case& k) {
  SCOPED_TRACE(std::string(XF::name) + " -> " + std::string(YF::name) + " " + std::string(to_string(dtype_of_v<T>)) +
               " sizes " + memfmt::detail::dims_to_string(e) + " groups " + std::to_string(k.groups) +
               (k.affine ? " affine" : ""));
  const std::int64_t c = e[1], n = e[0], ng = n * k.groups;
  host_tensor<T, XF> x(e), dx(e), dx_ref(e);
  host_tensor<T, YF> y(e), y_ref(e), dy(e);
  fill(x, 51, k.lo, k.hi);
  fill(dy, 52);
  const auto cs = static_cast<std::size_t>(c), gs = static_cast<std::size_t>(ng);
  std::vector<float> gamma(cs), beta(cs), sm(gs), si(gs), sm_ref(gs), si_ref(gs);
  std::vector<float> dg(cs, 7.f), db(cs, 7.f), dg_ref(cs, 7.f), db_ref(cs, 7.f);
  fill(gamma.data(), c, 53, 0.5f, 1.5f);
  fill(beta.data(), c, 54);
  group_norm_params p;
  p.groups = k.groups;
  const float* g = k.affine ? gamma.data() : nullptr;
  const double m = static_cast<double>(x.numel() / ng);
  const double count = static_cast<double>(x.numel() / c);

  reference::group_norm_forward<T, XF, YF>(x.view(), y_ref.view(), g, k.affine ? beta.data() : nullptr, sm_ref.data(),
                                           si_ref.data(), p);
  b.group_norm_forward(x.const_view(), y.view(), g, k.affine ? beta.data() : nullptr, sm.data(), si.data(), p);
  EXPECT_TRUE(all_close<T>(y.const_view(), y_ref.const_view(), m, 4.0)) << "y";
  EXPECT_TRUE(arrays_close(sm.data(), sm_ref.data(), ng, m, 4.0)) << "saved_mean";
  for (std::size_t i = 0; i < gs; ++i)  // invstd is relative: compare it scaled by the reference's
    EXPECT_NEAR(si[i] / si_ref[i], 1.0, onednn_test::tolerance<float>(1.0, m)) << "saved_invstd " << i;

  reference::group_norm_backward<T, XF, YF, XF>(x.view(), dy.view(), dx_ref.view(), g, sm_ref.data(), si_ref.data(),
                                                k.affine ? dg_ref.data() : nullptr, k.affine ? db_ref.data() : nullptr,
                                                p);
  b.group_norm_backward(x.const_view(), dy.const_view(), dx.view(), g, sm_ref.data(), si_ref.data(),
                        k.affine ? dg.data() : nullptr, k.affine ? db.data() : nullptr, p);
  // dx scales with invstd: the tolerance's magnitude is the largest invstd.
  double max_invstd = 1.0;
  for (float v : si_ref) max_invstd = std::max(max_invstd, static_cast<double>(v));
  EXPECT_TRUE(all_close<T>(dx.const_view(), dx_ref.const_view(), m, 4.0 * max_invstd)) << "dx";
  EXPECT_TRUE(arrays_close(dg.data(), dg_ref.data(), c, count, 4.0)) << "dgamma";
  EXPECT_TRUE(arrays_close(db.data(), db_ref.data(), c, count, 1.0)) << "dbeta";
  if (!k.affine) {
    for (std::size_t i = 0; i < cs; ++i) EXPECT_EQ(dg[i], 7.f) << "dgamma was null: untouched";
  }
}

template <class T, class XF, class YF>
void check_groups(onednn::backend& b, const typename layout<XF>::extents_type& e) {
  const std::int64_t c = e[1];
  for (std::int64_t groups : {std::int64_t{1}, c / 2 > 1 ? c / 2 : std::int64_t{1}, c})
    for (bool affine : {true, false}) check_gn<T, XF, YF>(b, e, {groups, affine});
}

template <class T>
void run_grid() {
  onednn::backend b;
  // Small odd shapes (one chunk per sample).
  check_groups<T, nchw, nchw>(b, {2, 6, 3, 5});
  check_groups<T, nhwc, nhwc>(b, {2, 6, 3, 5});
  check_groups<T, nchw, nhwc>(b, {2, 6, 3, 5});
  check_groups<T, nhwc, nchw>(b, {2, 6, 3, 5});
  check_groups<T, ncdhw, ncdhw>(b, {2, 4, 3, 2, 3});
  check_groups<T, ndhwc, ndhwc>(b, {2, 4, 3, 2, 3});
  check_groups<T, ndhwc, ncdhw>(b, {2, 4, 3, 2, 3});
  // Shapes whose samples split into several chunks (partial sums added across chunks).
  const layout<nchw>::extents_type big4{2, 12, 24, 40};
  const layout<ncdhw>::extents_type big5{1, 8, 6, 8, 16};
  for (bool channels_last : {false, true}) {
    ASSERT_GT(cpu::group_norm_detail::make_chunking({2, 12, 1, 24, 40}, channels_last).chunks_per_sample, 2);
    ASSERT_GT(cpu::group_norm_detail::make_chunking({1, 8, 6, 8, 16}, channels_last).chunks_per_sample, 1);
  }
  check_groups<T, nchw, nchw>(b, big4);
  check_groups<T, nhwc, nhwc>(b, big4);
  check_groups<T, ncdhw, ndhwc>(b, big5);
  check_groups<T, ndhwc, ndhwc>(b, big5);
}

TEST(OnednnGroupNorm, SupportSaysYes) {
  const onednn::backend b;
  for (int rank : {4, 5}) {
    op_query q;
    q.op = layer_kind::group_norm;
    q.type = dtype::float32;
    q.rank = rank;
    q.backward = true;
    EXPECT_TRUE(b.support(q).supported) << b.support(q).reason;
  }
}

TEST(OnednnGroupNorm, GridFloat) { run_grid<float>(); }

TEST(OnednnGroupNorm, GridBfloat16) {
  onednn::backend b;
  host_tensor<bfloat16, nhwc> x({2, 4, 2, 2}), y({2, 4, 2, 2});
  std::vector<float> s(4), t(4), sm(4), si(4, 1.f), dg(4), db(4);
  group_norm_params p;
  p.groups = 2;
  onednn_test::refused_on_this_cpu<bfloat16>("onednn::group_norm_backward", [&] {
    b.group_norm_backward(x.const_view(), y.const_view(), y.view(), s.data(), sm.data(), si.data(), dg.data(),
                          db.data(), p);
  });
  const std::string unsupported = onednn_test::refused_on_this_cpu<bfloat16>("onednn::group_norm_forward", [&] {
    b.group_norm_forward(x.const_view(), y.view(), s.data(), t.data(), sm.data(), si.data(), p);
  });
  if (!unsupported.empty()) GTEST_SKIP() << unsupported;
  run_grid<bfloat16>();
}

// x = 1e4 + noise of width 1: E[x^2] - E[x]^2 in float would cancel to nothing; the two-pass
// variance keeps the reference's result.
TEST(OnednnGroupNorm, LargeMean) {
  onednn::backend b;
  for (bool affine : {true, false}) {
    check_gn<float, nchw, nchw>(b, {2, 12, 24, 40}, {3, affine, 1e4f - 0.5f, 1e4f + 0.5f});
    check_gn<float, nhwc, nhwc>(b, {2, 12, 24, 40}, {12, affine, 1e4f - 0.5f, 1e4f + 0.5f});
  }
}

// Chunks and their reduction order depend on the shape only: 1, 2 and 7 threads give the same bits.
template <class F>
std::vector<float> group_norm_results() {
  return onednn_test::norm_step_results<F>(9, 1e4f - 1.f, 1e4f + 1.f, [](auto& x, auto& y, auto& dx, auto... v) {
    const auto [g, b, m, s, dg, db] = std::make_tuple(v...);
    group_norm_params p;
    p.groups = 3;
    cpu::group_norm_forward(x.const_view(), y.view(), g, b, m, s, p);
    cpu::group_norm_backward(x.const_view(), y.const_view(), dx.view(), g, m, s, dg, db, p);
  });
}

TEST(OnednnGroupNorm, SameBitsForAnyThreadCount) {
  onednn_test::expect_same_bits_for_any_thread_count(group_norm_results<nchw>, "nchw");
  onednn_test::expect_same_bits_for_any_thread_count(group_norm_results<nhwc>, "nhwc");
}

// An empty x (no samples, or a zero extent) has no statistics to read: null ones, or ones shorter
// than N * groups, are never touched, and dgamma / dbeta (sums over nothing) come out zero.
TEST(OnednnGroupNorm, BackwardOfEmptyInput) {
  onednn::backend b;
  group_norm_params p;
  p.groups = 2;
  std::vector<float> short_stats(1, 1.f);  // N * groups = 4 would be read for a non-empty x
  for (const host_tensor<float, nhwc>::extents_type& e :
       {host_tensor<float, nhwc>::extents_type{0, 4, 3, 3}, {2, 4, 0, 3}, {2, 4, 3, 0}}) {
    const host_tensor<float, nhwc> x(e), dy(e);
    host_tensor<float, nhwc> dx(e);
    for (const float* stats : {static_cast<const float*>(nullptr), static_cast<const float*>(short_stats.data())}) {
      std::vector<float> dg(4, 7.5f), db(4, -3.25f);  // garbage the backward must overwrite
      EXPECT_NO_THROW(b.group_norm_backward(x.const_view(), dy.const_view(), dx.view(), nullptr, stats, stats,
                                            dg.data(), db.data(), p));
      for (std::size_t c = 0; c < dg.size(); ++c) {
        EXPECT_EQ(dg[c], 0.f) << "dgamma[" << c << "]";
        EXPECT_EQ(db[c], 0.f) << "dbeta[" << c << "]";
      }
    }
  }
}

TEST(OnednnGroupNorm, ForwardOfEmptyInputSavesNoStatistics) {
  onednn::backend b;
  group_norm_params p;
  p.groups = 2;
  for (const host_tensor<float, nhwc>::extents_type& e :
       {host_tensor<float, nhwc>::extents_type{0, 4, 3, 3}, {2, 4, 0, 3}, {2, 4, 3, 0}}) {
    const host_tensor<float, nhwc> x(e);
    host_tensor<float, nhwc> y(e);
    EXPECT_NO_THROW(b.group_norm_forward(x.const_view(), y.view(), nullptr, nullptr, nullptr, nullptr, p));
    std::vector<float> mean(4, 7.5f), invstd(4, -3.25f);
    EXPECT_NO_THROW(b.group_norm_forward(x.const_view(), y.view(), nullptr, nullptr, mean.data(), invstd.data(), p));
    for (std::size_t i = 0; i < mean.size(); ++i) {
      EXPECT_EQ(mean[i], 7.5f) << "saved_mean[" << i << "]";
      EXPECT_EQ(invstd[i], -3.25f) << "saved_invstd[" << i << "]";
    }
  }
}

TEST(OnednnGroupNorm, Errors) {
  onednn::backend b;
  host_tensor<float, nhwc> x({2, 6, 2, 2}), y({2, 6, 2, 2}), y_bad({2, 6, 2, 1});
  std::vector<float> s(6, 1.f), sm(8), si(8), dg(6), db(6);
  for (std::int64_t groups : {std::int64_t{4}, std::int64_t{0}}) {
    group_norm_params p;
    p.groups = groups;
    const auto ref = memfmt_test::error_code([&] {
      reference::group_norm_forward<float, nhwc, nhwc>(x.view(), y.view(), s.data(), s.data(), sm.data(), si.data(), p);
    });
    ASSERT_TRUE(ref.has_value());
    EXPECT_EQ(memfmt_test::error_code(
                  [&] { b.group_norm_forward(x.const_view(), y.view(), s.data(), s.data(), sm.data(), si.data(), p); }),
              ref);
    EXPECT_EQ(memfmt_test::error_code([&] {
                b.group_norm_backward(x.const_view(), y.const_view(), y.view(), s.data(), sm.data(), si.data(),
                                      dg.data(), db.data(), p);
              }),
              ref);
  }
  group_norm_params p;
  p.groups = 2;
  EXPECT_EQ(memfmt_test::error_code(
                [&] { b.group_norm_forward(x.const_view(), y_bad.view(), nullptr, nullptr, sm.data(), si.data(), p); }),
            errc::shape_mismatch);
  EXPECT_EQ(memfmt_test::error_code(
                [&] { b.group_norm_forward(x.const_view(), y.view(), nullptr, nullptr, nullptr, si.data(), p); }),
            errc::null_pointer);
  memfmt_test::expect_error(
      [&] {
        host_tensor<double, nhwc> xd({1, 2, 1, 1}), yd({1, 2, 1, 1});
        std::vector<double> a(2), c(2);
        b.group_norm_forward(xd.const_view(), yd.view(), nullptr, nullptr, a.data(), c.data(), p);
      },
      errc::unsupported_dtype, {"onednn::group_norm_forward", "float64"});
}

}  // namespace
