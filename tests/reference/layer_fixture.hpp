// The reference layers other than conv and batch norm against PyTorch (float64) fixtures
// (fixtures/layers.bin): activations, binary ops with broadcasting, max/average/global pooling,
// upsampling, padding, group/instance norm, softmax, local response norm, linear, asymmetrically
// padded conv, rearrangements and layer norm, forward
// and backward, for every element type, with inputs and outputs in every pair of formats.
//
// Tolerances: the fixture inputs are exact in every type, so a result computed in double and
// rounded once lies within one ulp of T of PyTorch's float64 value (plus 1e-12 of the tensor's
// largest magnitude for the order of PyTorch's own double arithmetic). Two backward passes read
// values that are themselves rounded results - softmax reads y in T, group norm its saved
// statistics in param_t<T> - and get that rounding's propagated error on top (derived below).
// Format invariance: every format pair must give bitwise the same values.
// Shared by layer_fixture_test.cpp (double, float) and layer_fixture_narrow_test.cpp (half,
// bfloat16): one file for all four types was the longest compile of the sanitizer build.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "memfmt/backends/reference/backend.hpp"

namespace {

using namespace memfmt;
using namespace memfmt::testing;

constexpr double slack = 1e-12;

using results = std::map<std::string, std::vector<double>>;  // each in logical (NCHW / NCDHW) order

template <class T, class F>
std::vector<double> logical(const host_tensor<T, F>& t) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for_each_coord(t.extents(), [&](const auto& c, std::int64_t i) {
    v[static_cast<std::size_t>(i)] = to_f64(t.data()[t.mapping()(c)]);
  });
  return v;
}

template <class P>
std::vector<double> logical(const std::vector<P>& p) {
  std::vector<double> v;
  for (const auto& e : p) v.push_back(to_f64(e));
  return v;
}

template <class T>
T nan_value() {
  return T(std::numeric_limits<float>::quiet_NaN());
}

std::array<std::int64_t, 3> spatial_of(const fixture_case& fc, const std::string& key, int sr) {
  std::array<std::int64_t, 3> a{0, 0, 0};
  for (int i = 0; i < sr; ++i) a[static_cast<std::size_t>(i)] = fc.integer(key + std::to_string(i));
  return a;
}

// Runs one case with inputs (and their gradients) in XF and outputs (and theirs) in YF.
template <class T, class XF, class YF>
results run_case(const fixture_case& fc) {
  constexpr int rank = XF::rank, sr = rank - 2;
  using P = param_t<T>;
  reference::backend be;
  results r;
  auto out_like = [&](const char* name) { return nan_tensor<T, YF>(to_extents<rank>(fc.tensor(name))); };
  auto in_like = [&](const char* name) { return nan_tensor<T, XF>(to_extents<rank>(fc.tensor(name))); };

  if (fc.op == "activation") {
    activation_params kind(static_cast<activation>(fc.integer("kind")));
    if (fc.reals.count("alpha")) kind = {kind.kind, fc.real("alpha"), fc.real("beta")};
    const auto x = to_tensor<T, XF>(fc.tensor("x"));
    const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
    auto y = out_like("y");
    auto dx = in_like("dx");
    be.activation_forward<T>(kind, x.const_view(), y.view());
    be.activation_backward<T>(kind, x.const_view(), dy.const_view(), dx.view());
    r["y"] = logical(y);
    r["dx"] = logical(dx);
  } else if (fc.op == "binary") {
    const auto kind = static_cast<binary_op>(fc.integer("kind"));
    const auto a = to_tensor<T, XF>(fc.tensor("a"));
    const auto b = to_tensor<T, YF>(fc.tensor("b"));  // the two operands in different formats too
    const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
    auto y = out_like("y");
    auto da = in_like("da");
    auto db = nan_tensor<T, YF>(b.extents());
    be.binary_forward<T>(kind, a.const_view(), b.const_view(), y.view());
    be.binary_backward<T>(kind, a.const_view(), b.const_view(), dy.const_view(), da.view(), db.view());
    r["y"] = logical(y);
    r["da"] = logical(da);
    r["db"] = logical(db);
  } else if (fc.op == "pool") {
    pool_params p;
    p.kind = static_cast<pool_kind>(fc.integer("kind"));
    p.kernel = spatial_of(fc, "kernel", sr);
    p.stride = spatial_of(fc, "stride", sr);
    p.padding = spatial_of(fc, "padding", sr);
    p.padding_end = spatial_of(fc, "padding_end", sr);
    p.ceil_mode = fc.integer("ceil_mode") != 0;
    p.count_include_pad = fc.integer("count_include_pad") != 0;
    const auto x = to_tensor<T, XF>(fc.tensor("x"));
    const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
    EXPECT_EQ(pool_output_extents(x.extents(), p), dy.extents());
    auto y = out_like("y");
    auto dx = in_like("dx");
    be.pool_forward<T>(x.const_view(), y.view(), p);
    // Average pooling does not read x: an empty view proves it.
    const tensor_view<const T, XF> x_for_backward =
        p.kind == pool_kind::max ? x.const_view() : tensor_view<const T, XF>{};
    be.pool_backward<T>(x_for_backward, dy.const_view(), dx.view(), p);
    r["y"] = logical(y);
    r["dx"] = logical(dx);
  } else if (fc.op == "global_avg_pool") {
    const auto x = to_tensor<T, XF>(fc.tensor("x"));
    const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
    auto y = out_like("y");
    auto dx = in_like("dx");
    be.global_average_pool_forward<T>(x.const_view(), y.view());
    be.global_average_pool_backward<T>(dy.const_view(), dx.view());
    r["y"] = logical(y);
    r["dx"] = logical(dx);
  } else if (fc.op == "upsample") {
    upsample_params p;
    p.mode = static_cast<resample_mode>(fc.integer("mode"));
    p.output = spatial_of(fc, "output", sr);
    const auto x = to_tensor<T, XF>(fc.tensor("x"));
    const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
    auto y = out_like("y");
    auto dx = in_like("dx");
    be.upsample_forward<T>(x.const_view(), y.view(), p);
    be.upsample_backward<T>(dy.const_view(), dx.view(), p);
    r["y"] = logical(y);
    r["dx"] = logical(dx);
  } else if (fc.op == "rearrange") {
    rearrange_params p;
    p.kind = static_cast<rearrange_kind>(fc.integer("kind"));
    p.factor = fc.integer("factor");
    p.order = static_cast<block_order>(fc.integer("order"));
    if (p.kind == rearrange_kind::transpose)
      for (int i = 0; i < sr; ++i)
        p.perm[static_cast<std::size_t>(2 + i)] = static_cast<int>(fc.integer("perm" + std::to_string(i)));
    const auto x = to_tensor<T, XF>(fc.tensor("x"));
    const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
    EXPECT_EQ(rearrange_output_extents(x.extents(), p), dy.extents());
    auto y = out_like("y");
    auto dx = in_like("dx");
    be.rearrange_forward<T>(x.const_view(), p, y.view());
    be.rearrange_backward<T>(dy.const_view(), p, dx.view());
    r["y"] = logical(y);
    r["dx"] = logical(dx);
  } else if (fc.op == "pad") {
    pad_params p;
    p.mode = static_cast<pad_mode>(fc.integer("mode"));
    p.begin = spatial_of(fc, "begin", sr);
    p.end = spatial_of(fc, "end", sr);
    p.value = fc.real("value");
    const auto x = to_tensor<T, XF>(fc.tensor("x"));
    const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
    EXPECT_EQ(pad_output_extents(x.extents(), p), dy.extents());
    auto y = out_like("y");
    auto dx = in_like("dx");
    be.pad_forward<T>(x.const_view(), y.view(), p);
    be.pad_backward<T>(dy.const_view(), dx.view(), p);
    r["y"] = logical(y);
    r["dx"] = logical(dx);
  } else if (fc.op == "group_norm" || fc.op == "layer_norm") {
    // Group norm keeps N * groups statistics, layer norm one per sample and position.
    const bool layer = fc.op == "layer_norm";
    group_norm_params gp;
    layer_norm_params lp;
    gp.epsilon = lp.epsilon = fc.real("epsilon");
    if (!layer) gp.groups = fc.integer("groups");
    const bool affine = fc.integer("affine") != 0;
    const auto x = to_tensor<T, XF>(fc.tensor("x"));
    const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
    const std::vector<P> gamma = affine ? to_vector<P>(fc.tensor("gamma")) : std::vector<P>{};
    const std::vector<P> beta = affine ? to_vector<P>(fc.tensor("beta")) : std::vector<P>{};
    const auto stats = static_cast<std::size_t>(layer ? x.numel() / x.extent(1) : x.extent(0) * gp.groups);
    std::vector<P> mean(stats, P(-1)), invstd(stats, P(-1));
    const auto channels = static_cast<std::size_t>(x.extent(1));
    std::vector<P> dgamma(channels, P(-1)), dbeta(channels, P(-1));
    auto y = out_like("y");
    auto dx = in_like("dx");
    const P* g = affine ? gamma.data() : nullptr;
    const P* bt = affine ? beta.data() : nullptr;
    P* dg = affine ? dgamma.data() : nullptr;
    P* db = affine ? dbeta.data() : nullptr;
    // The gradient flows back in the format of the forward output's gradient (dy in YF, dx in XF).
    if (layer) {
      be.layer_norm_forward<T>(x.const_view(), y.view(), g, bt, mean.data(), invstd.data(), lp);
      be.layer_norm_backward<T>(x.const_view(), dy.const_view(), dx.view(), g, mean.data(), invstd.data(), dg, db, lp);
    } else {
      be.group_norm_forward<T>(x.const_view(), y.view(), g, bt, mean.data(), invstd.data(), gp);
      be.group_norm_backward<T>(x.const_view(), dy.const_view(), dx.view(), g, mean.data(), invstd.data(), dg, db, gp);
    }
    r["y"] = logical(y);
    r["saved_mean"] = logical(mean);
    r["saved_invstd"] = logical(invstd);
    r["dx"] = logical(dx);
    if (affine) {
      r["dgamma"] = logical(dgamma);
      r["dbeta"] = logical(dbeta);
    }
  } else if (fc.op == "softmax") {
    softmax_params p;
    p.log = fc.integer("log") != 0;
    const auto x = to_tensor<T, XF>(fc.tensor("x"));
    const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
    auto y = out_like("y");
    auto dx = in_like("dx");
    be.softmax_forward<T>(x.const_view(), y.view(), p);
    be.softmax_backward<T>(y.const_view(), dy.const_view(), dx.view(), p);
    r["y"] = logical(y);
    r["dx"] = logical(dx);
  } else if (fc.op == "lrn") {
    lrn_params p;
    p.size = fc.integer("size");
    p.before = fc.integer("before");
    p.alpha = fc.real("alpha");
    p.beta = fc.real("beta");
    p.bias = fc.real("bias");
    const auto x = to_tensor<T, XF>(fc.tensor("x"));
    const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
    auto y = out_like("y");
    auto dx = in_like("dx");
    be.lrn_forward<T>(x.const_view(), y.view(), p);
    be.lrn_backward<T>(x.const_view(), dy.const_view(), dx.view(), p);
    r["y"] = logical(y);
    r["dx"] = logical(dx);
  } else if (fc.op == "linear") {
    const bool bias = fc.integer("bias") != 0;
    const auto x = to_tensor<T, XF>(fc.tensor("x"));
    const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
    const auto w = to_vector<T>(fc.tensor("w"));
    const std::vector<T> b = bias ? to_vector<T>(fc.tensor("b")) : std::vector<T>{};
    auto y = out_like("y");
    auto dx = in_like("dx");
    std::vector<T> dw(w.size(), nan_value<T>()), db(b.size(), nan_value<T>());
    be.linear_forward<T>(x.const_view(), w.data(), bias ? b.data() : nullptr, y.view());
    be.linear_backward_data<T>(dy.const_view(), w.data(), dx.view());
    be.linear_backward_weights<T>(x.const_view(), dy.const_view(), dw.data(), bias ? db.data() : nullptr);
    r["y"] = logical(y);
    r["dx"] = logical(dx);
    r["dw"] = logical(dw);
    if (bias) r["db"] = logical(db);
  } else if (fc.op == "conv_asym") {
    conv_params p;
    p.stride = spatial_of(fc, "stride", sr);
    p.padding = spatial_of(fc, "padding", sr);
    p.padding_end = spatial_of(fc, "padding_end", sr);
    p.groups = fc.integer("groups");
    const auto x = to_tensor<T, XF>(fc.tensor("x"));
    const auto w = to_tensor<T, XF>(fc.tensor("w"));
    const auto dy = to_tensor<T, YF>(fc.tensor("dy"));
    const auto b = to_vector<T>(fc.tensor("b"));
    EXPECT_EQ(conv_output_extents(x.extents(), w.extents(), p), dy.extents());
    auto y = out_like("y");
    auto dx = in_like("dx");
    auto dw = nan_tensor<T, XF>(w.extents());
    std::vector<T> db(b.size(), nan_value<T>());
    be.conv_forward<T>(x.const_view(), w.const_view(), b.data(), y.view(), p);
    be.conv_backward_data<T>(dy.const_view(), w.const_view(), dx.view(), p);
    be.conv_backward_weights<T>(x.const_view(), dy.const_view(), dw.view(), db.data(), p);
    r["y"] = logical(y);
    r["dx"] = logical(dx);
    r["dw"] = logical(dw);
    r["db"] = logical(db);
  } else {
    ADD_FAILURE() << "unknown fixture op " << fc.op;
  }
  return r;
}

// Propagated error of the softmax backward from y rounded to T (dy is exact): y_c carries an
// error of up to one ulp, d_c.
//   softmax dx_i = y_i (dy_i - sum dy y): |ddx_i| <= d_i |dy_i - dot| + |y_i| sum |dy_c| d_c
//   log-softmax dx_i = dy_i - exp(y_i) sum dy: |ddx_i| <= exp(y_i) d_i |sum dy| (to first order)
template <class T>
std::vector<double> softmax_backward_extra(const fixture_case& fc) {
  std::vector<double> extra(fc.tensor("dx").data.size(), 0.0);
  if constexpr (std::is_same_v<T, double>) return extra;
  const auto& y = fc.tensor("y");
  const auto& dy = fc.tensor("dy");
  const std::int64_t n = y.sizes[0], c = y.sizes[1];
  const std::int64_t s = static_cast<std::int64_t>(y.data.size()) / (n * c);
  const bool log = fc.integer("log") != 0;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t p = 0; p < s; ++p) {
      auto at = [&](std::int64_t ch) { return static_cast<std::size_t>((b * c + ch) * s + p); };
      double dot = 0, sum = 0, spread = 0;
      for (std::int64_t ch = 0; ch < c; ++ch) {
        dot += dy.data[at(ch)] * y.data[at(ch)];
        sum += dy.data[at(ch)];
        spread += std::fabs(dy.data[at(ch)]) * ulp<T>(y.data[at(ch)]);
      }
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const double yi = y.data[at(ch)], d = ulp<T>(yi);
        extra[at(ch)] = 2 * (log ? std::exp(yi) * d * std::fabs(sum)
                                 : d * std::fabs(dy.data[at(ch)] - dot) + std::fabs(yi) * spread);
      }
    }
  return extra;
}

// Propagated error of a norm's backward from saved statistics rounded to P (relative error r =
// one ulp): within a statistics set (a sample's group for group norm, a sample's position for
// layer norm; m elements), xhat_i moves by e_i <= r (|xhat_i| + |mean| invstd); with g = dy gamma
// and sums over the set, dx_i = invstd / m (m g_i - sum g - xhat_i sum g xhat) moves by at most
//   invstd (r (|g_i| + sum |g| / m + |xhat_i| sum |g xhat| / m) + (e_i sum |g xhat| + |xhat_i| sum |g| e) / m)
// and dgamma_c = sum dy xhat by sum |dy| e (doubled for the second-order terms).
template <class T>
std::map<std::string, std::vector<double>> norm_backward_extra(const fixture_case& fc) {
  using P = param_t<T>;
  std::map<std::string, std::vector<double>> extra;
  const auto& x = fc.tensor("x");
  const auto& dy = fc.tensor("dy");
  const auto& mean = fc.tensor("saved_mean");
  const auto& invstd = fc.tensor("saved_invstd");
  const bool affine = fc.integer("affine") != 0;
  const std::int64_t n = x.sizes[0], c = x.sizes[1];
  const std::int64_t s = static_cast<std::int64_t>(x.data.size()) / (n * c);
  const bool layer = fc.op == "layer_norm";
  const std::int64_t groups = layer ? 1 : fc.integer("groups"), per = c / groups;
  // Set k's elements: (channel, position) pairs, as contiguous (NCHW) indices.
  std::vector<std::vector<std::size_t>> sets(static_cast<std::size_t>(layer ? n * s : n * groups));
  std::vector<std::int64_t> channel_of(x.data.size());
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t p = 0; p < s; ++p) {
        const auto at = static_cast<std::size_t>((b * c + ch) * s + p);
        sets[static_cast<std::size_t>(layer ? b * s + p : b * groups + ch / per)].push_back(at);
        channel_of[at] = ch;
      }
  const double r = std::is_same_v<T, double> ? 0.0 : epsilon<P>();
  extra["dx"].assign(x.data.size(), 0.0);
  extra["dgamma"].assign(static_cast<std::size_t>(c), 0.0);
  auto gamma = [&](std::int64_t ch) { return affine ? fc.tensor("gamma").data[static_cast<std::size_t>(ch)] : 1.0; };
  for (std::size_t k = 0; k < sets.size(); ++k) {
    const double mu = mean.data[k], is = invstd.data[k], m = static_cast<double>(sets[k].size());
    double sum_g = 0, sum_gx = 0, sum_ge = 0;
    for (std::size_t at : sets[k]) {
      const double xh = (x.data[at] - mu) * is, gg = std::fabs(dy.data[at] * gamma(channel_of[at]));
      const double e = r * (std::fabs(xh) + std::fabs(mu) * is);
      sum_g += gg;
      sum_gx += gg * std::fabs(xh);
      sum_ge += gg * e;
      extra["dgamma"][static_cast<std::size_t>(channel_of[at])] += 2 * std::fabs(dy.data[at]) * e;
    }
    for (std::size_t at : sets[k]) {
      const double xh = std::fabs((x.data[at] - mu) * is), gg = std::fabs(dy.data[at] * gamma(channel_of[at]));
      const double e = r * (xh + std::fabs(mu) * is);
      extra["dx"][at] = 2 * is * (r * (gg + sum_g / m + xh * sum_gx / m) + (e * sum_gx + xh * sum_ge) / m);
    }
  }
  return extra;
}

template <class T>
void check_against_fixture(const fixture_case& fc, const results& got, const std::string& formats) {
  std::map<std::string, std::vector<double>> extra;
  if (fc.op == "softmax") extra["dx"] = softmax_backward_extra<T>(fc);
  if (fc.op == "group_norm" || fc.op == "layer_norm") extra = norm_backward_extra<T>(fc);
  for (const auto& [name, values] : got) {
    const auto& want = fc.tensor(name);
    ASSERT_EQ(values.size(), want.data.size()) << fc.name << " " << name;
    // Saved statistics are param_t<T>: float for the 16-bit types.
    const bool param = name == "saved_mean" || name == "saved_invstd" || name == "dgamma" || name == "dbeta";
    const double scale = max_abs(want.data);
    const auto it = extra.find(name);
    expect_close(
        fc.name + " " + name + " (" + float_traits<T>::name + ", " + formats + ")",
        static_cast<std::int64_t>(values.size()), [&](std::int64_t i) { return values[static_cast<std::size_t>(i)]; },
        want.data,
        [&](std::int64_t i, double w) {
          const double u = param ? ulp<param_t<T>>(w) : ulp<T>(w);
          return u + slack * scale + (it == extra.end() ? 0.0 : it->second[static_cast<std::size_t>(i)]);
        });
  }
}

void expect_identical(const fixture_case& fc, const results& a, const results& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << fc.name;
  for (const auto& [name, values] : a) {
    const auto& other = b.at(name);
    ASSERT_EQ(values.size(), other.size());
    int diff = 0;
    for (std::size_t i = 0; i < values.size(); ++i)
      if (!(values[i] == other[i]) && !(std::isnan(values[i]) && std::isnan(other[i]))) ++diff;
    EXPECT_EQ(diff, 0) << fc.name << " " << name << ": " << what << " differ in " << diff << " elements";
  }
}

template <class T, class CF, class CL>
void check_case_all_formats(const fixture_case& fc) {
  const auto first = run_case<T, CF, CF>(fc);
  check_against_fixture<T>(fc, first, std::string(CF::name) + " -> " + CF::name);
  const auto last = run_case<T, CL, CL>(fc);
  const auto mixed_a = run_case<T, CF, CL>(fc);
  const auto mixed_b = run_case<T, CL, CF>(fc);
  expect_identical(fc, first, last, std::string(CF::name) + " and " + CL::name);
  expect_identical(fc, first, mixed_a, std::string(CF::name) + " -> " + CL::name);
  expect_identical(fc, first, mixed_b, std::string(CL::name) + " -> " + CF::name);
}

// Every fixture case in T, in every pair of formats; every op the fixtures promise is there.
template <class T>
void check_every_op_every_format_pair() {
  const auto cases = load_fixtures("layers.bin");
  std::map<std::string, int> per_op;
  for (const auto& fc : cases) {
    SCOPED_TRACE(fc.name + " (" + fc.op + ")");
    ++per_op[fc.op];
    if (fc.tensor(fc.has("x") ? "x" : "a").sizes.size() == 4) check_case_all_formats<T, nchw, nhwc>(fc);
    else check_case_all_formats<T, ncdhw, ndhwc>(fc);
  }
  // A generator that lost one fails here.
  for (const char* op : {"activation", "binary", "pool", "global_avg_pool", "upsample", "pad", "group_norm", "softmax",
                         "linear", "conv_asym", "rearrange", "layer_norm", "lrn"})
    EXPECT_GE(per_op[op], 1) << op;
  EXPECT_EQ(per_op["activation"], 17);
  EXPECT_EQ(per_op["layer_norm"], 3);
  EXPECT_EQ(per_op["rearrange"], 12);
  EXPECT_EQ(per_op["lrn"], 5);
}

}  // namespace
