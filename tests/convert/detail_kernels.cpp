#include "memfmt/convert/detail/execute.hpp"
#include "memfmt/convert/detail/transpose_kernels.hpp"
#include "memfmt/convert/detail/stream_copy.hpp"
#include "memfmt/convert/detail/copy_plan.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

// The planner merges dimensions contiguous in both tensors: dense NCHW->NHWC is N x C x (H*W).
TEST(ConvertPlan, MergesSpatialDims) {
  const std::int64_t sizes[4] = {2, 3, 4, 5};
  const std::int64_t src[4] = {60, 20, 5, 1};  // nchw
  const std::int64_t dst[4] = {60, 1, 15, 3};  // nhwc
  const int order[4] = {0, 2, 3, 1};
  const auto p = memfmt::detail::make_copy_plan(4, sizes, src, dst, order);
  ASSERT_EQ(p.rank, 3);
  EXPECT_EQ(p.dims[1].size, 20);
  EXPECT_EQ(p.dims[1].src_stride, 1);
  EXPECT_EQ(p.dims[1].dst_stride, 3);
  EXPECT_EQ(p.dims[2].size, 3);
}

// stream_copy against memcpy for every head/tail misalignment.
TEST(ConvertKernels, StreamCopyMatchesMemcpy) {
  std::vector<unsigned char> src(5000), dst(5100), ref(5100);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  for (std::size_t off = 0; off < 70; off += 3)
    for (std::size_t n : {0, 1, 255, 256, 257, 4000, 4999}) {
      if (off + n > dst.size()) continue;
      std::fill(dst.begin(), dst.end(), 0xAB);
      ref = dst;
      memfmt::detail::stream_copy(dst.data() + off, src.data(), n);
      memfmt::detail::stream_fence();
      std::copy(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(n),
                ref.begin() + static_cast<std::ptrdiff_t>(off));
      ASSERT_EQ(dst, ref) << "offset " << off << " bytes " << n;
    }
}

// transpose_block against the index definition, for sizes around every tile boundary.
template <std::size_t E>
void check_transpose_block() {
  for (std::int64_t rows : {1, 2, 3, 4, 5, 8, 15, 16, 17, 33, 64, 130}) {
    for (std::int64_t cols : {1, 2, 3, 4, 7, 8, 16, 31, 32, 33, 65, 129}) {
      const std::int64_t srs = rows + 3, drs = cols + 5;
      std::vector<unsigned char> src(static_cast<std::size_t>(srs * cols * E)),
          dst(static_cast<std::size_t>(drs * rows * E), 0xEE);
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + i / 251);
      auto ref = dst;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          std::memcpy(&ref[static_cast<std::size_t>((r * drs + c) * E)],
                      &src[static_cast<std::size_t>((c * srs + r) * E)], E);
      memfmt::detail::transpose_block<E>(src.data(), srs, dst.data(), drs, rows, cols);
      ASSERT_EQ(dst, ref) << "E=" << E << " rows " << rows << " cols " << cols;
      // Dense strides select the interleave / de-interleave kernels.
      std::vector<unsigned char> d2(static_cast<std::size_t>(rows * cols * E)), r2(d2.size());
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          std::memcpy(&r2[static_cast<std::size_t>((r * cols + c) * E)],
                      &src[static_cast<std::size_t>((c * rows + r) * E)], E);
      memfmt::detail::transpose_block<E>(src.data(), rows, d2.data(), cols, rows, cols);
      ASSERT_EQ(d2, r2) << "dense E=" << E << " rows " << rows << " cols " << cols;
    }
  }
}
TEST(ConvertKernels, TransposeBlock1) { check_transpose_block<1>(); }
TEST(ConvertKernels, TransposeBlock2) { check_transpose_block<2>(); }
TEST(ConvertKernels, TransposeBlock4) { check_transpose_block<4>(); }
TEST(ConvertKernels, TransposeBlock8) { check_transpose_block<8>(); }
