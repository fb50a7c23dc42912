// cudnn::backend::convert through cuda_converter() (memfmt::cuda::convert's kernels) against the
// index arithmetic of the two formats, every element size, rank 4 and 5, both directions; and the
// converter handed to the executor tests (kernel_converter.hpp). Skips without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include <memfmt/backends/cudnn/backend.hpp>
#include <memfmt/backends/cudnn/cuda_converter.cuh>

#include "kernel_converter.hpp"

namespace memfmt_test {
memfmt::cudnn::format_converter kernel_converter() { return memfmt::cudnn::cuda_converter(); }
}  // namespace memfmt_test

namespace {

using namespace memfmt;

// Logical (n, c, position) of a packed tensor in either format, as an element index.
std::int64_t index_of(bool channels_last, std::int64_t n, std::int64_t c, std::int64_t s, std::int64_t C,
                      std::int64_t S) {
  return channels_last ? (n * S + s) * C + c : (n * C + c) * S + s;
}

template <class Word, class From, class To>
void check_conversion(cudnn::backend& be, const std::array<std::int64_t, From::rank>& e) {
  tensor_view<const Word, From> probe(nullptr, e);
  const std::int64_t N = e[0], C = e[1], S = probe.spatial_numel(), count = probe.numel();
  std::vector<Word> host(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) host[static_cast<std::size_t>(i)] = static_cast<Word>(i * 2654435761u);
  const std::size_t bytes = host.size() * sizeof(Word);
  void* src = be.allocate(bytes);
  void* dst = be.allocate(bytes);
  be.copy_in(src, host.data(), bytes);
  be.convert(tensor_view<const Word, From>(static_cast<const Word*>(src), e), tensor_view<Word, To>(static_cast<Word*>(dst), e));
  std::vector<Word> got(host.size());
  be.copy_out(got.data(), dst, bytes);
  be.deallocate(src, bytes);
  be.deallocate(dst, bytes);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t s = 0; s < S; ++s)
        ASSERT_EQ(got[static_cast<std::size_t>(index_of(To::channels_last, n, c, s, C, S))],
                  host[static_cast<std::size_t>(index_of(From::channels_last, n, c, s, C, S))])
            << sizeof(Word) << "-byte elements, n " << n << " c " << c << " position " << s;
}

template <class Word>
void check_every_shape(cudnn::backend& be) {
  check_conversion<Word, nchw, nhwc>(be, {2, 37, 9, 11});
  check_conversion<Word, nhwc, nchw>(be, {2, 37, 9, 11});
  check_conversion<Word, nchw, nhwc>(be, {1, 3, 64, 64});  // few channels: the narrow path
  check_conversion<Word, ncdhw, ndhwc>(be, {2, 16, 3, 5, 7});
  check_conversion<Word, ndhwc, ncdhw>(be, {2, 16, 3, 5, 7});
}

TEST(CudnnKernelConverter, EveryElementSizeAgainstTheIndexArithmetic) {
  if (cudnn::device_count() == 0) GTEST_SKIP() << "no CUDA device: the conversion kernels not run";
  cudnn::backend_options o;
  o.converter = cudnn::cuda_converter();
  cudnn::backend be(o);
  check_every_shape<std::uint8_t>(be);
  check_every_shape<std::uint16_t>(be);
  check_every_shape<std::uint32_t>(be);
  check_every_shape<std::uint64_t>(be);
}

}  // namespace
