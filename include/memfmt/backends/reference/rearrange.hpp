// memfmt/backends/reference/rearrange.hpp - reference rearrangements (channel shuffle, depth to
// space, space to depth, transpose): the permuted copy of backends/rearrange.hpp, one element at a time.
#pragma once

#include <array>
#include <cstdint>

#include "../../tensor/tensor_view.hpp"
#include "../rearrange.hpp"
#include "numeric.hpp"

namespace memfmt::reference {
namespace detail {

// to[i . m.to] = from[i . m.from] over every index i of m (an odometer over its dims).
template <class T>
void run_permuted_copy(const permuted_copy& m, const T* from, T* to) {
  if (m.numel() == 0) return;
  std::array<std::int64_t, 6> i{};
  std::int64_t src = 0, dst = 0;
  const int last = m.rank - 1;
  for (;;) {
    to[dst] = from[src];
    int d = last;
    for (; d >= 0; --d) {
      const auto k = static_cast<std::size_t>(d);
      if (++i[k] < m.extents[k]) {
        src += m.from[k];
        dst += m.to[k];
        break;
      }
      src -= m.from[k] * (m.extents[k] - 1);
      dst -= m.to[k] * (m.extents[k] - 1);
      i[k] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace detail

template <class T, class XF, class YF>
void rearrange_forward(tensor_view<const T, XF> x, const rearrange_params& p, tensor_view<T, YF> y) {
  detail::check_element_type<T>();
  detail::run_permuted_copy(rearrange_copy("rearrange_forward", p, x, y), x.data(), y.data());
}

// dx = the inverse rearrangement of dy (dx has x's sizes, dy y's).
template <class T, class DYF, class DXF>
void rearrange_backward(tensor_view<const T, DYF> dy, const rearrange_params& p, tensor_view<T, DXF> dx) {
  detail::check_element_type<T>();
  detail::run_permuted_copy(rearrange_backward_copy("rearrange_backward", p, dy, dx), dy.data(), dx.data());
}

}  // namespace memfmt::reference
