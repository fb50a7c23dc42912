// memfmt/format/layout.hpp - the layout (mapping) of one memory format.
//
// The layout concept (shared by every format, CUTLASS/mdspan style):
//   extents()               logical extents, always N, C, spatial...
//   stride(d) / strides()   element strides in the same logical order
//   operator()(n, c, ...)   -> element offset (int64_t)
//   packed(extents)         the dense layout of that format
//   required_span_size()    elements a buffer must hold for every offset to be in range
//
// The unit stride is known at compile time (the innermost dimension of the format's stride order:
// W for NCHW, C for NHWC); the other rank-1 strides are runtime int64_t, so slices of larger
// buffers (padded strides) are representable. Index math is noexcept and usable in device code;
// the checked factory `strided()` is host-only and throws memfmt::error.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "../config.hpp"
#include "../detail/checked.hpp"
#include "../error.hpp"
#include "tags.hpp"

namespace memfmt {

template <class Format>
class layout {
  static_assert(is_format_v<Format>, "layout<F>: F must be one of nchw, nhwc, ncdhw, ndhwc");

 public:
  using format_type = Format;
  using index_type = std::int64_t;
  static constexpr int rank = Format::rank;
  static constexpr int unit_dim = Format::channels_last ? 1 : Format::rank - 1;
  using extents_type = std::array<index_type, rank>;
  using strides_type = std::array<index_type, rank>;

  // Zero extents: an empty tensor.
  MEMFMT_HOST_DEVICE constexpr layout() noexcept : ext_{}, dyn_{} {}

  // The dense layout of `e`. Like PyTorch, a size-0 or size-1 dimension contributes a factor of 1,
  // so the strides equal what torch reports for a tensor of that shape and format.
  MEMFMT_HOST_DEVICE static constexpr layout packed(const extents_type& e) noexcept {
    layout m;
    for (int d = 0; d < rank; ++d) m.ext_[d] = e[d];
    index_type s = 1;
    for (int i = rank - 1; i > 0; --i) {
      const index_type x = e[order_at(i)];
      s *= (x > 1 ? x : 1);
      m.dyn_[i - 1] = s;
    }
    return m;
  }

  // packed(e), checked (host only): throws invalid_argument for a negative size and overflow when
  // the dense strides of e do not fit in 64 bits. `what` names the caller in the message.
  static layout packed_checked(const extents_type& e, const std::string& what) {
    detail::checked_dense_extent(e, what);
    return packed(e);
  }

  // A layout from logical strides, checked: the unit dimension has stride 1 (or extent <= 1) and
  // the other strides follow the format's order without overlap. Padding between rows, channels or
  // images is allowed (a slice of a larger buffer). Strides of size-1 dimensions are ignored, as
  // PyTorch ignores them. Throws memfmt::error(format_mismatch) naming sizes and strides, or
  // overflow when the span of the layout does not fit in 64 bits (so numel() and
  // required_span_size() of the result always fit).
  static layout strided(const extents_type& e, const strides_type& s) {
    layout m;
    for (int d = 0; d < rank; ++d) {
      if (e[d] < 0)
        detail::fail(errc::invalid_argument,
                     std::string("layout<") + Format::name + ">: negative size in sizes " + detail::dims_to_string(e));
      m.ext_[d] = e[d];
    }
    if (e[unit_dim] > 1 && s[unit_dim] != 1) bad_strides(e, s, "the innermost dimension must have stride 1");
    // Walk from inner to outer: each stride must cover the extent of everything inside it.
    // Every stride but the outermost must fit with its extent (the next stride covers it); the
    // outermost only needs the whole span to fit.
    index_type inner_span = (e[unit_dim] > 1 ? e[unit_dim] : 1);
    bool inner_overflowed = false;
    for (int i = rank - 2; i >= 0; --i) {
      const int d = order_at(i);
      if (inner_overflowed) fail_span_overflow(e, s);
      index_type st = s[d];
      if (e[d] <= 1) st = inner_span;  // irrelevant for addressing: normalise
      if (st < inner_span) bad_strides(e, s, "strides overlap or are out of this format's order");
      m.dyn_[i] = st;
      if (e[d] > 1) inner_overflowed = detail::mul_overflows(st, e[d], &inner_span);
    }
    std::int64_t span = 0;
    if (detail::span_overflows(e, m.strides(), &span)) fail_span_overflow(e, s);
    return m;
  }

  MEMFMT_HOST_DEVICE constexpr index_type extent(int d) const noexcept { return ext_[d]; }
  MEMFMT_HOST_DEVICE constexpr index_type stride(int d) const noexcept {
    if (d == unit_dim) return 1;
    for (int i = 0; i < rank - 1; ++i)
      if (order_at(i) == d) return dyn_[i];
    return 0;  // unreachable for 0 <= d < rank
  }
  // The static unit stride, for code that wants it as a constant.
  static constexpr index_type unit_stride() noexcept { return 1; }

  constexpr extents_type extents() const noexcept {
    extents_type e{};
    for (int d = 0; d < rank; ++d) e[d] = ext_[d];
    return e;
  }
  constexpr strides_type strides() const noexcept {
    strides_type s{};
    for (int d = 0; d < rank; ++d) s[d] = stride(d);
    return s;
  }

  // The checked factories (packed_checked, strided) guarantee that these products fit; a zero
  // extent answers 0 before any product is formed.
  MEMFMT_HOST_DEVICE constexpr index_type numel() const noexcept {
    for (int d = 0; d < rank; ++d)
      if (ext_[d] == 0) return 0;
    index_type n = 1;
    for (int d = 0; d < rank; ++d) n *= ext_[d];
    return n;
  }

  // Offset of a logical coordinate (n, c, [d,] h, w).
  template <class... I>
  MEMFMT_HOST_DEVICE constexpr index_type operator()(I... idx) const noexcept {
    static_assert(sizeof...(I) == rank, "layout: one index per logical dimension (N, C, spatial...)");
    const index_type c[rank] = {static_cast<index_type>(idx)...};
    return offset(c);
  }
  MEMFMT_HOST_DEVICE constexpr index_type operator()(const extents_type& coord) const noexcept {
    index_type c[rank] = {};
    for (int d = 0; d < rank; ++d) c[d] = coord[d];
    return offset(c);
  }

  // One past the largest offset; 0 for an empty tensor.
  MEMFMT_HOST_DEVICE constexpr index_type required_span_size() const noexcept {
    for (int d = 0; d < rank; ++d)
      if (ext_[d] == 0) return 0;
    index_type span = 1;
    for (int d = 0; d < rank; ++d) span += (ext_[d] - 1) * stride(d);
    return span;
  }

  // True when the layout equals packed(extents()): no padding, every offset used once.
  MEMFMT_HOST_DEVICE constexpr bool is_packed() const noexcept {
    const layout p = packed_of(*this);
    for (int i = 0; i < rank - 1; ++i)
      if (ext_[order_at(i)] > 1 && p.dyn_[i] != dyn_[i]) return false;
    return true;
  }
  static constexpr bool is_always_unique() noexcept { return true; }
  static constexpr bool is_always_strided() noexcept { return true; }

  friend constexpr bool operator==(const layout& a, const layout& b) noexcept {
    for (int d = 0; d < rank; ++d)
      if (a.ext_[d] != b.ext_[d]) return false;
    for (int i = 0; i < rank - 1; ++i)
      if (a.dyn_[i] != b.dyn_[i]) return false;
    return true;
  }
  friend constexpr bool operator!=(const layout& a, const layout& b) noexcept { return !(a == b); }

 private:
  MEMFMT_HOST_DEVICE static constexpr layout packed_of(const layout& m) noexcept {
    extents_type e{};
    for (int d = 0; d < rank; ++d) e[d] = m.ext_[d];
    return packed(e);
  }
  MEMFMT_HOST_DEVICE constexpr index_type offset(const index_type (&c)[rank]) const noexcept {
    index_type off = c[unit_dim];
    for (int i = 0; i < rank - 1; ++i) off += c[order_at(i)] * dyn_[i];
    return off;
  }
  [[noreturn]] static void fail_span_overflow(const extents_type& e, const strides_type& s) {
    detail::fail(errc::overflow, std::string("layout<") + Format::name + ">: the span of sizes " +
                                     detail::dims_to_string(e) + " with strides " + detail::dims_to_string(s) +
                                     " overflows 64 bits");
  }
  [[noreturn]] static void bad_strides(const extents_type& e, const strides_type& s, const char* why) {
    detail::fail(errc::format_mismatch, std::string("sizes ") + detail::dims_to_string(e) + " with strides " +
                                            detail::dims_to_string(s) + " are not a " + Format::name +
                                            " layout: " + why);
  }

  // Memory position i -> logical dimension (the tag's `order`, as a function usable in device code;
  // every tag is N, C, spatial... or N, spatial..., C).
  MEMFMT_HOST_DEVICE static constexpr int order_at(int i) noexcept {
    return !Format::channels_last ? i : (i == 0 ? 0 : (i == rank - 1 ? 1 : i + 1));
  }
  static constexpr bool order_matches_tag() noexcept {
    for (int i = 0; i < rank; ++i)
      if (order_at(i) != Format::order[i]) return false;
    return true;
  }
  static_assert(order_matches_tag(), "layout: the format's stride order is not N,C,spatial or N,spatial,C");

  index_type ext_[rank];      // logical N, C, spatial
  index_type dyn_[rank - 1];  // strides of order[0..rank-2], outermost first
};

}  // namespace memfmt
