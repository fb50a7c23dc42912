// memfmt/strided/detail/torch_view_ops.hpp - PyTorch 1.13's shape-only view and copy ops.
//
// The operator rules (op_rules.hpp) replay PyTorch's C++ step by step, and those steps reshape
// their operands on the way: unsqueeze a 1-D conv to 2-D, .contiguous(format) before a backend,
// narrow per group, view the result. These functions give the sizes and strides each of those
// calls produces, nothing more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../../detail/checked.hpp"
#include "../../error.hpp"
#include "../../format/memory_format.hpp"
#include "../classify.hpp"
#include "../descriptor.hpp"

namespace memfmt {
namespace detail {

// Tensor.unsqueeze(d): the new stride is sizes[d] * strides[d] (1 past the last dimension).
inline strided_desc torch_unsqueeze(const strided_desc& t, std::size_t d) {
  strided_desc r = t;
  const std::int64_t stride = d >= t.sizes.size() ? 1 : checked_mul(t.sizes[d], t.strides[d], "unsqueeze: new stride");
  r.sizes.insert(r.sizes.begin() + static_cast<std::ptrdiff_t>(d), 1);
  r.strides.insert(r.strides.begin() + static_cast<std::ptrdiff_t>(d), stride);
  return r;
}

// Tensor.squeeze(d): drops d only when its size is 1.
inline strided_desc torch_squeeze(const strided_desc& t, std::size_t d) {
  if (d >= t.sizes.size() || t.sizes[d] != 1) return t;
  strided_desc r = t;
  r.sizes.erase(r.sizes.begin() + static_cast<std::ptrdiff_t>(d));
  r.strides.erase(r.strides.begin() + static_cast<std::ptrdiff_t>(d));
  return r;
}

// at::empty(sizes, memory_format=f).
inline strided_desc torch_empty(const std::vector<std::int64_t>& sizes, memory_format f, dtype type) {
  strided_desc r;
  r.sizes = sizes;
  r.strides = dense_strides(sizes, f);
  r.type = type;
  return r;
}

// Tensor.contiguous(memory_format=f): t itself when already contiguous in f, else a fresh copy.
inline strided_desc torch_contiguous(const strided_desc& t, memory_format f = memory_format::contiguous) {
  if (is_contiguous(t, f)) return t;
  return torch_empty(t.sizes, f, t.type);
}

// Tensor.narrow(d, start, length): same strides, smaller size.
inline strided_desc torch_narrow(const strided_desc& t, std::size_t d, std::int64_t length) {
  strided_desc r = t;
  r.sizes[d] = length;
  return r;
}

// c10 computeStride (Tensor.view): the strides of t viewed as new_sizes, or nullopt where the
// view would need a copy. new_sizes must have t's element count.
inline std::optional<std::vector<std::int64_t>> torch_view_strides(const strided_desc& t,
                                                                   const std::vector<std::int64_t>& new_sizes) {
  const auto& old_sizes = t.sizes;
  const auto& old_strides = t.strides;
  std::vector<std::int64_t> new_strides(new_sizes.size(), 1);
  if (old_sizes.empty()) return new_strides;
  if (t.numel() == 0) {
    // Any view of nothing works: same shape keeps the strides, others get resize-like strides.
    if (old_sizes == new_sizes) return old_strides;
    for (auto d = new_sizes.size(); d-- > 0;)
      new_strides[d] = d + 1 == new_sizes.size() ? 1
                                                 : checked_mul(new_sizes[d + 1] > 1 ? new_sizes[d + 1] : 1,
                                                               new_strides[d + 1], "view: stride of an empty tensor");
    return new_strides;
  }
  // Walk the old dimensions in chunks that are contiguous with each other, and fill the new
  // dimensions that cover exactly the same elements.
  auto view_d = static_cast<std::int64_t>(new_sizes.size()) - 1;
  std::int64_t chunk_base_stride = old_strides.back();
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (auto tensor_d = static_cast<std::int64_t>(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    const auto td = static_cast<std::size_t>(tensor_d);
    const char* what = "view: stride";
    tensor_numel = checked_mul(tensor_numel, old_sizes[td], what);
    std::int64_t chunk_stride = 0;  // a product that does not fit cannot equal a real stride
    if (tensor_d == 0 || (old_sizes[td - 1] != 1 && (mul_overflows(tensor_numel, chunk_base_stride, &chunk_stride) ||
                                                     old_strides[td - 1] != chunk_stride))) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[static_cast<std::size_t>(view_d)] == 1)) {
        new_strides[static_cast<std::size_t>(view_d)] = checked_mul(view_numel, chunk_base_stride, what);
        view_numel = checked_mul(view_numel, new_sizes[static_cast<std::size_t>(view_d)], what);
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// Tensor.view(new_sizes) with PyTorch's two error messages.
inline strided_desc torch_view(const strided_desc& t, const std::vector<std::int64_t>& new_sizes) {
  const std::int64_t n = checked_numel(new_sizes, "view");
  if (n != t.numel())
    fail(errc::shape_mismatch,
         "shape '" + dims_to_string(new_sizes) + "' is invalid for input of size " + std::to_string(t.numel()));
  auto strides = torch_view_strides(t, new_sizes);
  if (!strides)
    fail(errc::format_mismatch,
         "view size is not compatible with input tensor's size and stride (at least one dimension spans across two "
         "contiguous subspaces). Use .reshape(...) instead.");
  strided_desc r;
  r.sizes = new_sizes;
  r.strides = *strides;
  r.type = t.type;
  return r;
}

}  // namespace detail
}  // namespace memfmt
