// bench_util.hpp - what the benchmark suites share: environment knobs and layout-independent data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include <memfmt/format/layout.hpp>
#include <memfmt/tensor/tensor_view.hpp>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace memfmt_bench {

inline std::int64_t env_int(const char* name, std::int64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : dflt;
}
inline double env_double(const char* name, double dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atof(v) : dflt;
}

// memcpy split over `threads` threads in 64-byte-aligned slices: the copy bound a multi-threaded
// kernel that moves the same bytes is compared with.
inline void parallel_memcpy(unsigned char* d, const unsigned char* s, std::size_t n, int threads) {
#if defined(_OPENMP)
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
      const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
      const std::size_t k = static_cast<std::size_t>(omp_get_num_threads());
      const std::size_t lo = n / k * t / 64 * 64, hi = t + 1 == k ? n : n / k * (t + 1) / 64 * 64;
      std::memcpy(d + lo, s + lo, hi - lo);
    }
    return;
  }
#endif
  (void)threads;
  std::memcpy(d, s, n);
}

// A hash of the logical index (N, C, spatial order), in [-scale, scale): every layout of the same
// extents holds the same values, so NCHW and NHWC runs compute the same thing.
template <class T, class F>
void fill_logical(memfmt::tensor_view<T, F> v, std::uint32_t seed, float scale = 1.f) {
  const auto e = v.extents();
  typename memfmt::layout<F>::extents_type c{};
  const std::int64_t n = v.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t r = i;
    for (int d = F::rank - 1; d >= 0; --d) {
      c[d] = r % e[d];
      r /= e[d];
    }
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ (seed * 0x9e3779b9u);
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float f = (static_cast<float>(h & 0xffffu) / 32768.f - 1.f) * scale;
    if constexpr (std::is_same_v<T, float>) v(c) = f;
    else v(c) = T(f);
  }
}

}  // namespace memfmt_bench
