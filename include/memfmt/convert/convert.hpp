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
#include <string>
#include <type_traits>

#include "../dtype.hpp"
#include "../error.hpp"
#include "../detail/checked.hpp"
#include "../strided/descriptor.hpp"
#include "../tensor/tensor_view.hpp"
#include "detail/copy_plan.hpp"
#include "detail/cpu_tuning.hpp"
#include "detail/execute.hpp"
#include "detail/validate.hpp"
#include "options.hpp"

namespace memfmt {
namespace detail {

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

// What far_prefetch::automatic and stage_stream::automatic stand for on this machine: chosen from
// the size of its L1 data cache (detail/cpu_tuning.hpp).
inline far_prefetch detected_far_prefetch() noexcept { return detail::resolve(far_prefetch::automatic); }
inline stage_stream detected_stage_stream() noexcept { return detail::resolve(stage_stream::automatic); }

template <class T, class From, class To>
void convert(tensor_view<const T, From> src, tensor_view<T, To> dst, const convert_options& opt = {}) {
  static_assert(!std::is_const_v<T>, "memfmt::convert: the destination view must be writable");
  detail::check_threads(opt);
  const std::string who = detail::convert_name<From, To>("memfmt::convert");
  if (detail::check_convert_views(who, src, dst, alignof(T)) == 0) return;
  detail::convert_checked<T, To::rank, To>(src.data(), src.strides().data(), dst, opt);
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
                                             " differ from destination extents " + detail::dims_to_string(de) + " (" +
                                             To::name + ")");
  const std::int64_t numel = detail::checked_numel(de, "memfmt::convert");
  if (numel == 0) return;
  const auto ds = dst.strides();
  detail::check_convert_memory<rank>("memfmt::convert", src, src_desc.sizes.data(), src_desc.strides.data(), dst.data(),
                                     de.data(), ds.data(), numel, sizeof(T), alignof(T));
  detail::convert_checked<T, rank, To>(src, src_desc.strides.data(), dst, opt);
}

}  // namespace memfmt
