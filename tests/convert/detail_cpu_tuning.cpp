// cpu_tuning.hpp compiles on its own (first include of its translation unit); the rule from cache
// sizes to choices, forced settings, and what `automatic` resolves to on this machine.
#include "memfmt/convert/detail/cpu_tuning.hpp"

#include <gtest/gtest.h>

using namespace memfmt;

namespace {

detail::cache_geometry with_l1d(std::int64_t l1d, std::int64_t l2) {
  detail::cache_geometry g;
  g.l1d_bytes = l1d;
  g.l2_bytes = l2;
  return g;
}

// The caches the two settings were measured on, and what lies around the threshold.
TEST(ConvertCpuTuning, RuleFromCacheSizes) {
  const std::int64_t k = 1024;
  // 32 KiB L1d, 1 MiB L2 (AMD Zen 4): far prefetches into L2, stages in bursts.
  EXPECT_EQ(detail::far_prefetch_for(with_l1d(32 * k, 1024 * k)), far_prefetch::l2);
  EXPECT_EQ(detail::stage_stream_for(with_l1d(32 * k, 1024 * k)), stage_stream::burst);
  // 48 KiB L1d with 1 MiB L2 (AMD Zen 5) or 2 MiB (recent Intel Xeons): into L1, in slices.
  for (const std::int64_t l2 : {1024 * k, 2048 * k}) {
    EXPECT_EQ(detail::far_prefetch_for(with_l1d(48 * k, l2)), far_prefetch::l1);
    EXPECT_EQ(detail::stage_stream_for(with_l1d(48 * k, l2)), stage_stream::slices);
  }
  // The threshold is two stages and as much again; an unknown L1 (0) is treated as small.
  EXPECT_EQ(detail::l1d_for_l1_prefetch, 3 * detail::short_row_stage_bytes);
  EXPECT_EQ(detail::far_prefetch_for(with_l1d(detail::l1d_for_l1_prefetch - 64, 0)), far_prefetch::l2);
  EXPECT_EQ(detail::far_prefetch_for(with_l1d(detail::l1d_for_l1_prefetch, 0)), far_prefetch::l1);
  EXPECT_EQ(detail::far_prefetch_for(with_l1d(0, 0)), far_prefetch::l2);
  EXPECT_EQ(detail::stage_stream_for(with_l1d(0, 0)), stage_stream::burst);
}

TEST(ConvertCpuTuning, ForcedSettingsWin) {
  convert_options o;
  o.prefetch = far_prefetch::l1;
  o.stage = stage_stream::burst;
  EXPECT_EQ(detail::far_prefetch_level(o), detail::prefetch_into::l1);
  EXPECT_TRUE(detail::stage_bursts(o));
  o.prefetch = far_prefetch::l2;
  o.stage = stage_stream::slices;
  EXPECT_EQ(detail::far_prefetch_level(o), detail::prefetch_into::l2);
  EXPECT_FALSE(detail::stage_bursts(o));
}

// `automatic` is the rule applied to the detected caches.
TEST(ConvertCpuTuning, AutomaticFollowsDetectedCaches) {
  const detail::cache_geometry& g = detail::detected_cache_geometry();
  EXPECT_EQ(detail::resolve(far_prefetch::automatic), detail::far_prefetch_for(g)) << "L1d " << g.l1d_bytes;
  EXPECT_EQ(detail::resolve(stage_stream::automatic), detail::stage_stream_for(g)) << "L1d " << g.l1d_bytes;
  const convert_options o;
  EXPECT_EQ(detail::far_prefetch_level(o) == detail::prefetch_into::l1,
            detail::far_prefetch_for(g) == far_prefetch::l1);
  EXPECT_EQ(detail::stage_bursts(o), detail::stage_stream_for(g) == stage_stream::burst);
}

}  // namespace
