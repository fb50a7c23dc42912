// memfmt/dtype_dispatch.hpp - from a run-time floating element type to a compile-time one.
//
// The executor, the trainer and the cuDNN group norm kernels all reach typed code from a dtype;
// this is their one switch, so a new floating type is added in one place.
#pragma once

#include <string>

#include "dtype.hpp"
#include "error.hpp"

namespace memfmt::detail {

// Calls fn(T{}) for the floating element types memfmt computes in; any other dtype is an
// unsupported_dtype error naming `who`.
template <class Fn>
decltype(auto) dispatch_float_dtype(dtype t, const std::string& who, Fn&& fn) {
  switch (t) {
    case dtype::float32: return fn(float{});
    case dtype::float64: return fn(double{});
    case dtype::float16: return fn(half{});
    case dtype::bfloat16: return fn(bfloat16{});
    default: break;
  }
  fail(errc::unsupported_dtype,
       who + ": dtype " + std::string(to_string(t)) + " (float32, float64, float16 and bfloat16 are supported)");
}

}  // namespace memfmt::detail
