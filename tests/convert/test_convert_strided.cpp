// convert(ptr, strided_desc, view): arbitrary source strides against an offset-by-offset reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "convert_test_util.hpp"
#include "memfmt/convert/convert.hpp"

using namespace memfmt;

namespace {

// Source buffer of `span` patterned elements; base at `base_offset` (so negative strides fit).
template <class T, class To>
void check_strided(const std::vector<std::int64_t>& sizes, const std::vector<std::int64_t>& strides, std::int64_t span,
                   std::int64_t base_offset, std::int64_t dst_pad) {
  std::int64_t lo = base_offset, hi = base_offset;  // the case must fit its buffer
  for (std::size_t d = 0; d < sizes.size(); ++d) (strides[d] < 0 ? lo : hi) += (sizes[d] - 1) * strides[d];
  ASSERT_GE(lo, 0);
  ASSERT_LT(hi, span);
  std::vector<T> src(static_cast<std::size_t>(span));
  for (std::size_t k = 0; k < src.size(); ++k) src[k] = convert_test::pattern<T>(k, 11);
  std::array<std::int64_t, To::rank> e{};
  for (int d = 0; d < To::rank; ++d) e[static_cast<std::size_t>(d)] = sizes[static_cast<std::size_t>(d)];
  const dtype t = sizeof(T) == 1   ? dtype::uint8
                  : sizeof(T) == 2 ? dtype::float16
                  : sizeof(T) == 4 ? dtype::float32
                                   : dtype::float64;
  for (int threads : {1, 2}) {
    convert_test::padded_tensor<T, To> dst(e, dst_pad, 1);
    auto expected = dst.buffer;
    const tensor_view<T, To> ev(expected.data() + 1, dst.view.mapping());
    convert_test::for_each_index(e, [&](const auto& i) {
      std::int64_t off = base_offset;
      for (int d = 0; d < To::rank; ++d) off += i[static_cast<std::size_t>(d)] * strides[static_cast<std::size_t>(d)];
      ev(i) = src[static_cast<std::size_t>(off)];
    });
    convert(static_cast<const T*>(src.data() + base_offset), strided_desc{sizes, strides, t}, dst.view,
            convert_options{threads, true});
    for (std::size_t k = 0; k < expected.size(); ++k)
      ASSERT_TRUE(convert_test::same_bits(dst.buffer[k], expected[k]))
          << To::name << " sizes " << detail::dims_to_string(sizes) << " strides " << detail::dims_to_string(strides)
          << " threads " << threads << " index " << k;
  }
}

template <class T>
void check_all_strided() {
  // Dense NCHW and NHWC described at run time.
  check_strided<T, nhwc>({2, 5, 3, 7}, {105, 21, 7, 1}, 210, 0, 0);
  check_strided<T, nchw>({2, 5, 3, 7}, {105, 1, 35, 5}, 210, 0, 1);
  // Permuted: a (N, W, H, C)-ordered buffer.
  check_strided<T, nchw>({2, 6, 4, 9}, {216, 1, 6, 24}, 432, 0, 0);
  check_strided<T, nhwc>({2, 6, 4, 9}, {216, 1, 6, 24}, 432, 0, 2);
  // Expanded (stride 0): broadcast over N, over C, over H.
  check_strided<T, nhwc>({3, 4, 5, 6}, {0, 30, 6, 1}, 120, 0, 0);
  check_strided<T, nchw>({3, 4, 5, 6}, {120, 0, 6, 1}, 360, 0, 0);
  check_strided<T, nhwc>({2, 17, 5, 6}, {510, 30, 0, 1}, 1020, 0, 1);
  // Sliced: every other W, every third C, with an offset.
  check_strided<T, nhwc>({2, 5, 4, 6}, {400, 72, 12, 2}, 800, 3, 0);
  check_strided<T, nchw>({2, 5, 4, 6}, {1, 3, 20, 100}, 600, 1, 0);
  // Negative strides: W flipped.
  check_strided<T, nhwc>({2, 3, 4, 5}, {60, 20, 5, -1}, 120, 4, 0);
  // Channels-last source with W flipped, taken by the AVX-512 transpose (whose prefetch range then
  // runs backwards: found by fuzz_convert under UBSan).
  check_strided<T, nchw>({2, 10, 11, 17}, {222, 444, 1, -13}, 4437, 208, 0);
  // 5-D, permuted (N, W, D, H, C).
  check_strided<T, ndhwc>({2, 3, 4, 5, 6}, {360, 1, 18, 72, 3}, 720, 0, 0);
  check_strided<T, ncdhw>({2, 3, 4, 5, 6}, {360, 1, 18, 72, 3}, 720, 0, 1);
  // Large enough for streaming stores: a permuted (N, W, H, C) source of 2 x 64 x 96 x 96.
  check_strided<T, nhwc>({2, 64, 96, 96}, {589824, 1, 64, 6144}, 1179648, 0, 0);
  check_strided<T, nchw>({2, 64, 96, 96}, {589824, 1, 64, 6144}, 1179648, 0, 0);
}

TEST(ConvertStrided, Bytes1) { check_all_strided<std::uint8_t>(); }
TEST(ConvertStrided, Bytes2) { check_all_strided<bfloat16>(); }
TEST(ConvertStrided, Bytes4) { check_all_strided<float>(); }
TEST(ConvertStrided, Bytes8) { check_all_strided<double>(); }

}  // namespace
