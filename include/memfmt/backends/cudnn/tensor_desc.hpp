// memfmt/backends/cudnn/tensor_desc.hpp - cuDNN tensor descriptors from typed views.
//
// A view already knows everything cuDNN asks for: logical dims (N, C, spatial - cuDNN's order too),
// element strides (the view's layout; NHWC is just another stride order), the element type and the
// pointer, whose alignment cuDNN wants stated. tensor_spec is that information as plain data, so it
// can be validated and hashed into a plan-cache key before any cuDNN call.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../../dtype.hpp"
#include "../../error.hpp"
#include "../../strided/classify.hpp"
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

// The layer graphs (pointwise, resample, reduction, matmul) run float32, float16 and bfloat16;
// throws unsupported_dtype naming `op` and the type otherwise.
inline void require_layer_dtype(dtype t, const std::string& op) {
  if (t == dtype::float32 || t == dtype::float16 || t == dtype::bfloat16) return;
  memfmt::detail::fail(errc::unsupported_dtype, op + ": element type " + std::string(to_string(t)) +
                                                    " is not supported (float32, float16, bfloat16)");
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

// A packed per-channel tensor [1, C, 1, 1(, 1)] (scale, bias, mean, variance): the same bytes in any
// format, described with channels-last strides [C, 1, C, C(, C)]. cuDNN's runtime-fusion engines
// read the stride order literally, size-1 dims included: on an H100 (cuDNN 9.19) they turned down
// [C, 1, 1, 1] as "not NSpatialC / CNSpatial / CSpatialN ordered fully packed".
inline tensor_spec channel_spec(std::int64_t channels, int rank, dtype t, std::int64_t uid, const void* ptr = nullptr) {
  tensor_spec s;
  s.dims.assign(static_cast<std::size_t>(rank), 1);
  s.dims[1] = channels;
  s.strides.assign(static_cast<std::size_t>(rank), channels);
  s.strides[1] = 1;
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

// The extents of a dense 4-D or 5-D tensor [N, C, spatial...] as (N, C, S), S the number of
// positions, and whether it is channels-last; nullopt when it is dense in neither order. Density is
// PyTorch's is_contiguous (strided/classify.hpp): strides of size-1 dimensions do not count, so a
// tensor with one channel or one position is both, and is reported as channels-last.
struct dense_shape {
  std::int64_t n, c, s;
  bool channels_last;
};
inline std::optional<dense_shape> dense_shape_of(const tensor_spec& t) {
  const std::size_t rank = t.dims.size();
  if ((rank != 4 && rank != 5) || rank != t.strides.size()) return std::nullopt;
  dense_shape d{t.dims[0], t.dims[1], 1, false};
  for (std::size_t i = 2; i < rank; ++i) d.s *= t.dims[i];
  const strided_desc desc{t.dims, t.strides, t.type};
  d.channels_last = is_contiguous(desc, rank == 4 ? memory_format::channels_last : memory_format::channels_last_3d);
  if (d.channels_last || is_contiguous(desc, memory_format::contiguous)) return d;
  return std::nullopt;
}

// cuDNN's runtime-fusion engine runs pointwise graphs on fully packed tensors in (N, spatial, C),
// (C, N, spatial) or (C, spatial, N) stride order with C > 1, and reads the strides literally,
// size-1 dimensions included (H100, cuDNN 9.19: "!(isNSpatialC_ordered_fullyPacked() || ...)",
// "getDimA()[1] == 1"). A pointwise frame describes a dense tensor with one position, [N, C, 1, 1]
// in either format, with the channels-last strides [C, 1, C, C] (the GPU tests ran batch norm on
// such tensors through it), and leaves every other tensor as it is.
// A channels-first tensor with C, S > 1 has no such description. Two were tried on an H100 with
// cuDNN 9.19: [N, S, C, 1] with the operands broadcast along the third dimension was turned down
// ("Unsupported pointwise pattern"); one sample [1, C, spatial] with (C, N, spatial) strides, run
// per sample, was accepted and computed wrong values. Pointwise graphs over such tensors stay
// unsupported, and the backend says so (require_pointwise_plan). (C == 1 needs no frame there:
// cuDNN 9.19 has no batch-norm engine for one channel, "c % elements_per_ldg != 0".)
// Unique ids and types do not change. The frame is chosen from the graph's main tensor, and every
// other full tensor of the graph must be dense with the same extents.
class pointwise_frame {
 public:
  enum class form { as_is, channels_only };

  explicit pointwise_frame(const tensor_spec& main) {
    const auto d = dense_shape_of(main);
    if (!d) return;
    shape_ = *d;
    if (d->s == 1) form_ = form::channels_only;
  }
  form kind() const noexcept { return form_; }

  // A full tensor (x, y, residual, gradients) of the graph.
  tensor_spec full(const tensor_spec& t) const {
    if (form_ == form::as_is || t.dims.empty()) return t;
    const auto d = dense_shape_of(t);
    if (!d || d->n != shape_.n || d->c != shape_.c || d->s != shape_.s)
      memfmt::detail::fail(errc::unsupported, "cuDNN pointwise graph: tensor " + t.key() +
                                                  " is not dense with the extents of the graph's main tensor");
    tensor_spec r = t;
    r.dims = {shape_.n, shape_.c, 1, 1};
    r.strides = {shape_.c, 1, shape_.c, shape_.c};
    return r;
  }
  // A per-channel operand [1, C, 1, ...] (channel_spec) of the graph.
  tensor_spec param(const tensor_spec& t) const {
    if (form_ == form::as_is) return t;
    tensor_spec r = t;
    r.dims = {1, shape_.c, 1, 1};
    r.strides = {shape_.c, 1, shape_.c, shape_.c};
    return r;
  }

 private:
  form form_ = form::as_is;
  dense_shape shape_{};
};

// A dense tensor with one position ([N, C, 1, 1(, 1)]) described with packed channels-last strides
// [C, 1, C, C(, C)] - the same bytes in either format, in the stride order cuDNN's runtime-fusion
// engines accept (see pointwise_frame below); any other tensor as it is.
inline tensor_spec one_position_as_channels_last(tensor_spec t) {
  if (t.dims.size() < 4) return t;
  std::int64_t positions = 1;
  for (std::size_t d = 2; d < t.dims.size(); ++d) positions *= t.dims[d];
  if (positions != 1) return t;
  const strided_desc desc{t.dims, t.strides, t.type};
  const memory_format cf = memory_format::contiguous;
  const memory_format cl = t.dims.size() == 4 ? memory_format::channels_last : memory_format::channels_last_3d;
  if (!is_contiguous(desc, cf) && !is_contiguous(desc, cl)) return t;
  t.strides.assign(t.dims.size(), t.dims[1]);
  t.strides[1] = 1;
  return t;
}

// "[a/b, c, ...]" (whole numbers without their denominator), for messages and cache keys.
inline std::string fractions_to_string(const std::vector<cudnnFraction_t>& v) {
  std::string r = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(v[i].numerator);
    if (v[i].denominator != 1) r += "/" + std::to_string(v[i].denominator);
  }
  return r + "]";
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
