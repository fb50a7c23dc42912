// memfmt/interop/dlpack.hpp - typed views from DLPack tensors, and DLPack tensors from views.
//
// Optional interop header: it needs <dlpack/dlpack.h> (Debian libdlpack-dev; written against
// DLPack 0.6, the legacy DLManagedTensor ABI that PyTorch 1.13 speaks). The core never includes it.
//
// In:  view_as<Format, T>(const DLTensor&) checks dtype, ndim, device (optionally), byte_offset and
//      strides (NULL = compact row-major, DLPack's rule), then density exactly as
//      memfmt/tensor/from_strided.hpp does. Shape and strides are in DLPack's (= torch's) logical
//      N, C, spatial order, strides in elements.
// Out: to_dlpack(view, device, owner) returns a DLManagedTensor that owns its shape/strides arrays
//      (and, optionally, keeps `owner` alive) until its deleter is called, exactly once, by the
//      consumer. What PyTorch 1.13's torch.utils.dlpack.from_dlpack needs of it (checked by
//      experiment against the installed torch, see tests/interop/torch_roundtrip.py):
//        - a PyCapsule named "dltensor" around the pointer (the Python side makes it; torch renames
//          it "used_dltensor" once consumed and calls the deleter when the tensor dies),
//        - dtype lanes == 1 and code/bits among int8/16/32/64, uint8, float16/32/64, bfloat16
//          (torch 1.13 has no DLPack bool: it rejects code 6 and refuses to export bool),
//        - device kDLCPU or kDLCUDA (kDLROCM too); others are "Unsupported device_type",
//        - byte_offset is IGNORED by torch 1.13, so `data` must already point at element 0,
//        - strides in elements (NULL allowed) and never negative (torch aborts the process on a
//          negative stride),
//        - data != NULL even for an empty tensor: torch never calls the deleter of a NULL-data
//          tensor (a leak).
//      to_dlpack always emits byte_offset 0, non-null data, non-null non-negative strides, lanes 1.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "../detail/checked.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../format/layout.hpp"
#include "../format/tags.hpp"
#include "../tensor/from_strided.hpp"
#include "../tensor/tensor_view.hpp"

namespace memfmt {
namespace dlpack {

// kDLBool from DLPack >= 0.8 (absent from the 0.6 header): one byte per element, 0 or 1.
inline constexpr std::uint8_t bool_code = 6;

// The DLPack dtype of a memfmt element type.
template <class T>
constexpr DLDataType dtype_for() noexcept {
  using U = std::remove_cv_t<T>;
  constexpr dtype d = dtype_of_v<U>;
  std::uint8_t code = kDLFloat;
  switch (d) {
    case dtype::float32:
    case dtype::float64:
    case dtype::float16: code = kDLFloat; break;
    case dtype::bfloat16: code = kDLBfloat; break;
    case dtype::int8:
    case dtype::int16:
    case dtype::int32:
    case dtype::int64: code = kDLInt; break;
    case dtype::uint8: code = kDLUInt; break;
    case dtype::bool8: code = bool_code; break;
  }
  return DLDataType{code, static_cast<std::uint8_t>(size_of(d) * 8), 1};
}

constexpr bool same_dtype(DLDataType a, DLDataType b) noexcept {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

// "float32", "bfloat16", "bool", or "code 7 bits 12 lanes 1" for what memfmt has no name for.
inline std::string to_string(DLDataType t) {
  const dtype all[] = {dtype::float32, dtype::float64, dtype::float16, dtype::bfloat16, dtype::int8,
                       dtype::uint8,   dtype::int16,   dtype::int32,   dtype::int64,    dtype::bool8};
  const DLDataType known[] = {dtype_for<float>(),        dtype_for<double>(),       dtype_for<half>(),
                              dtype_for<bfloat16>(),     dtype_for<std::int8_t>(),  dtype_for<std::uint8_t>(),
                              dtype_for<std::int16_t>(), dtype_for<std::int32_t>(), dtype_for<std::int64_t>(),
                              dtype_for<bool>()};
  for (std::size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i)
    if (same_dtype(t, known[i])) return std::string(memfmt::to_string(all[i]));
  return "code " + std::to_string(t.code) + " bits " + std::to_string(t.bits) + " lanes " + std::to_string(t.lanes);
}

// "cpu:0", "cuda:1", "device_type 4:0".
inline std::string to_string(DLDevice d) {
  std::string type;
  switch (d.device_type) {
    case kDLCPU: type = "cpu"; break;
    case kDLCUDA: type = "cuda"; break;
    case kDLCUDAHost: type = "cuda_host"; break;
    case kDLCUDAManaged: type = "cuda_managed"; break;
    case kDLROCM: type = "rocm"; break;
    default: type = "device_type " + std::to_string(static_cast<int>(d.device_type)); break;
  }
  return type + ":" + std::to_string(d.device_id);
}

// Calls a DLManagedTensor's deleter (the consumer's one duty); for unique_dlpack.
struct managed_deleter {
  void operator()(DLManagedTensor* m) const noexcept {
    if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  }
};
using unique_managed = std::unique_ptr<DLManagedTensor, managed_deleter>;

}  // namespace dlpack

namespace detail::dlpack_io {

// DLPack's meaning of strides == NULL: compact row-major (a size-0 dimension makes the strides
// outside it 0). Throws overflow naming the shape when a stride does not fit.
inline std::vector<std::int64_t> row_major_strides(const std::int64_t* shape, int ndim, const std::string& what) {
  std::vector<std::int64_t> s(static_cast<std::size_t>(ndim), 1);
  for (int i = ndim - 2; i >= 0; --i) {
    const auto next = static_cast<std::size_t>(i + 1);
    if (mul_overflows(s[next], shape[next], &s[static_cast<std::size_t>(i)]))
      fail(errc::overflow, what + ": the row-major strides of shape " +
                               dims_to_string(from_strided::dims_ref{shape, static_cast<std::size_t>(ndim)}) +
                               " overflow 64 bits");
  }
  return s;
}

// One allocation: the managed tensor, the arrays it points into, and what keeps the data alive.
template <int Rank>
struct export_holder {
  DLManagedTensor managed{};
  std::int64_t shape[Rank] = {};
  std::int64_t strides[Rank] = {};
  std::shared_ptr<const void> owner;

  static void release(DLManagedTensor* m) noexcept { delete static_cast<export_holder*>(m->manager_ctx); }
};

}  // namespace detail::dlpack_io

// A typed view of a DLPack tensor. `required_device`, when given, must equal t.device.device_type
// (a host-only caller passes kDLCPU). Throws memfmt::error naming the dtype, sizes, strides and
// device: unsupported_dtype (code/bits/lanes differ from T), invalid_argument (ndim, null shape,
// device), overflow, null_pointer, misaligned, format_mismatch (not dense in Format).
template <class Format, class T>
tensor_view<T, Format> view_as(const DLTensor& t, std::optional<DLDeviceType> required_device = std::nullopt) {
  static_assert(is_format_v<Format>, "view_as<F>: F must be one of nchw, nhwc, ncdhw, ndhwc");
  namespace fs = detail::from_strided;
  const auto context = [&t]() {
    return std::string("view_as<") + Format::name + ">(DLTensor " + dlpack::to_string(t.dtype) + " on " +
           dlpack::to_string(t.device) + (t.strides == nullptr ? ", strides NULL = compact row-major" : "") + ")";
  };
  constexpr DLDataType want = dlpack::dtype_for<T>();
  if (!dlpack::same_dtype(t.dtype, want))
    detail::fail(errc::unsupported_dtype, context() + ": dtype " + dlpack::to_string(t.dtype) +
                                              " does not match element type " + dlpack::to_string(want));
  if (t.ndim != Format::rank)
    detail::fail(
        errc::invalid_argument,
        context() + ": " + Format::name + " needs ndim " + std::to_string(Format::rank) + ", got ndim " +
            std::to_string(t.ndim) +
            (t.shape != nullptr && t.ndim > 0
                 ? " (shape " + detail::dims_to_string(fs::dims_ref{t.shape, static_cast<std::size_t>(t.ndim)}) + ")"
                 : std::string()));
  if (t.shape == nullptr)
    detail::fail(errc::invalid_argument, context() + ": shape is NULL for ndim " + std::to_string(t.ndim));
  if (required_device && t.device.device_type != *required_device)
    detail::fail(errc::invalid_argument,
                 context() + ": the caller needs device " + dlpack::to_string(DLDevice{*required_device, 0}) +
                     " but the tensor is on " + dlpack::to_string(t.device) + " (shape " +
                     detail::dims_to_string(fs::dims_ref{t.shape, static_cast<std::size_t>(t.ndim)}) + ")");

  const fs::dims_ref sizes{t.shape, static_cast<std::size_t>(t.ndim)};
  std::vector<std::int64_t> compact;  // only when strides == NULL
  fs::dims_ref strides{t.strides, sizes.size()};
  if (t.strides == nullptr) {
    // row_major_strides multiplies sizes: reject negative sizes and overflow before it runs.
    std::int64_t numel = 0;
    const fs::problem p = fs::check_dims<Format>(sizes, sizes, sizeof(T), &numel);
    if (p == fs::problem::negative_size || p == fs::problem::overflow)
      fs::throw_problem<Format>(p, context(), sizes, fs::dims_ref{}, nullptr, alignof(T), sizeof(T));
    compact = detail::dlpack_io::row_major_strides(t.shape, t.ndim, context());
    strides = fs::ref(compact);
  }

  std::uintptr_t address = reinterpret_cast<std::uintptr_t>(t.data);
  if (detail::add_address_overflows(address, t.byte_offset, &address))
    detail::fail(errc::overflow,
                 context() + ": data + byte_offset " + std::to_string(t.byte_offset) + " overflows the address space");
  if (t.data == nullptr && t.byte_offset != 0) address = 0;  // a null buffer stays null
  T* data = reinterpret_cast<T*>(address);
  return fs::view_or_throw<Format>(data, sizes, strides, context);
}

template <class Format, class T>
tensor_view<T, Format> view_as(const DLManagedTensor& m, std::optional<DLDeviceType> required_device = std::nullopt) {
  return view_as<Format, T>(m.dl_tensor, required_device);
}

// A DLPack tensor describing `v` (shape and element strides in logical N, C, spatial order, i.e.
// torch's order; data points at element 0; byte_offset 0). `device` is kDLCPU (id 0) or kDLCUDA.
// `owner`, if given, is kept alive until the consumer calls the deleter. The result must be
// released exactly once through its deleter (dlpack::unique_managed does that for C++ callers).
template <class T, class Format>
DLManagedTensor* to_dlpack(const tensor_view<T, Format>& v, DLDevice device = DLDevice{kDLCPU, 0},
                           std::shared_ptr<const void> owner = nullptr) {
  using holder = detail::dlpack_io::export_holder<Format::rank>;
  const auto context = [&]() {
    return std::string("to_dlpack(") + Format::name + " view " +
           std::string(memfmt::to_string(dtype_of_v<std::remove_cv_t<T>>)) + " sizes " +
           detail::dims_to_string(v.extents()) + " strides " + detail::dims_to_string(v.strides()) + ", device " +
           dlpack::to_string(device) + ")";
  };
  if (device.device_type != kDLCPU && device.device_type != kDLCUDA)
    detail::fail(errc::invalid_argument, context() + ": device must be cpu or cuda");
  if (device.device_id < 0 || (device.device_type == kDLCPU && device.device_id != 0))
    detail::fail(errc::invalid_argument,
                 context() + ": bad device_id " + std::to_string(device.device_id) + " (cpu needs 0, cuda needs >= 0)");
  if (v.data() == nullptr && v.numel() > 0) detail::fail(errc::null_pointer, context() + ": null data");

  auto h = std::make_unique<holder>();
  for (int d = 0; d < Format::rank; ++d) {
    h->shape[d] = v.extent(d);
    h->strides[d] = v.stride(d);
  }
  h->owner = std::move(owner);
  DLTensor& t = h->managed.dl_tensor;
  // DLPack has no const; consumers may write. An empty view may have no data, but torch 1.13 never
  // calls the deleter of a tensor whose data is NULL (a leak), so it gets a harmless non-null,
  // suitably aligned address that no element ever reads.
  static_assert(alignof(std::remove_cv_t<T>) <= alignof(std::int64_t), "to_dlpack: over-aligned element type");
  t.data = v.data() != nullptr ? static_cast<void*>(const_cast<std::remove_cv_t<T>*>(v.data()))
                               : static_cast<void*>(h->shape);
  t.device = device;
  t.ndim = Format::rank;
  t.dtype = dlpack::dtype_for<T>();
  t.shape = h->shape;
  t.strides = h->strides;
  t.byte_offset = 0;  // torch 1.13 ignores byte_offset: data already points at element 0
  h->managed.manager_ctx = h.get();
  h->managed.deleter = &holder::release;
  return &h.release()->managed;
}

}  // namespace memfmt
