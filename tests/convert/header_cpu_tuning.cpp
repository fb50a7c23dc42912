// cpu_tuning.hpp compiles on its own (first include of its translation unit); what each tuning
// chooses, and the detection against the kernel's own account of the CPU (/proc/cpuinfo).
#include "memfmt/convert/detail/cpu_tuning.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

using namespace memfmt;

TEST(ConvertCpuTuning, Choices) {
  const detail::tuning_choices zen4 = detail::choices_for(cpu_tuning::zen4);
  EXPECT_EQ(zen4.far, detail::prefetch_into::l2);
  EXPECT_TRUE(zen4.stage_bursts);
  const detail::tuning_choices zen5 = detail::choices_for(cpu_tuning::zen5);
  EXPECT_EQ(zen5.far, detail::prefetch_into::l1);
  EXPECT_FALSE(zen5.stage_bursts);
  const detail::tuning_choices automatic = detail::choices_for(cpu_tuning::automatic);
  const detail::tuning_choices detected = detail::choices_for(detail::detected_cpu_tuning());
  EXPECT_EQ(automatic.far, detected.far);
  EXPECT_EQ(automatic.stage_bursts, detected.stage_bursts);
  EXPECT_STREQ(to_string(cpu_tuning::automatic), "automatic");
  EXPECT_STREQ(to_string(cpu_tuning::zen4), "zen4");
  EXPECT_STREQ(to_string(cpu_tuning::zen5), "zen5");
}

// Linux reports the vendor and the (base + extended) family of the first CPU in /proc/cpuinfo.
TEST(ConvertCpuTuning, DetectionMatchesCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string line, vendor;
  int family = -1;
  while (std::getline(in, line) && (vendor.empty() || family < 0)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : std::string();
    if (key == "vendor_id" && vendor.empty()) vendor = value;
    if (key == "cpu family" && family < 0) family = std::stoi(value);
  }
  if (vendor.empty() || family < 0) GTEST_SKIP() << "/proc/cpuinfo has no vendor_id or cpu family (not x86?)";
  const bool amd = vendor == "AuthenticAMD";
  EXPECT_EQ(detail::amd_family(), amd ? static_cast<unsigned>(family) : 0u) << vendor << " family " << family;
  EXPECT_EQ(detail::detected_cpu_tuning(), amd && family >= 0x1A ? cpu_tuning::zen5 : cpu_tuning::zen4)
      << vendor << " family " << family;
}
