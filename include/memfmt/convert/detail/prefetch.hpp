// memfmt/convert/detail/prefetch.hpp - software prefetches spread over a kernel's calls.
//
// The transposes read their source in an order the hardware prefetchers do not follow (a segment
// per source row). These helpers issue the prefetches for a later piece of work a slice per call
// of the current one, so the reads stay in flight without a burst that the core would drop.
//
// Two targets. Work that runs next (a kernel call or panel away) is fetched into L1; work further
// ahead (a block of 16 squares, a whole plane) into L2. Far prefetches into L1 had evicted the
// lines of the work in progress on Zen 4 (32 KiB L1): 1 thread, cold, ratio to memcpy, into L1
// -> into L2: bf16 NHWC->NCHW 32x256x56x56 0.46-0.47 -> 1.44-1.45, NCHW->NHWC (row strips)
// 0.46-0.47 -> 1.28-1.29; 256x64x56x56 bf16 0.81-0.92 -> 1.68-1.69, fp32 NHWC->NCHW 0.64-0.65 ->
// 1.08-1.12; fp32 NHWC->NCHW 32x64x112x112 0.63-0.65 -> 0.95. (They were chosen into L1 on Zen 5,
// 48 KiB L1, which has not been measured with L2 since.)
#pragma once

#include <cstdint>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif
#if defined(__linux__)
#include <unistd.h>
#endif

namespace memfmt::detail {

// Where a prefetch puts its line: L1 (and L2) for lines the next call or panel reads, L2 only for
// lines read a block or a plane from now.
enum class prefetch_into { l1, l2 };

template <prefetch_into Level = prefetch_into::l1>
inline void prefetch_line(std::uintptr_t address) noexcept {
#if defined(__SSE__)
  _mm_prefetch(reinterpret_cast<const char*>(address), Level == prefetch_into::l1 ? _MM_HINT_T0 : _MM_HINT_T1);
#else
  (void)address;
#endif
}

// The L1 data cache of one core, in bytes (32 KiB where the system does not say).
inline std::int64_t l1d_bytes() noexcept {
  static const std::int64_t bytes = [] {
    long b = 0;
#if defined(__linux__) && defined(_SC_LEVEL1_DCACHE_SIZE)
    b = sysconf(_SC_LEVEL1_DCACHE_SIZE);
#endif
    return b >= (4 << 10) ? static_cast<std::int64_t>(b) : std::int64_t{32} << 10;
  }();
  return bytes;
}

// Prefetches a byte range in address order into L2, a slice per step (addresses as integers: the
// range may end inside a line).
struct linear_prefetch {
  std::uintptr_t next = 0, end = 0, slice = 0;

  void start(const void* p, std::int64_t bytes, std::int64_t steps) noexcept {
    next = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{63};
    end = reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(bytes);
    const std::int64_t lines = static_cast<std::int64_t>((end - next + 63) / 64);
    slice = static_cast<std::uintptr_t>((lines + steps - 1) / (steps > 0 ? steps : 1) * 64);
  }
  void step() noexcept {
    if (next >= end) return;
    const std::uintptr_t stop = end - next < slice ? end : next + slice;
    for (; next < stop; next += 64) prefetch_line<prefetch_into::l2>(next);
  }
};

// Prefetches `count` segments of `bytes` bytes, `pitch` bytes apart (a panel's channels at every
// position), in address order into L1, a slice of lines per step. (Used for a whole plane
// ahead, it ran 5-10 % slower than linear_prefetch over the same lines, 1 thread, cold,
// 32x2048x7x7; the cause was not found. A form with a division per line was 25 % slower there.)
struct segment_prefetch {
  const unsigned char* base = nullptr;
  std::int64_t bytes = 0, pitch = 0, count = 0, seg = 0, slice = 0;
  std::uintptr_t next = 0, end = 0;  // lines left in segment `seg` (addresses as integers: a
                                     // segment may start and end inside a line)

  void start(const unsigned char* p, std::int64_t seg_bytes, std::int64_t seg_pitch, std::int64_t segs,
             std::int64_t steps) noexcept {
    base = p;
    bytes = seg_bytes;
    pitch = seg_pitch;
    count = segs;
    seg = 0;
    const bool split = reinterpret_cast<std::uintptr_t>(p) % 64 != 0 || seg_pitch % 64 != 0;
    const std::int64_t total = ((seg_bytes + 63) / 64 + (split ? 1 : 0)) * segs;
    slice = (total + steps - 1) / (steps > 0 ? steps : 1);
    open();
  }
  void step() noexcept {
    for (std::int64_t issued = 0; issued < slice && seg < count;) {
      if (next >= end) {
        if (++seg < count) open();
        continue;
      }
      prefetch_line(next);
      next += 64;
      ++issued;
    }
  }

 private:
  void open() noexcept {
    if (seg >= count) return;
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(base + seg * pitch);
    next = a & ~std::uintptr_t{63};
    end = a + static_cast<std::uintptr_t>(bytes);
  }
};

}  // namespace memfmt::detail
