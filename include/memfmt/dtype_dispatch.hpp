// memfmt/dtype_dispatch.hpp - from a run-time floating element type to a compile-time one.
//
// The executor, the trainer and the cuDNN group norm kernels all reach typed code from a dtype;
// this is their one switch, so a new floating type is added in one place.
//
// A backend may name the element types its kernels compute in (`using element_types =
// memfmt::element_types<float, half, bfloat16>;`). The executor, trainer and calibration then
// compile each layer for those types only (a oneDNN network is never float64) and refuse any other
// with an unsupported_dtype error when they are built. Without the member, all four are compiled.
#pragma once

#include <string>
#include <type_traits>

#include "dtype.hpp"
#include "error.hpp"

namespace memfmt {

// A list of element types: what a backend computes in.
template <class... T>
struct element_types {};

// The floating types memfmt computes in, in the order error messages name them.
using float_element_types = element_types<float, double, half, bfloat16>;

namespace detail {

template <class Backend, class = void>
struct backend_element_types {
  using type = float_element_types;
};
template <class Backend>
struct backend_element_types<Backend, std::void_t<typename Backend::element_types>> {
  using type = typename Backend::element_types;
};
// Backend::element_types where the backend names it, else every floating type.
template <class Backend>
using backend_element_types_t = typename backend_element_types<Backend>::type;

template <class... T>
std::string element_type_names(element_types<T...>) {
  std::string s;
  ((s += (s.empty() ? "" : ", ") + std::string(to_string(dtype_of<T>::value))), ...);
  return s;
}

template <class All, class Fn, class T, class... Rest>
decltype(auto) dispatch_among(element_types<T, Rest...>, dtype t, const std::string& who, Fn& fn) {
  if (t == dtype_of<T>::value) return fn(T{});
  if constexpr (sizeof...(Rest) > 0) {
    return dispatch_among<All>(element_types<Rest...>{}, t, who, fn);
  } else {
    fail(errc::unsupported_dtype,
         who + ": dtype " + std::string(to_string(t)) + " (supported: " + element_type_names(All{}) + ")");
  }
}

// Calls fn(T{}) for the element type T of `Types` (by default every floating type) that is t; any
// other dtype is an unsupported_dtype error naming `who` and the supported types.
template <class Types = float_element_types, class Fn>
decltype(auto) dispatch_float_dtype(dtype t, const std::string& who, Fn&& fn) {
  return dispatch_among<Types>(Types{}, t, who, fn);
}

}  // namespace detail
}  // namespace memfmt
