// Validation of the reference backend: every bad input is a memfmt::error with the right code and a
// message naming the values, raised before any work, so every output buffer is left untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/tensor/host_tensor.hpp"

#include "../common/expect_error.hpp"

namespace {

using namespace memfmt;

using memfmt_test::expect_error;

constexpr double sentinel = 123.25;

template <class F>
host_tensor<double, F> filled(const typename host_tensor<double, F>::extents_type& e, double v) {
  host_tensor<double, F> t(e);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = v;
  return t;
}
template <class F>
void expect_untouched(const host_tensor<double, F>& t, const char* what) {
  for (std::int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.data()[i], sentinel) << what << " was written at " << i;
}
void expect_untouched(const std::vector<double>& v, const char* what) {
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], sentinel) << what << " was written at " << i;
}

struct ConvErrors : ::testing::Test {
  host_tensor<double, nchw> x = filled<nchw>({2, 4, 5, 5}, 1.0);
  host_tensor<double, nhwc> w = filled<nhwc>({6, 2, 3, 3}, 1.0);  // groups 2
  conv_params p = [] {
    conv_params q;
    q.groups = 2;
    return q;
  }();
  reference::backend be;
};

TEST_F(ConvErrors, ForwardOutputShape) {
  auto y = filled<nhwc>({2, 6, 3, 4}, sentinel);
  std::vector<double> bias(6, sentinel);
  expect_error([&] { be.conv_forward<double>(x.const_view(), w.const_view(), bias.data(), y.view(), p); },
               errc::shape_mismatch, {"output y", "[2, 6, 3, 4]", "[2, 6, 3, 3]"});
  expect_untouched(y, "y");
}

TEST_F(ConvErrors, ForwardBadGroupsAndParams) {
  auto y = filled<nhwc>({2, 6, 3, 3}, sentinel);
  conv_params q = p;
  q.groups = 3;
  expect_error([&] { be.conv_forward<double>(x.const_view(), w.const_view(), nullptr, y.view(), q); },
               errc::invalid_argument, {"groups = 3", "C = 4"});
  q = p;
  q.groups = 1;  // weight has C/groups = 2 but C = 4
  expect_error([&] { be.conv_forward<double>(x.const_view(), w.const_view(), nullptr, y.view(), q); },
               errc::shape_mismatch, {"2 input channels per group"});
  q = p;
  q.stride[1] = 0;
  expect_error([&] { be.conv_forward<double>(x.const_view(), w.const_view(), nullptr, y.view(), q); },
               errc::invalid_argument, {"stride 0"});
  q = p;
  q.dilation[0] = 3;  // dilated kernel 7 > input 5
  expect_error([&] { be.conv_forward<double>(x.const_view(), w.const_view(), nullptr, y.view(), q); },
               errc::invalid_argument, {"dilated kernel 7"});
  expect_untouched(y, "y");
}

TEST_F(ConvErrors, ForwardNullData) {
  auto y = filled<nhwc>({2, 6, 3, 3}, sentinel);
  tensor_view<const double, nchw> null_x(nullptr, x.extents());
  expect_error([&] { be.conv_forward<double>(null_x, w.const_view(), nullptr, y.view(), p); }, errc::null_pointer,
               {"input x", "[2, 4, 5, 5]"});
  tensor_view<double, nhwc> null_y(nullptr, y.extents());
  expect_error([&] { be.conv_forward<double>(x.const_view(), w.const_view(), nullptr, null_y, p); },
               errc::null_pointer, {"output y"});
  expect_untouched(y, "y");
}

TEST_F(ConvErrors, BackwardDataShape) {
  auto dy = filled<nhwc>({2, 6, 3, 3}, 1.0);
  auto dx = filled<nchw>({2, 4, 6, 5}, sentinel);  // gives output [2, 6, 4, 3]
  expect_error([&] { be.conv_backward_data<double>(dy.const_view(), w.const_view(), dx.view(), p); },
               errc::shape_mismatch, {"dy", "[2, 6, 3, 3]", "[2, 6, 4, 3]"});
  expect_untouched(dx, "dx");
}

TEST_F(ConvErrors, BackwardWeightsShape) {
  auto dy = filled<nhwc>({2, 6, 3, 3}, 1.0);
  auto dw = filled<nhwc>({6, 2, 2, 3}, sentinel);
  std::vector<double> dbias(6, sentinel);
  expect_error([&] { be.conv_backward_weights<double>(x.const_view(), dy.const_view(), dw.view(), dbias.data(), p); },
               errc::shape_mismatch, {"dy", "[2, 6, 4, 3]"});
  expect_untouched(dw, "dw");
  expect_untouched(dbias, "dbias");
  tensor_view<double, nhwc> null_dw(nullptr, w.extents());
  expect_error([&] { be.conv_backward_weights<double>(x.const_view(), dy.const_view(), null_dw, dbias.data(), p); },
               errc::null_pointer, {"weight gradient dw"});
  expect_untouched(dbias, "dbias");
}

struct BatchNormErrors : ::testing::Test {
  host_tensor<double, nhwc> x = filled<nhwc>({2, 3, 2, 2}, 1.0);
  std::vector<double> gamma = std::vector<double>(3, 1.0), beta = std::vector<double>(3, 0.0);
  std::vector<double> rm = std::vector<double>(3, sentinel), rv = std::vector<double>(3, sentinel);
  std::vector<double> sm = std::vector<double>(3, sentinel), si = std::vector<double>(3, sentinel);
  host_tensor<double, nhwc> y = filled<nhwc>({2, 3, 2, 2}, sentinel);
  batch_norm_params p;
  reference::backend be;

  void train(tensor_view<const double, nhwc> xv, tensor_view<double, nhwc> yv, const double* g,
             tensor_view<const double, nhwc> res = {}) {
    be.batch_norm_forward_training<double>(xv, yv, g, beta.data(), rm.data(), rv.data(), sm.data(), si.data(), p, res);
  }
  void expect_outputs_untouched() {
    expect_untouched(y, "y");
    expect_untouched(rm, "running_mean");
    expect_untouched(rv, "running_var");
    expect_untouched(sm, "saved_mean");
    expect_untouched(si, "saved_invstd");
  }
};

TEST_F(BatchNormErrors, TrainingShapes) {
  auto y_bad = filled<nhwc>({2, 3, 2, 3}, sentinel);
  expect_error([&] { train(x.const_view(), y_bad.view(), gamma.data()); }, errc::shape_mismatch,
               {"output y", "[2, 3, 2, 3]", "[2, 3, 2, 2]"});
  expect_untouched(y_bad, "y");
  auto res = filled<nhwc>({2, 3, 1, 2}, 0.0);
  expect_error([&] { train(x.const_view(), y.view(), gamma.data(), res.const_view()); }, errc::shape_mismatch,
               {"residual", "[2, 3, 1, 2]"});
  expect_outputs_untouched();
}

TEST_F(BatchNormErrors, TrainingNeedsTwoValuesPerChannel) {
  auto x1 = filled<nhwc>({1, 3, 1, 1}, 1.0);
  auto y1 = filled<nhwc>({1, 3, 1, 1}, sentinel);
  expect_error([&] { train(x1.const_view(), y1.view(), gamma.data()); }, errc::invalid_argument,
               {"[1, 3, 1, 1]", "1 value(s) per channel"});
  expect_untouched(y1, "y");
  expect_outputs_untouched();
}

TEST_F(BatchNormErrors, NullParameters) {
  expect_error([&] { train(x.const_view(), y.view(), nullptr); }, errc::null_pointer, {"gamma", "C = 3"});
  expect_error(
      [&] {
        be.batch_norm_forward_training<double>(x.const_view(), y.view(), gamma.data(), beta.data(), rm.data(), nullptr,
                                               sm.data(), si.data(), p);
      },
      errc::null_pointer, {"running_var"});
  expect_error(
      [&] {
        be.batch_norm_forward_inference<double>(x.const_view(), y.view(), gamma.data(), beta.data(), nullptr,
                                                rv.data(), p);
      },
      errc::null_pointer, {"running_mean"});
  expect_outputs_untouched();
}

TEST_F(BatchNormErrors, BadEpsilonAndMomentum) {
  p.epsilon = 0;
  expect_error([&] { train(x.const_view(), y.view(), gamma.data()); }, errc::invalid_argument, {"epsilon"});
  p.epsilon = 1e-5;
  p.momentum = 1.5;
  expect_error([&] { train(x.const_view(), y.view(), gamma.data()); }, errc::invalid_argument, {"momentum = 1.5"});
  p.momentum = std::nan("");
  expect_error([&] { train(x.const_view(), y.view(), gamma.data()); }, errc::invalid_argument, {"momentum"});
  expect_outputs_untouched();
}

TEST_F(BatchNormErrors, Backward) {
  auto dy = filled<nhwc>({2, 3, 2, 2}, 1.0);
  auto dx = filled<nhwc>({2, 3, 2, 2}, sentinel);
  std::vector<double> dg(3, sentinel), db(3, sentinel), mean(3, 0.0), invstd(3, 1.0);
  p.fuse_relu = true;
  expect_error(
      [&] {
        be.batch_norm_backward<double>(x.const_view(), dy.const_view(), dx.view(), gamma.data(), mean.data(),
                                       invstd.data(), dg.data(), db.data(), p);
      },
      errc::null_pointer, {"fuse_relu", "forward output y"});
  p.fuse_relu = false;
  auto dres = filled<nhwc>({2, 2, 2, 2}, sentinel);
  expect_error(
      [&] {
        be.batch_norm_backward<double>(x.const_view(), dy.const_view(), dx.view(), gamma.data(), mean.data(),
                                       invstd.data(), dg.data(), db.data(), p, {}, dres.view());
      },
      errc::shape_mismatch, {"dresidual", "[2, 2, 2, 2]"});
  expect_error(
      [&] {
        be.batch_norm_backward<double>(x.const_view(), dy.const_view(), dx.view(), gamma.data(), mean.data(),
                                       nullptr, dg.data(), db.data(), p);
      },
      errc::null_pointer, {"saved_invstd"});
  expect_untouched(dx, "dx");
  expect_untouched(dres, "dresidual");
  expect_untouched(dg, "dgamma");
  expect_untouched(db, "dbeta");
}

// No channels: nothing to read, so null parameter pointers are fine; an empty batch in inference is a no-op.
TEST_F(BatchNormErrors, EmptyTensorsNeedNoParameters) {
  host_tensor<double, nchw> x0({2, 0, 3, 3}), y0({2, 0, 3, 3});
  EXPECT_NO_THROW(be.batch_norm_forward_inference<double>(x0.const_view(), y0.view(), nullptr, nullptr, nullptr,
                                                          nullptr, p));
  EXPECT_NO_THROW(be.batch_norm_forward_training<double>(x0.const_view(), y0.view(), nullptr, nullptr, nullptr,
                                                         nullptr, nullptr, nullptr, p));
  host_tensor<double, nchw> xe({0, 3, 3, 3}), ye({0, 3, 3, 3});
  EXPECT_NO_THROW(be.batch_norm_forward_inference<double>(xe.const_view(), ye.view(), gamma.data(), beta.data(),
                                                          rm.data(), rv.data(), p));
}

}  // namespace
