// memfmt/convert/cuda/validate.hpp - argument checks of memfmt::cuda::convert, before any launch.
//
// Plain C++ (no CUDA headers): the checks never touch the data, so they run and are tested on
// machines without a GPU. They are the CPU conversion's (../detail/validate.hpp), with the one
// requirement only the device has: pointers aligned to the element size.
#pragma once

#include <cstdint>
#include <string>

#include "../../tensor/tensor_view.hpp"
#include "../detail/validate.hpp"

namespace memfmt::cuda::detail {

template <class From, class To>
std::string convert_name() {
  return memfmt::detail::convert_name<From, To>("memfmt::cuda::convert");
}

// Throws unless `src` can be converted into `dst`; returns the element count (0: nothing to do).
// The kernels move elements as unsigned integers of their size, so each pointer needs that
// alignment (a 4-byte struct of bytes too, which the CPU path would take at its alignof).
template <class T, class From, class To>
std::int64_t validate_convert(const tensor_view<const T, From>& src, const tensor_view<T, To>& dst) {
  return memfmt::detail::check_convert_views(convert_name<From, To>(), src, dst, sizeof(T));
}

}  // namespace memfmt::cuda::detail
