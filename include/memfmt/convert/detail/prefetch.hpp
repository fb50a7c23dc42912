// memfmt/convert/detail/prefetch.hpp - software prefetches spread over a kernel's calls.
//
// The transposes read their source in an order the hardware prefetchers do not follow (a segment
// per source row). These helpers issue the prefetches for a later piece of work a slice per call
// of the current one, so the reads stay in flight without a burst that the core would drop.
//
// Two targets. Work that runs next (a kernel call or panel away) is fetched into L1. Work further
// ahead (a block of 16 squares, a whole plane) goes where convert_options::prefetch says: L1, or
// L2 where L1 is too small to hold it beside the work in progress (cpu_tuning.hpp).
#pragma once

#include <cstdint>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace memfmt::detail {

// Where a prefetch puts its line: L1 (and L2), or L2 only.
enum class prefetch_into { l1, l2 };

inline void prefetch_line(std::uintptr_t address, prefetch_into into = prefetch_into::l1) noexcept {
#if defined(__SSE__)
  if (into == prefetch_into::l1) _mm_prefetch(reinterpret_cast<const char*>(address), _MM_HINT_T0);
  else _mm_prefetch(reinterpret_cast<const char*>(address), _MM_HINT_T1);
#else
  (void)address;
  (void)into;
#endif
}

// Prefetches a byte range in address order, a slice per step (addresses as integers: the range
// may end inside a line).
struct linear_prefetch {
  std::uintptr_t next = 0, end = 0, slice = 0;
  prefetch_into into = prefetch_into::l2;

  void start(const void* p, std::int64_t bytes, std::int64_t steps, prefetch_into level) noexcept {
    into = level;
    if (bytes <= 0) {  // a range walked backwards (negative source strides) is not prefetched
      next = end = slice = 0;
      return;
    }
    next = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{63};
    end = reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(bytes);
    const std::int64_t lines = static_cast<std::int64_t>((end - next + 63) / 64);
    slice = static_cast<std::uintptr_t>((lines + steps - 1) / (steps > 0 ? steps : 1) * 64);
  }
  void step() noexcept {
    if (next >= end) return;
    const std::uintptr_t stop = end - next < slice ? end : next + slice;
    for (; next < stop; next += 64) prefetch_line(next, into);
  }
};

// Prefetches `count` segments of `bytes` bytes, `pitch` bytes apart (a panel's channels at every
// position), in address order into L1, a slice of lines per step. For a whole plane ahead,
// linear_prefetch over the same lines is faster (NHWC->NCHW 32x2048x7x7, 1 thread).
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
