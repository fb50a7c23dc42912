// memfmt/convert/options.hpp - knobs of the CPU conversion.
#pragma once

namespace memfmt {

// Two choices of the AVX-512 kernels whose best setting depends on the CPU's caches. Results are
// the same bytes under every setting; only the speed changes. `automatic` picks from the L1 data
// cache size the CPU reports (detail/cpu_tuning.hpp gives the rule; detected_far_prefetch() and
// detected_stage_stream() in convert.hpp say what it picked on this machine).

// Where software prefetches of work far ahead (the squares a block or strip ahead, a thread's next
// plane) put their lines: into L1, or into L2 only, which keeps them from evicting the lines of
// the work in progress when L1 is small.
enum class far_prefetch { automatic, l1, l2 };

// How the short-row panels (NHWC->NCHW with H*W = 49 and other rows that are not whole lines)
// stream a finished stage out: in one burst after the next panel's kernels, or a slice after each
// kernel call.
enum class stage_stream { automatic, burst, slices };

constexpr const char* to_string(far_prefetch p) noexcept {
  return p == far_prefetch::l1 ? "l1" : p == far_prefetch::l2 ? "l2" : "automatic";
}
constexpr const char* to_string(stage_stream s) noexcept {
  return s == stage_stream::burst ? "burst" : s == stage_stream::slices ? "slices" : "automatic";
}

struct convert_options {
  // 0 = OpenMP's default (all cores); 1 = single thread; n = at most n threads. Small tensors use
  // fewer threads than asked: a thread must have enough bytes to be worth waking.
  int num_threads = 0;
  // Large outputs are written with non-temporal stores: they skip the read-for-ownership a normal
  // store pays, which otherwise caps a transpose near 55 % of memcpy.
  bool allow_streaming_stores = true;
  far_prefetch prefetch = far_prefetch::automatic;
  stage_stream stage = stage_stream::automatic;
};

}  // namespace memfmt
