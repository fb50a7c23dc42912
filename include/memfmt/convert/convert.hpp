// memfmt/convert/convert.hpp - CPU conversion between memory formats (the public entry point).
//
//   convert(src_view, dst_view [, options])       any two formats of the same rank: NCHW<->NHWC,
//                                                 NCDHW<->NDHWC, or a same-format copy honouring
//                                                 the strides of both views;
//   convert(src_ptr, src_desc, dst_view [, opts]) a source with arbitrary strides (permuted,
//                                                 broadcast stride-0, sliced, negative).
//
// Elements are moved bit for bit (any type of 1, 2, 4 or 8 bytes). Every argument is checked
// before any byte is written; failures throw memfmt::error naming the values. The work is a
// cache-blocked, vectorised transpose of each image's (C x spatial) plane, multi-threaded with
// OpenMP when the build has it, with non-temporal stores for large outputs (see options.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "../dtype.hpp"
#include "../error.hpp"
#include "../detail/checked.hpp"
#include "../strided/descriptor.hpp"
#include "../tensor/tensor_view.hpp"
#include "detail/copy_plan.hpp"
#include "detail/execute.hpp"
#include "options.hpp"

namespace memfmt {
namespace detail {

template <class T>
constexpr void check_convert_element() noexcept {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "memfmt::convert: element types must be 1, 2, 4 or 8 bytes");
  static_assert(std::is_trivially_copyable_v<T>, "memfmt::convert: element types must be trivially copyable");
}

inline std::string ptr_to_string(const void* p) {
  std::ostringstream os;
  os << p;
  return os.str();
}

// Byte range [lo, hi) touched by sizes/strides from base (strides may be negative or 0).
struct byte_range {
  std::uintptr_t lo = 0, hi = 0;
};
template <int Rank>
byte_range touched_bytes(const void* base, const std::int64_t* sizes, const std::int64_t* strides,
                         std::size_t elem) {
  std::int64_t min_off = 0, max_off = 0;
  for (int d = 0; d < Rank; ++d) {
    std::int64_t span = 0;
    if (mul_overflows(sizes[d] - 1, strides[d], &span) ||
        (span < 0 ? __builtin_add_overflow(min_off, span, &min_off) : __builtin_add_overflow(max_off, span, &max_off)))
      fail(errc::overflow, "memfmt::convert: sizes " + dims_to_string(std::vector<std::int64_t>(sizes, sizes + Rank)) +
                               " with strides " + dims_to_string(std::vector<std::int64_t>(strides, strides + Rank)) +
                               " overflow 64-bit offsets");
  }
  // Byte offsets, and the addresses they reach, must not wrap either.
  const auto b = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(base));
  const auto e = static_cast<std::int64_t>(elem);
  std::int64_t lo = 0, hi = 0;
  if (mul_overflows(min_off, e, &lo) || mul_overflows(max_off + 1, e, &hi) || __builtin_add_overflow(b, lo, &lo) ||
      __builtin_add_overflow(b, hi, &hi) || lo < 0)
    fail(errc::overflow, "memfmt::convert: sizes " + dims_to_string(std::vector<std::int64_t>(sizes, sizes + Rank)) +
                             " with strides " + dims_to_string(std::vector<std::int64_t>(strides, strides + Rank)) +
                             " overflow the address space from " + ptr_to_string(base));
  return {static_cast<std::uintptr_t>(lo), static_cast<std::uintptr_t>(hi)};
}

template <class T>
void check_pointer(const void* p, std::int64_t numel, const char* which) {
  if (numel == 0) return;
  if (p == nullptr)
    fail(errc::null_pointer, std::string("memfmt::convert: ") + which + " pointer is null for " +
                                 std::to_string(numel) + " elements");
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0)
    fail(errc::misaligned, std::string("memfmt::convert: ") + which + " pointer " + ptr_to_string(p) +
                               " is not aligned to " + std::to_string(alignof(T)) + " bytes (element size " +
                               std::to_string(sizeof(T)) + ")");
}

inline void check_no_overlap(const byte_range& s, const byte_range& d) {
  if (s.lo < d.hi && d.lo < s.hi)
    fail(errc::invalid_argument, "memfmt::convert: source bytes [" + ptr_to_string(reinterpret_cast<void*>(s.lo)) +
                                     ", " + ptr_to_string(reinterpret_cast<void*>(s.hi)) +
                                     ") overlap destination bytes [" +
                                     ptr_to_string(reinterpret_cast<void*>(d.lo)) + ", " +
                                     ptr_to_string(reinterpret_cast<void*>(d.hi)) + ")");
}

inline void check_threads(const convert_options& opt) {
  if (opt.num_threads < 0)
    fail(errc::invalid_argument,
         "memfmt::convert: num_threads must be >= 0 (0 = all), got " + std::to_string(opt.num_threads));
}

template <class T, int Rank, class To>
void convert_checked(const T* src, const std::int64_t* src_strides, tensor_view<T, To> dst,
                     const convert_options& opt) {
  const auto sizes = dst.extents();
  const auto dst_strides = dst.strides();
  const copy_plan plan = make_copy_plan(Rank, sizes.data(), src_strides, dst_strides.data(), To::order.data());
  switch (sizeof(T)) {
    case 1: execute_plan<1>(plan, src, dst.data(), opt); break;
    case 2: execute_plan<2>(plan, src, dst.data(), opt); break;
    case 4: execute_plan<4>(plan, src, dst.data(), opt); break;
    default: execute_plan<8>(plan, src, dst.data(), opt); break;
  }
}

}  // namespace detail

// What convert_options::cpu = automatic stands for on this machine (zen4 or zen5).
inline cpu_tuning detected_cpu_tuning() noexcept { return detail::detected_cpu_tuning(); }

template <class T, class From, class To>
void convert(tensor_view<const T, From> src, tensor_view<T, To> dst, const convert_options& opt = {}) {
  static_assert(!std::is_const_v<T>, "memfmt::convert: the destination view must be writable");
  static_assert(From::rank == To::rank,
                "memfmt::convert: source and destination formats must have the same rank "
                "(nchw/nhwc are rank 4, ncdhw/ndhwc rank 5)");
  detail::check_convert_element<T>();
  detail::check_threads(opt);
  constexpr int rank = To::rank;
  const auto se = src.extents(), de = dst.extents();
  if (se != de)
    detail::fail(errc::shape_mismatch, std::string("memfmt::convert: source extents ") + detail::dims_to_string(se) +
                                           " (" + From::name + ") differ from destination extents " +
                                           detail::dims_to_string(de) + " (" + To::name + ")");
  const std::int64_t numel = detail::checked_numel(de, "memfmt::convert");
  if (numel == 0) return;
  detail::check_pointer<T>(src.data(), numel, "source");
  detail::check_pointer<T>(dst.data(), numel, "destination");
  const auto ss = src.strides(), ds = dst.strides();
  detail::check_no_overlap(detail::touched_bytes<rank>(src.data(), se.data(), ss.data(), sizeof(T)),
                           detail::touched_bytes<rank>(dst.data(), de.data(), ds.data(), sizeof(T)));
  detail::convert_checked<T, rank, To>(src.data(), ss.data(), dst, opt);
}

// Writable sources convert like const ones.
template <class T, class From, class To, class = std::enable_if_t<!std::is_const_v<T>>>
void convert(tensor_view<T, From> src, tensor_view<T, To> dst, const convert_options& opt = {}) {
  convert(tensor_view<const T, From>(src), dst, opt);
}

// A source described at run time: sizes and strides (elements) in logical N, C, spatial order.
template <class T, class To>
void convert(const T* src, const strided_desc& src_desc, tensor_view<T, To> dst, const convert_options& opt = {}) {
  static_assert(!std::is_const_v<T>, "memfmt::convert: the destination view must be writable");
  detail::check_convert_element<T>();
  detail::check_threads(opt);
  constexpr int rank = To::rank;
  src_desc.validate();
  if (src_desc.dim() != rank)
    detail::fail(errc::invalid_argument, "memfmt::convert: src_desc has rank " + std::to_string(src_desc.dim()) +
                                             " (sizes " + detail::dims_to_string(src_desc.sizes) +
                                             ") but the destination format " + To::name + " has rank " +
                                             std::to_string(rank));
  if (size_of(src_desc.type) != sizeof(T))
    detail::fail(errc::unsupported_dtype, "memfmt::convert: src_desc dtype " + std::string(to_string(src_desc.type)) +
                                              " (" + std::to_string(size_of(src_desc.type)) +
                                              " bytes) does not match the destination element size of " +
                                              std::to_string(sizeof(T)) + " bytes");
  const auto de = dst.extents();
  for (int d = 0; d < rank; ++d)
    if (src_desc.sizes[d] != de[d])
      detail::fail(errc::shape_mismatch, "memfmt::convert: src_desc sizes " + detail::dims_to_string(src_desc.sizes) +
                                             " differ from destination extents " + detail::dims_to_string(de) +
                                             " (" + To::name + ")");
  const std::int64_t numel = detail::checked_numel(de, "memfmt::convert");
  if (numel == 0) return;
  detail::check_pointer<T>(src, numel, "source");
  detail::check_pointer<T>(dst.data(), numel, "destination");
  const auto ds = dst.strides();
  detail::check_no_overlap(detail::touched_bytes<rank>(src, src_desc.sizes.data(), src_desc.strides.data(), sizeof(T)),
                           detail::touched_bytes<rank>(dst.data(), de.data(), ds.data(), sizeof(T)));
  detail::convert_checked<T, rank, To>(src, src_desc.strides.data(), dst, opt);
}

}  // namespace memfmt
