// memfmt/backends/cudnn/tensor_desc.hpp - cuDNN tensor descriptors from typed views.
//
// A view already knows everything cuDNN asks for: logical dims (N, C, spatial - cuDNN's order too),
// element strides (the view's layout; NHWC is just another stride order), the element type and the
// pointer, whose alignment cuDNN wants stated. tensor_spec is that information as plain data, so it
// can be validated and hashed into a plan-cache key before any cuDNN call.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../../dtype.hpp"
#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "descriptor.hpp"

namespace memfmt::cudnn {

// The cuDNN data type of an element type; throws unsupported_dtype for the ones this backend does not
// run (cuDNN's convolution and normalization engines take floating types only).
inline cudnnDataType_t to_cudnn(dtype t) {
  switch (t) {
    case dtype::float32: return CUDNN_DATA_FLOAT;
    case dtype::float64: return CUDNN_DATA_DOUBLE;
    case dtype::float16: return CUDNN_DATA_HALF;
    case dtype::bfloat16: return CUDNN_DATA_BFLOAT16;
    default: break;
  }
  memfmt::detail::fail(errc::unsupported_dtype, std::string("cuDNN backend: element type ") +
                                                    std::string(to_string(t)) +
                                                    " is not supported (float32, float64, float16, bfloat16)");
}

// Math (compute) type for a storage type: float for the 16-bit types and float32, double for double.
inline cudnnDataType_t compute_type_for(dtype t) { return t == dtype::float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; }

// Largest power of two (<= 16) dividing the address; 16 for a null pointer (descriptor-only use).
inline std::int64_t pointer_alignment(const void* p) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a == 0) return 16;
  std::int64_t al = 1;
  while (al < 16 && (a % static_cast<std::uintptr_t>(al * 2)) == 0) al *= 2;
  return al;
}

struct tensor_spec {
  std::vector<std::int64_t> dims;     // logical N, C, spatial...
  std::vector<std::int64_t> strides;  // element strides, same order
  dtype type = dtype::float32;
  std::int64_t uid = 0;
  std::int64_t alignment = 16;  // bytes
  bool is_virtual = false;      // an intermediate of a fused graph, never in memory
  bool by_value = false;        // a scalar passed by value in the variant pack (epsilon, momentum)

  // Canonical text for cache keys: everything that changes the plan.
  std::string key() const {
    return "t" + std::to_string(uid) + std::string(to_string(type)) + memfmt::detail::dims_to_string(dims) +
           memfmt::detail::dims_to_string(strides) + "a" + std::to_string(alignment) + (is_virtual ? "v" : "") +
           (by_value ? "s" : "");
  }
};

// A spec from a typed view. Throws misaligned when the pointer is not aligned for its element type.
template <class T, class F>
tensor_spec spec_of(const tensor_view<T, F>& v, std::int64_t uid) {
  using value_type = std::remove_cv_t<T>;
  tensor_spec s;
  const auto e = v.extents();
  const auto st = v.strides();
  s.dims.assign(e.begin(), e.end());
  s.strides.assign(st.begin(), st.end());
  s.type = dtype_of_v<value_type>;
  s.uid = uid;
  s.alignment = pointer_alignment(v.data());
  if (s.alignment < static_cast<std::int64_t>(sizeof(value_type)) && v.data() != nullptr)
    memfmt::detail::fail(errc::misaligned, std::string("cuDNN backend: ") + F::name + " tensor " +
                                               memfmt::detail::dims_to_string(e) + " of " +
                                               std::string(to_string(s.type)) + " has a pointer aligned to " +
                                               std::to_string(s.alignment) + " bytes, less than its element size");
  return s;
}

// A packed per-channel tensor [1, C, 1, 1(, 1)] (scale, bias, mean, variance): dense in any format.
inline tensor_spec channel_spec(std::int64_t channels, int rank, dtype t, std::int64_t uid, const void* ptr = nullptr) {
  tensor_spec s;
  s.dims.assign(static_cast<std::size_t>(rank), 1);
  s.dims[1] = channels;
  s.strides.assign(static_cast<std::size_t>(rank), 1);
  s.strides[0] = channels;
  s.type = t;
  s.uid = uid;
  s.alignment = pointer_alignment(ptr);
  return s;
}

// A by-value scalar [1, 1, 1, 1(, 1)] of type `t`.
inline tensor_spec scalar_spec(int rank, dtype t, std::int64_t uid) {
  tensor_spec s;
  s.dims.assign(static_cast<std::size_t>(rank), 1);
  s.strides.assign(static_cast<std::size_t>(rank), 1);
  s.type = t;
  s.uid = uid;
  s.alignment = static_cast<std::int64_t>(size_of(t));
  s.by_value = true;
  return s;
}

// A virtual (fused intermediate) tensor: dense in the order of `like`'s strides, of type `t`.
inline tensor_spec virtual_like(const tensor_spec& like, dtype t, std::int64_t uid) {
  tensor_spec s = like;
  s.type = t;
  s.uid = uid;
  s.alignment = 16;
  s.is_virtual = true;
  s.by_value = false;
  return s;
}

// Builds and finalizes the cuDNN tensor descriptor of `s`.
inline descriptor make_tensor(const tensor_spec& s) {
  if (s.dims.size() != s.strides.size() || s.dims.size() < 3 || s.dims.size() > 8)
    memfmt::detail::fail(errc::invalid_argument, "cuDNN tensor: dims " + memfmt::detail::dims_to_string(s.dims) +
                                                     " and strides " + memfmt::detail::dims_to_string(s.strides) +
                                                     " must have the same rank, 3 to 8");
  descriptor d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set_data_type(CUDNN_ATTR_TENSOR_DATA_TYPE, to_cudnn(s.type), "set CUDNN_ATTR_TENSOR_DATA_TYPE");
  d.set_int64s(CUDNN_ATTR_TENSOR_DIMENSIONS, s.dims, "set CUDNN_ATTR_TENSOR_DIMENSIONS");
  d.set_int64s(CUDNN_ATTR_TENSOR_STRIDES, s.strides, "set CUDNN_ATTR_TENSOR_STRIDES");
  d.set_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, s.uid, "set CUDNN_ATTR_TENSOR_UNIQUE_ID");
  d.set_int64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, s.alignment, "set CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT");
  if (s.is_virtual) d.set_bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, true, "set CUDNN_ATTR_TENSOR_IS_VIRTUAL");
  if (s.by_value) d.set_bool(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true, "set CUDNN_ATTR_TENSOR_IS_BY_VALUE");
  d.finalize(("finalize tensor descriptor " + s.key()).c_str());
  return d;
}

}  // namespace memfmt::cudnn
