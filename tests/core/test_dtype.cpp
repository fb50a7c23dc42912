// half / bfloat16 storage conversions against exhaustive and algebraic truths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "memfmt/dtype.hpp"

namespace {

TEST(Dtype, SizesAndNames) {
  EXPECT_EQ(memfmt::size_of(memfmt::dtype::float32), 4u);
  EXPECT_EQ(memfmt::size_of(memfmt::dtype::bfloat16), 2u);
  EXPECT_EQ(memfmt::size_of(memfmt::dtype::int64), 8u);
  EXPECT_EQ(memfmt::size_of(memfmt::dtype::bool8), 1u);
  EXPECT_EQ(memfmt::to_string(memfmt::dtype::float16), "float16");
  static_assert(memfmt::dtype_of_v<memfmt::half> == memfmt::dtype::float16);
  static_assert(memfmt::dtype_of_v<const double> == memfmt::dtype::float64);
}

// Every finite half converts to float and back to the same bits (float holds every half exactly).
TEST(Dtype, HalfRoundTripsAllBitPatterns) {
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = memfmt::half::to_float(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(memfmt::half::to_float(memfmt::half::from_float(f))));
      continue;
    }
    ASSERT_EQ(memfmt::half::from_float(f), bits) << "bits 0x" << std::hex << b;
  }
}

// Known values (IEEE 754 binary16 table).
TEST(Dtype, HalfKnownValuesAndRounding) {
  EXPECT_EQ(memfmt::half::from_float(1.0f), 0x3c00);
  EXPECT_EQ(memfmt::half::from_float(-2.0f), 0xc000);
  EXPECT_EQ(memfmt::half::from_float(65504.0f), 0x7bff);
  EXPECT_EQ(memfmt::half::from_float(65520.0f), 0x7c00);               // rounds up to inf
  EXPECT_EQ(memfmt::half::from_float(5.9604645e-8f), 0x0001);          // smallest subnormal
  EXPECT_EQ(memfmt::half::from_float(1.0f + 1.0f / 2048.0f), 0x3c00);  // tie -> even
  EXPECT_EQ(memfmt::half::from_float(1.0f + 3.0f / 2048.0f), 0x3c02);  // tie -> even (up)
}

TEST(Dtype, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(memfmt::bfloat16::from_float(1.0f), 0x3f80);
  float f;
  std::uint32_t x = 0x3f808000u;  // exactly halfway between 0x3f80 and 0x3f81 -> even (0x3f80)
  std::memcpy(&f, &x, 4);
  EXPECT_EQ(memfmt::bfloat16::from_float(f), 0x3f80);
  x = 0x3f818000u;  // halfway between 0x3f81 and 0x3f82 -> even (0x3f82)
  std::memcpy(&f, &x, 4);
  EXPECT_EQ(memfmt::bfloat16::from_float(f), 0x3f82);
  for (std::uint32_t b = 0; b < 0x10000u; b += 7) {
    const float g = memfmt::bfloat16::to_float(static_cast<std::uint16_t>(b));
    if (!std::isnan(g)) {
      ASSERT_EQ(memfmt::bfloat16::from_float(g), b);
    }
  }
}

}  // namespace

#include "memfmt/format/dispatch.hpp"

namespace {

TEST(FormatDispatch, RuntimeRequestsReachTheTags) {
  using memfmt::memory_format;
  EXPECT_EQ(memfmt::format_name(memory_format::contiguous, 4), "nchw");
  EXPECT_EQ(memfmt::format_name(memory_format::contiguous, 5), "ncdhw");
  EXPECT_EQ(memfmt::format_name(memory_format::channels_last, 4), "nhwc");
  EXPECT_EQ(memfmt::format_name(memory_format::channels_last_3d, 5), "ndhwc");
  const int rank =
      memfmt::dispatch_format(memory_format::channels_last_3d, 5, [](auto tag) { return decltype(tag)::rank; });
  EXPECT_EQ(rank, 5);
  EXPECT_THROW(memfmt::format_name(memory_format::channels_last, 5), memfmt::error);
  EXPECT_THROW(memfmt::format_name(memory_format::preserve, 4), memfmt::error);
  EXPECT_THROW(memfmt::format_name(memory_format::contiguous, 3), memfmt::error);
  for (auto f : memfmt::all_memory_formats) EXPECT_EQ(memfmt::parse_memory_format(memfmt::to_string(f)), f);
  EXPECT_FALSE(memfmt::parse_memory_format("nhwc").has_value());
}

}  // namespace
