// memfmt/convert/detail/cpu_tuning.hpp - the choices of the kernels that differ between CPUs.
//
// Two choices were measured to go opposite ways on Zen 4 (AMD family 0x19, 32 KiB L1) and Zen 5
// (family 0x1A, 48 KiB L1), both with 1 MiB L2, in each case by 0.2-0.5 of memcpy (1 thread,
// cold, bench_convert's ratio to memcpy):
//  * Where prefetches of squares a block or a strip ahead, and of a thread's next plane, land.
//    Zen 4, into L1 -> into L2: bf16 NHWC->NCHW 32x256x56x56 0.46 -> 1.44, bf16 NCHW->NHWC
//    (row strips) 0.46 -> 1.28, 256x64x56x56 bf16 0.81-0.92 -> 1.68, fp32 NHWC->NCHW 0.64-0.65 ->
//    1.08-1.12, fp32 NHWC->NCHW 32x64x112x112 0.63-0.65 -> 0.95 (there they had evicted the
//    lines of the work in progress). Zen 5, into L2 -> into L1: bf16 NCHW->NHWC 32x256x56x56
//    0.61-0.69 -> 1.04-1.06, 32x1024x14x14 0.46-0.47 -> 0.92-0.94, 32x512x28x28 0.52-0.62 ->
//    1.00-1.02; bf16 NHWC->NCHW 32x256x56x56 1.00-1.03 -> 1.41-1.42.
//  * How the short-row panels (run_short_rows) stream a stage out: in one burst after the next
//    panel's kernels, or a slice after each kernel call. Zen 4, slices -> burst, NHWC->NCHW
//    32x2048x7x7: fp32 0.72-0.88 -> 0.87-1.03, bf16 0.64-0.70 -> 0.74-0.85. Zen 5 (prefetches
//    into L1), burst -> slices: fp32 0.84 -> 1.02-1.09, bf16 0.86-0.87 -> 1.06-1.12.
// Other CPUs were not measured; they get Zen 4's choices, the usual ones (prefetcht1 for data
// needed later than the next few hundred cycles).
#pragma once

#include "../options.hpp"
#include "prefetch.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define MEMFMT_CONVERT_HAVE_CPUID 1
#else
#define MEMFMT_CONVERT_HAVE_CPUID 0
#endif

namespace memfmt::detail {

struct tuning_choices {
  prefetch_into far = prefetch_into::l2;  // squares a block or strip ahead, a thread's next plane
  bool stage_bursts = true;               // short-row stages go out in one burst where L1 holds two
};

// AMD's family number (base + extended, as the manuals define it), or 0 on other vendors.
inline unsigned amd_family() noexcept {
#if MEMFMT_CONVERT_HAVE_CPUID
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
  // "AuthenticAMD" in ebx, edx, ecx.
  if (b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u) return 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  const unsigned base = (a >> 8) & 0xFu;
  return base == 0xFu ? base + ((a >> 20) & 0xFFu) : base;
#else
  return 0;
#endif
}

inline cpu_tuning detected_cpu_tuning() noexcept {
  static const cpu_tuning detected = amd_family() >= 0x1Au ? cpu_tuning::zen5 : cpu_tuning::zen4;
  return detected;
}

inline tuning_choices choices_for(cpu_tuning t) noexcept {
  if (t == cpu_tuning::automatic) t = detected_cpu_tuning();
  tuning_choices c;
  if (t == cpu_tuning::zen5) {
    c.far = prefetch_into::l1;
    c.stage_bursts = false;
  }
  return c;
}

}  // namespace memfmt::detail
