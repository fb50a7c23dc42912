// memfmt/convert/cuda/validate.hpp - argument checks of memfmt::cuda::convert, before any launch.
//
// Plain C++ (no CUDA headers): the checks never touch the data, so they run and are tested on
// machines without a GPU. Every failure is a memfmt::error that names the values involved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "../../detail/checked.hpp"
#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"

namespace memfmt::cuda::detail {

template <class From, class To>
std::string convert_name() {
  return std::string("memfmt::cuda::convert ") + From::name + " -> " + To::name;
}

inline std::string address_string(const void* p) {
  std::ostringstream os;
  os << p;
  return os.str();
}

// Elements a view spans (one past its largest offset), with every product and sum checked.
template <class T, class F>
std::int64_t checked_span(const tensor_view<T, F>& v, const std::string& who, const char* which) {
  std::int64_t span = 1;
  for (int d = 0; d < F::rank; ++d) {
    const std::int64_t e = v.extent(d);
    if (e == 0) return 0;
    std::int64_t term = 0;
    if (memfmt::detail::mul_overflows(e - 1, v.stride(d), &term) || __builtin_add_overflow(span, term, &span))
      memfmt::detail::fail(errc::overflow, who + ": the " + which + " view (sizes " +
                                               memfmt::detail::dims_to_string(v.extents()) + ", strides " +
                                               memfmt::detail::dims_to_string(v.strides()) +
                                               ") spans more than 2^63 elements");
  }
  return span;
}

// Throws unless `src` can be converted into `dst`; returns the element count (0: nothing to do).
template <class T, class From, class To>
std::int64_t validate_convert(const tensor_view<const T, From>& src, const tensor_view<T, To>& dst) {
  static_assert(is_format_v<From> && is_format_v<To>, "convert: formats must be nchw, nhwc, ncdhw or ndhwc");
  static_assert(From::rank == To::rank, "convert: formats must have the same rank (nchw<->nhwc, ncdhw<->ndhwc)");
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "memfmt::cuda::convert: element size must be 1, 2, 4 or 8 bytes");
  static_assert(std::is_trivially_copyable_v<T>, "memfmt::cuda::convert: elements are copied as bytes");
  const std::string who = convert_name<From, To>();
  const auto se = src.extents();
  const auto de = dst.extents();
  if (se != de)
    memfmt::detail::fail(errc::shape_mismatch, who + ": source sizes " + memfmt::detail::dims_to_string(se) +
                                                   " differ from destination sizes " +
                                                   memfmt::detail::dims_to_string(de));
  const std::int64_t numel = memfmt::detail::checked_numel(se, who.c_str());
  if (numel == 0) return 0;
  const std::size_t src_bytes = memfmt::detail::checked_bytes(checked_span(src, who, "source"), sizeof(T), who.c_str());
  const std::size_t dst_bytes =
      memfmt::detail::checked_bytes(checked_span(dst, who, "destination"), sizeof(T), who.c_str());
  if (src.data() == nullptr || dst.data() == nullptr)
    memfmt::detail::fail(errc::null_pointer, who + ": " + (src.data() == nullptr ? "source" : "destination") +
                                                 " data pointer is null for sizes " +
                                                 memfmt::detail::dims_to_string(se));
  // Elements move as unsigned integers of their size, so each needs its natural alignment.
  const auto s_addr = reinterpret_cast<std::uintptr_t>(src.data());
  const auto d_addr = reinterpret_cast<std::uintptr_t>(dst.data());
  for (const auto& [addr, which] : {std::pair{s_addr, "source"}, std::pair{d_addr, "destination"}})
    if (addr % sizeof(T) != 0)
      memfmt::detail::fail(errc::misaligned, who + ": " + which + " pointer " +
                                                 address_string(reinterpret_cast<const void*>(addr)) +
                                                 " is not aligned to the element size " + std::to_string(sizeof(T)));
  // Threads of different blocks read and write concurrently: overlapping buffers would race.
  if (s_addr < d_addr + dst_bytes && d_addr < s_addr + src_bytes)
    memfmt::detail::fail(errc::invalid_argument,
                         who + ": source [" + address_string(src.data()) + ", +" + std::to_string(src_bytes) +
                             " bytes) and destination [" + address_string(dst.data()) + ", +" +
                             std::to_string(dst_bytes) + " bytes) overlap");
  return numel;
}

}  // namespace memfmt::cuda::detail
