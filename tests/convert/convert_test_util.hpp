// Helpers for the conversion tests: padded buffers, a naive reference, unique bit patterns.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "memfmt/dtype.hpp"
#include "memfmt/format/layout.hpp"
#include "memfmt/tensor/tensor_view.hpp"

namespace convert_test {

// A bit pattern unique per (i, salt) for element type T; never depends on the code under test.
template <class T>
T pattern(std::uint64_t i, std::uint64_t salt = 0) {
  std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (salt * 0xD6E8FEB86659FD93ull);
  x ^= x >> 29;
  T t;
  std::memcpy(static_cast<void*>(&t), &x, sizeof(T));
  return t;
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(static_cast<const void*>(&a), static_cast<const void*>(&b), sizeof(T)) == 0;
}

// A view of format F over a larger buffer: `pad` extra elements on every non-unit stride and
// `offset` elements before the first element (a slice of a bigger tensor). pad = offset = 0: dense.
template <class T, class F>
struct padded_tensor {
  std::vector<T> buffer;
  memfmt::tensor_view<T, F> view;

  padded_tensor(const std::array<std::int64_t, F::rank>& e, std::int64_t pad, std::int64_t offset) {
    std::array<std::int64_t, F::rank> s{};
    std::int64_t inner = 1;
    for (int i = F::rank - 1; i >= 0; --i) {
      const int d = F::order[i];
      s[d] = (i == F::rank - 1) ? 1 : inner + pad;
      inner = s[d] * (e[d] > 0 ? e[d] : 1);
    }
    const auto m = memfmt::layout<F>::strided(e, s);
    buffer.assign(static_cast<std::size_t>(offset + m.required_span_size() + 8), pattern<T>(0xFFFF, 99));
    view = memfmt::tensor_view<T, F>(buffer.data() + offset, m);
  }
};

// Visit every logical index of extents e (N, C, spatial...).
template <std::size_t R, class Fn>
void for_each_index(const std::array<std::int64_t, R>& e, Fn&& fn) {
  for (auto x : e)
    if (x == 0) return;
  std::array<std::int64_t, R> i{};
  while (true) {
    fn(i);
    int d = static_cast<int>(R) - 1;
    while (d >= 0 && ++i[static_cast<std::size_t>(d)] == e[static_cast<std::size_t>(d)])
      i[static_cast<std::size_t>(d--)] = 0;
    if (d < 0) return;
  }
}

template <class T, class F>
void fill(memfmt::tensor_view<T, F> v, std::uint64_t salt) {
  std::uint64_t k = 0;
  for_each_index(v.extents(), [&](const auto& i) { v(i) = pattern<T>(k++, salt); });
}

}  // namespace convert_test
