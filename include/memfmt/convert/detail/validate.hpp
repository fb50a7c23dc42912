// memfmt/convert/detail/validate.hpp - the argument checks of a conversion, before any byte moves.
//
// Shared by the CPU convert() (convert.hpp) and memfmt::cuda::convert (cuda/validate.hpp adds what
// only the device needs). Plain C++: the checks look at addresses and sizes, never at the data.
// Every failure is a memfmt::error whose message starts with `who` and names the values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "../../detail/checked.hpp"
#include "../../error.hpp"
#include "../../format/tags.hpp"
#include "../../tensor/tensor_view.hpp"

namespace memfmt::detail {

// Elements move as opaque words of their size (element_bits.hpp), so any trivially copyable type
// of 1, 2, 4 or 8 bytes converts.
template <class T>
constexpr void check_convert_element() noexcept {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "memfmt::convert: element types must be 1, 2, 4 or 8 bytes");
  static_assert(std::is_trivially_copyable_v<T>, "memfmt::convert: element types must be trivially copyable");
}

template <class From, class To>
constexpr void check_convert_formats() noexcept {
  static_assert(is_format_v<From> && is_format_v<To>, "memfmt::convert: formats must be nchw, nhwc, ncdhw or ndhwc");
  static_assert(From::rank == To::rank,
                "memfmt::convert: source and destination formats must have the same rank "
                "(nchw/nhwc are rank 4, ncdhw/ndhwc rank 5)");
}

// "memfmt::convert nchw -> nhwc", with `entry` the function's name.
template <class From, class To>
std::string convert_name(const char* entry) {
  return std::string(entry) + " " + From::name + " -> " + To::name;
}

inline std::string address_string(const void* p) {
  std::ostringstream os;
  os << p;
  return os.str();
}

// Byte range [lo, hi) that sizes/strides (elements; strides may be negative or 0) touch from
// base, or errc::overflow where an offset or an address would not fit.
struct byte_range {
  std::uintptr_t lo = 0, hi = 0;
};
template <int Rank>
byte_range touched_bytes(const std::string& who, const void* base, const std::int64_t* sizes,
                         const std::int64_t* strides, std::size_t elem) {
  const auto describe = [&] {
    return "sizes " + dims_to_string(std::vector<std::int64_t>(sizes, sizes + Rank)) + " with strides " +
           dims_to_string(std::vector<std::int64_t>(strides, strides + Rank)) + " (elements of " +
           std::to_string(elem) + " bytes)";
  };
  std::int64_t min_off = 0, max_off = 0;
  for (int d = 0; d < Rank; ++d) {
    std::int64_t span = 0;
    if (mul_overflows(sizes[d] - 1, strides[d], &span) ||
        (span < 0 ? add_overflows(min_off, span, &min_off) : add_overflows(max_off, span, &max_off)))
      fail(errc::overflow, who + ": " + describe() + " overflow 64-bit offsets");
  }
  // Byte offsets, and the addresses they reach, must not wrap either.
  const auto b = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(base));
  const auto e = static_cast<std::int64_t>(elem);
  std::int64_t lo = 0, hi = 0;
  if (mul_overflows(min_off, e, &lo) || mul_overflows(max_off + 1, e, &hi) || add_overflows(b, lo, &lo) ||
      add_overflows(b, hi, &hi) || lo < 0)
    fail(errc::overflow, who + ": " + describe() + " overflow the address space from " + address_string(base));
  return {static_cast<std::uintptr_t>(lo), static_cast<std::uintptr_t>(hi)};
}

// A pointer to `numel` > 0 elements: not null, and aligned to `alignment` bytes.
template <int Rank>
void check_convert_pointer(const std::string& who, const void* p, const char* which, const std::int64_t* sizes,
                           std::int64_t numel, std::size_t elem, std::size_t alignment) {
  if (p == nullptr)
    fail(errc::null_pointer, who + ": " + which + " pointer is null for sizes " +
                                 dims_to_string(std::vector<std::int64_t>(sizes, sizes + Rank)) + " (" +
                                 std::to_string(numel) + " elements)");
  if (reinterpret_cast<std::uintptr_t>(p) % alignment != 0)
    fail(errc::misaligned, who + ": " + which + " pointer " + address_string(p) + " is not aligned to " +
                               std::to_string(alignment) + " bytes (element size " + std::to_string(elem) + ")");
}

// The memory of a conversion of `numel` > 0 elements: both pointers valid (check_convert_pointer),
// and the bytes the source is read from disjoint from those the destination is written to (the
// kernels read and write concurrently, and in no particular order).
template <int Rank>
void check_convert_memory(const std::string& who, const void* src, const std::int64_t* src_sizes,
                          const std::int64_t* src_strides, const void* dst, const std::int64_t* dst_sizes,
                          const std::int64_t* dst_strides, std::int64_t numel, std::size_t elem,
                          std::size_t alignment) {
  check_convert_pointer<Rank>(who, src, "source", src_sizes, numel, elem, alignment);
  check_convert_pointer<Rank>(who, dst, "destination", dst_sizes, numel, elem, alignment);
  const byte_range s = touched_bytes<Rank>(who, src, src_sizes, src_strides, elem);
  const byte_range d = touched_bytes<Rank>(who, dst, dst_sizes, dst_strides, elem);
  if (s.lo < d.hi && d.lo < s.hi)
    fail(errc::invalid_argument, who + ": source bytes [" + address_string(reinterpret_cast<void*>(s.lo)) + ", " +
                                     address_string(reinterpret_cast<void*>(s.hi)) + ") overlap destination bytes [" +
                                     address_string(reinterpret_cast<void*>(d.lo)) + ", " +
                                     address_string(reinterpret_cast<void*>(d.hi)) + ")");
}

// Every check of a view-to-view conversion: element type and formats (at compile time), equal
// extents, an element count that fits, and the memory (check_convert_memory, pointers aligned to
// `alignment`). Returns the element count; 0 means there is nothing to do (and no memory needed).
template <class T, class From, class To>
std::int64_t check_convert_views(const std::string& who, const tensor_view<const T, From>& src,
                                 const tensor_view<T, To>& dst, std::size_t alignment) {
  check_convert_element<T>();
  check_convert_formats<From, To>();
  const auto se = src.extents(), de = dst.extents();
  if (se != de)
    fail(errc::shape_mismatch, who + ": source extents " + dims_to_string(se) + " (" + From::name +
                                   ") differ from destination extents " + dims_to_string(de) + " (" + To::name + ")");
  const std::int64_t numel = checked_numel(de, who.c_str());
  if (numel == 0) return 0;
  const auto ss = src.strides(), ds = dst.strides();
  check_convert_memory<To::rank>(who, src.data(), se.data(), ss.data(), dst.data(), de.data(), ds.data(), numel,
                                 sizeof(T), alignment);
  return numel;
}

}  // namespace memfmt::detail
