// memfmt/tensor/tensor_view.hpp - a non-owning, typed view: element type + format in the type.
//
// The pointer may be host or device memory; the view never dereferences it except through
// operator(), which the caller uses only where the memory is accessible. Views of different
// formats are different types with no conversion between them: passing an NCHW view where an
// NHWC one is expected does not compile. The only implicit conversion is the always-valid one,
// T -> const T. Changing format goes through convert() (a copy) or relabel() (zero-copy, only for
// the shapes where both formats are the same bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../dtype.hpp"
#include "../format/layout.hpp"

namespace memfmt {

template <class T, class Format>
class tensor_view {
 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using format_type = Format;
  using layout_type = layout<Format>;
  using index_type = std::int64_t;
  using extents_type = typename layout_type::extents_type;
  using strides_type = typename layout_type::strides_type;
  static constexpr int rank = Format::rank;

  MEMFMT_HOST_DEVICE constexpr tensor_view() noexcept : data_(nullptr), map_() {}
  MEMFMT_HOST_DEVICE constexpr tensor_view(T* data, const layout_type& m) noexcept : data_(data), map_(m) {}
  // A dense view of `extents` (logical N, C, spatial order).
  MEMFMT_HOST_DEVICE constexpr tensor_view(T* data, const extents_type& extents) noexcept
      : data_(data), map_(layout_type::packed(extents)) {}

  // T -> const T (always valid, so implicit). Nothing else converts.
  template <class U, class = std::enable_if_t<!std::is_same_v<U, T> && std::is_convertible_v<U (*)[], T (*)[]>>>
  MEMFMT_HOST_DEVICE constexpr tensor_view(const tensor_view<U, Format>& other) noexcept
      : data_(other.data()), map_(other.mapping()) {}

  MEMFMT_HOST_DEVICE constexpr T* data() const noexcept { return data_; }
  MEMFMT_HOST_DEVICE constexpr const layout_type& mapping() const noexcept { return map_; }
  constexpr extents_type extents() const noexcept { return map_.extents(); }
  constexpr strides_type strides() const noexcept { return map_.strides(); }
  MEMFMT_HOST_DEVICE constexpr index_type extent(int d) const noexcept { return map_.extent(d); }
  MEMFMT_HOST_DEVICE constexpr index_type stride(int d) const noexcept { return map_.stride(d); }
  MEMFMT_HOST_DEVICE constexpr index_type numel() const noexcept { return map_.numel(); }
  MEMFMT_HOST_DEVICE constexpr bool empty() const noexcept { return map_.numel() == 0; }
  MEMFMT_HOST_DEVICE constexpr bool is_packed() const noexcept { return map_.is_packed(); }
  // Bytes spanned by the view (what a buffer behind it must hold).
  MEMFMT_HOST_DEVICE constexpr std::size_t span_bytes() const noexcept {
    return static_cast<std::size_t>(map_.required_span_size()) * sizeof(T);
  }

  // Logical extents by name.
  MEMFMT_HOST_DEVICE constexpr index_type batch() const noexcept { return map_.extent(0); }
  MEMFMT_HOST_DEVICE constexpr index_type channels() const noexcept { return map_.extent(1); }
  // Spatial extent i (0-based: for NCHW, 0 = H and 1 = W).
  MEMFMT_HOST_DEVICE constexpr index_type spatial(int i) const noexcept { return map_.extent(2 + i); }
  MEMFMT_HOST_DEVICE constexpr index_type spatial_numel() const noexcept {
    index_type s = 1;
    for (int d = 2; d < rank; ++d) s *= map_.extent(d);
    return s;
  }

  template <class... I>
  MEMFMT_HOST_DEVICE constexpr T& operator()(I... idx) const noexcept {
    return data_[map_(idx...)];
  }
  MEMFMT_HOST_DEVICE constexpr T& operator()(const extents_type& coord) const noexcept { return data_[map_(coord)]; }

 private:
  T* data_;
  layout_type map_;
};

// Shorthands.
template <class T>
using nchw_view = tensor_view<T, nchw>;
template <class T>
using nhwc_view = tensor_view<T, nhwc>;
template <class T>
using ncdhw_view = tensor_view<T, ncdhw>;
template <class T>
using ndhwc_view = tensor_view<T, ndhwc>;

template <class V>
struct is_tensor_view : std::false_type {};
template <class T, class F>
struct is_tensor_view<tensor_view<T, F>> : std::true_type {};
template <class V>
inline constexpr bool is_tensor_view_v = is_tensor_view<V>::value;

}  // namespace memfmt
