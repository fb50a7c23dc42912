// memfmt/format/dispatch.hpp - from the runtime vocabulary to the compile-time tags.
//
// PyTorch speaks in (memory_format, rank); memfmt's typed code speaks in tags; the format planner
// (graph/) speaks in families, the two-way choice it makes per layer. This header is the one mapping
// between the three: family <-> memory_format here, memory_format <-> tag by tags.hpp's torch_format
// and dispatch_format(), which calls a generic callable with a value of the tag type, so runtime
// requests reach typed code without a hand-written switch at every call site.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "../error.hpp"
#include "memory_format.hpp"
#include "tags.hpp"

namespace memfmt {

// NCHW/NCDHW or NHWC/NDHWC, whatever the rank: the planner's word for a layout.
enum class format_family : std::uint8_t { channels_first, channels_last };

constexpr const char* to_string(format_family f) noexcept {
  return f == format_family::channels_first ? "channels_first" : "channels_last";
}

// The family of a tag, and of a memory_format request (`preserve` names none).
template <class F>
inline constexpr format_family family_v =
    F::channels_last ? format_family::channels_last : format_family::channels_first;

inline format_family family_of(memory_format f) {
  switch (f) {
    case memory_format::contiguous: return format_family::channels_first;
    case memory_format::channels_last:
    case memory_format::channels_last_3d: return format_family::channels_last;
    case memory_format::preserve: break;
  }
  detail::fail(errc::invalid_argument, std::string("memory_format ") + std::string(to_string(f)) +
                                           " names no layout family (it means: follow the input)");
}

// The memory_format of a family at a rank: channels_last is channels_last (rank 4) or
// channels_last_3d (rank 5); channels_first is contiguous at any rank.
inline memory_format to_memory_format(format_family f, int rank) {
  if (f == format_family::channels_first) return memory_format::contiguous;
  if (rank == 4) return memory_format::channels_last;
  if (rank == 5) return memory_format::channels_last_3d;
  detail::fail(errc::invalid_argument, "channels_last at rank " + std::to_string(rank) + " (it needs rank 4 or 5)");
}

// Calls fn(tag{}) for the tag of (f, rank): contiguous -> nchw/ncdhw, channels_last -> nhwc
// (rank 4 only), channels_last_3d -> ndhwc (rank 5 only). `preserve` names no layout by itself.
template <class Fn>
decltype(auto) dispatch_format(memory_format f, int rank, Fn&& fn) {
  if (f == memory_format::contiguous && rank == 4) return fn(nchw{});
  if (f == memory_format::contiguous && rank == 5) return fn(ncdhw{});
  if (f == memory_format::channels_last && rank == 4) return fn(nhwc{});
  if (f == memory_format::channels_last_3d && rank == 5) return fn(ndhwc{});
  detail::fail(errc::invalid_argument,
               std::string("no memfmt format for memory_format ") + std::string(to_string(f)) + " at rank " +
                   std::to_string(rank) +
                   " (contiguous: rank 4 or 5; channels_last: rank 4; channels_last_3d: rank 5)");
}

// The tag of family F at rank 4 or 5.
template <format_family F, int Rank>
using family_tag_t = std::conditional_t<(Rank == 4), std::conditional_t<F == format_family::channels_last, nhwc, nchw>,
                                        std::conditional_t<F == format_family::channels_last, ndhwc, ncdhw>>;

// Calls fn(tag{}) for family f at a compile-time rank: only that rank's two tags are instantiated,
// so fn may be written for rank 4 (or 5) alone.
template <int Rank, class Fn>
decltype(auto) dispatch_format(format_family f, Fn&& fn) {
  static_assert(Rank == 4 || Rank == 5, "dispatch_format: rank 4 or 5");
  if (f == format_family::channels_last) return fn(family_tag_t<format_family::channels_last, Rank>{});
  return fn(family_tag_t<format_family::channels_first, Rank>{});
}

// Calls fn(tag{}) for family f at a runtime rank 4 or 5 (nchw, nhwc, ncdhw, ndhwc).
template <class Fn>
decltype(auto) dispatch_format(format_family f, int rank, Fn&& fn) {
  if (rank == 4) return dispatch_format<4>(f, std::forward<Fn>(fn));
  if (rank == 5) return dispatch_format<5>(f, std::forward<Fn>(fn));
  detail::fail(errc::invalid_argument, std::string("no memfmt format for ") + to_string(f) + " at rank " +
                                           std::to_string(rank) + " (rank 4 or 5)");
}

// The tag's name ("nchw", ...) for (f, rank); throws like dispatch_format.
inline std::string format_name(memory_format f, int rank) {
  return dispatch_format(f, rank, [](auto tag) { return std::string(decltype(tag)::name); });
}

}  // namespace memfmt
