// memfmt/tensor/relabel.hpp - zero-copy change of format for ambiguous shapes.
//
// When C == 1, or every spatial extent is 1, or the tensor is empty, the channels-first and the
// channels-last layout of a dense tensor are the same bytes (PyTorch's "ambiguous" shapes, where
// strides alone cannot tell the two apart). For those shapes, and only those, relabel() returns a
// view of the other format over the same memory. It checks that every element keeps its address;
// any other shape needs convert().
#pragma once

#include <string>

#include "../error.hpp"
#include "tensor_view.hpp"

namespace memfmt {

// True when both formats of this rank describe the same bytes for dense data of these extents.
template <class Extents>
constexpr bool is_ambiguous_shape(const Extents& e) noexcept {
  bool spatial_all_one = true;
  bool any_zero = false;
  for (std::size_t d = 0; d < e.size(); ++d) {
    if (e[d] == 0) any_zero = true;
    if (d >= 2 && e[d] != 1) spatial_all_one = false;
  }
  return any_zero || e[1] == 1 || spatial_all_one;
}

template <class To, class T, class From>
tensor_view<T, To> relabel(const tensor_view<T, From>& v) {
  static_assert(To::rank == From::rank, "relabel: formats must have the same rank (nchw<->nhwc, ncdhw<->ndhwc)");
  const auto e = v.extents();
  if (!is_ambiguous_shape(e))
    detail::fail(errc::format_mismatch,
                 std::string("relabel ") + From::name + " -> " + To::name + ": sizes " + detail::dims_to_string(e) +
                     " are not ambiguous (need C == 1, all spatial sizes == 1, or numel == 0); use convert()");
  if (v.numel() == 0)
    return tensor_view<T, To>(v.data(),
                              layout<To>::packed_checked(e, std::string("relabel ") + From::name + " -> " + To::name));
  // Same strides, read through the other format's checks: offsets are unchanged by construction,
  // and layout<To>::strided() rejects the case where the bytes differ (a padded unit dimension).
  return tensor_view<T, To>(v.data(), layout<To>::strided(e, v.strides()));
}

}  // namespace memfmt
