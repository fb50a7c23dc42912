// convert/detail/validate.hpp compiles on its own (first include of its translation unit); the
// required alignment is the caller's (the CUDA path asks for the element size, the CPU path for
// alignof), and the checks name the caller.
#include "memfmt/convert/detail/validate.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "../common/expect_error.hpp"

using namespace memfmt;

namespace {

struct rgba {  // 4 bytes, aligned to 1
  std::uint8_t c[4];
};

TEST(ConvertValidate, AlignmentIsTheCallers) {
  alignas(8) static rgba buf[2 * 24 + 1];
  const std::array<std::int64_t, 4> e{1, 2, 3, 4};
  const tensor_view<const rgba, nchw> src(
      reinterpret_cast<const rgba*>(reinterpret_cast<const unsigned char*>(buf) + 1), e);
  const tensor_view<rgba, nhwc> dst(buf + 25, e);
  EXPECT_EQ(detail::check_convert_views("alignof", src, dst, alignof(rgba)), 24);
  memfmt_test::expect_error([&] { detail::check_convert_views("element size", src, dst, sizeof(rgba)); },
                            errc::misaligned, {"element size: source pointer", "4 bytes"});
}

TEST(ConvertValidate, NamesTheCaller) {
  EXPECT_EQ((detail::convert_name<nchw, nhwc>("memfmt::convert")), "memfmt::convert nchw -> nhwc");
  static float a[24], b[24];
  const std::array<std::int64_t, 4> e{1, 2, 3, 4};
  memfmt_test::expect_error(
      [&] {
        detail::check_convert_views("who", tensor_view<const float, nchw>(a, e), tensor_view<float, nhwc>(a, e),
                                    alignof(float));
      },
      errc::invalid_argument, {"who: source bytes", "overlap"});
  EXPECT_EQ(detail::check_convert_views("who", tensor_view<const float, nchw>(a, e), tensor_view<float, nhwc>(b, e),
                                        alignof(float)),
            24);
}

}  // namespace
