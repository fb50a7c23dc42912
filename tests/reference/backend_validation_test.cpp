// One validation path for every backend: each bad input below goes through the shared checks
// (memfmt/backends/validate.hpp) and through the reference backend and, when built with oneDNN, the
// oneDNN backend. All must throw memfmt::error with the same code and the very same message; that
// message must carry the code and the values the case names (written out here by hand), and the
// outputs must stay untouched. Every case is one change away from a valid baseline, which all of
// them accept, so each error comes from the change.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/backends/validate.hpp"
#include "memfmt/tensor/host_tensor.hpp"
#if defined(MEMFMT_TEST_ONEDNN)
#include "memfmt/backends/onednn/backend.hpp"
#endif

namespace {

using namespace memfmt;

// The shared validation on its own, with the backends' argument lists.
struct shared_runner {
  static constexpr const char* name = "validate.hpp";
  template <class XF, class WF, class YF>
  void conv_forward(tensor_view<const float, XF> x, tensor_view<const float, WF> w, const float*,
                    tensor_view<float, YF> y, const conv_params& p) {
    validate_conv_forward(x, w, y, p);
  }
  template <class YF, class WF, class XF>
  void conv_backward_data(tensor_view<const float, YF> dy, tensor_view<const float, WF> w, tensor_view<float, XF> dx,
                          const conv_params& p) {
    validate_conv_backward_data(dy, w, dx, p);
  }
  template <class XF, class YF, class WF>
  void conv_backward_weights(tensor_view<const float, XF> x, tensor_view<const float, YF> dy, tensor_view<float, WF> dw,
                             float*, const conv_params& p) {
    validate_conv_backward_weights(x, dy, dw, p);
  }
  template <class F>
  void bn_training(tensor_view<const float, F> x, tensor_view<float, F> y, const float* g, const float* b, float* rm,
                   float* rv, float* sm, float* si, const batch_norm_params& p, tensor_view<const float, F> res) {
    validate_batch_norm_forward_training(x, y, g, b, rm, rv, sm, si, p, res);
  }
  template <class F>
  void bn_inference(tensor_view<const float, F> x, tensor_view<float, F> y, const float* g, const float* b,
                    const float* rm, const float* rv, const batch_norm_params& p, tensor_view<const float, F> res) {
    validate_batch_norm_forward_inference(x, y, g, b, rm, rv, p, res);
  }
  template <class F>
  void bn_backward(tensor_view<const float, F> x, tensor_view<const float, F> dy, tensor_view<float, F> dx,
                   const float* g, const float* sm, const float* si, float* dg, float* db, const batch_norm_params& p,
                   tensor_view<const float, F> y, tensor_view<float, F> dres) {
    validate_batch_norm_backward(x, dy, dx, g, sm, si, dg, db, p, y, dres);
  }
};

struct reference_runner {
  static constexpr const char* name = "reference";
  reference::backend be;
  template <class XF, class WF, class YF>
  void conv_forward(tensor_view<const float, XF> x, tensor_view<const float, WF> w, const float* bias,
                    tensor_view<float, YF> y, const conv_params& p) {
    be.conv_forward<float, XF, WF, YF>(x, w, bias, y, p);
  }
  template <class YF, class WF, class XF>
  void conv_backward_data(tensor_view<const float, YF> dy, tensor_view<const float, WF> w, tensor_view<float, XF> dx,
                          const conv_params& p) {
    be.conv_backward_data<float, YF, WF, XF>(dy, w, dx, p);
  }
  template <class XF, class YF, class WF>
  void conv_backward_weights(tensor_view<const float, XF> x, tensor_view<const float, YF> dy, tensor_view<float, WF> dw,
                             float* dbias, const conv_params& p) {
    be.conv_backward_weights<float, XF, YF, WF>(x, dy, dw, dbias, p);
  }
  template <class F>
  void bn_training(tensor_view<const float, F> x, tensor_view<float, F> y, const float* g, const float* b, float* rm,
                   float* rv, float* sm, float* si, const batch_norm_params& p, tensor_view<const float, F> res) {
    be.batch_norm_forward_training<float, F>(x, y, g, b, rm, rv, sm, si, p, res);
  }
  template <class F>
  void bn_inference(tensor_view<const float, F> x, tensor_view<float, F> y, const float* g, const float* b,
                    const float* rm, const float* rv, const batch_norm_params& p, tensor_view<const float, F> res) {
    be.batch_norm_forward_inference<float, F>(x, y, g, b, rm, rv, p, res);
  }
  template <class F>
  void bn_backward(tensor_view<const float, F> x, tensor_view<const float, F> dy, tensor_view<float, F> dx,
                   const float* g, const float* sm, const float* si, float* dg, float* db, const batch_norm_params& p,
                   tensor_view<const float, F> y, tensor_view<float, F> dres) {
    be.batch_norm_backward<float, F>(x, dy, dx, g, sm, si, dg, db, p, y, dres);
  }
};

#if defined(MEMFMT_TEST_ONEDNN)
struct onednn_runner {
  static constexpr const char* name = "onednn";
  onednn::backend be;
  template <class XF, class WF, class YF>
  void conv_forward(tensor_view<const float, XF> x, tensor_view<const float, WF> w, const float* bias,
                    tensor_view<float, YF> y, const conv_params& p) {
    be.conv_forward(x, w, bias, y, p);
  }
  template <class YF, class WF, class XF>
  void conv_backward_data(tensor_view<const float, YF> dy, tensor_view<const float, WF> w, tensor_view<float, XF> dx,
                          const conv_params& p) {
    be.conv_backward_data(dy, w, dx, p);
  }
  template <class XF, class YF, class WF>
  void conv_backward_weights(tensor_view<const float, XF> x, tensor_view<const float, YF> dy, tensor_view<float, WF> dw,
                             float* dbias, const conv_params& p) {
    be.conv_backward_weights(x, dy, dw, dbias, p);
  }
  template <class F>
  void bn_training(tensor_view<const float, F> x, tensor_view<float, F> y, const float* g, const float* b, float* rm,
                   float* rv, float* sm, float* si, const batch_norm_params& p, tensor_view<const float, F> res) {
    be.batch_norm_forward_training(x, y, g, b, rm, rv, sm, si, p, res);
  }
  template <class F>
  void bn_inference(tensor_view<const float, F> x, tensor_view<float, F> y, const float* g, const float* b,
                    const float* rm, const float* rv, const batch_norm_params& p, tensor_view<const float, F> res) {
    be.batch_norm_forward_inference(x, y, g, b, rm, rv, p, res);
  }
  template <class F>
  void bn_backward(tensor_view<const float, F> x, tensor_view<const float, F> dy, tensor_view<float, F> dx,
                   const float* g, const float* sm, const float* si, float* dg, float* db, const batch_norm_params& p,
                   tensor_view<const float, F> y, tensor_view<float, F> dres) {
    be.batch_norm_backward(x, dy, dx, g, sm, si, dg, db, p, y, dres);
  }
};
#endif

struct outcome {
  std::optional<errc> code;  // nullopt: nothing thrown
  std::string what;
};

template <class Runner, class Case>
outcome run_case(const Case& c) {
  Runner r;
  try {
    c(r);
  } catch (const memfmt::error& e) {
    return {e.code(), e.what()};
  }
  return {};
}

constexpr float sentinel = 123.25f;

template <class F>
host_tensor<float, F> filled(const typename host_tensor<float, F>::extents_type& e, float v) {
  host_tensor<float, F> t(e);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = v;
  return t;
}

bool all_sentinel(const float* p, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (p[i] != sentinel) return false;
  return true;
}

// The case fails in the shared validation with `code` and a message holding every `mention`, and
// each backend throws the same code and message.
template <class Case>
void expect_same_error(const char* label, const Case& c, errc code, std::initializer_list<const char*> mentions) {
  SCOPED_TRACE(label);
  const outcome shared = run_case<shared_runner>(c);
  ASSERT_TRUE(shared.code.has_value()) << "the shared validation accepted it";
  EXPECT_EQ(*shared.code, code) << shared.what;
  for (const char* m : mentions)
    EXPECT_NE(shared.what.find(m), std::string::npos) << "'" << m << "' not in: " << shared.what;
  auto same = [&](const outcome& o, const char* backend) {
    ASSERT_TRUE(o.code.has_value()) << backend << " accepted it";
    EXPECT_EQ(*o.code, *shared.code) << backend << ": " << o.what;
    EXPECT_EQ(o.what, shared.what) << backend;
  };
  same(run_case<reference_runner>(c), reference_runner::name);
#if defined(MEMFMT_TEST_ONEDNN)
  same(run_case<onednn_runner>(c), onednn_runner::name);
#endif
}

template <class Case>
void expect_accepted(const Case& c) {
  const outcome shared = run_case<shared_runner>(c);
  EXPECT_FALSE(shared.code.has_value()) << "shared: " << shared.what;
  const outcome ref = run_case<reference_runner>(c);
  EXPECT_FALSE(ref.code.has_value()) << "reference: " << ref.what;
#if defined(MEMFMT_TEST_ONEDNN)
  const outcome dnn = run_case<onednn_runner>(c);
  EXPECT_FALSE(dnn.code.has_value()) << "onednn: " << dnn.what;
#endif
}

// ------------------------------------------------------------------ convolution
// x NCHW [2, 4, 5, 5], weight KRSC [6, 2, 3, 3] with groups 2: y [2, 6, 3, 3] ((5 - 3) / 1 + 1 = 3).

struct ConvValidation : ::testing::Test {
  host_tensor<float, nchw> x = filled<nchw>({2, 4, 5, 5}, 1.f);
  host_tensor<float, nhwc> w = filled<nhwc>({6, 2, 3, 3}, 1.f);
  host_tensor<float, nhwc> dy = filled<nhwc>({2, 6, 3, 3}, 1.f);
  host_tensor<float, nhwc> y = filled<nhwc>({2, 6, 3, 3}, sentinel);
  host_tensor<float, nchw> dx = filled<nchw>({2, 4, 5, 5}, sentinel);
  host_tensor<float, nhwc> dw = filled<nhwc>({6, 2, 3, 3}, sentinel);
  std::vector<float> bias = std::vector<float>(6, 0.5f), dbias = std::vector<float>(6, sentinel);
  conv_params p = [] {
    conv_params q;
    q.groups = 2;
    return q;
  }();

  void expect_outputs_untouched() {
    EXPECT_TRUE(all_sentinel(y.data(), y.numel())) << "y written";
    EXPECT_TRUE(all_sentinel(dx.data(), dx.numel())) << "dx written";
    EXPECT_TRUE(all_sentinel(dw.data(), dw.numel())) << "dw written";
    EXPECT_TRUE(all_sentinel(dbias.data(), 6)) << "dbias written";
  }
};

TEST_F(ConvValidation, SharedChecksReturnTheOutputSizes) {
  using e4 = std::array<std::int64_t, 4>;
  EXPECT_EQ(validate_conv_forward(x.const_view(), w.const_view(), y.view(), p), (e4{2, 6, 3, 3}));
  EXPECT_EQ(validate_conv_backward_data(dy.const_view(), w.const_view(), dx.view(), p), (e4{2, 6, 3, 3}));
  EXPECT_EQ(validate_conv_backward_weights(x.const_view(), dy.const_view(), dw.view(), p), (e4{2, 6, 3, 3}));
  // Stride 2, padding 1, dilation 2 in W: H = (5 - 3) / 2 + 1 = 2, W = (5 + 2 - 5) / 1 + 1 = 3.
  conv_params q = p;
  q.stride = {2, 1, 1};
  q.padding = {0, 1, 0};
  q.dilation = {1, 2, 1};
  host_tensor<float, nhwc> y2({2, 6, 2, 3});
  EXPECT_EQ(validate_conv_forward(x.const_view(), w.const_view(), y2.view(), q), (e4{2, 6, 2, 3}));
}

TEST_F(ConvValidation, ValidBaselineAcceptedEverywhere) {
  expect_accepted([&](auto& r) { r.conv_forward(x.const_view(), w.const_view(), bias.data(), y.view(), p); });
  expect_accepted([&](auto& r) { r.conv_backward_data(dy.const_view(), w.const_view(), dx.view(), p); });
  expect_accepted(
      [&](auto& r) { r.conv_backward_weights(x.const_view(), dy.const_view(), dw.view(), dbias.data(), p); });
}

TEST_F(ConvValidation, Forward) {
  auto y_bad = filled<nhwc>({2, 6, 3, 4}, sentinel);
  expect_same_error("output sizes",
                    [&](auto& r) { r.conv_forward(x.const_view(), w.const_view(), bias.data(), y_bad.view(), p); },
                    errc::shape_mismatch, {"conv_forward", "output y", "[2, 6, 3, 4]", "[2, 6, 3, 3]"});
  EXPECT_TRUE(all_sentinel(y_bad.data(), y_bad.numel()));
  conv_params q = p;
  q.groups = 3;
  expect_same_error("groups 3", [&](auto& r) { r.conv_forward(x.const_view(), w.const_view(), nullptr, y.view(), q); },
                    errc::invalid_argument, {"groups = 3", "C = 4"});
  q = p;
  q.groups = 1;
  expect_same_error("groups 1", [&](auto& r) { r.conv_forward(x.const_view(), w.const_view(), nullptr, y.view(), q); },
                    errc::shape_mismatch, {"2 input channels per group", "4 / 1"});
  q = p;
  q.stride[1] = 0;
  expect_same_error("stride 0", [&](auto& r) { r.conv_forward(x.const_view(), w.const_view(), nullptr, y.view(), q); },
                    errc::invalid_argument, {"stride 0", "spatial dim 1"});
  q = p;
  q.padding[0] = -1;
  expect_same_error("padding -1",
                    [&](auto& r) { r.conv_forward(x.const_view(), w.const_view(), nullptr, y.view(), q); },
                    errc::invalid_argument, {"padding -1", "spatial dim 0"});
  q = p;
  q.dilation[0] = 3;
  expect_same_error("dilation 3",
                    [&](auto& r) { r.conv_forward(x.const_view(), w.const_view(), nullptr, y.view(), q); },
                    errc::invalid_argument, {"dilated kernel 7", "padded input 5"});
  tensor_view<const float, nchw> null_x(nullptr, x.extents());
  expect_same_error("null x", [&](auto& r) { r.conv_forward(null_x, w.const_view(), nullptr, y.view(), p); },
                    errc::null_pointer, {"input x", "nchw", "[2, 4, 5, 5]"});
  tensor_view<const float, nhwc> null_w(nullptr, w.extents());
  expect_same_error("null w", [&](auto& r) { r.conv_forward(x.const_view(), null_w, nullptr, y.view(), p); },
                    errc::null_pointer, {"weight w", "nhwc", "[6, 2, 3, 3]"});
  tensor_view<float, nhwc> null_y(nullptr, y.extents());
  expect_same_error("null y", [&](auto& r) { r.conv_forward(x.const_view(), w.const_view(), nullptr, null_y, p); },
                    errc::null_pointer, {"output y", "[2, 6, 3, 3]"});
  host_tensor<float, nhwc> w0({6, 2, 0, 3});
  host_tensor<float, nhwc> y0({2, 6, 3, 3});
  expect_same_error("empty kernel",
                    [&](auto& r) { r.conv_forward(x.const_view(), w0.const_view(), nullptr, y0.view(), p); },
                    errc::invalid_argument, {"weight [6, 2, 0, 3]", "weight sizes must be positive"});
  expect_outputs_untouched();
}

TEST_F(ConvValidation, BackwardData) {
  auto dx_bad = filled<nchw>({2, 4, 6, 5}, sentinel);  // gives dy [2, 6, 4, 3]
  expect_same_error("dx sizes",
                    [&](auto& r) { r.conv_backward_data(dy.const_view(), w.const_view(), dx_bad.view(), p); },
                    errc::shape_mismatch, {"conv_backward_data", "output gradient dy", "[2, 6, 3, 3]", "[2, 6, 4, 3]"});
  EXPECT_TRUE(all_sentinel(dx_bad.data(), dx_bad.numel()));
  tensor_view<const float, nhwc> null_dy(nullptr, dy.extents());
  expect_same_error("null dy", [&](auto& r) { r.conv_backward_data(null_dy, w.const_view(), dx.view(), p); },
                    errc::null_pointer, {"output gradient dy", "[2, 6, 3, 3]"});
  tensor_view<float, nchw> null_dx(nullptr, dx.extents());
  expect_same_error("null dx", [&](auto& r) { r.conv_backward_data(dy.const_view(), w.const_view(), null_dx, p); },
                    errc::null_pointer, {"input gradient dx", "[2, 4, 5, 5]"});
  conv_params q = p;
  q.groups = 4;
  expect_same_error("groups 4", [&](auto& r) { r.conv_backward_data(dy.const_view(), w.const_view(), dx.view(), q); },
                    errc::invalid_argument, {"groups = 4", "K = 6"});
  expect_outputs_untouched();
}

TEST_F(ConvValidation, BackwardWeights) {
  auto dw_bad = filled<nhwc>({6, 2, 2, 3}, sentinel);  // gives dy [2, 6, 4, 3]
  expect_same_error(
      "dw sizes",
      [&](auto& r) { r.conv_backward_weights(x.const_view(), dy.const_view(), dw_bad.view(), dbias.data(), p); },
      errc::shape_mismatch, {"conv_backward_weights", "output gradient dy", "[2, 6, 4, 3]"});
  EXPECT_TRUE(all_sentinel(dw_bad.data(), dw_bad.numel()));
  tensor_view<float, nhwc> null_dw(nullptr, dw.extents());
  expect_same_error(
      "null dw", [&](auto& r) { r.conv_backward_weights(x.const_view(), dy.const_view(), null_dw, dbias.data(), p); },
      errc::null_pointer, {"weight gradient dw", "[6, 2, 3, 3]"});
  tensor_view<const float, nchw> null_x(nullptr, x.extents());
  expect_same_error("null x",
                    [&](auto& r) { r.conv_backward_weights(null_x, dy.const_view(), dw.view(), dbias.data(), p); },
                    errc::null_pointer, {"input x", "[2, 4, 5, 5]"});
  expect_outputs_untouched();
}

// ------------------------------------------------------------------ batch norm
// x NHWC [2, 3, 2, 2]: C = 3 channels of 8 values.

struct BatchNormValidation : ::testing::Test {
  using view = tensor_view<float, nhwc>;
  using cview = tensor_view<const float, nhwc>;
  host_tensor<float, nhwc> x = filled<nhwc>({2, 3, 2, 2}, 1.f);
  host_tensor<float, nhwc> y = filled<nhwc>({2, 3, 2, 2}, sentinel);
  host_tensor<float, nhwc> dy = filled<nhwc>({2, 3, 2, 2}, 1.f);
  host_tensor<float, nhwc> dx = filled<nhwc>({2, 3, 2, 2}, sentinel);
  host_tensor<float, nhwc> yfwd = filled<nhwc>({2, 3, 2, 2}, 1.f);
  std::vector<float> gamma = std::vector<float>(3, 1.f), beta = std::vector<float>(3, 0.f);
  std::vector<float> rm = std::vector<float>(3, sentinel), rv = std::vector<float>(3, sentinel);
  std::vector<float> sm = std::vector<float>(3, sentinel), si = std::vector<float>(3, sentinel);
  std::vector<float> mean = std::vector<float>(3, 0.f), invstd = std::vector<float>(3, 1.f);
  std::vector<float> dg = std::vector<float>(3, sentinel), db = std::vector<float>(3, sentinel);
  // Inference statistics (read only).
  std::vector<float> run_mean = std::vector<float>(3, 0.f), run_var = std::vector<float>(3, 1.f);
  batch_norm_params p;

  void expect_outputs_untouched() {
    EXPECT_TRUE(all_sentinel(y.data(), y.numel())) << "y written";
    EXPECT_TRUE(all_sentinel(dx.data(), dx.numel())) << "dx written";
    for (const auto* v : {&rm, &rv, &sm, &si, &dg, &db}) EXPECT_TRUE(all_sentinel(v->data(), 3)) << "stats written";
  }
};

TEST_F(BatchNormValidation, ValidBaselineAcceptedEverywhere) {
  expect_accepted([&](auto& r) {
    r.bn_training(x.const_view(), y.view(), gamma.data(), beta.data(), rm.data(), rv.data(), sm.data(), si.data(), p,
                  cview{});
  });
  expect_accepted([&](auto& r) {
    r.bn_inference(x.const_view(), y.view(), gamma.data(), beta.data(), run_mean.data(), run_var.data(), p, cview{});
  });
  batch_norm_params relu = p;
  relu.fuse_relu = true;
  expect_accepted([&](auto& r) {
    r.bn_backward(x.const_view(), dy.const_view(), dx.view(), gamma.data(), mean.data(), invstd.data(), dg.data(),
                  db.data(), relu, yfwd.const_view(), view{});
  });
}

TEST_F(BatchNormValidation, Training) {
  auto train = [&](cview xv, view yv, const float* g, float* rvar, float* sinv, const batch_norm_params& q,
                   cview res = {}) {
    return [=](auto& r) { r.bn_training(xv, yv, g, beta.data(), rm.data(), rvar, sm.data(), sinv, q, res); };
  };
  auto y_bad = filled<nhwc>({2, 3, 2, 3}, sentinel);
  expect_same_error("y sizes", train(x.const_view(), y_bad.view(), gamma.data(), rv.data(), si.data(), p),
                    errc::shape_mismatch, {"batch_norm_forward_training", "output y", "[2, 3, 2, 3]", "[2, 3, 2, 2]"});
  EXPECT_TRUE(all_sentinel(y_bad.data(), y_bad.numel()));
  auto res = filled<nhwc>({2, 3, 1, 2}, 0.f);
  expect_same_error("residual sizes",
                    train(x.const_view(), y.view(), gamma.data(), rv.data(), si.data(), p, res.const_view()),
                    errc::shape_mismatch, {"residual", "[2, 3, 1, 2]"});
  auto x1 = filled<nhwc>({1, 3, 1, 1}, 1.f);
  auto y1 = filled<nhwc>({1, 3, 1, 1}, sentinel);
  expect_same_error("one value per channel", train(x1.const_view(), y1.view(), gamma.data(), rv.data(), si.data(), p),
                    errc::invalid_argument, {"[1, 3, 1, 1]", "1 value(s) per channel"});
  EXPECT_TRUE(all_sentinel(y1.data(), y1.numel()));
  expect_same_error("null gamma", train(x.const_view(), y.view(), nullptr, rv.data(), si.data(), p), errc::null_pointer,
                    {"gamma", "C = 3"});
  expect_same_error("null running_var", train(x.const_view(), y.view(), gamma.data(), nullptr, si.data(), p),
                    errc::null_pointer, {"running_var", "C = 3"});
  expect_same_error("null saved_invstd", train(x.const_view(), y.view(), gamma.data(), rv.data(), nullptr, p),
                    errc::null_pointer, {"saved_invstd"});
  expect_same_error("null x", train(cview(nullptr, x.extents()), y.view(), gamma.data(), rv.data(), si.data(), p),
                    errc::null_pointer, {"input x", "nhwc", "[2, 3, 2, 2]"});
  batch_norm_params q = p;
  q.epsilon = 0;
  expect_same_error("epsilon 0", train(x.const_view(), y.view(), gamma.data(), rv.data(), si.data(), q),
                    errc::invalid_argument, {"epsilon = 0.000000"});
  q.epsilon = std::numeric_limits<double>::infinity();
  expect_same_error("epsilon inf", train(x.const_view(), y.view(), gamma.data(), rv.data(), si.data(), q),
                    errc::invalid_argument, {"epsilon = inf"});
  q = p;
  q.momentum = 1.5;
  expect_same_error("momentum 1.5", train(x.const_view(), y.view(), gamma.data(), rv.data(), si.data(), q),
                    errc::invalid_argument, {"momentum = 1.5"});
  q.momentum = std::nan("");
  expect_same_error("momentum nan", train(x.const_view(), y.view(), gamma.data(), rv.data(), si.data(), q),
                    errc::invalid_argument, {"momentum = nan"});
  expect_outputs_untouched();
}

TEST_F(BatchNormValidation, Inference) {
  auto infer = [&](cview xv, view yv, const float* rmean, const batch_norm_params& q, cview res = {}) {
    return [=](auto& r) { r.bn_inference(xv, yv, gamma.data(), beta.data(), rmean, run_var.data(), q, res); };
  };
  expect_same_error("null running_mean", infer(x.const_view(), y.view(), nullptr, p), errc::null_pointer,
                    {"batch_norm_forward_inference", "running_mean", "C = 3"});
  auto y_bad = filled<nhwc>({2, 4, 2, 2}, sentinel);
  expect_same_error("y sizes", infer(x.const_view(), y_bad.view(), run_mean.data(), p), errc::shape_mismatch,
                    {"output y", "[2, 4, 2, 2]"});
  auto res = filled<nhwc>({1, 3, 2, 2}, 0.f);
  expect_same_error("residual sizes", infer(x.const_view(), y.view(), run_mean.data(), p, res.const_view()),
                    errc::shape_mismatch, {"residual", "[1, 3, 2, 2]"});
  batch_norm_params q = p;
  q.epsilon = -1;
  expect_same_error("epsilon -1", infer(x.const_view(), y.view(), run_mean.data(), q), errc::invalid_argument,
                    {"epsilon = -1.000000"});
  expect_same_error("null y", infer(x.const_view(), view(nullptr, x.extents()), run_mean.data(), p), errc::null_pointer,
                    {"output y", "[2, 3, 2, 2]"});
  expect_outputs_untouched();
}

TEST_F(BatchNormValidation, Backward) {
  auto bwd = [&](cview dyv, view dxv, const float* sinv, float* dgam, const batch_norm_params& q, cview yv = {},
                 view dres = {}) {
    return [=](auto& r) {
      r.bn_backward(x.const_view(), dyv, dxv, gamma.data(), mean.data(), sinv, dgam, db.data(), q, yv, dres);
    };
  };
  batch_norm_params relu = p;
  relu.fuse_relu = true;
  expect_same_error("fuse_relu without y", bwd(dy.const_view(), dx.view(), invstd.data(), dg.data(), relu),
                    errc::null_pointer, {"batch_norm_backward", "fuse_relu", "forward output y"});
  auto y_bad = filled<nhwc>({2, 3, 1, 2}, 1.f);
  expect_same_error("y sizes", bwd(dy.const_view(), dx.view(), invstd.data(), dg.data(), relu, y_bad.const_view()),
                    errc::shape_mismatch, {"forward output y", "[2, 3, 1, 2]"});
  auto dres = filled<nhwc>({2, 2, 2, 2}, sentinel);
  expect_same_error("dresidual sizes",
                    bwd(dy.const_view(), dx.view(), invstd.data(), dg.data(), p, cview{}, dres.view()),
                    errc::shape_mismatch, {"residual gradient dresidual", "[2, 2, 2, 2]"});
  EXPECT_TRUE(all_sentinel(dres.data(), dres.numel()));
  auto dy_bad = filled<nhwc>({3, 3, 2, 2}, 1.f);
  expect_same_error("dy sizes", bwd(dy_bad.const_view(), dx.view(), invstd.data(), dg.data(), p), errc::shape_mismatch,
                    {"output gradient dy", "[3, 3, 2, 2]", "[2, 3, 2, 2]"});
  auto dx_bad = filled<nhwc>({2, 3, 2, 1}, sentinel);
  expect_same_error("dx sizes", bwd(dy.const_view(), dx_bad.view(), invstd.data(), dg.data(), p), errc::shape_mismatch,
                    {"input gradient dx", "[2, 3, 2, 1]"});
  expect_same_error("null saved_invstd", bwd(dy.const_view(), dx.view(), nullptr, dg.data(), p), errc::null_pointer,
                    {"saved_invstd", "C = 3"});
  expect_same_error("null dgamma", bwd(dy.const_view(), dx.view(), invstd.data(), nullptr, p), errc::null_pointer,
                    {"dgamma"});
  expect_same_error("null dx", bwd(dy.const_view(), view(nullptr, x.extents()), invstd.data(), dg.data(), p),
                    errc::null_pointer, {"input gradient dx"});
  batch_norm_params q = p;
  q.epsilon = 0;
  expect_same_error("epsilon 0", bwd(dy.const_view(), dx.view(), invstd.data(), dg.data(), q), errc::invalid_argument,
                    {"epsilon"});
  expect_outputs_untouched();
}

}  // namespace
