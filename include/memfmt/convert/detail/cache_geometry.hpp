// memfmt/convert/detail/cache_geometry.hpp - the cache sizes of the CPU the conversion runs on.
//
// The kernels size their stages and choose where prefetches go (cpu_tuning.hpp) from the L1 data
// cache and L2 of one core. They are read from the deterministic cache parameter leaves of cpuid
// (leaf 4 on Intel, 0x8000001D on AMD with topology extensions; both lay out a cache the same way),
// else from Linux's /sys/devices/system/cpu/cpu0/cache, else reported as 0 (unknown). Hybrid CPUs
// report the core that asked first.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define MEMFMT_CONVERT_HAVE_CPUID 1
#else
#define MEMFMT_CONVERT_HAVE_CPUID 0
#endif

namespace memfmt::detail {

struct cache_geometry {
  std::int64_t l1d_bytes = 0;   // per core; 0 = not reported
  std::int64_t l2_bytes = 0;    // per core (or per core cluster)
  std::int64_t l3_bytes = 0;    // the last level, shared
  const char* source = "none";  // "cpuid", "sysfs" or "none"
};

// The kinds of cache a deterministic cache parameter leaf (or sysfs) names.
enum class cache_kind { none, data, instruction, unified };

// Records one cache of `level` in g: data and unified caches of levels 1-3 (L1 instruction
// caches and anything else are not ours).
inline void record_cache(cache_geometry& g, int level, cache_kind kind, std::int64_t bytes) noexcept {
  if (bytes <= 0 || (kind != cache_kind::data && kind != cache_kind::unified)) return;
  if (level == 1) g.l1d_bytes = bytes;
  else if (level == 2) g.l2_bytes = bytes;
  else if (level == 3) g.l3_bytes = bytes;
}

// One subleaf of cpuid leaf 4 or 0x8000001D: EAX[4:0] the kind (0 ends the list), EAX[7:5] the
// level; ways, partitions and line size (EBX[31:22], [21:12], [11:0]) and sets (ECX) are stored
// less one. Returns false at the end of the list.
inline bool decode_cache_leaf(std::uint32_t eax, std::uint32_t ebx, std::uint32_t ecx, cache_geometry& g) noexcept {
  const std::uint32_t type = eax & 0x1Fu;
  if (type == 0) return false;
  const cache_kind kind = type == 1   ? cache_kind::data
                          : type == 2 ? cache_kind::instruction
                          : type == 3 ? cache_kind::unified
                                      : cache_kind::none;
  const std::int64_t ways = (ebx >> 22) + 1, partitions = ((ebx >> 12) & 0x3FFu) + 1, line = (ebx & 0xFFFu) + 1;
  const std::int64_t sets = static_cast<std::int64_t>(ecx) + 1;
  record_cache(g, static_cast<int>((eax >> 5) & 0x7u), kind, ways * partitions * line * sets);
  return true;
}

inline cache_geometry cache_geometry_from_cpuid() noexcept {
  cache_geometry g;
#if MEMFMT_CONVERT_HAVE_CPUID
  unsigned a = 0, b = 0, c = 0, d = 0;
  auto walk = [&](unsigned leaf) {
    for (unsigned sub = 0; sub < 16; ++sub) {
      __cpuid_count(leaf, sub, a, b, c, d);
      if (!decode_cache_leaf(a, b, c, g)) break;
    }
  };
  if (__get_cpuid(0, &a, &b, &c, &d) && a >= 4) walk(4);
  // AMD leaves leaf 4 empty and lists its caches in 0x8000001D where topology extensions are on.
  if (g.l1d_bytes == 0 && __get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x8000001Du &&
      __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c >> 22) & 1u)
    walk(0x8000001Du);
#endif
  if (g.l1d_bytes > 0) g.source = "cpuid";
  return g;
}

// A size as sysfs writes it ("48K", "2048K", "1M", or bytes); 0 for anything else.
inline std::int64_t parse_cache_size(const char* text) noexcept {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || v <= 0) return 0;
  std::int64_t scale = 1;
  if (*end == 'K') scale = std::int64_t{1} << 10;
  else if (*end == 'M') scale = std::int64_t{1} << 20;
  else if (*end == 'G') scale = std::int64_t{1} << 30;
  else if (*end != '\0' && *end != '\n') return 0;
  return static_cast<std::int64_t>(v) * scale;
}

// The caches of one CPU as Linux lists them: dir/index<i>/{level,type,size}.
inline cache_geometry cache_geometry_from_sysfs(const char* dir = "/sys/devices/system/cpu/cpu0/cache") noexcept {
  cache_geometry g;
  auto read = [&](int index, const char* file, char(&out)[64]) {
    char path[512];
    std::snprintf(path, sizeof path, "%s/index%d/%s", dir, index, file);
    std::FILE* f = std::fopen(path, "r");
    if (!f) return false;
    const bool ok = std::fgets(out, sizeof out, f) != nullptr;
    std::fclose(f);
    return ok;
  };
  for (int i = 0; i < 16; ++i) {
    char level[64], type[64], size[64];
    if (!read(i, "level", level) || !read(i, "type", type) || !read(i, "size", size)) break;
    const cache_kind kind = type[0] == 'D'   ? cache_kind::data
                            : type[0] == 'U' ? cache_kind::unified
                                             : cache_kind::instruction;
    record_cache(g, std::atoi(level), kind, parse_cache_size(size));
  }
  if (g.l1d_bytes > 0) g.source = "sysfs";
  return g;
}

inline const cache_geometry& detected_cache_geometry() noexcept {
  static const cache_geometry g = [] {
    const cache_geometry c = cache_geometry_from_cpuid();
    return c.l1d_bytes > 0 ? c : cache_geometry_from_sysfs();
  }();
  return g;
}

// The L1 data cache of one core, in bytes (32 KiB where the CPU does not say).
inline std::int64_t l1d_bytes() noexcept {
  const std::int64_t b = detected_cache_geometry().l1d_bytes;
  return b >= (4 << 10) ? b : std::int64_t{32} << 10;
}

}  // namespace memfmt::detail
