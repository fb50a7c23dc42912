// cache_geometry.hpp compiles on its own (first include of its translation unit); cpuid leaves and
// sysfs listings decode to the sizes their fields describe, and the detection agrees with what
// Linux reports (sysfs and /proc/cpuinfo).
#include "memfmt/convert/detail/cache_geometry.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

using namespace memfmt;

namespace {

// The registers of one cache parameter subleaf, built from its fields.
struct leaf {
  std::uint32_t eax, ebx, ecx;
};
leaf make_leaf(unsigned type, unsigned level, unsigned ways, unsigned partitions, unsigned line, unsigned sets) {
  return {type | level << 5, (ways - 1) << 22 | (partitions - 1) << 12 | (line - 1), sets - 1};
}

TEST(ConvertCacheGeometry, DecodesCpuidLeaves) {
  detail::cache_geometry g;
  // 8-way 32 KiB L1d and 1 MiB L2 (64 and 2048 sets of 64-byte lines), a 16-way 2 MiB L2 with 2048
  // sets, an instruction cache (not recorded) and a 96 MiB L3 of 12 ways x 2 partitions.
  const leaf l1d = make_leaf(1, 1, 8, 1, 64, 64), l1i = make_leaf(2, 1, 8, 1, 64, 128);
  const leaf l2 = make_leaf(3, 2, 8, 1, 64, 2048), l3 = make_leaf(3, 3, 12, 2, 64, 65536);
  for (const leaf& x : {l1d, l1i, l2, l3}) EXPECT_TRUE(detail::decode_cache_leaf(x.eax, x.ebx, x.ecx, g));
  EXPECT_EQ(g.l1d_bytes, 32 << 10);
  EXPECT_EQ(g.l2_bytes, 1 << 20);
  EXPECT_EQ(g.l3_bytes, std::int64_t{96} << 20);
  const leaf big_l2 = make_leaf(3, 2, 16, 1, 64, 2048);
  EXPECT_TRUE(detail::decode_cache_leaf(big_l2.eax, big_l2.ebx, big_l2.ecx, g));
  EXPECT_EQ(g.l2_bytes, 2 << 20);
  // Type 0 ends the list and changes nothing.
  EXPECT_FALSE(detail::decode_cache_leaf(0, big_l2.ebx, big_l2.ecx, g));
  EXPECT_EQ(g.l1d_bytes, 32 << 10);
}

TEST(ConvertCacheGeometry, ParsesSysfsSizes) {
  EXPECT_EQ(detail::parse_cache_size("48K\n"), 48 << 10);
  EXPECT_EQ(detail::parse_cache_size("2048K"), 2 << 20);
  EXPECT_EQ(detail::parse_cache_size("1M"), 1 << 20);
  EXPECT_EQ(detail::parse_cache_size("65536"), 65536);
  EXPECT_EQ(detail::parse_cache_size(""), 0);
  EXPECT_EQ(detail::parse_cache_size("K"), 0);
  EXPECT_EQ(detail::parse_cache_size("12Q"), 0);
}

// A listing in sysfs's layout, written to a temporary directory.
TEST(ConvertCacheGeometry, ReadsSysfsListing) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("memfmt_cache_" + std::to_string(::getpid()));
  const struct {
    const char *level, *type, *size;
  } caches[] = {{"1", "Data", "48K"}, {"1", "Instruction", "32K"}, {"2", "Unified", "2048K"}, {"3", "Unified", "36M"}};
  int i = 0;
  for (const auto& c : caches) {
    const fs::path index = dir / ("index" + std::to_string(i++));
    fs::create_directories(index);
    std::ofstream(index / "level") << c.level << "\n";
    std::ofstream(index / "type") << c.type << "\n";
    std::ofstream(index / "size") << c.size << "\n";
  }
  const detail::cache_geometry g = detail::cache_geometry_from_sysfs(dir.c_str());
  fs::remove_all(dir);
  EXPECT_EQ(g.l1d_bytes, 48 << 10);
  EXPECT_EQ(g.l2_bytes, 2 << 20);
  EXPECT_EQ(g.l3_bytes, std::int64_t{36} << 20);
  EXPECT_STREQ(g.source, "sysfs");
  EXPECT_EQ(detail::cache_geometry_from_sysfs("/nonexistent/memfmt").l1d_bytes, 0);
}

// Linux's own account of cpu0's caches (its cpuid decoding, in sysfs) matches ours level by level.
TEST(ConvertCacheGeometry, DetectionMatchesSysfs) {
  const detail::cache_geometry sysfs = detail::cache_geometry_from_sysfs();
  if (sysfs.l1d_bytes == 0) GTEST_SKIP() << "no /sys/devices/system/cpu/cpu0/cache listing";
  const detail::cache_geometry& g = detail::detected_cache_geometry();
  EXPECT_EQ(g.l1d_bytes, sysfs.l1d_bytes) << "source " << g.source;
  if (sysfs.l2_bytes > 0) {
    EXPECT_EQ(g.l2_bytes, sysfs.l2_bytes) << "source " << g.source;
  }
  if (sysfs.l3_bytes > 0) {
    EXPECT_EQ(g.l3_bytes, sysfs.l3_bytes) << "source " << g.source;
  }
  EXPECT_EQ(detail::l1d_bytes(), g.l1d_bytes);
}

// /proc/cpuinfo's "cache size" is the L2 of a core on AMD (from cpuid 0x80000006, another leaf
// than ours) and the last level on Intel: it must be one of the sizes we detect.
TEST(ConvertCacheGeometry, DetectionMatchesCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string line;
  std::int64_t kib = -1;
  while (kib < 0 && std::getline(in, line))
    if (line.rfind("cache size", 0) == 0 && line.find(':') != std::string::npos)
      kib = std::atoll(line.c_str() + line.find(':') + 1);
  if (kib <= 0) GTEST_SKIP() << "/proc/cpuinfo has no cache size (not x86?)";
  const detail::cache_geometry& g = detail::detected_cache_geometry();
  EXPECT_TRUE(kib * 1024 == g.l2_bytes || kib * 1024 == g.l3_bytes)
      << "cpuinfo " << kib << " KiB, detected L2 " << g.l2_bytes << ", L3 " << g.l3_bytes << " (" << g.source << ")";
}

}  // namespace
