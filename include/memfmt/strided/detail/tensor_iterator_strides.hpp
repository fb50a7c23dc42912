// memfmt/strided/detail/tensor_iterator_strides.hpp - the output layout of PyTorch 1.13's
// TensorIterator (every pointwise op on CPU), replayed on sizes and strides only.
//
// Steps, as in TensorIteratorBase::build: broadcast the shapes; the fast setup (all operands the
// same shape and all contiguous, or all channels-last contiguous, or all non-overlapping-and-dense
// with equal strides) copies that layout; otherwise each operand's strides are broadcast (a size-1
// dimension that broadcasts gets stride 0), the dimensions are insertion-sorted by the first
// operand with a strict opinion, and the output gets dense strides in that order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../../detail/checked.hpp"
#include "../../error.hpp"
#include "../../format/memory_format.hpp"
#include "../classify.hpp"
#include "../descriptor.hpp"
#include "reorder_dimensions.hpp"

namespace memfmt {
namespace detail {

// at::infer_size: broadcast two shapes, with PyTorch's message.
inline std::vector<std::int64_t> broadcast_shapes(const std::vector<std::int64_t>& a,
                                                  const std::vector<std::int64_t>& b) {
  const auto na = static_cast<std::int64_t>(a.size()), nb = static_cast<std::int64_t>(b.size());
  const auto n = na > nb ? na : nb;
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  for (auto i = n - 1; i >= 0; --i) {
    const auto offset = n - 1 - i;
    const auto da = na - 1 - offset, db = nb - 1 - offset;
    const std::int64_t sa = da >= 0 ? a[static_cast<std::size_t>(da)] : 1;
    const std::int64_t sb = db >= 0 ? b[static_cast<std::size_t>(db)] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      fail(errc::shape_mismatch, "The size of tensor a (" + std::to_string(sa) + ") must match the size of tensor b (" +
                                     std::to_string(sb) + ") at non-singleton dimension " + std::to_string(i));
    out[static_cast<std::size_t>(i)] = sa == 1 ? sb : sa;
  }
  return out;
}

// Sizes and strides (in elements) of the output TensorIterator allocates for these inputs.
// An operand with no sizes is a 0-dim tensor or a wrapped Python scalar.
// Inputs whose dtype differs from common_type are first converted with .to(common_type), which
// keeps non-overlapping-and-dense strides and otherwise gives dense strides in the input's order.
inline void tensor_iterator_output(std::vector<strided_desc> inputs, dtype common_type,
                                   std::vector<std::int64_t>& sizes, std::vector<std::int64_t>& strides) {
  for (auto& op : inputs) {
    if (op.type == common_type) continue;
    if (!is_non_overlapping_and_dense(op)) op.strides = infer_dense_strides(op);
    op.type = common_type;
  }
  // compute_shape
  std::vector<std::int64_t> shape;
  bool all_same_shape = true, has_scalars = false, has_tensors = false;
  for (const auto& op : inputs) {
    (op.sizes.empty() ? has_scalars : has_tensors) = true;
    if (has_scalars && has_tensors) all_same_shape = false;
    if (shape.empty()) {
      shape = op.sizes;
    } else if (op.sizes != shape) {
      all_same_shape = false;
      shape = broadcast_shapes(shape, op.sizes);
    }
  }
  // The broadcast shape can hold more elements than any operand: memfmt's limit is that its dense
  // strides fit in 64 bits (then so do the "compatible" strides below).
  checked_dense_extent(shape, "pointwise_result: broadcast output");
  sizes = shape;

  // fast_set_up
  if (all_same_shape) {
    bool contiguous = true, channels_last = true, dense = true;
    for (const auto& op : inputs) {
      contiguous = contiguous && is_contiguous(op);
      channels_last = channels_last && is_contiguous(op, memory_format::channels_last);
      dense = dense && is_non_overlapping_and_dense(op);
    }
    if (contiguous) {
      strides = dense_strides(shape, memory_format::contiguous);
      return;
    }
    if (channels_last) {
      strides = dense_strides(shape, memory_format::channels_last);
      return;
    }
    if (dense) {
      bool same_strides = true;
      for (const auto& op : inputs) same_strides = same_strides && op.strides == inputs.back().strides;
      if (same_strides) {
        strides = inputs.back().strides;
        return;
      }
    }
  }

  const auto ndim = shape.size();
  if (ndim == 0) {
    strides.clear();
    return;
  }
  // compute_strides: right-aligned, broadcast dimensions get stride 0 (scalars: all 0).
  std::vector<std::vector<std::int64_t>> op_strides;
  for (const auto& op : inputs) {
    std::vector<std::int64_t> s(ndim, 0);
    const auto offset = ndim - op.sizes.size();
    for (std::size_t i = 0; i < op.sizes.size(); ++i)
      s[offset + i] = (op.sizes[i] == 1 && shape[offset + i] != 1) ? 0 : op.strides[i];
    op_strides.push_back(std::move(s));
  }

  // reorder_dimensions: perm[0] is the fastest-moving dimension.
  const std::vector<std::size_t> perm = reorder_dimensions(shape, op_strides);

  // allocate_or_resize_outputs: C order gives at::empty's strides, any other order the
  // "compatible" strides, which do not clamp size-0 dimensions.
  bool inverted = true;
  for (std::size_t j = 0; j < ndim; ++j) inverted = inverted && perm[j] == ndim - j - 1;
  if (inverted) {
    strides = dense_strides(shape, memory_format::contiguous);
    return;
  }
  strides.assign(ndim, 0);
  std::int64_t next = 1;
  for (std::size_t j = 0; j < ndim; ++j) {
    strides[perm[j]] = next;
    next = checked_mul(next, shape[perm[j]], "pointwise_result: output stride");
  }
}

}  // namespace detail
}  // namespace memfmt
