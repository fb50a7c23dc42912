// Shared helpers of the oneDNN backend tests: deterministic data and a dtype-aware comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <memfmt/backends/onednn/cpu_support.hpp>
#include <memfmt/dtype.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "../common/coords.hpp"
#include "../common/expect_error.hpp"

namespace onednn_test {

// run() (a std::vector<float> of every result) gives the same bits with 2 and 7 OpenMP threads as
// with 1: a kernel whose chunks and reduction order depend on the shape only. Skips without OpenMP.
template <class Run>
void expect_same_bits_for_any_thread_count(Run&& run, const std::string& what) {
#if defined(_OPENMP)
  const int before = omp_get_max_threads();
  const auto with = [&](int threads) {
    omp_set_num_threads(threads);
    const std::vector<float> r = run();
    omp_set_num_threads(before);
    return r;
  };
  const std::vector<float> one = with(1);
  for (int threads : {2, 7}) {
    const std::vector<float> many = with(threads);
    ASSERT_EQ(many.size(), one.size()) << what;
    EXPECT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float))) << threads << " threads, " << what;
  }
#else
  (void)run;
  GTEST_SKIP() << "built without OpenMP: one thread only (" << what << ")";
#endif
}

template <class T>
double to_d(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return static_cast<double>(static_cast<float>(v));
}

template <class T>
T from_f(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return T(v);
}

// Uniform values in [lo, hi), representable in T, from a fixed seed.
struct lcg {
  std::uint64_t s;
  explicit lcg(std::uint64_t seed) : s(seed * 6364136223846793005ull + 1442695040888963407ull) {}
  float next(float lo, float hi) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(s >> 11) / 9007199254740992.0;
    return static_cast<float>(lo + (hi - lo) * u);
  }
};

template <class T>
void fill(T* p, std::int64_t n, std::uint64_t seed, float lo = -1.f, float hi = 1.f) {
  lcg g(seed);
  for (std::int64_t i = 0; i < n; ++i) p[i] = from_f<T>(g.next(lo, hi));
}

template <class T, class F>
void fill(memfmt::host_tensor<T, F>& t, std::uint64_t seed, float lo = -1.f, float hi = 1.f) {
  fill(t.data(), t.numel(), seed, lo, hi);
}

// Unit roundoff of the stored type (half an ulp relative).
template <class T>
constexpr double unit_roundoff() {
  return std::is_same_v<T, float> ? 0x1p-24 : 0x1p-9;
}

// Tolerance for a value that is a reduction of `length` terms of magnitude <= `magnitude`,
// accumulated in fp32 and stored in T: fp32 accumulation error grows with the length, plus the
// final rounding (2 roundings of T allowed for fused epilogues), plus a floor for cancellation.
template <class T>
double tolerance(double want, double length, double magnitude = 1.0) {
  return 4.0 * unit_roundoff<T>() * std::fabs(want) + 2.0 * length * 0x1p-23 * magnitude +
         2.0 * unit_roundoff<T>() * magnitude;
}

// Every element of got equals want within tolerance<T>(want, length, magnitude); both views are
// walked by logical coordinates, so their layouts may differ.
template <class T, class F1, class F2>
::testing::AssertionResult all_close(memfmt::tensor_view<const T, F1> got, memfmt::tensor_view<const T, F2> want,
                                     double length, double magnitude = 1.0) {
  static_assert(F1::rank == F2::rank, "same rank");
  if (got.extents() != want.extents()) return ::testing::AssertionFailure() << "extents differ";
  const auto e = got.extents();
  std::int64_t bad = 0;
  std::ostringstream first;
  const std::int64_t n = got.numel();
  memfmt_test::for_each_coord(e, [&](const typename memfmt::layout<F1>::extents_type& c) {
    const double g = to_d(got(c)), w = to_d(want(c));
    const double tol = tolerance<T>(w, length, magnitude);
    if (!(std::fabs(g - w) <= tol)) {
      if (bad++ == 0)
        first << "first mismatch at " << memfmt::detail::dims_to_string(c) << ": got " << g << ", want " << w
              << " (tol " << tol << ")";
    }
  });
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << n << " elements differ; " << first.str();
}

inline ::testing::AssertionResult arrays_close(const float* got, const float* want, std::int64_t n, double length,
                                               double magnitude = 1.0) {
  for (std::int64_t i = 0; i < n; ++i) {
    const double tol = tolerance<float>(want[i], length, magnitude);
    if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= tol))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", want " << want[i] << " (tol " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

// Where oneDNN cannot compute in T on this CPU: checks that `call` (an operation of the backend in T)
// is refused with errc::unsupported_dtype naming the dtype, `op`, the ISA it needs and the one
// oneDNN uses, and returns that reason for GTEST_SKIP. Where T is supported: "" (call not made).
template <class T, class Fn>
std::string refused_on_this_cpu(const std::string& op, Fn&& call) {
  const memfmt::onednn::dtype_support s = memfmt::onednn::support_for(memfmt::dtype_of_v<T>);
  if (s.supported) return {};
  std::vector<std::string> names{op + ": ", std::string(memfmt::to_string(memfmt::dtype_of_v<T>))};
  if (!s.needs.empty()) {
    names.push_back("needs " + s.needs);
    names.push_back(std::string("oneDNN uses ") + memfmt::onednn::isa_name(memfmt::onednn::effective_isa()));
  }
  memfmt_test::expect_error(call, memfmt::errc::unsupported_dtype, names);
  return s.reason;
}

// The results of one forward and backward step of a per-channel-affine norm kernel over a
// [3, 12, 24, 40] float tensor of format F with x in [lo, hi): y, dx, the saved statistics
// (`stats` each) and dgamma, dbeta, in that order, for expect_same_bits_for_any_thread_count.
// step(x, y, dx, gamma, beta, mean, invstd, dgamma, dbeta) runs the kernel.
template <class F, class Step>
std::vector<float> norm_step_results(std::size_t stats, float lo, float hi, Step&& step) {
  memfmt::host_tensor<float, F> x({3, 12, 24, 40}), y({3, 12, 24, 40}), dx({3, 12, 24, 40});
  fill(x, 61, lo, hi);
  std::vector<float> g(12), b(12), m(stats), s(stats), dg(12), db(12);
  fill(g.data(), 12, 62, 0.5f, 1.5f);
  fill(b.data(), 12, 63);
  step(x, y, dx, g.data(), b.data(), m.data(), s.data(), dg.data(), db.data());
  std::vector<float> out(y.data(), y.data() + y.numel());
  out.insert(out.end(), dx.data(), dx.data() + dx.numel());
  for (const auto* v : {&m, &s, &dg, &db}) out.insert(out.end(), v->begin(), v->end());
  return out;
}

}  // namespace onednn_test
