// memfmt/convert/detail/element_bits.hpp - elements as opaque bit patterns of 1, 2, 4 or 8 bytes.
//
// Conversion only moves bytes, so kernels are instantiated per element size, not per type. The
// unsigned types are marked may_alias: they read and write float, half, int64 ... storage.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memfmt::detail {

#if defined(__GNUC__) || defined(__clang__)
typedef std::uint16_t __attribute__((__may_alias__)) alias_u16;
typedef std::uint32_t __attribute__((__may_alias__)) alias_u32;
typedef std::uint64_t __attribute__((__may_alias__)) alias_u64;
#else
using alias_u16 = std::uint16_t;
using alias_u32 = std::uint32_t;
using alias_u64 = std::uint64_t;
#endif

template <std::size_t E>
struct element_bits;
template <>
struct element_bits<1> {
  using type = unsigned char;
};
template <>
struct element_bits<2> {
  using type = alias_u16;
};
template <>
struct element_bits<4> {
  using type = alias_u32;
};
template <>
struct element_bits<8> {
  using type = alias_u64;
};
template <std::size_t E>
using element_bits_t = typename element_bits<E>::type;

}  // namespace memfmt::detail
