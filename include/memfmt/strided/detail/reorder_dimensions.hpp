// memfmt/strided/detail/reorder_dimensions.hpp - PyTorch 1.13's TensorIterator dimension order.
//
//   reorder_dimensions(shape, op_strides): the dimensions of `shape`, fastest-moving first
//
// TensorIteratorBase::reorder_dimensions: a stable insertion sort from C order (last dimension
// first). For two dimensions the first operand with an opinion decides: the smaller stride goes
// first, equal strides put the smaller size first; a stride 0 (broadcast) has no opinion, and a
// pair no operand orders stays as it is. Each operand's strides are already broadcast to `shape`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace memfmt::detail {

inline std::vector<std::size_t> reorder_dimensions(const std::vector<std::int64_t>& shape,
                                                   const std::vector<std::vector<std::int64_t>>& op_strides) {
  const auto ndim = shape.size();
  std::vector<std::size_t> perm(ndim);
  for (std::size_t i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  // 1: dim0 goes after dim1, -1: before, 0: no operand has an opinion.
  auto should_swap = [&](std::size_t dim0, std::size_t dim1) -> int {
    for (const auto& s : op_strides) {
      const auto s0 = s[dim0], s1 = s[dim1];
      if (s0 == 0 || s1 == 0) continue;  // broadcast in one of them: ask the next operand
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[dim0] > shape[dim1]) return 1;  // equal strides: the smaller size goes first
    }
    return 0;
  };
  for (std::size_t i = 1; i < ndim; ++i) {
    std::size_t dim1 = i;
    for (std::size_t k = 1; k <= i; ++k) {
      const std::size_t dim0 = i - k;
      const int c = should_swap(perm[dim0], perm[dim1]);
      if (c > 0) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (c < 0) {
        break;
      }
    }
  }
  return perm;
}

}  // namespace memfmt::detail
