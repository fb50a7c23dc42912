// memfmt/backends/cpu/thread_shares.hpp - contiguous shares of an index range, one per OpenMP
// thread, for kernels that walk their share with an odometer (decoding only its first index) and
// whose results must not depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace memfmt::cpu {

// Calls fn(begin, end) for contiguous shares [begin, end) covering [0, count), one per thread of
// an OpenMP team where `parallel` (and OpenMP) is on and count > 1; else fn(0, count) once.
template <class Fn>
void for_each_thread_share(std::int64_t count, bool parallel, Fn&& fn) {
#if defined(_OPENMP)
  if (parallel && count > 1) {
#pragma omp parallel
    {
      const std::int64_t teams = omp_get_num_threads(), t = omp_get_thread_num();
      const std::int64_t share = count / teams, extra = count % teams;
      const std::int64_t begin = t * share + std::min(t, extra);
      const std::int64_t end = begin + share + (t < extra ? 1 : 0);
      if (begin < end) fn(begin, end);
    }
    return;
  }
#endif
  (void)parallel;
  if (count > 0) fn(std::int64_t{0}, count);
}

}  // namespace memfmt::cpu
