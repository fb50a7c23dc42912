// memfmt/format/tags.hpp - compile-time memory-format tags.
//
// Logical dimensions are always N, C, spatial (D, H, W). A format is a *stride order* over those
// logical dimensions: `order` lists them from the outermost (largest stride) to the innermost
// (unit stride). NHWC is therefore not a different shape, just a different order: {N, H, W, C}.
#pragma once

#include <array>
#include <type_traits>

#include "memory_format.hpp"

namespace memfmt {

struct nchw;
struct nhwc;
struct ncdhw;
struct ndhwc;

struct nchw {
  static constexpr int rank = 4;
  static constexpr std::array<int, 4> order = {0, 1, 2, 3};
  static constexpr bool channels_last = false;
  static constexpr memory_format torch_format = memory_format::contiguous;
  static constexpr const char* name = "nchw";
  using as_2d = nchw;
  using as_3d = ncdhw;
  using channels_first_t = nchw;
  using channels_last_t = nhwc;
};

struct nhwc {
  static constexpr int rank = 4;
  static constexpr std::array<int, 4> order = {0, 2, 3, 1};
  static constexpr bool channels_last = true;
  static constexpr memory_format torch_format = memory_format::channels_last;
  static constexpr const char* name = "nhwc";
  using as_2d = nhwc;
  using as_3d = ndhwc;
  using channels_first_t = nchw;
  using channels_last_t = nhwc;
};

struct ncdhw {
  static constexpr int rank = 5;
  static constexpr std::array<int, 5> order = {0, 1, 2, 3, 4};
  static constexpr bool channels_last = false;
  static constexpr memory_format torch_format = memory_format::contiguous;
  static constexpr const char* name = "ncdhw";
  using as_2d = nchw;
  using as_3d = ncdhw;
  using channels_first_t = ncdhw;
  using channels_last_t = ndhwc;
};

struct ndhwc {
  static constexpr int rank = 5;
  static constexpr std::array<int, 5> order = {0, 2, 3, 4, 1};
  static constexpr bool channels_last = true;
  static constexpr memory_format torch_format = memory_format::channels_last_3d;
  static constexpr const char* name = "ndhwc";
  using as_2d = nhwc;
  using as_3d = ndhwc;
  using channels_first_t = ncdhw;
  using channels_last_t = ndhwc;
};

template <class F>
struct is_format : std::false_type {};
template <>
struct is_format<nchw> : std::true_type {};
template <>
struct is_format<nhwc> : std::true_type {};
template <>
struct is_format<ncdhw> : std::true_type {};
template <>
struct is_format<ndhwc> : std::true_type {};
template <class F>
inline constexpr bool is_format_v = is_format<F>::value;

// The logical dimension with unit stride: W for channels-first, C for channels-last.
template <class F>
inline constexpr int unit_dim_v = F::order[F::rank - 1];

// Number of spatial dimensions (2 for NCHW/NHWC, 3 for NCDHW/NDHWC).
template <class F>
inline constexpr int spatial_rank_v = F::rank - 2;

// The other format of the same rank.
template <class F>
using transposed_format_t =
    std::conditional_t<F::channels_last, typename F::channels_first_t, typename F::channels_last_t>;

// The runtime enum for a tag and a request (`memory_format`) resolved to a tag for a rank.
template <class F>
inline constexpr memory_format memory_format_v = F::torch_format;

}  // namespace memfmt
