// Validation of the reference backend: every bad input is a memfmt::error with the right code and a
// message naming the values, raised before any work, so every output buffer is left untouched.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/network.hpp"
#include "memfmt/tensor/host_tensor.hpp"

#include "../common/expect_error.hpp"

namespace {

using namespace memfmt;

using memfmt_test::expect_error;

constexpr double sentinel = 123.25;

template <class F>
host_tensor<double, F> filled(const typename host_tensor<double, F>::extents_type& e, double v = sentinel) {
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
  expect_error([&] { be.conv_forward<double>(x.const_view(), w.const_view(), nullptr, null_y, p); }, errc::null_pointer,
               {"output y"});
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
        be.batch_norm_forward_inference<double>(x.const_view(), y.view(), gamma.data(), beta.data(), nullptr, rv.data(),
                                                p);
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
        be.batch_norm_backward<double>(x.const_view(), dy.const_view(), dx.view(), gamma.data(), mean.data(), nullptr,
                                       dg.data(), db.data(), p);
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
  EXPECT_NO_THROW(
      be.batch_norm_forward_inference<double>(x0.const_view(), y0.view(), nullptr, nullptr, nullptr, nullptr, p));
  EXPECT_NO_THROW(be.batch_norm_forward_training<double>(x0.const_view(), y0.view(), nullptr, nullptr, nullptr, nullptr,
                                                         nullptr, nullptr, p));
  host_tensor<double, nchw> xe({0, 3, 3, 3}), ye({0, 3, 3, 3});
  EXPECT_NO_THROW(be.batch_norm_forward_inference<double>(xe.const_view(), ye.view(), gamma.data(), beta.data(),
                                                          rm.data(), rv.data(), p));
}

// ---- layers other than conv and batch norm (shape inference of layer_params.hpp)

const reference::backend layers;

TEST(ReferenceLayerErrors, Activation) {
  const auto x = filled<nchw>({2, 3, 4, 4}, 1.0);
  auto y = filled<nhwc>({2, 3, 4, 5});
  expect_error([&] { layers.activation_forward<double>(activation::relu, x.const_view(), y.view()); },
               errc::shape_mismatch,
               {"activation_forward", "output y has sizes [2, 3, 4, 5]", "expected [2, 3, 4, 4]"});
  expect_untouched(y, "y");
  auto dx = filled<nchw>({2, 3, 4, 4});
  expect_error(
      [&] {
        layers.activation_backward<double>(activation::silu, x.const_view(),
                                           tensor_view<const double, nchw>(nullptr, x.extents()), dx.view());
      },
      errc::null_pointer, {"activation_backward", "output gradient dy", "null data pointer"});
  expect_untouched(dx, "dx");
}

// Parameters out of range are named before any element is written; a network node with them is
// refused when it is built.
TEST(ReferenceLayerErrors, ActivationParameters) {
  const auto x = filled<nchw>({2, 3, 4, 4}, 1.0);
  auto y = filled<nhwc>({2, 3, 4, 4});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<std::pair<activation_params, const char*>> bad = {
      {activation_params(activation::relu, 0.5, 0.0), "relu(alpha=0.5, beta=0) (takes no parameters"},
      {activation_params::clip(2.0, 1.0), "clip(alpha=2, beta=1) (needs bounds alpha <= beta)"},
      {activation_params::clip(nan, 1.0), "clip(alpha=nan, beta=1)"},
      {activation_params::leaky_relu(std::numeric_limits<double>::infinity()), "leaky_relu(alpha=inf, beta=0)"},
      {activation_params(activation::elu, 1.0, 2.0), "elu(alpha=1, beta=2) (needs a finite alpha and beta 0)"},
      {activation_params::hardsigmoid(nan, 0.5), "hardsigmoid(alpha=nan, beta=0.5)"},
      {activation_params(static_cast<activation>(200)), "unknown function"}};
  for (const auto& [f, message] : bad) {
    expect_error([&] { layers.activation_forward<double>(f, x.const_view(), y.view()); }, errc::invalid_argument,
                 {"activation_forward", message});
    expect_untouched(y, "y");
    expect_error([&] { layers.activation_backward<double>(f, x.const_view(), x.const_view(), y.view()); },
                 errc::invalid_argument, {"activation_backward", message});
    expect_untouched(y, "y");
    graph::network net;
    const auto in = net.input("x", {2, 3, 4, 4}, dtype::float64, format_family::channels_first);
    expect_error([&] { net.activation("act", in, f); }, errc::invalid_argument, {"node 'act'", message});
  }
}

TEST(ReferenceLayerErrors, BinaryBroadcasting) {
  const auto a = filled<nchw>({2, 3, 4, 4}, 1.0);
  const auto b = filled<nchw>({2, 2, 1, 1}, 1.0);
  auto y = filled<nchw>({2, 3, 4, 4});
  expect_error([&] { layers.binary_forward<double>(binary_op::mul, a.const_view(), b.const_view(), y.view()); },
               errc::shape_mismatch, {"operands [2, 3, 4, 4] and [2, 2, 1, 1]", "do not broadcast in dim 1"});
  expect_untouched(y, "y");
  const auto b_ok = filled<nhwc>({2, 3, 1, 1}, 1.0);
  auto y_small = filled<nchw>({2, 3, 1, 1});
  expect_error(
      [&] { layers.binary_forward<double>(binary_op::add, a.const_view(), b_ok.const_view(), y_small.view()); },
      errc::shape_mismatch, {"binary_forward", "output y has sizes [2, 3, 1, 1]", "expected [2, 3, 4, 4]"});
  expect_untouched(y_small, "y");
  // mul's gradient of a needs b's data; a wrongly sized db is named.
  const auto dy = filled<nchw>({2, 3, 4, 4}, 1.0);
  auto da = filled<nchw>({2, 3, 4, 4});
  auto db = filled<nhwc>({2, 3, 1, 2});
  expect_error(
      [&] {
        layers.binary_backward<double>(binary_op::mul, a.const_view(),
                                       tensor_view<const double, nhwc>(nullptr, b_ok.extents()), dy.const_view(),
                                       da.view(), tensor_view<double, nhwc>{});
      },
      errc::null_pointer, {"binary_backward", "operand b"});
  expect_error(
      [&] {
        layers.binary_backward<double>(binary_op::add, a.const_view(), b_ok.const_view(), dy.const_view(), da.view(),
                                       db.view());
      },
      errc::shape_mismatch, {"gradient db has sizes [2, 3, 1, 2]", "expected [2, 3, 1, 1]"});
  expect_untouched(da, "da");
  expect_untouched(db, "db");
}

TEST(ReferenceLayerErrors, Pooling) {
  const auto x = filled<nchw>({1, 2, 5, 5}, 1.0);
  pool_params p;
  p.kernel = {3, 3, 1};
  p.stride = {2, 2, 1};
  p.padding = {1, 3, 0};
  p.padding_end = {1, 1, 0};
  auto y = filled<nhwc>({1, 2, 3, 3});
  expect_error([&] { layers.pool_forward<double>(x.const_view(), y.view(), p); }, errc::invalid_argument,
               {"max_pool: input [1, 2, 5, 5]", "padding 3 / 1", "spatial dim 1", "0 <= padding < kernel"});
  p.padding = {1, 1, 0};
  p.stride = {0, 2, 1};
  expect_error([&] { layers.pool_forward<double>(x.const_view(), y.view(), p); }, errc::invalid_argument,
               {"stride 0", "spatial dim 0"});
  p.stride = {2, 2, 1};
  auto y_wrong = filled<nhwc>({1, 2, 2, 3});
  expect_error([&] { layers.pool_forward<double>(x.const_view(), y_wrong.view(), p); }, errc::shape_mismatch,
               {"pool_forward", "output y has sizes [1, 2, 2, 3]", "expected [1, 2, 3, 3]"});
  // Max pooling's backward needs x; average pooling's does not.
  const auto dy = filled<nhwc>({1, 2, 3, 3}, 1.0);
  auto dx = filled<nchw>({1, 2, 5, 5});
  expect_error([&] { layers.pool_backward<double>(tensor_view<const double, nchw>{}, dy.const_view(), dx.view(), p); },
               errc::shape_mismatch, {"pool_backward", "input x has sizes [0, 0, 0, 0]", "max pooling needs x"});
  expect_untouched(y, "y");
  expect_untouched(y_wrong, "y");
  expect_untouched(dx, "dx");
  p.kind = pool_kind::average;
  layers.pool_backward<double>(tensor_view<const double, nchw>{}, dy.const_view(), dx.view(), p);
  EXPECT_NE(dx.data()[0], sentinel);
  // A kernel larger than the padded input.
  p.kernel = {8, 3, 1};
  p.padding = {0, 1, 0};
  p.padding_end = {0, 1, 0};
  expect_error([&] { (void)pool_output_extents(x.extents(), p); }, errc::invalid_argument,
               {"average_pool", "padded input 5 < kernel 8", "spatial dim 0"});
  // Global pooling: the output must be N, C, 1, 1.
  auto g = filled<nchw>({1, 2, 1, 2});
  expect_error([&] { layers.global_average_pool_forward<double>(x.const_view(), g.view()); }, errc::shape_mismatch,
               {"global_average_pool_forward", "expected [1, 2, 1, 1]"});
  expect_untouched(g, "global pool y");
}

TEST(ReferenceLayerErrors, UpsampleAndPad) {
  const auto x = filled<ncdhw>({1, 2, 3, 4, 5}, 1.0);
  upsample_params u;
  u.output = {6, 0, 10};
  auto y = filled<ndhwc>({1, 2, 6, 8, 10});
  expect_error([&] { layers.upsample_forward<double>(x.const_view(), y.view(), u); }, errc::invalid_argument,
               {"upsample: input [1, 2, 3, 4, 5]", "output size 0 in spatial dim 1"});
  u.output = {6, 7, 10};
  expect_error([&] { layers.upsample_forward<double>(x.const_view(), y.view(), u); }, errc::shape_mismatch,
               {"upsample_forward", "output y has sizes [1, 2, 6, 8, 10]", "expected [1, 2, 6, 7, 10]"});
  expect_untouched(y, "upsample y");

  pad_params p;
  p.mode = pad_mode::reflect;
  p.begin = {1, 4, 0};
  p.end = {0, 0, 2};
  auto yp = filled<ncdhw>({1, 2, 4, 8, 7});
  expect_error([&] { layers.pad_forward<double>(x.const_view(), yp.view(), p); }, errc::invalid_argument,
               {"pad: input [1, 2, 3, 4, 5]", "reflect padding 4 / 0", "spatial dim 1", "< the input size 4"});
  p.begin = {1, -1, 0};
  expect_error([&] { layers.pad_forward<double>(x.const_view(), yp.view(), p); }, errc::invalid_argument,
               {"padding -1 / 0", "spatial dim 1", "need >= 0"});
  p.mode = pad_mode::constant;
  p.begin = {1, std::numeric_limits<std::int64_t>::max(), 0};
  expect_error([&] { layers.pad_forward<double>(x.const_view(), yp.view(), p); }, errc::overflow,
               {"pad: input", "overflows"});
  expect_untouched(yp, "pad y");
}

TEST(ReferenceLayerErrors, GroupNorm) {
  const auto x = filled<nhwc>({2, 6, 3, 3}, 1.0);
  auto y = filled<nchw>({2, 6, 3, 3});
  std::vector<double> mean(8, sentinel), invstd(8, sentinel);
  group_norm_params p;
  p.groups = 4;
  expect_error(
      [&] {
        layers.group_norm_forward<double>(x.const_view(), y.view(), nullptr, nullptr, mean.data(), invstd.data(), p);
      },
      errc::invalid_argument, {"group_norm_forward", "groups = 4", "divide C = 6", "[2, 6, 3, 3]"});
  p.groups = 3;
  p.epsilon = 0.0;
  expect_error(
      [&] {
        layers.group_norm_forward<double>(x.const_view(), y.view(), nullptr, nullptr, mean.data(), invstd.data(), p);
      },
      errc::invalid_argument, {"epsilon = 0", "finite and > 0"});
  p.epsilon = 1e-5;
  expect_error(
      [&] { layers.group_norm_forward<double>(x.const_view(), y.view(), nullptr, nullptr, nullptr, invstd.data(), p); },
      errc::null_pointer, {"saved_mean or saved_invstd is null", "N * groups = 6"});
  expect_untouched(y, "y");
  for (double v : mean) ASSERT_EQ(v, sentinel);
}

// An empty x (no samples, or a zero extent) has no statistics to read: null ones, or ones shorter
// than N * groups, are never touched, and dgamma / dbeta (sums over nothing) come out zero.
TEST(ReferenceLayerErrors, GroupNormBackwardOfEmptyInput) {
  group_norm_params p;
  p.groups = 3;
  std::vector<double> short_stats(1, sentinel);  // N * groups = 6 would be read for a non-empty x
  const auto check = [&](const host_tensor<double, nhwc>::extents_type& e) {
    const auto x = filled<nhwc>(e, 1.0);
    const auto dy = filled<nchw>(e, 1.0);
    auto dx = filled<nchw>(e);
    for (const double* stats : {static_cast<const double*>(nullptr), static_cast<const double*>(short_stats.data())}) {
      std::vector<double> dg(6, sentinel), db(6, sentinel);
      EXPECT_NO_THROW(layers.group_norm_backward<double>(x.const_view(), dy.const_view(), dx.view(), nullptr, stats,
                                                         stats, dg.data(), db.data(), p));
      for (std::size_t c = 0; c < dg.size(); ++c) {
        EXPECT_EQ(dg[c], 0.0) << "dgamma[" << c << "]";
        EXPECT_EQ(db[c], 0.0) << "dbeta[" << c << "]";
      }
      EXPECT_NO_THROW(layers.group_norm_backward<double>(x.const_view(), dy.const_view(), dx.view(), nullptr, stats,
                                                         stats, nullptr, nullptr, p));
    }
  };
  check({0, 6, 3, 3});
  check({2, 6, 0, 3});
  check({2, 6, 3, 0});
}

// The forward of an empty x saves no statistics: null ones are allowed then, and given ones are
// left as they were.
TEST(ReferenceLayerErrors, GroupNormForwardOfEmptyInput) {
  group_norm_params p;
  p.groups = 3;
  for (const host_tensor<double, nhwc>::extents_type& e :
       {host_tensor<double, nhwc>::extents_type{0, 6, 3, 3}, {2, 6, 0, 3}, {2, 6, 3, 0}}) {
    const auto x = filled<nhwc>(e, 1.0);
    auto y = filled<nchw>(e);
    EXPECT_NO_THROW(layers.group_norm_forward<double>(x.const_view(), y.view(), nullptr, nullptr, nullptr, nullptr, p));
    std::vector<double> mean(6, sentinel), invstd(6, sentinel);
    EXPECT_NO_THROW(
        layers.group_norm_forward<double>(x.const_view(), y.view(), nullptr, nullptr, mean.data(), invstd.data(), p));
    for (std::size_t i = 0; i < mean.size(); ++i) {
      EXPECT_EQ(mean[i], sentinel) << "saved_mean[" << i << "]";
      EXPECT_EQ(invstd[i], sentinel) << "saved_invstd[" << i << "]";
    }
  }
}

TEST(ReferenceLayerErrors, SoftmaxLinearConcatSlice) {
  const auto y = filled<nchw>({2, 5, 3, 3}, 0.2);
  const auto dy = filled<nhwc>({2, 5, 3, 3}, 1.0);
  auto dx = filled<nchw>({2, 5, 3, 2});
  expect_error([&] { layers.softmax_backward<double>(y.const_view(), dy.const_view(), dx.view(), softmax_params{}); },
               errc::shape_mismatch,
               {"softmax_backward", "input gradient dx has sizes [2, 5, 3, 2]", "expected [2, 5, 3, 3]"});
  expect_untouched(dx, "softmax dx");

  const auto x = filled<nhwc>({2, 3, 2, 2}, 1.0);
  std::vector<double> w(4 * 12, 0.5);
  auto out = filled<nchw>({3, 4, 1, 1});
  expect_error([&] { layers.linear_forward<double>(x.const_view(), w.data(), nullptr, out.view()); },
               errc::shape_mismatch, {"linear_forward", "output y has sizes [3, 4, 1, 1]", "expected [2, 4, 1, 1]"});
  auto out_ok = filled<nchw>({2, 4, 1, 1});
  expect_error([&] { layers.linear_forward<double>(x.const_view(), nullptr, nullptr, out_ok.view()); },
               errc::null_pointer, {"weight w is null", "K x F = 4 x 12"});
  expect_untouched(out, "linear y");
  expect_untouched(out_ok, "linear y");

  const auto a = filled<nchw>({2, 3, 4, 4}, 1.0), b = filled<nchw>({2, 2, 4, 4}, 1.0);
  auto whole = filled<nhwc>({2, 6, 4, 4});
  expect_error(
      [&] {
        layers.concat_forward<double, nchw>({a.const_view(), b.const_view()}, whole.view());
      },
      errc::shape_mismatch, {"concat_forward", "2 parts have 5 entries along axis 1 in all", "output y has 6"});
  const auto c = filled<nchw>({2, 2, 4, 5}, 1.0);
  expect_error(
      [&] {
        layers.concat_forward<double, nchw>({a.const_view(), c.const_view()}, whole.view());
      },
      errc::shape_mismatch, {"part 1 has sizes [2, 2, 4, 5]", "expected [2, 2, 4, 4]", "outside axis 1"});
  // Along W: parts must match the whole outside W, and their W add up to the whole's; along N or
  // past the rank: no axis.
  const auto a6 = filled<nchw>({2, 6, 4, 2}, 1.0), c5 = filled<nchw>({2, 5, 4, 2}, 1.0);
  expect_error(
      [&] {
        layers.concat_forward<double, nchw>({a6.const_view(), c5.const_view()}, whole.view(), {3});
      },
      errc::shape_mismatch, {"part 1 has sizes [2, 5, 4, 2]", "expected [2, 6, 4, 2]", "outside axis 3"});
  expect_error(
      [&] {
        layers.concat_forward<double, nchw>({a.const_view(), a.const_view()}, whole.view(), {3});
      },
      errc::shape_mismatch, {"part 0 has sizes [2, 3, 4, 4]", "expected [2, 6, 4, 4]"});
  expect_error(
      [&] {
        layers.concat_forward<double, nchw>({a6.const_view(), a6.const_view(), a6.const_view()}, whole.view(), {3});
      },
      errc::shape_mismatch, {"3 parts have 6 entries along axis 3 in all", "output y has 4"});
  for (const int axis : {0, 4, -1})
    expect_error([&] { layers.concat_forward<double, nchw>({a.const_view()}, whole.view(), {axis}); },
                 errc::invalid_argument, {"concatenation axis " + std::to_string(axis), "spatial axis (2 to 3)"});
  expect_untouched(whole, "concat y");
  auto part = filled<nchw>({2, 3, 4, 4});
  expect_error(
      [&] {
        layers.slice_forward<double>(whole.const_view(), slice_params{1, 4, 7, 1}, part.view());
      },
      errc::invalid_argument, {"slice of axis 1 [4, 7) step 1", "need 0 <= begin < end <= 6"});
  expect_error(
      [&] {
        layers.slice_forward<double>(whole.const_view(), slice_params{1, -1, 2, 1}, part.view());
      },
      errc::invalid_argument, {"[-1, 2)"});
  expect_error(
      [&] {
        layers.slice_forward<double>(whole.const_view(), slice_params{2, 0, 4, 0}, part.view());
      },
      errc::invalid_argument, {"step 0", "step >= 1"});
  expect_error(
      [&] {
        layers.slice_forward<double>(whole.const_view(), slice_params{4, 0, 1, 1}, part.view());
      },
      errc::invalid_argument, {"the axis must be C (1) or a spatial axis (2 to 3)"});
  expect_error(
      [&] {
        layers.slice_forward<double>(whole.const_view(), slice_params{0, 0, 1, 1}, part.view());
      },
      errc::invalid_argument, {"slice of axis 0"});
  // Valid parameters, a part of other sizes: [0, 4) step 3 of H takes 2 rows, not 4.
  expect_error(
      [&] {
        layers.slice_forward<double>(whole.const_view(), slice_params{2, 0, 4, 3}, part.view());
      },
      errc::shape_mismatch, {"output y has sizes [2, 3, 4, 4]", "expected [2, 6, 2, 4]"});
  expect_untouched(part, "slice y");
}

TEST(ReferenceLayerErrors, Rearrange) {
  const auto x = filled<nhwc>({2, 8, 3, 3}, 1.0);
  auto y = filled<nchw>({2, 8, 6, 6});
  const rearrange_params d2s{rearrange_kind::depth_to_space, 2, block_order::crd};
  expect_error([&] { layers.rearrange_forward<double>(x.const_view(), d2s, y.view()); }, errc::shape_mismatch,
               {"rearrange_forward", "output y has sizes [2, 8, 6, 6]", "expected [2, 2, 6, 6]", "depth_to_space"});
  const rearrange_params shuffle{rearrange_kind::channel_shuffle, 3, block_order::crd};
  auto same = filled<nchw>({2, 8, 3, 3});
  expect_error([&] { layers.rearrange_forward<double>(x.const_view(), shuffle, same.view()); }, errc::invalid_argument,
               {"channel_shuffle by 3", "[2, 8, 3, 3]", "3 groups must divide channels 8"});
  auto dx = filled<nchw>({2, 8, 3, 3});
  const auto dy = filled<nhwc>({2, 2, 6, 5}, 1.0);
  expect_error([&] { layers.rearrange_backward<double>(dy.const_view(), d2s, dx.view()); }, errc::shape_mismatch,
               {"rearrange_backward", "output gradient dy has sizes [2, 2, 6, 5]", "expected [2, 2, 6, 6]"});
  const tensor_view<const double, nhwc> null_x(nullptr, x.const_view().mapping());
  expect_error([&] { layers.rearrange_forward<double>(null_x, shuffle, same.view()); }, errc::invalid_argument,
               {"3 groups must divide"});
  const rearrange_params halves{rearrange_kind::channel_shuffle, 2, block_order::crd};
  expect_error([&] { layers.rearrange_forward<double>(null_x, halves, same.view()); }, errc::null_pointer,
               {"rearrange_forward", "input x", "null data pointer"});
  // A transpose keeps N and C and permutes the spatial dims.
  auto t = filled<nchw>({2, 8, 3, 3});
  for (const auto& [perm, msg] : {std::pair<std::array<int, 5>, const char*>{{1, 0, 2, 3, 4}, "(0 -> 1)"},
                                  {{0, 1, 2, 2, 4}, "(3 -> 2)"},
                                  {{0, 1, 3, 4, 2}, "(3 -> 4)"},
                                  {{0, 1, 3, 2, 3}, "(4 -> 3)"},
                                  {{0, 1, 3, -1, 4}, "(3 -> -1)"}}) {
    rearrange_params p{rearrange_kind::transpose, 1, block_order::crd};
    p.perm = perm;
    expect_error([&] { layers.rearrange_forward<double>(x.const_view(), p, t.view()); }, errc::invalid_argument,
                 {"transpose [", "perm must keep N and C first and permute the 2 spatial dims", msg});
  }
  rearrange_params swap{rearrange_kind::transpose, 1, block_order::crd};
  swap.perm = {0, 1, 3, 2, 4};
  const auto wide = filled<nchw>({2, 8, 3, 5}, 1.0);
  expect_error([&] { layers.rearrange_forward<double>(wide.const_view(), swap, t.view()); }, errc::shape_mismatch,
               {"output y has sizes [2, 8, 3, 3]", "expected [2, 8, 5, 3]"});
  expect_untouched(t, "transpose y");
  expect_untouched(y, "rearrange y");
  expect_untouched(same, "rearrange y");
  expect_untouched(dx, "rearrange dx");
}

TEST(ReferenceLayerErrors, ConvEndPadding) {
  const auto x = filled<nchw>({1, 2, 5, 5}, 1.0);
  const auto w = filled<nchw>({3, 2, 3, 3}, 1.0);
  conv_params p;
  p.padding = {1, 1, 0};
  p.padding_end = std::array<std::int64_t, 3>{0, -1, 0};
  auto y = filled<nchw>({1, 3, 4, 4});
  expect_error([&] { layers.conv_forward<double>(x.const_view(), w.const_view(), nullptr, y.view(), p); },
               errc::invalid_argument, {"padding 1 (end -1)", "spatial dim 1"});
  p.padding_end = std::array<std::int64_t, 3>{0, 2, 0};
  EXPECT_EQ(conv_output_extents(x.extents(), w.extents(), p), (std::array<std::int64_t, 4>{1, 3, 4, 6}));
  expect_error([&] { layers.conv_forward<double>(x.const_view(), w.const_view(), nullptr, y.view(), p); },
               errc::shape_mismatch, {"output y has sizes [1, 3, 4, 4]", "expected [1, 3, 4, 6]"});
  p.padding_end = std::array<std::int64_t, 3>{std::numeric_limits<std::int64_t>::max(), 0, 0};
  expect_error([&] { (void)conv_output_extents(x.extents(), w.extents(), p); }, errc::overflow,
               {"padded input", "overflows"});
  expect_untouched(y, "conv y");
}

}  // namespace
