// Properties of the reference batch norm that need no oracle:
//  - the backward is the derivative of the training forward (central finite differences of
//    L = <dy, y(x, gamma, beta, residual)>, with and without ReLU and residual);
//  - the training output is normalised: per channel, mean(y) == beta and var(y) == gamma^2 var/(var+eps);
//  - in-place use (y == x, dx == dy) gives the out-of-place results.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "fixtures.hpp"
#include "memfmt/backends/reference/backend.hpp"

namespace {

using namespace memfmt;
using namespace memfmt::testing;

template <class F>
host_tensor<double, F> random_tensor(const typename host_tensor<double, F>::extents_type& e, std::mt19937_64& rng,
                                     double lo = -1, double hi = 1) {
  host_tensor<double, F> t(e);
  std::uniform_real_distribution<double> u(lo, hi);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = u(rng);
  return t;
}

template <class F>
double loss(const host_tensor<double, F>& x, const std::vector<double>& gamma, const std::vector<double>& beta,
            const host_tensor<double, F>* res, const host_tensor<double, F>& dy, const batch_norm_params& p) {
  const std::size_t c = gamma.size();
  std::vector<double> rm(c, 0), rv(c, 1), sm(c), si(c);
  host_tensor<double, F> y(x.extents());
  reference::batch_norm_forward_training<double>(x.const_view(), y.view(), gamma.data(), beta.data(), rm.data(),
                                                 rv.data(), sm.data(), si.data(), p,
                                                 res ? res->const_view() : tensor_view<const double, F>());
  double l = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i) l += y.data()[i] * dy.data()[i];  // same format: same order
  return l;
}

template <class F>
void check_gradients(bool relu, bool residual, std::uint64_t seed) {
  SCOPED_TRACE(std::string(F::name) + (relu ? " relu" : "") + (residual ? " residual" : ""));
  std::mt19937_64 rng(seed);
  typename host_tensor<double, F>::extents_type e{};
  e[0] = 3;
  e[1] = 4;
  for (int d = 2; d < F::rank; ++d) e[d] = 2 + d;
  auto x = random_tensor<F>(e, rng, -2, 2);
  auto res = random_tensor<F>(e, rng);
  const auto dy = random_tensor<F>(e, rng);
  std::vector<double> gamma(4), beta(4);
  for (auto& g : gamma) g = std::uniform_real_distribution<double>(0.5, 1.5)(rng);
  for (auto& b : beta) b = std::uniform_real_distribution<double>(-0.5, 0.5)(rng);
  batch_norm_params p;
  p.fuse_relu = relu;
  p.epsilon = 1e-3;
  host_tensor<double, F>* rp = residual ? &res : nullptr;

  // Analytic gradients.
  std::vector<double> rm(4, 0), rv(4, 1), sm(4), si(4), dgamma(4), dbeta(4);
  host_tensor<double, F> y(e), dx(e), dres(e);
  reference::batch_norm_forward_training<double>(x.const_view(), y.view(), gamma.data(), beta.data(), rm.data(),
                                                 rv.data(), sm.data(), si.data(), p,
                                                 residual ? res.const_view() : tensor_view<const double, F>());
  reference::batch_norm_backward<double>(x.const_view(), dy.const_view(), dx.view(), gamma.data(), sm.data(), si.data(),
                                         dgamma.data(), dbeta.data(), p, y.const_view(),
                                         residual ? dres.view() : tensor_view<double, F>());

  // Central differences. ReLU kinks make a few elements non-differentiable at the step size; random data
  // keeps them away from zero with overwhelming probability, and the test checks every element.
  const double h = 1e-6, tol = 1e-6;
  auto numeric = [&](double& v) {
    const double keep = v;
    v = keep + h;
    const double lp = loss(x, gamma, beta, rp, dy, p);
    v = keep - h;
    const double lm = loss(x, gamma, beta, rp, dy, p);
    v = keep;
    return (lp - lm) / (2 * h);
  };
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    EXPECT_NEAR(dx.data()[i], numeric(x.data()[i]), tol) << "dx[" << i << "]";
    if (residual) {
      EXPECT_NEAR(dres.data()[i], numeric(res.data()[i]), tol) << "dresidual[" << i << "]";
    }
  }
  for (std::size_t c = 0; c < 4; ++c) {
    EXPECT_NEAR(dgamma[c], numeric(gamma[c]), tol) << "dgamma[" << c << "]";
    EXPECT_NEAR(dbeta[c], numeric(beta[c]), tol) << "dbeta[" << c << "]";
  }
}

TEST(ReferenceBatchNormGradients, MatchFiniteDifferences) {
  check_gradients<nchw>(false, false, 1);
  check_gradients<nhwc>(true, false, 2);
  check_gradients<nchw>(true, true, 3);
  check_gradients<nhwc>(false, true, 4);
  check_gradients<ndhwc>(true, true, 5);
  check_gradients<ncdhw>(false, false, 6);
}

TEST(ReferenceBatchNormProperties, TrainingOutputIsNormalised) {
  std::mt19937_64 rng(7);
  const auto x = random_tensor<nhwc>({5, 3, 4, 6}, rng, -3, 7);
  const std::vector<double> gamma{0.5, 2.0, -1.0}, beta{0.25, -1.0, 3.0};
  std::vector<double> rm(3, 0), rv(3, 1), sm(3), si(3);
  host_tensor<double, nhwc> y(x.extents());
  batch_norm_params p;
  reference::batch_norm_forward_training<double>(x.const_view(), y.view(), gamma.data(), beta.data(), rm.data(),
                                                 rv.data(), sm.data(), si.data(), p);
  const double m = 5 * 4 * 6;
  for (int c = 0; c < 3; ++c) {
    double sx = 0, sy = 0, syy = 0;
    for_each_coord(x.extents(), [&](const auto& i, std::int64_t) {
      if (i[1] != c) return;
      sx += x(i[0], i[1], i[2], i[3]);
      sy += y(i[0], i[1], i[2], i[3]);
    });
    const double mean_y = sy / m;
    double sxx = 0;
    for_each_coord(x.extents(), [&](const auto& i, std::int64_t) {
      if (i[1] != c) return;
      syy += (y(i[0], i[1], i[2], i[3]) - mean_y) * (y(i[0], i[1], i[2], i[3]) - mean_y);
      sxx += (x(i[0], i[1], i[2], i[3]) - sx / m) * (x(i[0], i[1], i[2], i[3]) - sx / m);
    });
    const double var = sxx / m;
    EXPECT_NEAR(mean_y, beta[c], 1e-12);
    EXPECT_NEAR(syy / m, gamma[c] * gamma[c] * var / (var + p.epsilon), 1e-12);
    EXPECT_NEAR(sm[c], sx / m, 1e-12);
    EXPECT_NEAR(si[c], 1 / std::sqrt(var + p.epsilon), 1e-12);
    EXPECT_NEAR(rm[c], 0.1 * sx / m, 1e-12);
    EXPECT_NEAR(rv[c], 0.9 + 0.1 * var * m / (m - 1), 1e-12);
  }
}

TEST(ReferenceBatchNormProperties, InPlaceEqualsOutOfPlace) {
  std::mt19937_64 rng(8);
  auto x = random_tensor<nchw>({2, 3, 5, 4}, rng);
  const auto dy = random_tensor<nchw>({2, 3, 5, 4}, rng);
  const std::vector<double> gamma{1.5, 0.5, 1.0}, beta{0.0, 0.1, -0.2};
  batch_norm_params p;
  p.fuse_relu = true;
  std::vector<double> rm(3, 0), rv(3, 1), sm(3), si(3), rm2(3, 0), rv2(3, 1), sm2(3), si2(3);
  host_tensor<double, nchw> y(x.extents());
  reference::batch_norm_forward_training<double>(x.const_view(), y.view(), gamma.data(), beta.data(), rm.data(),
                                                 rv.data(), sm.data(), si.data(), p);
  auto inplace = x.clone();
  reference::batch_norm_forward_training<double>(inplace.const_view(), inplace.view(), gamma.data(), beta.data(),
                                                 rm2.data(), rv2.data(), sm2.data(), si2.data(), p);
  for (std::int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(inplace.data()[i], y.data()[i]);
  EXPECT_EQ(sm, sm2);
  EXPECT_EQ(si, si2);

  std::vector<double> dg(3), db(3), dg2(3), db2(3);
  host_tensor<double, nchw> dx(x.extents());
  reference::batch_norm_backward<double>(x.const_view(), dy.const_view(), dx.view(), gamma.data(), sm.data(), si.data(),
                                         dg.data(), db.data(), p, y.const_view());
  auto dy_inplace = dy.clone();
  reference::batch_norm_backward<double>(x.const_view(), dy_inplace.const_view(), dy_inplace.view(), gamma.data(),
                                         sm.data(), si.data(), dg2.data(), db2.data(), p, y.const_view());
  for (std::int64_t i = 0; i < dx.numel(); ++i) ASSERT_EQ(dy_inplace.data()[i], dx.data()[i]);
  EXPECT_EQ(dg, dg2);
  EXPECT_EQ(db, db2);
}

}  // namespace
