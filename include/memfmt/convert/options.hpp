// memfmt/convert/options.hpp - knobs of the CPU conversion.
#pragma once

namespace memfmt {

// The CPU whose measured choices the AVX-512 kernels follow where the best choice differs between
// the CPUs they were tuned on (detail/cpu_tuning.hpp says what differs and by how much). Results
// are the same bytes under every value; only the speed changes.
//   automatic: zen5 on AMD family 0x1A (Zen 5) and later, zen4 everywhere else;
//   zen4:      prefetches a block or a plane ahead go into L2, and the short-row panels stream
//              their stages out in one burst where L1 holds two;
//   zen5:      those prefetches go into L1, and the stages stream out a slice per kernel call.
enum class cpu_tuning { automatic, zen4, zen5 };

constexpr const char* to_string(cpu_tuning t) noexcept {
  return t == cpu_tuning::zen4 ? "zen4" : t == cpu_tuning::zen5 ? "zen5" : "automatic";
}

struct convert_options {
  // 0 = OpenMP's default (all cores); 1 = single thread; n = at most n threads. Small tensors use
  // fewer threads than asked: a thread must have enough bytes to be worth waking.
  int num_threads = 0;
  // Large outputs are written with non-temporal stores: they skip the read-for-ownership a normal
  // store pays, which otherwise caps a transpose near 55 % of memcpy.
  bool allow_streaming_stores = true;
  cpu_tuning cpu = cpu_tuning::automatic;
};

}  // namespace memfmt
