// memfmt/strided/classify.hpp - what PyTorch (1.13, c10::TensorImpl) says about a strided tensor.
//
// These functions reproduce the C++ rules bit for bit, including their quirks: size-1 dimensions
// are ignored by the contiguity checks, an empty tensor is always contiguous (but not always
// channels-last contiguous), and the "strides like channels last" rule breaks ties (N111, C == 1)
// toward contiguous. They differ from torch._prims_common's Python versions on some shapes; the
// fixtures in tests/strided/ pin them against PyTorch itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "../detail/checked.hpp"
#include "../error.hpp"
#include "../format/memory_format.hpp"
#include "descriptor.hpp"
#include "detail/reorder_dimensions.hpp"

namespace memfmt {
namespace detail {

// The dimension orders PyTorch walks, innermost first.
inline constexpr int channels_last_2d_walk[] = {1, 3, 2, 0};
inline constexpr int channels_last_3d_walk[] = {1, 4, 3, 2, 0};

// A running product that remembers overflow instead of wrapping: a stride can never equal a
// product past 2^63, so an overflowed expectation simply fails every later comparison.
struct expected_stride {
  std::int64_t value = 1;
  bool overflowed = false;
  bool matches(std::int64_t stride) const noexcept { return !overflowed && stride == value; }
  void times(std::int64_t size) noexcept {
    if (!overflowed && mul_overflows(value, size, &value)) overflowed = true;
  }
};

// The one density walk (c10 compute_contiguous, compute_channels_last_contiguous_*, and the last
// step of compute_non_overlapping_and_dense): visit `count` dimensions from the innermost out,
// dim_at(k) naming the k-th; every dimension of size != 1 must have exactly the stride that makes
// the data gap-free. Sizes and strides are any indexable ranges (vectors, DLPack arrays), which
// the caller has checked for length.
template <class Sizes, class Strides, class DimAt>
bool dense_along(const Sizes& sizes, const Strides& strides, std::size_t count, DimAt dim_at) noexcept {
  expected_stride expected;
  for (std::size_t k = 0; k < count; ++k) {
    const auto d = static_cast<std::size_t>(dim_at(k));
    const std::int64_t size_d = sizes[d];
    if (size_d == 1) continue;
    if (!expected.matches(strides[d])) return false;
    expected.times(size_d);
  }
  return true;
}

// c10 is_channels_last_strides_{2d_s4,3d_s5}: strides non-decreasing along the walk, with the
// two tie-breaks that send ambiguous shapes to contiguous.
template <std::size_t N>
bool strides_like_walk(const strided_desc& t, const int (&walk)[N]) noexcept {
  std::int64_t min = 0;
  // A broadcast (stride-0) channel dimension says nothing about the layout: default to NCHW.
  if (t.strides[1] == 0) return false;
  for (int d : walk) {
    const auto i = static_cast<std::size_t>(d);
    if (t.sizes[i] == 0) return false;
    if (t.strides[i] < min) return false;
    // N111 with equal strides (a contiguous N111, or an N11W sliced on W) stays contiguous.
    if (d == 0 && min == t.strides[1]) return false;
    min = t.strides[i];
    // Overflow here would need strides near 2^63; PyTorch wraps, we saturate (no real tensor differs).
    if (t.sizes[i] > 1 && mul_overflows(min, t.sizes[i], &min)) min = INT64_MAX;
  }
  return true;
}

template <class Sizes>
bool has_zero_size(const Sizes& sizes) noexcept {
  for (auto s : sizes)
    if (s == 0) return true;
  return false;
}
inline bool has_zero_size(const strided_desc& t) noexcept { return has_zero_size(t.sizes); }

template <class Sizes, class Strides>
bool compute_contiguous(const Sizes& sizes, const Strides& strides) noexcept {
  if (has_zero_size(sizes)) return true;  // numel() == 0, without risking an overflowing product
  const std::size_t n = sizes.size();
  return dense_along(sizes, strides, n, [n](std::size_t k) { return n - 1 - k; });
}
inline bool compute_contiguous(const strided_desc& t) noexcept { return compute_contiguous(t.sizes, t.strides); }

template <class Sizes, class Strides>
bool compute_channels_last_contiguous_2d(const Sizes& sizes, const Strides& strides) noexcept {
  return sizes.size() == 4 && dense_along(sizes, strides, 4, [](std::size_t k) { return channels_last_2d_walk[k]; });
}
inline bool compute_channels_last_contiguous_2d(const strided_desc& t) noexcept {
  return compute_channels_last_contiguous_2d(t.sizes, t.strides);
}

template <class Sizes, class Strides>
bool compute_channels_last_contiguous_3d(const Sizes& sizes, const Strides& strides) noexcept {
  return sizes.size() == 5 && dense_along(sizes, strides, 5, [](std::size_t k) { return channels_last_3d_walk[k]; });
}
inline bool compute_channels_last_contiguous_3d(const strided_desc& t) noexcept {
  return compute_channels_last_contiguous_3d(t.sizes, t.strides);
}

// c10 compute_non_overlapping_and_dense: sort the dimensions of size >= 2 by stride; each
// stride must be the product of the sizes before it. Size 0/1 dimensions are ignored.
inline bool compute_non_overlapping_and_dense(const strided_desc& t) noexcept {
  const auto n = t.sizes.size();
  if (n == 1) return t.sizes[0] < 2 || t.strides[0] == 1;
  std::vector<std::size_t> big;  // dimensions of size >= 2, by increasing stride
  for (std::size_t i = 0; i < n; ++i)
    if (t.sizes[i] >= 2) big.push_back(i);
  // Insertion sort: ranks are tiny, and ties between strides fail the check whatever the order.
  for (std::size_t i = 1; i < big.size(); ++i)
    for (std::size_t j = i; j > 0 && t.strides[big[j]] < t.strides[big[j - 1]]; --j) std::swap(big[j], big[j - 1]);
  return dense_along(t.sizes, t.strides, big.size(), [&big](std::size_t k) { return big[k]; });
}

// Channels-last strides for the sizes as c10 computes them: no clamping of size-0 dimensions.
// Returns false when a stride does not fit in 64 bits (the outermost dimension's extent is no
// stride, so it may).
inline bool channels_last_strides_fit(const std::vector<std::int64_t>& sizes, const int* walk, std::size_t walk_len,
                                      std::vector<std::int64_t>& strides) noexcept {
  strides.assign(sizes.size(), 0);
  std::int64_t s = 1;
  for (std::size_t k = 0; k < walk_len; ++k) {
    const auto d = static_cast<std::size_t>(walk[k]);
    strides[d] = s;
    if (k + 1 < walk_len && mul_overflows(s, sizes[d], &s)) return false;
  }
  return true;
}

inline std::vector<std::int64_t> channels_last_strides_for(const std::vector<std::int64_t>& sizes, const int* walk,
                                                           std::size_t walk_len) {
  std::vector<std::int64_t> strides;
  if (!channels_last_strides_fit(sizes, walk, walk_len, strides))
    fail(errc::overflow, "dense_strides: strides of sizes " + dims_to_string(sizes) + " overflow 64 bits");
  return strides;
}

}  // namespace detail

// Tensor.is_contiguous(memory_format=f). `preserve` answers like `contiguous`, as c10 does.
// Throws invalid_argument if t's sizes and strides differ in length or a size is negative.
inline bool is_contiguous(const strided_desc& t, memory_format f = memory_format::contiguous) {
  t.validate();
  switch (f) {
    case memory_format::channels_last: return detail::compute_channels_last_contiguous_2d(t);
    case memory_format::channels_last_3d:
      // c10 sets this flag only when the 2d channels-last flag is false (it always is at rank 5).
      return !detail::compute_channels_last_contiguous_2d(t) && detail::compute_channels_last_contiguous_3d(t);
    case memory_format::contiguous:
    case memory_format::preserve: break;
  }
  return detail::compute_contiguous(t);
}

// c10 TensorImpl::is_non_overlapping_and_dense(): every element addressed exactly once, with
// strides that are some permutation of a dense layout.
inline bool is_non_overlapping_and_dense(const strided_desc& t) {
  t.validate();
  if (detail::compute_contiguous(t)) return true;
  if (detail::compute_channels_last_contiguous_2d(t) || detail::compute_channels_last_contiguous_3d(t)) return true;
  return detail::compute_non_overlapping_and_dense(t);
}

// c10::is_channels_last_strides_2d: rank 4 only (false otherwise).
inline bool is_channels_last_strides_like(const strided_desc& t) {
  t.validate();
  return t.sizes.size() == 4 && detail::strides_like_walk(t, detail::channels_last_2d_walk);
}

// c10::is_channels_last_strides_3d: rank 5 only (false otherwise).
inline bool is_channels_last_3d_strides_like(const strided_desc& t) {
  t.validate();
  return t.sizes.size() == 5 && detail::strides_like_walk(t, detail::channels_last_3d_walk);
}

// Dense strides PyTorch gives a fresh tensor of these sizes in format f (at::empty(sizes,
// memory_format=f)). Contiguous strides treat size-0 dimensions as 1; channels-last strides do
// not. Wrong ranks and `preserve` throw memfmt::error with PyTorch's own message.
inline std::vector<std::int64_t> dense_strides(const std::vector<std::int64_t>& sizes, memory_format f) {
  for (auto s : sizes)
    if (s < 0)
      detail::fail(errc::invalid_argument, "dense_strides: negative size in sizes " + detail::dims_to_string(sizes));
  switch (f) {
    case memory_format::contiguous: {
      std::vector<std::int64_t> strides(sizes.size(), 1);
      for (auto i = sizes.size(); i-- > 1;) {
        const std::int64_t size = sizes[i] > 1 ? sizes[i] : 1;
        if (detail::mul_overflows(strides[i], size, &strides[i - 1]))
          detail::fail(errc::overflow,
                       "dense_strides: strides of sizes " + detail::dims_to_string(sizes) + " overflow 64 bits");
      }
      return strides;
    }
    case memory_format::channels_last:
      if (sizes.size() != 4) detail::fail(errc::invalid_argument, "required rank 4 tensor to use channels_last format");
      return detail::channels_last_strides_for(sizes, detail::channels_last_2d_walk, 4);
    case memory_format::channels_last_3d:
      if (sizes.size() != 5)
        detail::fail(errc::invalid_argument, "required rank 5 tensor to use channels_last_3d format");
      return detail::channels_last_strides_for(sizes, detail::channels_last_3d_walk, 5);
    case memory_format::preserve: break;
  }
  detail::fail(errc::unsupported, "unsupported memory format Preserve");
}

// TensorBase::suggest_memory_format: the format PyTorch infers from the strides. With
// channels_last_strides_exact_match (used by convolution), the strides must also equal the
// channels-last strides exactly, size-1 dimensions included.
inline memory_format suggest_memory_format(const strided_desc& t, bool channels_last_strides_exact_match = false) {
  t.validate();
  const auto rank = t.sizes.size();
  // Strides that do not fit in 64 bits cannot equal t's: no exact match.
  std::vector<std::int64_t> exact;
  if (rank == 4 && is_channels_last_strides_like(t)) {
    if (!channels_last_strides_exact_match ||
        (detail::channels_last_strides_fit(t.sizes, detail::channels_last_2d_walk, 4, exact) && exact == t.strides))
      return memory_format::channels_last;
  } else if (rank == 5 && is_channels_last_3d_strides_like(t)) {
    if (!channels_last_strides_exact_match ||
        (detail::channels_last_strides_fit(t.sizes, detail::channels_last_3d_walk, 5, exact) && exact == t.strides))
      return memory_format::channels_last_3d;
  }
  return memory_format::contiguous;
}

// at::infer_dense_strides: dense strides that keep t's dimension order (TensorIterator's stable
// insertion sort; stride-0 dimensions compare as ambiguous and stay put, equal strides put the
// smaller size first). Size 0/1 dimensions do not advance the stride.
inline std::vector<std::int64_t> infer_dense_strides(const strided_desc& t) {
  t.validate();
  const auto n = t.sizes.size();
  if (n == 0) return {};
  if (n == 1) return {1};
  const std::vector<std::size_t> perm = detail::reorder_dimensions(t.sizes, {t.strides});  // innermost first
  std::vector<std::int64_t> out(n);
  std::int64_t stride = 1;
  for (auto d : perm) {
    out[d] = stride;
    if (t.sizes[d] > 1 && detail::mul_overflows(stride, t.sizes[d], &stride))
      detail::fail(errc::overflow,
                   "infer_dense_strides: strides of sizes " + detail::dims_to_string(t.sizes) + " overflow 64 bits");
  }
  return out;
}

}  // namespace memfmt
