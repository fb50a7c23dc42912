// memfmt/tensor/from_strided.hpp - checked entry points from raw (pointer, sizes, strides) data.
//
// view_as<Format>(data, sizes, strides) returns a typed view when the data is DENSE in that format,
// in PyTorch 1.13's sense of `t.is_contiguous(memory_format=...)`: sizes and strides are in
// elements and in logical N, C, spatial order; strides of size-1 dimensions are ignored; NCHW-dense
// is torch's plain contiguous. One deliberate difference: a tensor with no elements is dense in
// every format here (no element has an address to disagree about), while torch 1.13 answers
// is_contiguous(channels_last) from the strides even then.
//
// The ambiguous shapes (C == 1, all spatial sizes 1, or no elements) are dense in BOTH formats of
// their rank, so view_as<nchw> and view_as<nhwc> both succeed and address every element the same.
//
// try_view_as() and is_dense_in() are the non-throwing forms; view_as() throws memfmt::error with a
// message naming the sizes, the strides, the requested format and the format they ARE dense in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "../detail/checked.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../format/layout.hpp"
#include "../format/tags.hpp"
#include "../strided/classify.hpp"
#include "../strided/descriptor.hpp"
#include "tensor_view.hpp"

namespace memfmt {
namespace detail::from_strided {

// A read-only run of int64 values (sizes or strides) from a vector or a C array (DLPack).
struct dims_ref {
  const std::int64_t* ptr = nullptr;
  std::size_t count = 0;
  const std::int64_t* begin() const noexcept { return ptr; }
  const std::int64_t* end() const noexcept { return ptr + count; }
  std::size_t size() const noexcept { return count; }
  std::int64_t operator[](std::size_t i) const noexcept { return ptr[i]; }
};
inline dims_ref ref(const std::vector<std::int64_t>& v) noexcept { return {v.data(), v.size()}; }

// Why raw data cannot be viewed; built without allocating so try_view_as() can be noexcept.
enum class problem {
  none,
  wrong_rank,
  length_mismatch,
  negative_size,
  overflow,
  null_data,
  misaligned,
  not_dense,
};

// Exactly torch 1.13's answer of is_contiguous(memory_format) for the format's torch_format
// (contiguous for nchw/ncdhw, channels_last for nhwc, channels_last_3d for ndhwc), including
// torch's treatment of empty tensors: true for contiguous, computed from the strides otherwise.
// Sizes must have Format::rank entries, strides as many. The walk is strided/classify.hpp's.
template <class Format>
bool torch_is_contiguous(dims_ref sizes, dims_ref strides) noexcept {
  if constexpr (!Format::channels_last) return compute_contiguous(sizes, strides);
  else if constexpr (Format::rank == 4) return compute_channels_last_contiguous_2d(sizes, strides);
  else return compute_channels_last_contiguous_3d(sizes, strides);
}

template <class Format>
bool dense_in(dims_ref sizes, dims_ref strides) noexcept {
  return has_zero_size(sizes) || torch_is_contiguous<Format>(sizes, strides);
}

// Checks everything but the pointer: rank, lengths, sizes, element count, density. The dense
// strides of the sizes (what the typed view stores, zero extents counted as 1) and their byte
// count must fit in 64 bits, empty tensors included.
template <class Format>
problem check_dims(dims_ref sizes, dims_ref strides, std::size_t elem_size, std::int64_t* numel) noexcept {
  if (sizes.size() != static_cast<std::size_t>(Format::rank)) return problem::wrong_rank;
  if (strides.size() != sizes.size()) return problem::length_mismatch;
  for (auto s : sizes)
    if (s < 0) return problem::negative_size;
  std::int64_t extent = 0, bytes = 0;
  if (dense_extent_overflows(sizes, &extent) || mul_overflows(extent, static_cast<std::int64_t>(elem_size), &bytes))
    return problem::overflow;
  const std::int64_t n = has_zero_size(sizes) ? 0 : extent;  // without zeros, the extent is the count
  *numel = n;
  if (!dense_in<Format>(sizes, strides)) return problem::not_dense;
  return problem::none;
}

inline problem check_pointer(const void* data, std::size_t alignment, std::int64_t numel) noexcept {
  if (numel == 0) return problem::none;  // nothing is ever read through it
  if (data == nullptr) return problem::null_data;
  if (reinterpret_cast<std::uintptr_t>(data) % alignment != 0) return problem::misaligned;
  return problem::none;
}

// The formats of this rank the strides are dense in, for messages ("" when none).
template <class Format>
std::string dense_formats_text(dims_ref sizes, dims_ref strides) {
  using first = typename Format::channels_first_t;
  using last = typename Format::channels_last_t;
  const bool in_first = torch_is_contiguous<first>(sizes, strides);
  const bool in_last = torch_is_contiguous<last>(sizes, strides);
  if (in_first && in_last) return std::string(first::name) + " and " + last::name;
  if (in_first) return std::string(first::name) + " (torch contiguous)";
  if (in_last) return std::string(last::name) + " (torch " + std::string(to_string(last::torch_format)) + ")";
  return "";
}

// The message for a problem. `context` says who is asking ("view_as<nhwc>", plus DLPack details).
template <class Format>
[[noreturn]] void throw_problem(problem p, const std::string& context, dims_ref sizes, dims_ref strides,
                                const void* data, std::size_t alignment, std::size_t elem_size) {
  const std::string s = "sizes " + dims_to_string(sizes);
  const std::string st = "strides " + dims_to_string(strides);
  switch (p) {
    case problem::none: break;
    case problem::wrong_rank:
      fail(errc::invalid_argument, context + ": " + Format::name + " needs " + std::to_string(Format::rank) +
                                       " sizes (N, C, " + (Format::rank == 4 ? "H, W" : "D, H, W") + "), got " +
                                       std::to_string(sizes.size()) + ": " + s);
    case problem::length_mismatch:
      fail(errc::invalid_argument, context + ": " + s + " and " + st + " differ in length (" +
                                       std::to_string(sizes.size()) + " vs " + std::to_string(strides.size()) + ")");
    case problem::negative_size: fail(errc::invalid_argument, context + ": negative size in " + s);
    case problem::overflow:
      fail(errc::overflow, context + ": the element count, dense strides or byte count of " + s + " (elements of " +
                               std::to_string(elem_size) + " bytes) overflows 64 bits");
    case problem::null_data: fail(errc::null_pointer, context + ": null data for non-empty " + s);
    case problem::misaligned: {
      std::ostringstream os;
      os << context << ": data " << data << " is not aligned to " << alignment << " bytes for " << s;
      fail(errc::misaligned, os.str());
    }
    case problem::not_dense: {
      const std::string other = dense_formats_text<Format>(sizes, strides);
      fail(errc::format_mismatch,
           context + ": " + s + " with " + st + " are not dense in " + Format::name + " (torch " +
               std::string(to_string(Format::torch_format)) + "); " +
               (other.empty() ? std::string("they are not dense in any format (padded, sliced, permuted, "
                                            "expanded or overlapping strides)")
                              : "they are dense in " + other));
    }
  }
  fail(errc::invalid_argument, context + ": internal error");
}

template <class Format, class T>
tensor_view<T, Format> make_view(T* data, dims_ref sizes) noexcept {
  typename layout<Format>::extents_type e{};
  for (int d = 0; d < Format::rank; ++d) e[static_cast<std::size_t>(d)] = sizes[static_cast<std::size_t>(d)];
  // Dense in Format: for every dimension of size > 1 the given stride equals the packed one, and
  // size-1 (or empty) dimensions address nothing, so the packed layout addresses the same bytes.
  return tensor_view<T, Format>(data, layout<Format>::packed(e));
}

template <class Format>
std::string view_as_context() {
  return std::string("view_as<") + Format::name + ">";
}

// `context()` makes the message prefix; it runs only on failure, so success allocates nothing.
template <class Format, class T, class Context>
tensor_view<T, Format> view_or_throw(T* data, dims_ref sizes, dims_ref strides, Context context) {
  static_assert(is_format_v<Format>, "view_as<F>: F must be one of nchw, nhwc, ncdhw, ndhwc");
  std::int64_t numel = 0;
  problem p = check_dims<Format>(sizes, strides, sizeof(T), &numel);
  if (p == problem::none) p = check_pointer(data, alignof(T), numel);
  if (p != problem::none) throw_problem<Format>(p, context(), sizes, strides, data, alignof(T), sizeof(T));
  return make_view<Format>(data, sizes);
}

}  // namespace detail::from_strided

// True when (sizes, strides) describe data dense in Format (see the top of this file). False for a
// wrong number of sizes, mismatched lengths or negative sizes.
template <class Format>
bool is_dense_in(const std::vector<std::int64_t>& sizes, const std::vector<std::int64_t>& strides) noexcept {
  static_assert(is_format_v<Format>, "is_dense_in<F>: F must be one of nchw, nhwc, ncdhw, ndhwc");
  namespace fs = detail::from_strided;
  std::int64_t numel = 0;
  return fs::check_dims<Format>(fs::ref(sizes), fs::ref(strides), 1, &numel) == fs::problem::none;
}

// A typed view of `data`, or nullopt where view_as() would throw.
template <class Format, class T>
std::optional<tensor_view<T, Format>> try_view_as(T* data, const std::vector<std::int64_t>& sizes,
                                                  const std::vector<std::int64_t>& strides) noexcept {
  static_assert(is_format_v<Format>, "try_view_as<F>: F must be one of nchw, nhwc, ncdhw, ndhwc");
  namespace fs = detail::from_strided;
  std::int64_t numel = 0;
  fs::problem p = fs::check_dims<Format>(fs::ref(sizes), fs::ref(strides), sizeof(T), &numel);
  if (p == fs::problem::none) p = fs::check_pointer(data, alignof(T), numel);
  if (p != fs::problem::none) return std::nullopt;
  return fs::make_view<Format>(data, fs::ref(sizes));
}

// A typed view of `data` with these sizes and element strides (logical N, C, spatial order).
// Throws memfmt::error: invalid_argument (rank, lengths, negative size), overflow, null_pointer,
// misaligned, or format_mismatch (not dense in Format; the message says where it is dense).
template <class Format, class T>
tensor_view<T, Format> view_as(T* data, const std::vector<std::int64_t>& sizes,
                               const std::vector<std::int64_t>& strides) {
  namespace fs = detail::from_strided;
  return fs::view_or_throw<Format>(data, fs::ref(sizes), fs::ref(strides), fs::view_as_context<Format>);
}

// The same from a strided_desc, which must also name T's dtype.
template <class Format, class T>
tensor_view<T, Format> view_as(T* data, const strided_desc& desc) {
  namespace fs = detail::from_strided;
  constexpr dtype want = dtype_of_v<std::remove_cv_t<T>>;
  if (desc.type != want)
    detail::fail(errc::unsupported_dtype, fs::view_as_context<Format>() + ": descriptor dtype " +
                                              std::string(to_string(desc.type)) + " does not match element type " +
                                              std::string(to_string(want)) + " (sizes " +
                                              detail::dims_to_string(desc.sizes) + ")");
  return fs::view_or_throw<Format>(data, fs::ref(desc.sizes), fs::ref(desc.strides), fs::view_as_context<Format>);
}

}  // namespace memfmt
