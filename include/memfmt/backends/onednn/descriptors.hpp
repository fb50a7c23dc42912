// memfmt/backends/onednn/descriptors.hpp - oneDNN memory descriptors from typed views.
//
// Dense views map to oneDNN's plain format tags (nchw/nhwc/ncdhw/ndhwc for activations,
// oihw/ohwi/oidhw/odhwi for weights); padded views (slices of larger buffers) map to explicit
// strides. A grouped weight view [K, C/g, R, S] becomes oneDNN's 5-D (6-D in 3-D) grouped
// descriptor [g, K/g, C/g, R, S] over the same bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include <oneapi/dnnl/dnnl.hpp>

#include "../../dtype.hpp"
#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "cpu_support.hpp"

namespace memfmt::onednn::detail {

using dnnl_dt = dnnl::memory::data_type;

// The element types this backend computes with (others are rejected at run time, before any work).
template <class T>
inline constexpr bool supported_v = std::is_same_v<T, float> || std::is_same_v<T, bfloat16>;

template <class T>
T* mut(const T* p) noexcept {
  return const_cast<T*>(p);  // oneDNN takes void* for inputs too; it never writes them
}
using dnnl_tag = dnnl::memory::format_tag;

// float -> f32, bfloat16 -> bf16. Other element types have no fast oneDNN convolution on CPU in
// 2.6 (f16 and f64 would run reference loops or are not implemented): reject them up front, as
// bfloat16 on a CPU where oneDNN cannot compute in it (cpu_support.hpp).
template <class T>
dnnl_dt data_type_of(const char* op) {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) {
    return dnnl_dt::f32;
  } else if constexpr (std::is_same_v<U, bfloat16>) {
    require_supported(dtype::bfloat16, op);
    return dnnl_dt::bf16;
  } else {
    memfmt::detail::fail(errc::unsupported_dtype, std::string(op) +
                                                      ": the oneDNN backend supports float32 and "
                                                      "bfloat16, not " +
                                                      std::string(to_string(dtype_of_v<U>)));
  }
}

template <class F>
constexpr dnnl_tag activation_tag() noexcept {
  if constexpr (F::rank == 4) return F::channels_last ? dnnl_tag::nhwc : dnnl_tag::nchw;
  else return F::channels_last ? dnnl_tag::ndhwc : dnnl_tag::ncdhw;
}

template <class F>
constexpr dnnl_tag weights_tag() noexcept {
  if constexpr (F::rank == 4) return F::channels_last ? dnnl_tag::ohwi : dnnl_tag::oihw;
  else return F::channels_last ? dnnl_tag::odhwi : dnnl_tag::oidhw;
}

template <class F>
dnnl::memory::desc md_of(const layout<F>& m, dnnl_dt dt) {
  const auto e = m.extents();
  dnnl::memory::dims dims(e.begin(), e.end());
  if (m.is_packed()) return dnnl::memory::desc(dims, dt, activation_tag<F>());
  const auto s = m.strides();
  return dnnl::memory::desc(dims, dt, dnnl::memory::dims(s.begin(), s.end()));
}

// Activation (or any N, C, spatial tensor) descriptor.
template <class T, class F>
dnnl::memory::desc activation_md(const tensor_view<T, F>& v, dnnl_dt dt) {
  return md_of(v.mapping(), dt);
}

// Weight descriptor for logical [K, C/groups, kernel...] in the view's layout.
template <class F>
dnnl::memory::desc weights_md(const layout<F>& m, std::int64_t groups, dnnl_dt dt) {
  const auto e = m.extents();
  const auto s = m.strides();
  if (groups == 1) {
    dnnl::memory::dims dims(e.begin(), e.end());
    if (m.is_packed()) return dnnl::memory::desc(dims, dt, weights_tag<F>());
    return dnnl::memory::desc(dims, dt, dnnl::memory::dims(s.begin(), s.end()));
  }
  dnnl::memory::dims dims{groups, e[0] / groups};
  dnnl::memory::dims strides{s[0] * (e[0] / groups), s[0]};
  for (int d = 1; d < F::rank; ++d) {
    dims.push_back(e[d]);
    strides.push_back(s[d]);
  }
  return dnnl::memory::desc(dims, dt, strides);
}

// Grouped or plain weight dims with no layout fixed: lets oneDNN choose its blocked layout.
template <class Extents>
dnnl::memory::desc weights_any_md(const Extents& e, std::int64_t groups, dnnl_dt dt) {
  dnnl::memory::dims dims;
  if (groups > 1) {
    dims.push_back(groups);
    dims.push_back(e[0] / groups);
  } else {
    dims.push_back(e[0]);
  }
  for (std::size_t d = 1; d < e.size(); ++d) dims.push_back(e[d]);
  return dnnl::memory::desc(dims, dt, dnnl_tag::any);
}

// Appends an identity of `md` (data type, dims, blocking) to a cache key.
inline void append_key(std::string& key, std::int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }
inline void append_key(std::string& key, const dnnl::memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  append_key(key, d.ndims);
  append_key(key, static_cast<std::int64_t>(d.data_type));
  append_key(key, static_cast<std::int64_t>(d.format_kind));
  for (int i = 0; i < d.ndims; ++i) append_key(key, d.dims[i]);
  if (d.format_kind == dnnl_blocked) {
    const auto& b = d.format_desc.blocking;
    for (int i = 0; i < d.ndims; ++i) append_key(key, b.strides[i]);
    append_key(key, b.inner_nblks);
    for (int i = 0; i < b.inner_nblks; ++i) {
      append_key(key, b.inner_blks[i]);
      append_key(key, b.inner_idxs[i]);
    }
  }
  append_key(key, d.offset0);
}

}  // namespace memfmt::onednn::detail
