// tests/common/coords.hpp - brute-force helpers shared by the test suites.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "memfmt/format/layout.hpp"

namespace memfmt_test {

// Calls fn(coord) - or fn(coord, i) with i the row-major index - for every logical coordinate
// of `e`, last dimension fastest. Nothing is visited when an extent is 0.
template <std::size_t R, class Fn>
void for_each_coord(const std::array<std::int64_t, R>& e, Fn&& fn) {
  for (auto v : e)
    if (v <= 0) return;
  std::array<std::int64_t, R> c{};
  for (std::int64_t i = 0;; ++i) {
    if constexpr (std::is_invocable_v<Fn&, const std::array<std::int64_t, R>&, std::int64_t>)
      fn(static_cast<const std::array<std::int64_t, R>&>(c), i);
    else fn(static_cast<const std::array<std::int64_t, R>&>(c));
    std::size_t d = R;
    while (d > 0 && ++c[d - 1] == e[d - 1]) c[--d] = 0;
    if (d == 0) return;
  }
}

// A layout of format F over extents `e` with padding after every level (a different amount per
// level, so a kernel that confuses two strides is caught): a slice of a larger buffer.
template <class F>
memfmt::layout<F> padded_layout(const typename memfmt::layout<F>::extents_type& e, std::int64_t pad) {
  typename memfmt::layout<F>::strides_type s{};
  std::int64_t span = 1;
  for (int i = F::rank - 1; i >= 0; --i) {
    const int d = F::order[static_cast<std::size_t>(i)];
    s[static_cast<std::size_t>(d)] = (i == F::rank - 1) ? 1 : span + pad * (i + 1);
    span = s[static_cast<std::size_t>(d)] * (e[static_cast<std::size_t>(d)] > 0 ? e[static_cast<std::size_t>(d)] : 1);
  }
  return memfmt::layout<F>::strided(e, s);
}

}  // namespace memfmt_test
