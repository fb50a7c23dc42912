// memfmt/backends/cudnn/cuda_converter.cuh - the cuDNN backend's format conversions through
// memfmt::cuda::convert's transposing kernels. Needs nvcc: include it in one .cu file.
//
//   memfmt::cudnn::backend_options o;
//   o.converter = memfmt::cudnn::cuda_converter();
//   memfmt::cudnn::backend be(o);   // executor and trainer conversions now run as kernels
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "../../convert/cuda/convert.cuh"
#include "../../error.hpp"
#include "backend.hpp"

namespace memfmt::cudnn {
namespace detail {

// A packed (N, C, positions) tensor converts as N x C x 1 x positions: the transposition of
// (C, positions) per sample is the same whatever the spatial rank. Elements move as words of
// their size, never interpreted.
template <class Word>
void convert_packed(const packed_shape& from, const void* src, void* dst, cudaStream_t stream) {
  const std::array<std::int64_t, 4> e{from.n, from.c, 1, from.s};
  const auto* in = static_cast<const Word*>(src);
  auto* out = static_cast<Word*>(dst);
  if (from.channels_last)
    memfmt::cuda::convert(tensor_view<const Word, nhwc>(in, e), tensor_view<Word, nchw>(out, e), stream);
  else memfmt::cuda::convert(tensor_view<const Word, nchw>(in, e), tensor_view<Word, nhwc>(out, e), stream);
}

}  // namespace detail

inline format_converter cuda_converter() {
  return [](const packed_shape& from, const void* src, void* dst, cudaStream_t stream) {
    switch (from.element_bytes) {
      case 1: return detail::convert_packed<std::uint8_t>(from, src, dst, stream);
      case 2: return detail::convert_packed<std::uint16_t>(from, src, dst, stream);
      case 4: return detail::convert_packed<std::uint32_t>(from, src, dst, stream);
      case 8: return detail::convert_packed<std::uint64_t>(from, src, dst, stream);
      default:
        memfmt::detail::fail(errc::unsupported_dtype, "cudnn::cuda_converter: elements of " +
                                                          std::to_string(from.element_bytes) + " bytes (1, 2, 4 or 8)");
    }
  };
}

}  // namespace memfmt::cudnn
