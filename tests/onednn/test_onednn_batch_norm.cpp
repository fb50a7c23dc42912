// oneDNN batch norm vs the reference backend: training step (outputs, saved and running
// statistics), inference, backward; plain, fused ReLU, residual, ReLU + residual; 2-D and 3-D,
// both formats, fp32 and bf16.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
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

template <class T, class F>
void check_bn(onednn::backend& b, const typename layout<F>::extents_type& e, bool relu, bool residual) {
  SCOPED_TRACE(std::string(F::name) + " " + std::string(to_string(dtype_of_v<T>)) + " sizes " +
               memfmt::detail::dims_to_string(e) + (relu ? " relu" : "") + (residual ? " residual" : ""));
  const std::int64_t c = e[1];
  host_tensor<T, F> x(e), y(e), y_ref(e), r(e), dy(e), dx(e), dx_ref(e), dr(e), dr_ref(e);
  fill(x, 41, -2.f, 3.f);
  fill(r, 42);
  fill(dy, 43);
  const std::size_t cs = static_cast<std::size_t>(c);
  std::vector<float> gamma(cs), beta(cs), rm(cs), rv(cs), rm_ref, rv_ref, sm(cs), si(cs), sm_ref(cs), si_ref(cs);
  fill(gamma.data(), c, 44, 0.5f, 1.5f);
  fill(beta.data(), c, 45);
  fill(rm.data(), c, 46);
  fill(rv.data(), c, 47, 0.5f, 2.f);
  rm_ref = rm;
  rv_ref = rv;
  batch_norm_params p;
  p.fuse_relu = relu;
  p.momentum = 0.25;
  const tensor_view<const T, F> res = residual ? r.const_view() : tensor_view<const T, F>();
  const double m = static_cast<double>(x.numel() / c);

  // Training step.
  reference::batch_norm_forward_training<T, F>(x.view(), y_ref.view(), gamma.data(), beta.data(), rm_ref.data(),
                                               rv_ref.data(), sm_ref.data(), si_ref.data(), p, res);
  b.batch_norm_forward_training(x.view(), y.view(), gamma.data(), beta.data(), rm.data(), rv.data(), sm.data(),
                                si.data(), p, res);
  EXPECT_TRUE(all_close<T>(y.const_view(), y_ref.const_view(), m, 4.0)) << "training y";
  EXPECT_TRUE(arrays_close(sm.data(), sm_ref.data(), c, m, 3.0)) << "saved_mean";
  EXPECT_TRUE(arrays_close(si.data(), si_ref.data(), c, m, 3.0)) << "saved_invstd";
  EXPECT_TRUE(arrays_close(rm.data(), rm_ref.data(), c, m, 3.0)) << "running_mean";
  EXPECT_TRUE(arrays_close(rv.data(), rv_ref.data(), c, m, 9.0)) << "running_var";

  // Backward from the reference's saved statistics (so both start from the same inputs).
  std::vector<float> dg(cs), dbt(cs), dg_ref(cs), dbt_ref(cs);
  const tensor_view<T, F> drv = residual ? dr.view() : tensor_view<T, F>();
  const tensor_view<T, F> drv_ref = residual ? dr_ref.view() : tensor_view<T, F>();
  reference::batch_norm_backward<T, F>(x.view(), dy.view(), dx_ref.view(), gamma.data(), sm_ref.data(), si_ref.data(),
                                       dg_ref.data(), dbt_ref.data(), p, y_ref.view(), drv_ref);
  b.batch_norm_backward(x.view(), dy.view(), dx.view(), gamma.data(), sm_ref.data(), si_ref.data(), dg.data(),
                        dbt.data(), p, y_ref.const_view(), drv);
  EXPECT_TRUE(all_close<T>(dx.const_view(), dx_ref.const_view(), m, 8.0)) << "dx";
  EXPECT_TRUE(arrays_close(dg.data(), dg_ref.data(), c, m, 3.0)) << "dgamma";
  EXPECT_TRUE(arrays_close(dbt.data(), dbt_ref.data(), c, m, 1.0)) << "dbeta";
  if (residual) {
    EXPECT_TRUE(all_close<T>(dr.const_view(), dr_ref.const_view(), 1.0)) << "dresidual";
  }

  // Inference with the running statistics.
  reference::batch_norm_forward_inference<T, F>(x.view(), y_ref.view(), gamma.data(), beta.data(), rm_ref.data(),
                                                rv_ref.data(), p, res);
  b.batch_norm_forward_inference(x.view(), y.view(), gamma.data(), beta.data(), rm_ref.data(), rv_ref.data(), p, res);
  EXPECT_TRUE(all_close<T>(y.const_view(), y_ref.const_view(), 1.0, 8.0)) << "inference y";
}

template <class T>
void run_grid() {
  onednn::backend b;
  for (int mode = 0; mode < 4; ++mode) {
    const bool relu = mode & 1, residual = mode & 2;
    check_bn<T, nchw>(b, {2, 5, 3, 4}, relu, residual);
    check_bn<T, nhwc>(b, {2, 5, 3, 4}, relu, residual);
    check_bn<T, nhwc>(b, {1, 19, 5, 3}, relu, residual);
    check_bn<T, nchw>(b, {1, 19, 5, 3}, relu, residual);
    check_bn<T, ncdhw>(b, {2, 3, 3, 4, 2}, relu, residual);
    check_bn<T, ndhwc>(b, {2, 3, 3, 4, 2}, relu, residual);
  }
}

TEST(OnednnBatchNorm, GridFloat) { run_grid<float>(); }
TEST(OnednnBatchNorm, GridBfloat16) {
  // Where oneDNN cannot compute in bfloat16 here, each batch-norm call is refused with the clear error.
  onednn::backend b;
  host_tensor<bfloat16, nhwc> x({2, 3, 2, 2}), y({2, 3, 2, 2});
  std::vector<float> s(3, 1.f), t(3, 0.f), m(3, 0.f), v(3, 1.f), sm(3), si(3, 1.f), dg(3), db(3);
  const batch_norm_params p;
  onednn_test::refused_on_this_cpu<bfloat16>("onednn::batch_norm_forward_inference", [&] {
    b.batch_norm_forward_inference(x.view(), y.view(), s.data(), t.data(), m.data(), v.data(), p);
  });
  onednn_test::refused_on_this_cpu<bfloat16>("onednn::batch_norm_backward", [&] {
    b.batch_norm_backward(x.view(), y.view(), y.view(), s.data(), sm.data(), si.data(), dg.data(), db.data(), p);
  });
  const std::string unsupported =
      onednn_test::refused_on_this_cpu<bfloat16>("onednn::batch_norm_forward_training", [&] {
        b.batch_norm_forward_training(x.view(), y.view(), s.data(), t.data(), m.data(), v.data(), sm.data(), si.data(),
                                      p);
      });
  if (!unsupported.empty()) GTEST_SKIP() << unsupported;
  run_grid<bfloat16>();
}

TEST(OnednnBatchNorm, ValidationErrors) {
  onednn::backend b;
  host_tensor<float, nhwc> x({2, 3, 2, 2}), y({2, 3, 2, 2}), y_bad({2, 3, 2, 1}), one({1, 3, 1, 1});
  std::vector<float> s(3, 1.f), t(3, 1.f), u(3, 1.f), v(3, 1.f), w(3, 1.f), z(3, 1.f);
  batch_norm_params p;
  EXPECT_TRUE(memfmt_test::error_code([&] {
                b.batch_norm_forward_training(x.view(), y_bad.view(), s.data(), t.data(), u.data(), v.data(), w.data(),
                                              z.data(), p);
              }) == errc::shape_mismatch);
  EXPECT_TRUE(memfmt_test::error_code([&] {
                b.batch_norm_forward_training(one.view(), one.view(), s.data(), t.data(), u.data(), v.data(), w.data(),
                                              z.data(), p);
              }) == errc::invalid_argument);
  EXPECT_TRUE(memfmt_test::error_code([&] {
                b.batch_norm_forward_inference(x.view(), y.view(), nullptr, t.data(), u.data(), v.data(), p);
              }) == errc::null_pointer);
  batch_norm_params bad = p;
  bad.epsilon = 0;
  EXPECT_TRUE(memfmt_test::error_code([&] {
                b.batch_norm_forward_inference(x.view(), y.view(), s.data(), t.data(), u.data(), v.data(), bad);
              }) == errc::invalid_argument);
  batch_norm_params relu = p;
  relu.fuse_relu = true;
  EXPECT_TRUE(memfmt_test::error_code([&] {
                b.batch_norm_backward(x.view(), y.view(), y.view(), s.data(), t.data(), u.data(), v.data(), w.data(),
                                      relu);
              }) == errc::null_pointer);
  host_tensor<double, nhwc> xd({2, 3, 2, 2});
  std::vector<double> sd(3, 1.0);
  EXPECT_TRUE(memfmt_test::error_code([&] {
                b.batch_norm_forward_inference(xd.view(), xd.view(), sd.data(), sd.data(), sd.data(), sd.data(), p);
              }) == errc::unsupported_dtype);
  for (std::int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.data()[i], 0.f) << "nothing written on error";
}

}  // namespace
