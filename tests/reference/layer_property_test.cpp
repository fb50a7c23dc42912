// Algebraic properties of the reference layers, on random shapes and parameters in double:
// - the linear layers' backward passes are the adjoints of their forwards, <dy, f(x)> == <f^T dy, x>
//   (padding, upsampling, average and global pooling, linear in x and in w, concat and slices,
//   and convolution with asymmetric padding);
// - the nonlinear layers' backward passes match central finite differences of their forwards,
//   <dy, (f(x + h v) - f(x - h v)) / 2h> == <df^T dy, v> (activations, mul/div with broadcasting,
//   max pooling, group norm, softmax, reductions over C, whose forwards are also checked by hand);
// - strided (padded) views give bitwise the values of dense ones.
// A wrong index in a backward loop breaks an identity; the PyTorch fixtures pin the forwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../common/expect_error.hpp"
#include "fixtures.hpp"
#include "memfmt/backends/reference/backend.hpp"

namespace {

using namespace memfmt;
using namespace memfmt::testing;
using memfmt_test::padded_layout;

template <class F>
using tensor = host_tensor<double, F>;
template <class F>
using ext = typename tensor<F>::extents_type;

std::mt19937_64& rng() {
  static std::mt19937_64 r(0x5eed1e55u);
  return r;
}
std::int64_t pick(std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng());
}

template <class F>
tensor<F> random_tensor(const ext<F>& e, double lo = -1.0, double hi = 1.0) {
  tensor<F> t(e);
  std::uniform_real_distribution<double> u(lo, hi);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = u(rng());
  return t;
}
std::vector<double> random_vector(std::size_t n) {
  std::vector<double> v(n);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (auto& e : v) e = u(rng());
  return v;
}

// <a, b> over logical coordinates (any two formats) and sum |a_i b_i|, the scale of its rounding.
template <class FA, class FB>
std::pair<double, double> dot(const tensor<FA>& a, const tensor<FB>& b) {
  EXPECT_EQ(a.extents(), b.extents());
  double s = 0, m = 0;
  for_each_coord(a.extents(), [&](const auto& c) {
    const double p = a.data()[a.mapping()(c)] * b.data()[b.mapping()(c)];
    s += p;
    m += std::fabs(p);
  });
  return {s, m};
}
std::pair<double, double> dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0, m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    s += a[i] * b[i];
    m += std::fabs(a[i] * b[i]);
  }
  return {s, m};
}

void expect_equal_dots(std::pair<double, double> lhs, std::pair<double, double> rhs, double rel,
                       const std::string& what) {
  const double scale = std::max({lhs.second, rhs.second, 1e-300});
  EXPECT_NEAR(lhs.first, rhs.first, rel * scale) << what;
}

// 2-D or 3-D extents with the given N, C and random spatial sizes in [lo, hi].
template <class F>
ext<F> random_extents(std::int64_t n, std::int64_t c, std::int64_t lo, std::int64_t hi) {
  ext<F> e{};
  e[0] = n;
  e[1] = c;
  for (int d = 2; d < F::rank; ++d) e[static_cast<std::size_t>(d)] = pick(lo, hi);
  return e;
}

constexpr double adjoint_rel = 1e-13;

// ---------------------------------------------------------------- adjoints

template <class XF, class YF>
void pad_adjoint() {
  constexpr int sr = XF::rank - 2;
  for (int mode = 0; mode < 3; ++mode)
    for (int trial = 0; trial < 4; ++trial) {
      pad_params p;
      p.mode = static_cast<pad_mode>(mode);
      const auto xe = random_extents<XF>(pick(1, 2), pick(1, 3), 2, 5);
      for (int i = 0; i < sr; ++i) {
        const std::int64_t hi = p.mode == pad_mode::reflect ? xe[static_cast<std::size_t>(2 + i)] - 1 : 4;
        p.begin[static_cast<std::size_t>(i)] = pick(0, hi);
        p.end[static_cast<std::size_t>(i)] = pick(0, hi);
      }
      SCOPED_TRACE("pad mode " + std::to_string(mode) + " x " + memfmt::detail::dims_to_string(xe) + " begin " +
                   memfmt::detail::dims_to_string(p.begin) + " end " + memfmt::detail::dims_to_string(p.end));
      const auto ye = pad_output_extents(xe, p);
      const auto x = random_tensor<XF>(xe);
      const auto dy = random_tensor<YF>(ye);
      tensor<YF> y(ye);
      tensor<XF> dx(xe);
      reference::pad_forward<double>(x.const_view(), y.view(), p);
      reference::pad_backward<double>(dy.const_view(), dx.view(), p);
      expect_equal_dots(dot(dy, y), dot(dx, x), adjoint_rel, "pad");
    }
}

template <class XF, class YF>
void upsample_adjoint() {
  constexpr int sr = XF::rank - 2;
  for (int mode = 0; mode < 2; ++mode)
    for (int trial = 0; trial < 6; ++trial) {
      upsample_params p;
      p.mode = static_cast<resample_mode>(mode);
      if (trial >= 4) {  // ONNX coordinates, a given scale in the first spatial dim
        p.coordinates = trial == 4 ? resample_coordinates::align_corners : resample_coordinates::half_pixel;
        p.rounding = nearest_rounding::ceil;
        p.scale[0] = 1.25;
      }
      const auto xe = random_extents<XF>(pick(1, 2), pick(1, 3), 1, 5);
      for (int i = 0; i < sr; ++i) p.output[static_cast<std::size_t>(i)] = pick(1, 9);
      SCOPED_TRACE("upsample mode " + std::to_string(mode) + " x " + memfmt::detail::dims_to_string(xe) + " out " +
                   memfmt::detail::dims_to_string(p.output));
      const auto ye = upsample_output_extents(xe, p);
      const auto x = random_tensor<XF>(xe);
      const auto dy = random_tensor<YF>(ye);
      tensor<YF> y(ye);
      tensor<XF> dx(xe);
      reference::upsample_forward<double>(x.const_view(), y.view(), p);
      reference::upsample_backward<double>(dy.const_view(), dx.view(), p);
      expect_equal_dots(dot(dy, y), dot(dx, x), adjoint_rel, "upsample");
    }
}

template <class F>
pool_params random_pool(pool_kind kind, const ext<F>& xe) {
  pool_params p;
  p.kind = kind;
  p.ceil_mode = pick(0, 1) != 0;
  p.count_include_pad = pick(0, 1) != 0;
  for (int i = 0; i < F::rank - 2; ++i) {
    const auto s = static_cast<std::size_t>(i);
    p.kernel[s] = pick(1, std::min<std::int64_t>(3, xe[2 + s]));
    p.stride[s] = pick(1, 3);
    p.padding[s] = pick(0, p.kernel[s] - 1);
    p.padding_end[s] = pick(0, p.kernel[s] - 1);
  }
  return p;
}

std::string describe(const pool_params& p) {
  return "kernel " + memfmt::detail::dims_to_string(p.kernel) + " stride " + memfmt::detail::dims_to_string(p.stride) +
         " pad " + memfmt::detail::dims_to_string(p.padding) + " / " + memfmt::detail::dims_to_string(p.padding_end) +
         " ceil " + std::to_string(p.ceil_mode) + " cip " + std::to_string(p.count_include_pad);
}

template <class XF, class YF>
void average_pool_adjoint() {
  for (int trial = 0; trial < 12; ++trial) {
    const auto xe = random_extents<XF>(pick(1, 2), pick(1, 3), 1, 7);
    const auto p = random_pool<XF>(pool_kind::average, xe);
    SCOPED_TRACE("average pool x " + memfmt::detail::dims_to_string(xe) + " " + describe(p));
    const auto ye = pool_output_extents(xe, p);
    const auto x = random_tensor<XF>(xe);
    const auto dy = random_tensor<YF>(ye);
    tensor<YF> y(ye);
    tensor<XF> dx(xe);
    reference::pool_forward<double>(x.const_view(), y.view(), p);
    reference::pool_backward<double>(tensor_view<const double, XF>{}, dy.const_view(), dx.view(), p);
    expect_equal_dots(dot(dy, y), dot(dx, x), adjoint_rel, "average pool");
  }
  const auto xe = random_extents<XF>(2, 3, 1, 5);
  const auto ye = global_pool_output_extents(xe);
  const auto x = random_tensor<XF>(xe);
  const auto dy = random_tensor<YF>(ye);
  tensor<YF> y(ye);
  tensor<XF> dx(xe);
  reference::global_average_pool_forward<double>(x.const_view(), y.view());
  reference::global_average_pool_backward<double>(dy.const_view(), dx.view());
  expect_equal_dots(dot(dy, y), dot(dx, x), adjoint_rel, "global average pool");
}

template <class XF, class YF>
void linear_adjoint() {
  for (int trial = 0; trial < 4; ++trial) {
    const auto xe = random_extents<XF>(pick(1, 3), pick(1, 4), 1, 3);
    ext<YF> ye{};
    ye.fill(1);
    ye[0] = xe[0];
    ye[1] = pick(1, 5);
    const auto features = static_cast<std::size_t>(xe[1] * (XF::rank == 4 ? xe[2] * xe[3] : xe[2] * xe[3] * xe[4]));
    const auto x = random_tensor<XF>(xe);
    const auto dy = random_tensor<YF>(ye);
    const auto w = random_vector(static_cast<std::size_t>(ye[1]) * features);
    tensor<YF> y(ye);
    tensor<XF> dx(xe);
    std::vector<double> dw(w.size()), db(static_cast<std::size_t>(ye[1]));
    reference::linear_forward<double>(x.const_view(), w.data(), nullptr, y.view());
    reference::linear_backward_data<double>(dy.const_view(), w.data(), dx.view());
    reference::linear_backward_weights<double>(x.const_view(), dy.const_view(), dw.data(), db.data());
    const auto lhs = dot(dy, y);
    expect_equal_dots(lhs, dot(dx, x), adjoint_rel, "linear, x");
    expect_equal_dots(lhs, dot(dw, w), adjoint_rel, "linear, w");
    // The bias: y(b) - y(0) = b broadcast, so <dy, y(b) - y(0)> == <db, b>.
    const auto b = random_vector(db.size());
    tensor<YF> yb(ye);
    reference::linear_forward<double>(x.const_view(), w.data(), b.data(), yb.view());
    double lhs_b = 0, scale_b = 0;
    for_each_coord(ye, [&](const auto& c) {
      const double t = dy.data()[dy.mapping()(c)] * (yb.data()[yb.mapping()(c)] - y.data()[y.mapping()(c)]);
      lhs_b += t;
      scale_b += std::fabs(t);
    });
    expect_equal_dots({lhs_b, scale_b}, dot(db, b), 1e-12, "linear, bias");
  }
}

// Concatenation along each axis (C, every spatial one): each part sits at its offset along the
// axis (brute force over logical coordinates); the backward pass hands each part its slice of dy,
// and a slice's backward is the slice's adjoint.
template <class XF, class YF>
void concat_and_slice_adjoint() {
  for (int axis = 1; axis < XF::rank; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const auto a = static_cast<std::size_t>(axis);
    auto whole = random_extents<YF>(2, 3, 1, 4);
    whole[a] = 7;
    const std::int64_t extents[3] = {2, 1, 4};
    std::vector<tensor<XF>> parts;
    std::vector<tensor_view<const double, XF>> views;
    for (auto e : extents) {
      auto pe = whole;
      pe[a] = e;
      parts.push_back(random_tensor<XF>(pe));
    }
    for (const auto& t : parts) views.push_back(t.const_view());
    tensor<YF> y(whole);
    reference::concat_forward<double>(views, y.view(), concat_params{axis});
    std::int64_t begin = 0;
    for (const auto& t : parts) {
      for_each_coord(t.extents(), [&](const auto& c) {
        auto cy = c;
        cy[a] += begin;
        ASSERT_EQ(y.data()[y.mapping()(cy)], t.data()[t.mapping()(c)]);
      });
      begin += t.extent(axis);
    }
    const auto dy = random_tensor<YF>(whole);
    std::vector<tensor<XF>> dparts;
    std::vector<tensor_view<double, XF>> dviews;
    for (const auto& t : parts) dparts.emplace_back(t.extents());
    for (auto& t : dparts) dviews.push_back(t.view());
    reference::concat_backward<double>(dy.const_view(), dviews, concat_params{axis});
    begin = 0;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const slice_params p{axis, begin, begin + parts[i].extent(axis), 1};
      for_each_coord(parts[i].extents(), [&](const auto& c) {
        auto cy = c;
        cy[a] += begin;
        ASSERT_EQ(dparts[i].data()[dparts[i].mapping()(c)], dy.data()[dy.mapping()(cy)]);
      });
      tensor<XF> slice(parts[i].extents());
      reference::slice_forward<double>(dy.const_view(), p, slice.view());
      tensor<YF> back(whole);
      reference::slice_backward<double>(slice.const_view(), p, back.view());
      const auto x = random_tensor<YF>(whole);
      tensor<XF> xs(parts[i].extents());
      reference::slice_forward<double>(x.const_view(), p, xs.view());
      expect_equal_dots(dot(slice, xs), dot(back, x), adjoint_rel, "slice");
      begin += parts[i].extent(axis);
    }
  }
}

// Slices of any axis and step: y at index i of the axis is x at begin + i step (brute force over
// logical coordinates), and the backward pass is the forward's adjoint.
template <class XF, class YF>
void strided_slice_adjoint() {
  for (int trial = 0; trial < 12; ++trial) {
    const auto xe = random_extents<XF>(pick(1, 2), pick(1, 6), 1, 7);
    slice_params p;
    p.axis = static_cast<int>(pick(1, XF::rank - 1));
    const std::int64_t extent = xe[static_cast<std::size_t>(p.axis)];
    p.begin = pick(0, extent - 1);
    p.end = pick(p.begin + 1, extent);
    p.step = pick(1, 3);
    SCOPED_TRACE("axis " + std::to_string(p.axis) + " [" + std::to_string(p.begin) + ", " + std::to_string(p.end) +
                 ") step " + std::to_string(p.step));
    const auto ye = slice_output_extents(xe, p);
    const auto x = random_tensor<XF>(xe);
    tensor<YF> y(ye);
    reference::slice_forward<double>(x.const_view(), p, y.view());
    for_each_coord(ye, [&](const auto& c) {
      auto cx = c;
      cx[static_cast<std::size_t>(p.axis)] = p.begin + c[static_cast<std::size_t>(p.axis)] * p.step;
      ASSERT_EQ(y.data()[y.mapping()(c)], x.data()[x.mapping()(cx)]);
    });
    const auto dy = random_tensor<YF>(ye);
    tensor<XF> dx(xe);
    reference::slice_backward<double>(dy.const_view(), p, dx.view());
    expect_equal_dots(dot(dy, y), dot(dx, x), adjoint_rel, "slice");
  }
}

template <class XF, class YF>
void asymmetric_conv_adjoint() {
  constexpr int sr = XF::rank - 2;
  for (int trial = 0; trial < 6; ++trial) {
    conv_params p;
    p.groups = pick(1, 2);
    auto xe = random_extents<XF>(pick(1, 2), p.groups * pick(1, 2), 2, 6);
    ext<XF> we{};
    we[0] = p.groups * pick(1, 2);
    we[1] = xe[1] / p.groups;
    std::array<std::int64_t, 3> end{0, 0, 0};
    for (int i = 0; i < sr; ++i) {
      const auto s = static_cast<std::size_t>(i);
      we[2 + s] = pick(1, 3);
      p.stride[s] = pick(1, 2);
      p.dilation[s] = pick(1, 2);
      p.padding[s] = pick(0, 2);
      end[s] = pick(0, 3);
      xe[2 + s] = std::max(xe[2 + s], p.dilation[s] * (we[2 + s] - 1) + 1);
    }
    p.padding_end = end;
    SCOPED_TRACE("conv x " + memfmt::detail::dims_to_string(xe) + " w " + memfmt::detail::dims_to_string(we) + " pad " +
                 memfmt::detail::dims_to_string(p.padding) + " / " + memfmt::detail::dims_to_string(end));
    const auto ye = conv_output_extents(xe, we, p);
    const auto x = random_tensor<XF>(xe);
    const auto w = random_tensor<XF>(we);
    const auto dy = random_tensor<YF>(ye);
    tensor<YF> y(ye);
    tensor<XF> dx(xe), dw(we);
    reference::conv_forward<double>(x.const_view(), w.const_view(), nullptr, y.view(), p);
    reference::conv_backward_data<double>(dy.const_view(), w.const_view(), dx.view(), p);
    reference::conv_backward_weights<double>(x.const_view(), dy.const_view(), dw.view(), nullptr, p);
    const auto lhs = dot(dy, y);
    expect_equal_dots(lhs, dot(dx, x), adjoint_rel, "conv, x");
    expect_equal_dots(lhs, dot(dw, w), adjoint_rel, "conv, w");
    // End padding equal to the begin padding is the symmetric convolution, bit for bit.
    conv_params sym = p, explicit_sym = p;
    sym.padding_end.reset();
    explicit_sym.padding_end = p.padding;
    const auto ys = conv_output_extents(xe, we, sym);
    ASSERT_EQ(ys, conv_output_extents(xe, we, explicit_sym));
    tensor<YF> a(ys), b(ys);
    reference::conv_forward<double>(x.const_view(), w.const_view(), nullptr, a.view(), sym);
    reference::conv_forward<double>(x.const_view(), w.const_view(), nullptr, b.view(), explicit_sym);
    for (std::int64_t k = 0; k < a.numel(); ++k) ASSERT_EQ(a.data()[k], b.data()[k]);
  }
}

TEST(ReferenceLayerAdjoints, Pad) {
  pad_adjoint<nchw, nhwc>();
  pad_adjoint<ndhwc, ncdhw>();
}
TEST(ReferenceLayerAdjoints, Upsample) {
  upsample_adjoint<nhwc, nchw>();
  upsample_adjoint<ncdhw, ndhwc>();
}
TEST(ReferenceLayerAdjoints, AverageAndGlobalPool) {
  average_pool_adjoint<nchw, nhwc>();
  average_pool_adjoint<ndhwc, ndhwc>();
}
TEST(ReferenceLayerAdjoints, Linear) {
  linear_adjoint<nhwc, nchw>();
  linear_adjoint<ncdhw, ndhwc>();
}
TEST(ReferenceLayerAdjoints, ConcatAndSlice) {
  concat_and_slice_adjoint<nchw, nhwc>();
  concat_and_slice_adjoint<ndhwc, ncdhw>();
}
TEST(ReferenceLayerAdjoints, StridedSlicesOfEveryAxis) {
  strided_slice_adjoint<nchw, nhwc>();
  strided_slice_adjoint<nhwc, nhwc>();
  strided_slice_adjoint<ncdhw, ndhwc>();
  strided_slice_adjoint<ndhwc, ndhwc>();
}
TEST(ReferenceLayerAdjoints, AsymmetricConvPadding) {
  asymmetric_conv_adjoint<nchw, nhwc>();
  asymmetric_conv_adjoint<ndhwc, ndhwc>();
}

// ---------------------------------------------------------------- finite differences
// <dy, (f(x + h v) - f(x - h v)) / 2h> against <backward(dy), v>: the central difference is exact
// to O(h^2) for smooth f; random inputs stay away from the kinks (relu, max ties) with probability 1.
constexpr double fd_h = 1e-5, fd_rel = 1e-6;

template <class XF, class YF, class Forward>
double directional(const tensor<XF>& x, const tensor<XF>& v, const tensor<YF>& dy, Forward&& f) {
  tensor<XF> xp(x.extents()), xm(x.extents());
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    xp.data()[i] = x.data()[i] + fd_h * v.data()[i];
    xm.data()[i] = x.data()[i] - fd_h * v.data()[i];
  }
  tensor<YF> yp(dy.extents()), ym(dy.extents());
  f(xp, yp);
  f(xm, ym);
  return (dot(dy, yp).first - dot(dy, ym).first) / (2 * fd_h);
}

void expect_fd(double numeric, std::pair<double, double> analytic, const std::string& what) {
  EXPECT_NEAR(numeric, analytic.first, fd_rel * std::max(1.0, analytic.second)) << what;
}

template <class XF, class YF>
void activation_fd() {
  std::vector<activation_params> functions;
  for (int k = 0; k < activation_count; ++k) functions.push_back(static_cast<activation>(k));  // defaults
  const double inf = std::numeric_limits<double>::infinity();
  for (const activation_params& f :
       {activation_params::hardsigmoid(0.2, 0.5), activation_params::hardsigmoid(-0.3, 0.1),
        activation_params::leaky_relu(0.3), activation_params::leaky_relu(-1.5), activation_params::elu(0.7),
        activation_params::clip(-2.0, 1.5), activation_params::clip(-inf, 0.5), activation_params::clip(-0.5, inf)})
    functions.push_back(f);
  for (const activation_params& kind : functions) {
    const auto xe = random_extents<XF>(2, 3, 2, 4);
    const auto x = random_tensor<XF>(xe, -7.0, 7.0), v = random_tensor<XF>(xe);
    const auto dy = random_tensor<YF>(xe);
    tensor<XF> dx(xe);
    reference::activation_backward<double>(kind, x.const_view(), dy.const_view(), dx.view());
    const double num = directional(x, v, dy, [&](const tensor<XF>& in, tensor<YF>& out) {
      reference::activation_forward<double>(kind, in.const_view(), out.view());
    });
    expect_fd(num, dot(dx, v), "activation " + to_string(kind));
  }
}

template <class F>
void binary_fd() {
  for (int k = 0; k < 4; ++k)
    for (int trial = 0; trial < 3; ++trial) {
      const auto kind = static_cast<binary_op>(k);
      const auto ye = random_extents<F>(2, 3, 2, 4);
      auto ae = ye, be = ye;
      for (std::size_t d = 0; d < ye.size(); ++d) {  // each dim broadcast in a, in b or in neither
        const auto r = pick(0, 2);
        if (r == 1) ae[d] = 1;
        if (r == 2) be[d] = 1;
      }
      SCOPED_TRACE("binary " + std::to_string(k) + " a " + memfmt::detail::dims_to_string(ae) + " b " +
                   memfmt::detail::dims_to_string(be));
      const auto a = random_tensor<F>(ae), va = random_tensor<F>(ae);
      const auto b = random_tensor<F>(be, 0.5, 2.0), vb = random_tensor<F>(be);  // away from 0 for div
      const auto dy = random_tensor<F>(ye);
      tensor<F> da(ae), db(be);
      reference::binary_backward<double>(kind, a.const_view(), b.const_view(), dy.const_view(), da.view(), db.view());
      const double num_a = directional(a, va, dy, [&](const tensor<F>& in, tensor<F>& out) {
        reference::binary_forward<double>(kind, in.const_view(), b.const_view(), out.view());
      });
      const double num_b = directional(b, vb, dy, [&](const tensor<F>& in, tensor<F>& out) {
        reference::binary_forward<double>(kind, a.const_view(), in.const_view(), out.view());
      });
      expect_fd(num_a, dot(da, va), "da");
      expect_fd(num_b, dot(db, vb), "db");
    }
}

template <class XF, class YF>
void max_pool_fd() {
  for (int trial = 0; trial < 8; ++trial) {
    const auto xe = random_extents<XF>(pick(1, 2), pick(1, 3), 1, 7);
    const auto p = random_pool<XF>(pool_kind::max, xe);
    SCOPED_TRACE("max pool x " + memfmt::detail::dims_to_string(xe) + " " + describe(p));
    const auto ye = pool_output_extents(xe, p);
    const auto x = random_tensor<XF>(xe), v = random_tensor<XF>(xe);
    const auto dy = random_tensor<YF>(ye);
    tensor<XF> dx(xe);
    reference::pool_backward<double>(x.const_view(), dy.const_view(), dx.view(), p);
    const double num = directional(x, v, dy, [&](const tensor<XF>& in, tensor<YF>& out) {
      reference::pool_forward<double>(in.const_view(), out.view(), p);
    });
    expect_fd(num, dot(dx, v), "max pool");
  }
}

template <class XF, class YF>
void group_norm_fd() {
  for (std::int64_t groups : {1, 2, 4}) {
    group_norm_params p;
    p.groups = groups;
    const auto xe = random_extents<XF>(2, 4, 1, 3);
    const auto channels = static_cast<std::size_t>(xe[1]);
    const auto x = random_tensor<XF>(xe), v = random_tensor<XF>(xe);
    const auto dy = random_tensor<YF>(xe);
    const auto gamma = random_vector(channels), beta = random_vector(channels);
    const auto stats = static_cast<std::size_t>(xe[0] * groups);
    std::vector<double> mean(stats), invstd(stats), dgamma(channels), dbeta(channels);
    tensor<YF> y(xe);
    tensor<XF> dx(xe);
    reference::group_norm_forward<double>(x.const_view(), y.view(), gamma.data(), beta.data(), mean.data(),
                                          invstd.data(), p);
    reference::group_norm_backward<double>(x.const_view(), dy.const_view(), dx.view(), gamma.data(), mean.data(),
                                           invstd.data(), dgamma.data(), dbeta.data(), p);
    std::vector<double> scratch_m(stats), scratch_i(stats);
    auto run = [&](const tensor<XF>& in, tensor<YF>& out, const std::vector<double>& g, const std::vector<double>& b) {
      reference::group_norm_forward<double>(in.const_view(), out.view(), g.data(), b.data(), scratch_m.data(),
                                            scratch_i.data(), p);
    };
    const double num_x =
        directional(x, v, dy, [&](const tensor<XF>& in, tensor<YF>& out) { run(in, out, gamma, beta); });
    expect_fd(num_x, dot(dx, v), "group norm dx, groups " + std::to_string(groups));
    // gamma and beta enter linearly: <dy, y(gamma + v) - y(gamma)> == <dgamma, v>.
    const auto vg = random_vector(channels);
    std::vector<double> g2(channels), b2(channels);
    for (std::size_t c = 0; c < channels; ++c) {
      g2[c] = gamma[c] + vg[c];
      b2[c] = beta[c] + vg[c];
    }
    tensor<YF> yg(xe), yb(xe);
    run(x, yg, g2, beta);
    run(x, yb, gamma, b2);
    expect_fd(dot(dy, yg).first - dot(dy, y).first, dot(dgamma, vg), "dgamma");
    expect_fd(dot(dy, yb).first - dot(dy, y).first, dot(dbeta, vg), "dbeta");
  }
}

template <class XF, class YF>
void softmax_fd() {
  for (bool log : {false, true}) {
    softmax_params p;
    p.log = log;
    const auto xe = random_extents<XF>(2, 5, 1, 3);
    const auto x = random_tensor<XF>(xe, -3.0, 3.0), v = random_tensor<XF>(xe);
    const auto dy = random_tensor<YF>(xe);
    tensor<YF> y(xe);
    tensor<XF> dx(xe);
    reference::softmax_forward<double>(x.const_view(), y.view(), p);
    reference::softmax_backward<double>(y.const_view(), dy.const_view(), dx.view(), p);
    const double num = directional(x, v, dy, [&](const tensor<XF>& in, tensor<YF>& out) {
      reference::softmax_forward<double>(in.const_view(), out.view(), p);
    });
    expect_fd(num, dot(dx, v), log ? "log-softmax" : "softmax");
  }
}

// Each reduction over C written with the standard algorithms over one position's values.
double reduction_by_hand(reduce_op op, const std::vector<double>& v) {
  const double sum = std::accumulate(v.begin(), v.end(), 0.0);
  const double squares = std::inner_product(v.begin(), v.end(), v.begin(), 0.0);
  switch (op) {
    case reduce_op::sum: return sum;
    case reduce_op::mean: return sum / static_cast<double>(v.size());
    case reduce_op::max: return *std::max_element(v.begin(), v.end());
    case reduce_op::min: return *std::min_element(v.begin(), v.end());
    case reduce_op::l1:
      return std::accumulate(v.begin(), v.end(), 0.0, [](double a, double b) { return a + std::fabs(b); });
    case reduce_op::l2: return std::sqrt(squares);
    case reduce_op::sum_square: return squares;
  }
  return 0.0;
}

// Forward against reduction_by_hand at every output, its values gathered by walking all of x;
// backward against finite differences (random inputs keep away from l1's kink at 0 and from max /
// min ties). Every reduction over C, over spatial axes and over both.
template <class XF, class YF>
void reduce_checks() {
  for (std::uint32_t axes = 2; axes < (1u << XF::rank); axes += 2) {
    for (int k = 0; k < reduce_op_count; ++k) {
      const reduce_params p{static_cast<reduce_op>(k), axes};
      const auto xe = random_extents<XF>(2, pick(1, 4), 1, 4);
      auto ye = xe;
      for (int d = 1; d < XF::rank; ++d)
        if (axes & axis_bit(d)) ye[static_cast<std::size_t>(d)] = 1;
      SCOPED_TRACE(std::string(to_string(p.op)) + " over " + axes_to_string(axes) + " of x " +
                   memfmt::detail::dims_to_string(xe));
      const auto x = random_tensor<XF>(xe, -2.0, 2.0), v = random_tensor<XF>(xe);
      const auto dy = random_tensor<YF>(ye);
      tensor<YF> y(ye);
      tensor<XF> dx(xe);
      reference::reduce_forward<double>(x.const_view(), y.view(), p);
      std::map<std::int64_t, std::vector<double>> values;  // by the output's offset
      for_each_coord(xe, [&](const auto& at) {
        auto o = at;
        for (int d = 1; d < XF::rank; ++d)
          if (axes & axis_bit(d)) o[static_cast<std::size_t>(d)] = 0;
        values[y.mapping()(o)].push_back(x.data()[x.mapping()(at)]);
      });
      ASSERT_EQ(values.size(), static_cast<std::size_t>(y.numel()));
      for (const auto& [offset, in] : values) EXPECT_NEAR(y.data()[offset], reduction_by_hand(p.op, in), 1e-12);
      reference::reduce_backward<double>(x.const_view(), y.const_view(), dy.const_view(), dx.view(), p);
      const double num = directional(x, v, dy, [&](const tensor<XF>& in, tensor<YF>& out) {
        reference::reduce_forward<double>(in.const_view(), out.view(), p);
      });
      expect_fd(num, dot(dx, v), to_string(p.op));
    }
  }
}

TEST(ReferenceLayerFiniteDifferences, Reductions) {
  reduce_checks<nchw, nhwc>();
  reduce_checks<nhwc, nhwc>();
  reduce_checks<ndhwc, ncdhw>();
}

TEST(ReferenceLayerFiniteDifferences, Activations) {
  activation_fd<nchw, nhwc>();
  activation_fd<ndhwc, ncdhw>();
}
TEST(ReferenceLayerFiniteDifferences, BinaryWithBroadcasting) {
  binary_fd<nhwc>();
  binary_fd<ncdhw>();
}
TEST(ReferenceLayerFiniteDifferences, MaxPool) {
  max_pool_fd<nchw, nhwc>();
  max_pool_fd<ndhwc, ncdhw>();
}
TEST(ReferenceLayerFiniteDifferences, GroupNorm) {
  group_norm_fd<nhwc, nchw>();
  group_norm_fd<ncdhw, ndhwc>();
}
TEST(ReferenceLayerFiniteDifferences, Softmax) {
  softmax_fd<nchw, nhwc>();
  softmax_fd<ndhwc, ndhwc>();
}

// ---------------------------------------------------------------- strided views
// Every op reads and writes through the view's strides: a view into a larger (padded) buffer gives
// bitwise the dense result and leaves the gaps alone.
template <class F>
struct padded {
  std::vector<double> buffer;
  tensor_view<double, F> view;
  explicit padded(const ext<F>& e) {
    const auto m = padded_layout<F>(e, 3);
    buffer.assign(static_cast<std::size_t>(m.required_span_size()), -999.0);
    view = tensor_view<double, F>(buffer.data(), m);
  }
  double at(const ext<F>& c) const { return view(c); }
};

template <class F>
void expect_same(const tensor<F>& dense, const padded<F>& strided, const char* what) {
  for_each_coord(dense.extents(),
                 [&](const auto& c) { ASSERT_EQ(dense.data()[dense.mapping()(c)], strided.at(c)) << what; });
  std::int64_t fill = 0;  // the gaps between the elements keep their fill
  for (double v : strided.buffer) fill += v == -999.0;
  EXPECT_EQ(fill, static_cast<std::int64_t>(strided.buffer.size()) - dense.numel()) << what;
}

template <class F>
void strided_matches_dense() {
  const auto xe = random_extents<F>(2, 4, 3, 5);
  const auto x = random_tensor<F>(xe), dy_same = random_tensor<F>(xe);
  padded<F> xp(xe);
  for_each_coord(xe, [&](const auto& c) { xp.view(c) = x.data()[x.mapping()(c)]; });
  const tensor_view<const double, F> xv = xp.view;

  {  // activation
    tensor<F> y(xe);
    padded<F> yp(xe);
    reference::activation_forward<double>(activation::silu, x.const_view(), y.view());
    reference::activation_forward<double>(activation::silu, xv, yp.view);
    expect_same(y, yp, "silu");
  }
  {  // max pool backward (reads x through strides, scatters into dx)
    pool_params p;
    p.kernel = {3, 3, 3};
    p.stride = {2, 2, 2};
    p.padding = {1, 1, 1};
    p.padding_end = {1, 1, 1};
    p.ceil_mode = true;
    const auto ye = pool_output_extents(xe, p);
    const auto dy = random_tensor<F>(ye);
    tensor<F> dx(xe);
    padded<F> dxp(xe);
    reference::pool_backward<double>(x.const_view(), dy.const_view(), dx.view(), p);
    reference::pool_backward<double>(xv, dy.const_view(), dxp.view, p);
    expect_same(dx, dxp, "max pool backward");
  }
  {  // group norm
    group_norm_params p;
    p.groups = 2;
    std::vector<double> m(4), s(4);
    tensor<F> y(xe);
    padded<F> yp(xe);
    reference::group_norm_forward<double>(x.const_view(), y.view(), nullptr, nullptr, m.data(), s.data(), p);
    reference::group_norm_forward<double>(xv, yp.view, nullptr, nullptr, m.data(), s.data(), p);
    expect_same(y, yp, "group norm");
  }
  {  // softmax backward
    tensor<F> y(xe), dx(xe);
    padded<F> dxp(xe);
    reference::softmax_forward<double>(x.const_view(), y.view(), softmax_params{});
    reference::softmax_backward<double>(y.const_view(), dy_same.const_view(), dx.view(), softmax_params{});
    reference::softmax_backward<double>(y.const_view(), dy_same.const_view(), dxp.view, softmax_params{});
    expect_same(dx, dxp, "softmax backward");
  }
  {  // binary backward with broadcasting into a strided gradient
    auto be = xe;
    be[0] = 1;
    be[2] = 1;
    const auto b = random_tensor<F>(be, 0.5, 2.0);
    tensor<F> db(be);
    padded<F> dbp(be);
    reference::binary_backward<double>(binary_op::div, xv, b.const_view(), dy_same.const_view(),
                                       tensor_view<double, F>{}, db.view());
    reference::binary_backward<double>(binary_op::div, x.const_view(), b.const_view(), dy_same.const_view(),
                                       tensor_view<double, F>{}, dbp.view);
    expect_same(db, dbp, "div backward");
  }
}

TEST(ReferenceLayerStrided, PaddedViewsMatchDense) {
  strided_matches_dense<nchw>();
  strided_matches_dense<nhwc>();
  strided_matches_dense<ndhwc>();
}

// No elements, but one dim of 2^33: pad and upsample build no per-dim table (2^33 source indices)
// for an output nothing is written to.
TEST(ReferenceLayerEdges, EmptyValuesWithAHugeDim) {
  const std::int64_t huge = std::int64_t{1} << 33;
  tensor<nchw> x(ext<nchw>{0, 1, 1, huge}), padded(ext<nchw>{0, 1, 1, huge + 2}), wide(ext<nchw>{0, 1, 1, 2 * huge});
  pad_params p;
  p.mode = pad_mode::reflect;
  p.begin = {0, 1, 0};
  p.end = {0, 1, 0};
  reference::pad_forward<double>(x.const_view(), padded.view(), p);
  reference::pad_backward<double>(padded.const_view(), x.view(), p);
  upsample_params u;
  u.output = {1, 2 * huge, 1};
  reference::upsample_forward<double>(x.const_view(), wide.view(), u);
  reference::upsample_backward<double>(wide.const_view(), x.view(), u);
}

// No elements, but 2^33 channels: softmax and the norms' backward without affine parameters keep
// no per-channel scratch (64 GiB of doubles) for a tensor nothing is written to.
TEST(ReferenceLayerEdges, EmptyValuesWithHugeChannelCounts) {
  const std::int64_t huge = std::int64_t{1} << 33;
  tensor<nchw> x(ext<nchw>{0, huge, 2, 2}), y(ext<nchw>{0, huge, 2, 2}), dx(ext<nchw>{0, huge, 2, 2});
  for (const bool log : {false, true}) {
    softmax_params p;
    p.log = log;
    reference::softmax_forward<double>(x.const_view(), y.view(), p);
    reference::softmax_backward<double>(y.const_view(), y.const_view(), dx.view(), p);
  }
  group_norm_params g;
  g.groups = 1;
  reference::group_norm_backward<double>(x.const_view(), y.const_view(), dx.view(), nullptr, nullptr, nullptr, nullptr,
                                         nullptr, g);
  reference::layer_norm_backward<double>(x.const_view(), y.const_view(), dx.view(), nullptr, nullptr, nullptr, nullptr,
                                         nullptr, layer_norm_params{});
}

// ONNX Resize by hand, W 4 -> 8 (scale 2) and 4 -> 3: nearest half_pixel + ceil reads
// ceil((o + 1/2) / 2 - 1/2) = 0 1 1 2 2 3 3 3 (the last clamped); linear align_corners at
// o * 3 / 2 = 0, 1.5, 3 gives x0, (x1 + x2) / 2, x3; asymmetric with the given scale 0.6 at o / 0.6
// = 0, 1.67, 3.33 gives x0, x1 + 2/3 (x2 - x1), x3 (clamped).
TEST(ReferenceUpsample, OnnxCoordinatesByHand) {
  tensor<nchw> x(ext<nchw>{1, 1, 1, 4});  // C = 1: data() is W in either format
  const std::vector<double> v = {1.0, 10.0, 100.0, 1000.0};
  for (int i = 0; i < 4; ++i) x.data()[i] = v[static_cast<std::size_t>(i)];
  upsample_params p;
  p.output = {1, 8, 1};
  p.coordinates = resample_coordinates::half_pixel;
  p.rounding = nearest_rounding::ceil;
  tensor<nhwc> y(ext<nhwc>{1, 1, 1, 8});
  reference::upsample_forward<double>(x.const_view(), y.view(), p);
  const int picks[] = {0, 1, 1, 2, 2, 3, 3, 3};
  for (int o = 0; o < 8; ++o) EXPECT_EQ(y.data()[o], v[static_cast<std::size_t>(picks[o])]) << o;
  p.mode = resample_mode::linear;
  p.output = {1, 3, 1};
  p.coordinates = resample_coordinates::align_corners;
  tensor<nchw> z(ext<nchw>{1, 1, 1, 3});
  reference::upsample_forward<double>(x.const_view(), z.view(), p);
  EXPECT_DOUBLE_EQ(z.data()[0], 1.0);
  EXPECT_DOUBLE_EQ(z.data()[1], 55.0);
  EXPECT_DOUBLE_EQ(z.data()[2], 1000.0);
  p.coordinates = resample_coordinates::asymmetric;
  p.scale = {0.0, 0.6, 0.0};
  reference::upsample_forward<double>(x.const_view(), z.view(), p);
  EXPECT_DOUBLE_EQ(z.data()[0], 1.0);
  EXPECT_NEAR(z.data()[1], 10.0 + 90.0 * (1.0 / 0.6 - 1.0), 1e-9);
  EXPECT_DOUBLE_EQ(z.data()[2], 1000.0);
  // A scale with PyTorch's coordinates is refused, naming the value.
  p.coordinates = resample_coordinates::pytorch;
  const std::string e =
      memfmt_test::error_text([&] { reference::upsample_forward<double>(x.const_view(), z.view(), p); });
  EXPECT_NE(e.find("scale 0.6"), std::string::npos) << e;
}

}  // namespace
