// memfmt/tensor/host_tensor.hpp - an owning, dense host tensor of one format.
//
// Memory is 64-byte aligned (a cache line and an AVX-512 vector) and zero-initialised. The tensor
// is move-only; copies are explicit (clone()). It converts implicitly to views of its own format,
// which is always valid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "../detail/checked.hpp"
#include "tensor_view.hpp"

namespace memfmt {

template <class T, class Format>
class host_tensor {
 public:
  using value_type = T;
  using format_type = Format;
  using view_type = tensor_view<T, Format>;
  using const_view_type = tensor_view<const T, Format>;
  using extents_type = typename view_type::extents_type;
  static constexpr int rank = Format::rank;
  static constexpr std::size_t alignment = 64;

  host_tensor() = default;
  // Throws memfmt::error (invalid_argument, overflow) naming the extents before anything is computed
  // from them.
  explicit host_tensor(const extents_type& extents)
      : map_(layout<Format>::packed_checked(extents, std::string("host_tensor<") + Format::name + ">")) {
    const std::int64_t n = detail::checked_numel(extents, Format::name);
    const std::size_t bytes = detail::checked_bytes(n, sizeof(T), Format::name);
    if (bytes > 0) {
      const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
      void* p = std::aligned_alloc(alignment, rounded);
      if (!p) throw std::bad_alloc();
      std::memset(p, 0, rounded);
      data_.reset(static_cast<T*>(p));
    }
  }

  host_tensor(host_tensor&&) noexcept = default;
  host_tensor& operator=(host_tensor&&) noexcept = default;
  host_tensor(const host_tensor&) = delete;
  host_tensor& operator=(const host_tensor&) = delete;

  host_tensor clone() const {
    host_tensor t(map_.extents());
    if (numel() > 0) std::memcpy(t.data(), data(), static_cast<std::size_t>(numel()) * sizeof(T));
    return t;
  }

  T* data() noexcept { return data_.get(); }
  const T* data() const noexcept { return data_.get(); }
  const layout<Format>& mapping() const noexcept { return map_; }
  extents_type extents() const noexcept { return map_.extents(); }
  std::int64_t extent(int d) const noexcept { return map_.extent(d); }
  std::int64_t numel() const noexcept { return map_.numel(); }
  std::size_t size_bytes() const noexcept { return static_cast<std::size_t>(numel()) * sizeof(T); }

  view_type view() noexcept { return view_type(data(), map_); }
  const_view_type view() const noexcept { return const_view_type(data(), map_); }
  const_view_type const_view() const noexcept { return const_view_type(data(), map_); }
  operator view_type() noexcept { return view(); }
  operator const_view_type() const noexcept { return const_view(); }

  template <class... I>
  T& operator()(I... idx) noexcept {
    return data()[map_(idx...)];
  }
  template <class... I>
  const T& operator()(I... idx) const noexcept {
    return data()[map_(idx...)];
  }

 private:
  struct free_deleter {
    void operator()(T* p) const noexcept { std::free(p); }
  };
  layout<Format> map_{};
  std::unique_ptr<T, free_deleter> data_;
};

}  // namespace memfmt
