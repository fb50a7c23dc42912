// memfmt/convert/detail/lane_unpack.hpp - which row each register holds after the in-lane unpacks.
//
// The AVX2 and AVX-512 tile transposes (transpose_kernels.hpp, zmm_transpose.hpp) keep an n x n
// block of E-byte elements in every 128-bit lane (n = 16 / E) and transpose it with log2(n) rounds
// of unpacks, each interleaving the register pairs (2p, 2p + 1). That perfect-shuffle network
// leaves register j holding row lane_unpack_row<E>(j): j with its log2(n) bits reversed.
#pragma once

#include <cstddef>

namespace memfmt::detail {

template <std::size_t E>
constexpr int lane_unpack_row(int j) noexcept {
  constexpr int n = static_cast<int>(16 / E);
  constexpr int stages = n == 16 ? 4 : n == 8 ? 3 : n == 4 ? 2 : 1;
  int r = 0;
  for (int b = 0; b < stages; ++b) r |= ((j >> b) & 1) << (stages - 1 - b);
  return r;
}

}  // namespace memfmt::detail
