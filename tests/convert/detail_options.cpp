#include "memfmt/convert/options.hpp"
#include <gtest/gtest.h>
TEST(ConvertHeaders, OptionsDefaults) {
  memfmt::convert_options o;
  EXPECT_EQ(o.num_threads, 0);
  EXPECT_TRUE(o.allow_streaming_stores);
  EXPECT_EQ(o.prefetch, memfmt::far_prefetch::automatic);
  EXPECT_EQ(o.stage, memfmt::stage_stream::automatic);
}
TEST(ConvertHeaders, OptionNames) {
  EXPECT_STREQ(memfmt::to_string(memfmt::far_prefetch::automatic), "automatic");
  EXPECT_STREQ(memfmt::to_string(memfmt::far_prefetch::l1), "l1");
  EXPECT_STREQ(memfmt::to_string(memfmt::far_prefetch::l2), "l2");
  EXPECT_STREQ(memfmt::to_string(memfmt::stage_stream::automatic), "automatic");
  EXPECT_STREQ(memfmt::to_string(memfmt::stage_stream::burst), "burst");
  EXPECT_STREQ(memfmt::to_string(memfmt::stage_stream::slices), "slices");
}
