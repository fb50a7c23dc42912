// Algebraic properties of the reference convolution on random shapes: backward data and backward
// weights are the adjoints of the forward, <dy, conv(x, w)> == <conv_bwd_data(dy, w), x>
// == <conv_bwd_weights(x, dy), w>, and dbias is the adjoint of adding the bias. A wrong index in any
// one of the three loops breaks an identity; the PyTorch fixtures pin down the forward itself.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "memfmt/backends/reference/backend.hpp"

namespace {

using namespace memfmt;
using namespace memfmt::testing;

template <class F>
host_tensor<double, F> random_tensor(const typename host_tensor<double, F>::extents_type& e, std::mt19937_64& rng) {
  host_tensor<double, F> t(e);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = u(rng);
  return t;
}

// <a, b> over logical coordinates (the two may have different formats) and sum |a_i b_i| for the tolerance.
template <class FA, class FB>
std::pair<double, double> dot(const host_tensor<double, FA>& a, const host_tensor<double, FB>& b) {
  EXPECT_EQ(a.extents(), b.extents());
  double s = 0, m = 0;
  for_each_coord(a.extents(), [&](const auto& c, std::int64_t) {
    const double p = a.data()[a.mapping()(c)] * b.data()[b.mapping()(c)];
    s += p;
    m += std::fabs(p);
  });
  return {s, m};
}

struct random_case {
  std::int64_t n, c, k, groups;
  std::array<std::int64_t, 3> in, ker;
  conv_params p;
  std::string describe() const {
    return "n=" + std::to_string(n) + " c=" + std::to_string(c) + " k=" + std::to_string(k) +
           " groups=" + std::to_string(groups) + " in=" + memfmt::detail::dims_to_string(in) +
           " ker=" + memfmt::detail::dims_to_string(ker) + " stride=" + memfmt::detail::dims_to_string(p.stride) +
           " pad=" + memfmt::detail::dims_to_string(p.padding) + " dil=" + memfmt::detail::dims_to_string(p.dilation);
  }
};

random_case make_case(int spatial_rank, std::mt19937_64& rng) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (;;) {
    random_case rc{};
    rc.groups = pick(1, 3);
    rc.c = rc.groups * pick(1, 3);
    rc.k = rc.groups * pick(1, 3);
    rc.n = pick(1, 2);
    bool ok = true;
    for (int i = 0; i < spatial_rank; ++i) {
      rc.in[i] = pick(1, spatial_rank == 2 ? 9 : 5);
      rc.ker[i] = pick(1, 3);
      rc.p.stride[i] = pick(1, 3);
      rc.p.dilation[i] = pick(1, 2);
      rc.p.padding[i] = pick(0, 2);
      if (rc.in[i] + 2 * rc.p.padding[i] < rc.p.dilation[i] * (rc.ker[i] - 1) + 1) ok = false;
    }
    rc.p.groups = rc.groups;
    if (ok) return rc;
  }
}

// Returns whether the case was non-trivial (some output touched real input, not only padding).
template <class XF, class WF, class YF>
bool check_adjoints(const random_case& rc, std::mt19937_64& rng) {
  SCOPED_TRACE(rc.describe() + " x=" + XF::name + " w=" + WF::name + " y=" + YF::name);
  constexpr int rank = XF::rank;
  using ext = std::array<std::int64_t, rank>;
  ext xe{}, we{};
  xe[0] = rc.n;
  xe[1] = rc.c;
  we[0] = rc.k;
  we[1] = rc.c / rc.groups;
  for (int i = 0; i < rank - 2; ++i) {
    xe[2 + i] = rc.in[i];
    we[2 + i] = rc.ker[i];
  }
  const ext ye = conv_output_extents(xe, we, rc.p);
  const auto x = random_tensor<XF>(xe, rng);
  const auto w = random_tensor<WF>(we, rng);
  const auto dy = random_tensor<YF>(ye, rng);
  std::vector<double> bias(static_cast<std::size_t>(rc.k));
  for (auto& b : bias) b = std::uniform_real_distribution<double>(-1, 1)(rng);

  host_tensor<double, YF> y(ye), y_bias(ye);
  host_tensor<double, XF> dx(xe);
  host_tensor<double, WF> dw(we);
  std::vector<double> dbias(bias.size());
  reference::conv_forward<double>(x.const_view(), w.const_view(), nullptr, y.view(), rc.p);
  reference::conv_forward<double>(x.const_view(), w.const_view(), bias.data(), y_bias.view(), rc.p);
  reference::conv_backward_data<double>(dy.const_view(), w.const_view(), dx.view(), rc.p);
  reference::conv_backward_weights<double>(x.const_view(), dy.const_view(), dw.view(), dbias.data(), rc.p);

  const auto [fwd, fwd_mag] = dot(dy, y);
  const auto [bwd_d, bwd_d_mag] = dot(dx, x);
  const auto [bwd_w, bwd_w_mag] = dot(dw, w);
  const double tol = 1e-12 * (fwd_mag + bwd_d_mag + bwd_w_mag) + 1e-300;
  EXPECT_NEAR(fwd, bwd_d, tol) << "<dy, conv(x)> != <conv_backward_data(dy), x>";
  EXPECT_NEAR(fwd, bwd_w, tol) << "<dy, conv(x)> != <conv_backward_weights(x, dy), w>";

  // Bias: <dy, y_bias - y> == <dbias, bias>.
  double lhs = 0, mag = 0;
  for_each_coord(ye, [&](const auto& c, std::int64_t) {
    const double d = dy.data()[dy.mapping()(c)], diff = y_bias.data()[y_bias.mapping()(c)] - y.data()[y.mapping()(c)];
    lhs += d * diff;
    mag += std::fabs(d * diff);
  });
  double rhs = 0;
  for (std::size_t k = 0; k < bias.size(); ++k) rhs += dbias[k] * bias[k];
  EXPECT_NEAR(lhs, rhs, 1e-12 * mag + 1e-300) << "dbias is not the adjoint of the bias";
  return fwd_mag > 0;
}

TEST(ReferenceConvAdjoint, RandomShapes2d) {
  std::mt19937_64 rng(12345);
  int nontrivial = 0;
  for (int i = 0; i < 60; ++i) {
    const auto rc = make_case(2, rng);
    switch (i % 4) {
      case 0: nontrivial += check_adjoints<nchw, nchw, nchw>(rc, rng); break;
      case 1: nontrivial += check_adjoints<nhwc, nhwc, nhwc>(rc, rng); break;
      case 2: nontrivial += check_adjoints<nchw, nhwc, nhwc>(rc, rng); break;
      default: nontrivial += check_adjoints<nhwc, nchw, nchw>(rc, rng); break;
    }
  }
  EXPECT_GE(nontrivial, 45);  // a few random cases read only padding (y == 0): fine, but not most
}

TEST(ReferenceConvAdjoint, RandomShapes3d) {
  std::mt19937_64 rng(678);
  int nontrivial = 0;
  for (int i = 0; i < 30; ++i) {
    const auto rc = make_case(3, rng);
    if (i % 2 == 0) nontrivial += check_adjoints<ncdhw, ndhwc, ncdhw>(rc, rng);
    else nontrivial += check_adjoints<ndhwc, ncdhw, ndhwc>(rc, rng);
  }
  EXPECT_GE(nontrivial, 22);
}

// Formats are only a layout: the same logical data gives bit-identical results in every format
// (the reference sums in the same logical order whatever the layout).
TEST(ReferenceConvAdjoint, FormatsDoNotChangeResults) {
  std::mt19937_64 rng(99);
  for (int i = 0; i < 10; ++i) {
    const auto rc = make_case(2, rng);
    const std::array<std::int64_t, 4> xe{rc.n, rc.c, rc.in[0], rc.in[1]},
        we{rc.k, rc.c / rc.groups, rc.ker[0], rc.ker[1]};
    const auto ye = conv_output_extents(xe, we, rc.p);
    const auto x1 = random_tensor<nchw>(xe, rng);
    const auto w1 = random_tensor<nchw>(we, rng);
    host_tensor<double, nhwc> x2(xe), w2(we);
    for_each_coord(xe, [&](const auto& c, std::int64_t) { x2.data()[x2.mapping()(c)] = x1.data()[x1.mapping()(c)]; });
    for_each_coord(we, [&](const auto& c, std::int64_t) { w2.data()[w2.mapping()(c)] = w1.data()[w1.mapping()(c)]; });
    host_tensor<double, nchw> y1(ye);
    host_tensor<double, nhwc> y2(ye);
    reference::conv_forward<double>(x1.const_view(), w1.const_view(), nullptr, y1.view(), rc.p);
    reference::conv_forward<double>(x2.const_view(), w2.const_view(), nullptr, y2.view(), rc.p);
    for_each_coord(ye, [&](const auto& c, std::int64_t) {
      ASSERT_EQ(y1.data()[y1.mapping()(c)], y2.data()[y2.mapping()(c)]) << rc.describe();
    });
  }
}

}  // namespace
