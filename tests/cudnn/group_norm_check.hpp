// Group norm of the cuDNN backend's kernels against the reference backend: the cases, inputs,
// tolerances and comparison shared by the CPU replay of the kernels' partition
// (test_group_norm_index.cpp) and the GPU run (test_converter_gpu.cu).
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <memfmt/backends/reference/group_norm.hpp>
#include <memfmt/dtype.hpp>

namespace memfmt_test::group_norm {

using memfmt::param_t;

// One problem run through a pass: inputs, then what the run wrote. x in format XF; y, dy and dx in
// YF. The backward reads the reference forward's saved statistics (mean, invstd), so both sides
// start from the same numbers.
template <class T>
struct io {
  std::vector<std::int64_t> extents;  // N, C, spatial...
  std::int64_t groups = 1;
  double epsilon = 1e-5;
  bool x_channels_last = false, y_channels_last = false, params = true;
  std::vector<T> x, dy;
  std::vector<param_t<T>> gamma, beta;  // empty when !params
  std::vector<T> y, dx;
  std::vector<param_t<T>> mean, invstd, dgamma, dbeta;  // dgamma, dbeta empty when !params
};

inline std::int64_t count(const std::vector<std::int64_t>& e) {
  std::int64_t n = 1;
  for (auto v : e) n *= v;
  return n;
}

// Deterministic values in about [-2, 2] plus `offset` (a large mean tests the variance's precision).
template <class T>
std::vector<T> values(std::int64_t n, std::uint32_t seed, double offset) {
  std::vector<T> v(static_cast<std::size_t>(n));
  std::uint32_t s = seed;
  for (auto& e : v) {
    s = s * 1664525u + 1013904223u;
    e = static_cast<T>(static_cast<float>(offset + (static_cast<double>(s >> 8) / 16777216.0 - 0.5) * 4.0));
  }
  return v;
}

template <class T>
double to_d(T v) {
  return static_cast<double>(static_cast<float>(v));
}
inline double to_d(double v) { return v; }

// Output tolerances: one rounding of the output type plus float accumulation (double for double).
template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-9;
  else if constexpr (std::is_same_v<T, float>) return 2e-4;
  else if constexpr (std::is_same_v<T, memfmt::half>) return 4e-3;
  else return 2e-2;
}

template <class V>
void expect_near_all(const std::vector<V>& got, const std::vector<V>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = to_d(got[i]), w = to_d(want[i]);
    ASSERT_LE(std::abs(g - w), tol * (1.0 + std::abs(w))) << what << "[" << i << "]: " << g << " vs " << w;
  }
}

template <class F>
std::array<std::int64_t, F::rank> dims(const std::vector<std::int64_t>& e) {
  std::array<std::int64_t, F::rank> a{};
  for (int i = 0; i < F::rank; ++i) a[static_cast<std::size_t>(i)] = e[static_cast<std::size_t>(i)];
  return a;
}
template <class T, class F>
memfmt::tensor_view<const T, F> cview(const std::vector<T>& v, const std::vector<std::int64_t>& e) {
  return memfmt::tensor_view<const T, F>(v.data(), dims<F>(e));
}
template <class T, class F>
memfmt::tensor_view<T, F> view(std::vector<T>& v, const std::vector<std::int64_t>& e) {
  return memfmt::tensor_view<T, F>(v.data(), dims<F>(e));
}

template <class T>
const param_t<T>* data_or_null(const std::vector<param_t<T>>& v) {
  return v.empty() ? nullptr : v.data();
}
template <class T>
param_t<T>* data_or_null(std::vector<param_t<T>>& v) {
  return v.empty() ? nullptr : v.data();
}

// Runs forward and backward through `run_forward` / `run_backward` (which fill y, mean, invstd /
// dx, dgamma, dbeta of the io) and through the reference backend, and compares every output.
template <class T, class XF, class YF>
void check(std::vector<std::int64_t> extents, std::int64_t groups, double offset, bool params,
           const std::function<void(io<T>&)>& run_forward, const std::function<void(io<T>&)>& run_backward) {
  using P = param_t<T>;
  ASSERT_EQ(extents.size(), static_cast<std::size_t>(XF::rank));
  io<T> in;
  in.extents = extents;
  in.groups = groups;
  in.x_channels_last = XF::channels_last;
  in.y_channels_last = YF::channels_last;
  in.params = params;
  const std::int64_t n = count(extents), c = extents[1], stats = extents[0] * groups;
  in.x = values<T>(n, 7u, offset);
  in.dy = values<T>(n, 11u, 0.0);
  if (params) {
    for (const auto& g : values<float>(c, 13u, 1.0)) in.gamma.push_back(static_cast<P>(g));
    for (const auto& b : values<float>(c, 17u, 0.0)) in.beta.push_back(static_cast<P>(b));
  }
  const std::string what = std::string(XF::name) + " -> " + YF::name + " groups " + std::to_string(groups) +
                           " offset " + std::to_string(offset) + (params ? "" : " no gamma/beta");

  io<T> want = in;
  want.y.assign(static_cast<std::size_t>(n), T{});
  want.dx.assign(static_cast<std::size_t>(n), T{});
  want.mean.assign(static_cast<std::size_t>(stats), P{});
  want.invstd.assign(static_cast<std::size_t>(stats), P{});
  if (params) {
    want.dgamma.assign(static_cast<std::size_t>(c), P{});
    want.dbeta.assign(static_cast<std::size_t>(c), P{});
  }
  const memfmt::group_norm_params gp{groups, in.epsilon};
  memfmt::reference::group_norm_forward(cview<T, XF>(in.x, extents), view<T, YF>(want.y, extents),
                                        data_or_null<T>(in.gamma), data_or_null<T>(in.beta), want.mean.data(),
                                        want.invstd.data(), gp);
  memfmt::reference::group_norm_backward(cview<T, XF>(in.x, extents), cview<T, YF>(in.dy, extents),
                                         view<T, YF>(want.dx, extents), data_or_null<T>(in.gamma), want.mean.data(),
                                         want.invstd.data(), data_or_null<T>(want.dgamma), data_or_null<T>(want.dbeta),
                                         gp);

  io<T> got = in;
  run_forward(got);
  const double tol = tolerance<T>() * (offset != 0.0 ? 10.0 : 1.0);
  const double stat_tol = std::is_same_v<T, double> ? 1e-12 : 1e-5 * (offset != 0.0 ? 10.0 : 1.0);
  expect_near_all(got.mean, want.mean, stat_tol, what + ": saved mean");
  expect_near_all(got.invstd, want.invstd, stat_tol * 10, what + ": saved invstd");
  expect_near_all(got.y, want.y, tol, what + ": y");
  // The backward from the reference's statistics, so its own error is measured.
  got.mean = want.mean;
  got.invstd = want.invstd;
  run_backward(got);
  expect_near_all(got.dx, want.dx, tol, what + ": dx");
  const double sum_tol = std::is_same_v<T, double> ? 1e-10 : 1e-4;
  expect_near_all(got.dgamma, want.dgamma, sum_tol, what + ": dgamma");
  expect_near_all(got.dbeta, want.dbeta, sum_tol, what + ": dbeta");
}

// The cases: groups of several channels, instance norm (groups == C), a channel count that leaves
// a partial channel tile, positions split into chunks (S beyond 64 channels-last, 256 channels-first),
// a large mean; rank 4 and 5, x and y in either format.
// Run: a type with `template <class T, class XF, class YF> void check(extents, groups, offset, params) const`.
template <class T, class Run>
void check_all_cases(const Run& run) {
  using memfmt::nchw, memfmt::nhwc, memfmt::ncdhw, memfmt::ndhwc;
  run.template check<T, nchw, nchw>(std::vector<std::int64_t>{2, 6, 5, 7}, 3, 0.0, true);
  run.template check<T, nhwc, nhwc>(std::vector<std::int64_t>{2, 6, 5, 7}, 3, 0.0, true);
  run.template check<T, nchw, nhwc>(std::vector<std::int64_t>{2, 6, 5, 7}, 6, 0.0, false);
  run.template check<T, nhwc, nchw>(std::vector<std::int64_t>{2, 6, 5, 7}, 1, 0.0, true);
  run.template check<T, nchw, nchw>(std::vector<std::int64_t>{1, 40, 23, 25}, 8, 0.0, true);
  run.template check<T, nhwc, nhwc>(std::vector<std::int64_t>{1, 40, 23, 25}, 8, 0.0, true);
  run.template check<T, ndhwc, ndhwc>(std::vector<std::int64_t>{2, 4, 3, 4, 5}, 4, 0.0, true);
  run.template check<T, ncdhw, ndhwc>(std::vector<std::int64_t>{2, 4, 3, 4, 5}, 2, 0.0, true);
  run.template check<T, ndhwc, ncdhw>(std::vector<std::int64_t>{1, 8, 4, 9, 9}, 4, 0.0, false);
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    run.template check<T, nchw, nchw>(std::vector<std::int64_t>{2, 8, 20, 20}, 2, 1000.0, true);
    run.template check<T, nhwc, nhwc>(std::vector<std::int64_t>{2, 8, 20, 20}, 2, 1000.0, true);
  }
}

}  // namespace memfmt_test::group_norm
