// memfmt/convert/detail/transpose_scalar.hpp - the portable rectangle transpose.
//
//   transpose_scalar<E>(src, srs, dst, drs, rows, cols): dst[r * drs + c] = src[c * srs + r]
//
// (strides in elements, byte pointers). The fallback without AVX2, and the edges the vector
// kernels leave (rows or columns short of a tile).
#pragma once

#include <cstddef>
#include <cstdint>

#include "element_bits.hpp"

namespace memfmt::detail {

template <std::size_t E>
inline void transpose_scalar(const unsigned char* src, std::int64_t srs, unsigned char* dst, std::int64_t drs,
                             std::int64_t rows, std::int64_t cols) noexcept {
  using U = element_bits_t<E>;
  const U* s = reinterpret_cast<const U*>(src);
  U* d = reinterpret_cast<U*>(dst);
  constexpr std::int64_t b = 16;  // square blocks keep both sides in L1
  for (std::int64_t c0 = 0; c0 < cols; c0 += b) {
    const std::int64_t c1 = c0 + b < cols ? c0 + b : cols;
    for (std::int64_t r0 = 0; r0 < rows; r0 += b) {
      const std::int64_t r1 = r0 + b < rows ? r0 + b : rows;
      for (std::int64_t c = c0; c < c1; ++c)
        for (std::int64_t r = r0; r < r1; ++r) d[r * drs + c] = s[c * srs + r];
    }
  }
}

}  // namespace memfmt::detail
