// memfmt/runtime/computing_in.hpp - a backend that computes in the element types a program uses.
//
// The executor, the trainer and calibration compile every layer for each element type of their
// backend (Backend::element_types, dtype_dispatch.hpp): four for the reference backend, two for
// oneDNN. A program whose networks run in float32 only says so and compiles that code once:
//
//   runtime::computing_in<onednn::backend, float> backend;
//   runtime::executor<decltype(backend)> run(net, plan, backend, params);
//
// (examples/run_network.cpp on the reference backend: half the compile time, docs/building.md.)
// The adapted backend is the backend itself (same constructors, same kernels); it answers support
// queries for other dtypes with unsupported_dtype, so the planner and the executor refuse a
// float64 or bfloat16 network before any work, naming the node and the types it computes in.
#pragma once

#include <string>
#include <type_traits>

#include "../dtype.hpp"
#include "../dtype_dispatch.hpp"
#include "../error.hpp"
#include "../layers/op_query.hpp"

namespace memfmt::runtime {

namespace detail {
template <class U, class... All>
constexpr bool computes_in(memfmt::element_types<All...>) {
  return (std::is_same_v<U, All> || ...);
}
}  // namespace detail

/// Backend, compiled for and answering for the element types T... only.
/// @pre each T is one of Backend's element types (a compile error names the adaptor otherwise).
template <class Backend, class... T>
struct computing_in : Backend {
  static_assert(sizeof...(T) > 0, "computing_in: name at least one element type");
  static_assert((detail::computes_in<T>(memfmt::detail::backend_element_types_t<Backend>{}) && ...),
                "computing_in: every element type must be one the backend computes in");

  using element_types = memfmt::element_types<T...>;
  using Backend::Backend;

  /// Backend's answer for T...; unsupported_dtype for any other element type.
  op_support support(const op_query& q) const {
    if (((q.type != dtype_of<T>::value) && ...))
      return op_support::no(errc::unsupported_dtype, std::string(to_string(q.op)) + ": dtype " +
                                                         std::string(to_string(q.type)) + " (this " + Backend::name +
                                                         " backend computes in " +
                                                         memfmt::detail::element_type_names(element_types{}) + ")");
    return Backend::support(q);
  }
};

}  // namespace memfmt::runtime
