#include "memfmt/convert/options.hpp"
#include <gtest/gtest.h>
TEST(ConvertHeaders, OptionsDefaults) {
  memfmt::convert_options o;
  EXPECT_EQ(o.num_threads, 0);
  EXPECT_TRUE(o.allow_streaming_stores);
  EXPECT_EQ(o.cpu, memfmt::cpu_tuning::automatic);
}
