// memfmt/format/dispatch.hpp - from the runtime vocabulary to the compile-time tags.
//
// PyTorch speaks in (memory_format, rank); memfmt's typed code speaks in tags. format_for() names the
// tag, and dispatch_format() calls a generic callable with a value of that tag type, so runtime
// requests reach typed code without a hand-written switch at every call site.
#pragma once

#include <string>

#include "../error.hpp"
#include "memory_format.hpp"
#include "tags.hpp"

namespace memfmt {

// Calls fn(tag{}) for the tag of (f, rank): contiguous -> nchw/ncdhw, channels_last -> nhwc
// (rank 4 only), channels_last_3d -> ndhwc (rank 5 only). `preserve` names no layout by itself.
template <class Fn>
decltype(auto) dispatch_format(memory_format f, int rank, Fn&& fn) {
  if (f == memory_format::contiguous && rank == 4) return fn(nchw{});
  if (f == memory_format::contiguous && rank == 5) return fn(ncdhw{});
  if (f == memory_format::channels_last && rank == 4) return fn(nhwc{});
  if (f == memory_format::channels_last_3d && rank == 5) return fn(ndhwc{});
  detail::fail(errc::invalid_argument, std::string("no memfmt format for memory_format ") + std::string(to_string(f)) +
                                           " at rank " + std::to_string(rank) +
                                           " (contiguous: rank 4 or 5; channels_last: rank 4; channels_last_3d: rank 5)");
}

// The tag's name ("nchw", ...) for (f, rank); throws like dispatch_format.
inline std::string format_name(memory_format f, int rank) {
  return dispatch_format(f, rank, [](auto tag) { return std::string(decltype(tag)::name); });
}

}  // namespace memfmt
