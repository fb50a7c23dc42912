// The reference batch norm against PyTorch (float64) fixtures: training forward (output, updated
// running statistics, saved mean/invstd from torch.native_batch_norm), inference, and the backward
// (dx, dgamma, dbeta, dresidual), with and without ReLU and residual, 2-D and 3-D, both formats.
//
// Tolerances: outputs computed from exact inputs must be the double result rounded once to T (one ulp
// of T, plus 1e-12 relative slack for the order of PyTorch's double arithmetic). The backward reads
// the saved statistics as param_t<T> (float for float/half/bfloat16), which are themselves rounded;
// its extra error is bounded from the fixture's own magnitudes (see backward_tolerance).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "memfmt/backends/reference/backend.hpp"

namespace {

using namespace memfmt;
using namespace memfmt::testing;

constexpr double slack = 1e-12;  // relative to a tensor's largest magnitude: PyTorch's double rounding

template <class T>
T round_to(double v) {  // for inputs that are themselves results (saved statistics, y)
  if constexpr (std::is_same_v<T, double>) return v;
  else if constexpr (std::is_same_v<T, float>) return static_cast<float>(v);
  else return T(static_cast<float>(v));
}

template <class P>
void expect_params_close(const std::string& what, const std::vector<P>& got, const fixture_tensor& want,
                         const std::vector<double>& extra_tol = {}) {
  const double scale = max_abs(want.data);
  expect_close(
      what, static_cast<std::int64_t>(got.size()),
      [&](std::int64_t i) { return static_cast<double>(got[static_cast<std::size_t>(i)]); }, want.data,
      [&](std::int64_t i, double w) {
        return ulp<P>(w) + slack * scale + (extra_tol.empty() ? 0.0 : extra_tol[static_cast<std::size_t>(i)]);
      });
}

template <class T, class F>
void check_train_case(const fixture_case& fc) {
  SCOPED_TRACE(fc.name + " " + F::name + " " + float_traits<T>::name);
  using P = param_t<T>;
  batch_norm_params p;
  p.epsilon = fc.real("epsilon");
  p.momentum = fc.real("momentum");
  p.fuse_relu = fc.integer("relu") != 0;
  const bool has_res = fc.integer("residual") != 0;
  const auto x = to_tensor<T, F>(fc.tensor("x"));
  const auto res = has_res ? to_tensor<T, F>(fc.tensor("residual")) : host_tensor<T, F>();
  const auto gamma = to_vector<P>(fc.tensor("gamma")), beta = to_vector<P>(fc.tensor("beta"));
  auto rmean = to_vector<P>(fc.tensor("running_mean_in")), rvar = to_vector<P>(fc.tensor("running_var_in"));
  const std::size_t channels = gamma.size();
  std::vector<P> smean(channels, P(-1)), sinv(channels, P(-1));
  reference::backend be;

  auto y = nan_tensor<T, F>(x.extents());
  be.batch_norm_forward_training<T>(x.const_view(), y.view(), gamma.data(), beta.data(), rmean.data(), rvar.data(),
                                    smean.data(), sinv.data(), p,
                                    has_res ? res.const_view() : tensor_view<const T, F>());
  expect_tensor_close("y", y, fc.tensor("y"), 1.0, slack * max_abs(fc.tensor("y").data));
  expect_params_close("running_mean", rmean, fc.tensor("running_mean"));
  expect_params_close("running_var", rvar, fc.tensor("running_var"));
  expect_params_close("saved_mean", smean, fc.tensor("saved_mean"));
  expect_params_close("saved_invstd", sinv, fc.tensor("saved_invstd"));

  // Backward from the fixture's statistics and forward output (as the types the API takes).
  const auto& fx = fc.tensor("x");
  const auto& fdy = fc.tensor("dy");
  const auto& fy = fc.tensor("y");
  std::vector<P> saved_mean, saved_invstd;
  for (double v : fc.tensor("saved_mean").data) saved_mean.push_back(round_to<P>(v));
  for (double v : fc.tensor("saved_invstd").data) saved_invstd.push_back(round_to<P>(v));
  const auto dy = to_tensor<T, F>(fdy);
  auto y_in = host_tensor<T, F>(x.extents());
  for_each_coord(x.extents(), [&](const auto& c, std::int64_t i) {
    y_in.data()[y_in.mapping()(c)] = round_to<T>(fy.data[static_cast<std::size_t>(i)]);
  });

  // Per-channel bound of the error the rounded statistics cause (relative error eps_P in each).
  const std::int64_t m = x.numel() / static_cast<std::int64_t>(channels);
  std::vector<double> sum_g(channels), sum_gx(channels), max_g(channels), max_xhat(channels), mean_rel(channels);
  const auto xe = x.extents();
  for_each_coord(xe, [&](const auto& c, std::int64_t i) {
    const auto ch = static_cast<std::size_t>(c[1]);
    const double mean = fc.tensor("saved_mean").data[ch], inv = fc.tensor("saved_invstd").data[ch];
    const double g =
        (!p.fuse_relu || fy.data[static_cast<std::size_t>(i)] > 0) ? fdy.data[static_cast<std::size_t>(i)] : 0.0;
    const double xhat = (fx.data[static_cast<std::size_t>(i)] - mean) * inv;
    sum_g[ch] += std::fabs(g);
    sum_gx[ch] += std::fabs(g * xhat);
    max_g[ch] = std::max(max_g[ch], std::fabs(g));
    max_xhat[ch] = std::max(max_xhat[ch], std::fabs(xhat));
    mean_rel[ch] = std::fabs(mean) * inv;
  });
  const double eps_p = std::is_same_v<P, double> ? slack : epsilon<P>();
  std::vector<double> dx_extra(channels), dgamma_extra(channels);
  for (std::size_t ch = 0; ch < channels; ++ch) {
    const double k =
        std::fabs(fc.tensor("gamma").data[ch]) * fc.tensor("saved_invstd").data[ch] / static_cast<double>(m);
    const double terms = k * (static_cast<double>(m) * max_g[ch] + sum_g[ch] + max_xhat[ch] * sum_gx[ch]);
    dx_extra[ch] =
        4 * eps_p *
        (terms * (1 + mean_rel[ch]) + k * (max_xhat[ch] + mean_rel[ch]) * (sum_gx[ch] + max_xhat[ch] * sum_g[ch]));
    dgamma_extra[ch] = 4 * eps_p * (sum_gx[ch] + mean_rel[ch] * sum_g[ch]);
  }

  auto dx = nan_tensor<T, F>(x.extents());
  auto dres = nan_tensor<T, F>(x.extents());
  std::vector<P> dgamma(channels, P(-1)), dbeta(channels, P(-1));
  be.batch_norm_backward<T>(x.const_view(), dy.const_view(), dx.view(), gamma.data(), saved_mean.data(),
                            saved_invstd.data(), dgamma.data(), dbeta.data(), p,
                            p.fuse_relu ? y_in.const_view() : tensor_view<const T, F>(),
                            has_res ? dres.view() : tensor_view<T, F>());
  {
    std::vector<std::int64_t> off(static_cast<std::size_t>(dx.numel())), chan(off.size());
    for_each_coord(xe, [&](const auto& c, std::int64_t i) {
      off[static_cast<std::size_t>(i)] = dx.mapping()(c);
      chan[static_cast<std::size_t>(i)] = c[1];
    });
    const double scale = max_abs(fc.tensor("dx").data);
    expect_close(
        std::string("dx (") + float_traits<T>::name + ", " + F::name + ")", dx.numel(),
        [&](std::int64_t i) { return to_f64(dx.data()[off[static_cast<std::size_t>(i)]]); }, fc.tensor("dx").data,
        [&](std::int64_t i, double w) {
          return ulp<T>(w) + slack * scale + dx_extra[static_cast<std::size_t>(chan[static_cast<std::size_t>(i)])];
        });
  }
  expect_params_close("dgamma", dgamma, fc.tensor("dgamma"), dgamma_extra);
  expect_params_close("dbeta", dbeta, fc.tensor("dbeta"));
  if (has_res) expect_tensor_close("dresidual", dres, fc.tensor("dresidual"), 0.0, 0.0);  // exactly dy (masked)

  // The bound is meaningful: well below the values it guards (except with m == 2, where dx is zero
  // up to epsilon's effect and all of it is cancellation).
  if (m > 2) {
    for (std::size_t ch = 0; ch < channels; ++ch) EXPECT_LT(dx_extra[ch], 1e-3 * max_abs(fc.tensor("dx").data));
  }
}

template <class T, class F>
void check_eval_case(const fixture_case& fc) {
  SCOPED_TRACE(fc.name + " " + F::name + " " + float_traits<T>::name);
  using P = param_t<T>;
  batch_norm_params p;
  p.epsilon = fc.real("epsilon");
  p.fuse_relu = fc.integer("relu") != 0;
  const bool has_res = fc.integer("residual") != 0;
  const auto x = to_tensor<T, F>(fc.tensor("x"));
  const auto res = has_res ? to_tensor<T, F>(fc.tensor("residual")) : host_tensor<T, F>();
  const auto gamma = to_vector<P>(fc.tensor("gamma")), beta = to_vector<P>(fc.tensor("beta"));
  const auto rmean = to_vector<P>(fc.tensor("running_mean")), rvar = to_vector<P>(fc.tensor("running_var"));
  auto y = nan_tensor<T, F>(x.extents());
  reference::backend{}.batch_norm_forward_inference<T>(x.const_view(), y.view(), gamma.data(), beta.data(),
                                                       rmean.data(), rvar.data(), p,
                                                       has_res ? res.const_view() : tensor_view<const T, F>());
  expect_tensor_close("y", y, fc.tensor("y"), 1.0, slack * max_abs(fc.tensor("y").data));
}

template <class T, class F>
void check_case(const fixture_case& fc) {
  if (fc.op == "bn_train") check_train_case<T, F>(fc);
  else if (fc.op == "bn_eval") check_eval_case<T, F>(fc);
  else FAIL() << "unknown fixture op " << fc.op;
}

template <class T>
class ReferenceBatchNormFixtures : public ::testing::Test {};
using ElementTypes = ::testing::Types<double, float, half, bfloat16>;
TYPED_TEST_SUITE(ReferenceBatchNormFixtures, ElementTypes);

TYPED_TEST(ReferenceBatchNormFixtures, BothFormats) {
  using T = TypeParam;
  const auto cases = load_fixtures("batch_norm.bin");
  ASSERT_GE(cases.size(), 10u);
  int train = 0, eval = 0;
  for (const auto& fc : cases) {
    (fc.op == "bn_train" ? train : eval)++;
    if (fc.tensor("x").sizes.size() == 4) {
      check_case<T, nchw>(fc);
      check_case<T, nhwc>(fc);
    } else {
      check_case<T, ncdhw>(fc);
      check_case<T, ndhwc>(fc);
    }
  }
  EXPECT_GE(train, 5);
  EXPECT_GE(eval, 3);
}

}  // namespace
