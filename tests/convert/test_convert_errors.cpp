// Bad input throws memfmt::error naming the values, and nothing is written.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "memfmt/convert/convert.hpp"
#include "memfmt/tensor/host_tensor.hpp"

#include "../common/expect_error.hpp"

using namespace memfmt;

namespace {

using memfmt_test::expect_error;

bool all_equal(const float* p, std::int64_t n, float v) {
  for (std::int64_t i = 0; i < n; ++i)
    if (p[i] != v) return false;
  return true;
}

TEST(ConvertErrors, ExtentsMismatchNamesBoth) {
  host_tensor<float, nchw> a(std::array<std::int64_t, 4>{2, 3, 4, 5});
  host_tensor<float, nhwc> b(std::array<std::int64_t, 4>{2, 3, 5, 4});
  for (std::int64_t i = 0; i < b.numel(); ++i) b.data()[i] = -1.0f;
  expect_error([&] { convert(a.view(), b.view()); }, errc::shape_mismatch, {"[2, 3, 4, 5]", "[2, 3, 5, 4]"});
  EXPECT_TRUE(all_equal(b.data(), b.numel(), -1.0f));
}

TEST(ConvertErrors, NullPointers) {
  std::vector<float> buf(24);
  const std::array<std::int64_t, 4> e{1, 2, 3, 4};
  expect_error([&] { convert(tensor_view<const float, nchw>(nullptr, e), tensor_view<float, nhwc>(buf.data(), e)); },
               errc::null_pointer, {"source", "24"});
  expect_error([&] { convert(tensor_view<const float, nchw>(buf.data(), e), tensor_view<float, nhwc>(nullptr, e)); },
               errc::null_pointer, {"destination", "24"});
  // Empty tensors need no memory.
  const std::array<std::int64_t, 4> z{0, 2, 3, 4};
  EXPECT_NO_THROW(convert(tensor_view<const float, nchw>(nullptr, z), tensor_view<float, nhwc>(nullptr, z)));
}

TEST(ConvertErrors, Overlap) {
  std::vector<float> buf(100, -1.0f);
  const std::array<std::int64_t, 4> e{1, 2, 3, 4};
  expect_error(
      [&] { convert(tensor_view<const float, nchw>(buf.data(), e), tensor_view<float, nhwc>(buf.data() + 10, e)); },
      errc::invalid_argument, {"overlap"});
  EXPECT_TRUE(all_equal(buf.data(), 100, -1.0f));
  // In place is an overlap too.
  expect_error([&] { convert(tensor_view<const float, nchw>(buf.data(), e), tensor_view<float, nchw>(buf.data(), e)); },
               errc::invalid_argument, {"overlap"});
  // Adjacent, non-overlapping ranges of the same buffer are fine.
  EXPECT_NO_THROW(convert(tensor_view<const float, nchw>(buf.data(), e), tensor_view<float, nhwc>(buf.data() + 24, e)));
}

TEST(ConvertErrors, Misaligned) {
  std::vector<float> buf(64);
  const std::array<std::int64_t, 4> e{1, 2, 3, 4};
  auto* bytes = reinterpret_cast<unsigned char*>(buf.data());
  auto* odd = reinterpret_cast<float*>(bytes + 2);  // never dereferenced: rejected up front
  expect_error([&] { convert(tensor_view<const float, nchw>(odd, e), tensor_view<float, nhwc>(buf.data() + 32, e)); },
               errc::misaligned, {"source", "4 bytes"});
  expect_error([&] { convert(tensor_view<const float, nchw>(buf.data(), e), tensor_view<float, nhwc>(odd + 32, e)); },
               errc::misaligned, {"destination"});
}

TEST(ConvertErrors, NegativeThreads) {
  host_tensor<float, nchw> a(std::array<std::int64_t, 4>{1, 2, 3, 4});
  host_tensor<float, nhwc> b(std::array<std::int64_t, 4>{1, 2, 3, 4});
  expect_error([&] { convert(a.view(), b.view(), convert_options{-2, true}); }, errc::invalid_argument, {"-2"});
}

TEST(ConvertErrors, StridedDescMismatches) {
  std::vector<float> src(200, 1.0f);
  host_tensor<float, nhwc> b(std::array<std::int64_t, 4>{1, 2, 3, 4});
  for (std::int64_t i = 0; i < b.numel(); ++i) b.data()[i] = -1.0f;
  // Rank.
  expect_error(
      [&] {
        convert(src.data(), strided_desc{{2, 3, 4}, {12, 4, 1}, dtype::float32}, b.view());
      },
      errc::invalid_argument, {"rank 3", "[2, 3, 4]", "nhwc", "rank 4"});
  // Sizes.
  expect_error(
      [&] {
        convert(src.data(), strided_desc{{1, 2, 4, 3}, {24, 12, 3, 1}, dtype::float32}, b.view());
      },
      errc::shape_mismatch, {"[1, 2, 4, 3]", "[1, 2, 3, 4]"});
  // Sizes and strides of different lengths.
  expect_error(
      [&] {
        convert(src.data(), strided_desc{{1, 2, 3, 4}, {24, 12, 4}, dtype::float32}, b.view());
      },
      errc::invalid_argument, {"[24, 12, 4]"});
  // Element size.
  expect_error(
      [&] {
        convert(src.data(), strided_desc{{1, 2, 3, 4}, {24, 12, 4, 1}, dtype::float16}, b.view());
      },
      errc::unsupported_dtype, {"float16", "2 bytes", "4 bytes"});
  // Negative size.
  expect_error(
      [&] {
        convert(src.data(), strided_desc{{1, -2, 3, 4}, {24, 12, 4, 1}, dtype::float32}, b.view());
      },
      errc::invalid_argument, {"[1, -2, 3, 4]"});
  // Overlap with the destination.
  expect_error(
      [&] {
        convert(static_cast<const float*>(b.data()), strided_desc{{1, 2, 3, 4}, {24, 12, 4, 1}, dtype::float32},
                b.view());
      },
      errc::invalid_argument, {"overlap"});
  // Offsets that overflow 64 bits.
  expect_error(
      [&] {
        convert(src.data(), strided_desc{{1, 2, 3, 4}, {24, std::int64_t{1} << 62, 4, 1}, dtype::float32}, b.view());
      },
      errc::overflow, {"overflow"});
  EXPECT_TRUE(all_equal(b.data(), b.numel(), -1.0f));
}

}  // namespace
