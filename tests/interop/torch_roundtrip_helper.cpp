// A tiny C ABI over memfmt's DLPack interop, loaded by torch_roundtrip.py through ctypes, so that
// PyTorch itself (torch.utils.dlpack) can consume what to_dlpack produces and produce what
// view_as(DLTensor) consumes. Formats: 0 nchw, 1 nhwc, 2 ncdhw, 3 ndhwc.
#include <memfmt/interop/dlpack.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "../common/coords.hpp"

namespace {

std::atomic<int> live_buffers{0};

// The value stored at a logical coordinate: distinct for every element of the shapes used.
template <std::size_t R>
double value_at(const std::array<std::int64_t, R>& c) {
  double v = 0;
  for (auto x : c) v = v * 16 + static_cast<double>(x);
  return v;
}

using memfmt_test::for_each_coord;

template <class F>
DLManagedTensor* export_filled(const std::int64_t* sizes) {
  typename memfmt::layout<F>::extents_type e{};
  std::copy(sizes, sizes + F::rank, e.begin());
  auto owner = std::shared_ptr<memfmt::host_tensor<float, F>>(new memfmt::host_tensor<float, F>(e),
                                                              [](memfmt::host_tensor<float, F>* p) {
                                                                --live_buffers;
                                                                delete p;
                                                              });
  ++live_buffers;
  auto v = owner->view();
  for_each_coord(e, [&](const auto& c) { v(c) = static_cast<float>(value_at(c)); });
  return memfmt::to_dlpack(v, DLDevice{kDLCPU, 0}, owner);
}

template <class F>
std::int64_t check_import(const DLManagedTensor* m) {
  const auto v = memfmt::view_as<F, float>(*m, kDLCPU);
  std::int64_t wrong = 0;
  for_each_coord(v.extents(), [&](const auto& c) { wrong += v(c) != static_cast<float>(value_at(c)); });
  return wrong;
}

void copy_message(const std::string& s, char* out, int len) {
  if (out == nullptr || len <= 0) return;
  const std::size_t n = std::min<std::size_t>(s.size(), static_cast<std::size_t>(len - 1));
  std::memcpy(out, s.data(), n);
  out[n] = '\0';
}

}  // namespace

extern "C" {

// A new tensor of `format` and `sizes` (logical order) filled with value_at(coord), as DLPack.
// Null (and a message) on error.
DLManagedTensor* memfmt_export_filled(int format, const std::int64_t* sizes, char* err, int err_len) {
  try {
    switch (format) {
      case 0: return export_filled<memfmt::nchw>(sizes);
      case 1: return export_filled<memfmt::nhwc>(sizes);
      case 2: return export_filled<memfmt::ncdhw>(sizes);
      case 3: return export_filled<memfmt::ndhwc>(sizes);
      default: copy_message("unknown format", err, err_len); return nullptr;
    }
  } catch (const std::exception& e) {
    copy_message(e.what(), err, err_len);
    return nullptr;
  }
}

// Buffers made by memfmt_export_filled and not yet released through the DLPack deleter.
int memfmt_live_buffers() { return live_buffers.load(); }

// Views a DLPack tensor as `format` and counts elements != value_at(coord); -1 and a message on error.
std::int64_t memfmt_check_import(int format, const DLManagedTensor* m, char* err, int err_len) {
  try {
    switch (format) {
      case 0: return check_import<memfmt::nchw>(m);
      case 1: return check_import<memfmt::nhwc>(m);
      case 2: return check_import<memfmt::ncdhw>(m);
      case 3: return check_import<memfmt::ndhwc>(m);
      default: copy_message("unknown format", err, err_len); return -1;
    }
  } catch (const std::exception& e) {
    copy_message(e.what(), err, err_len);
    return -1;
  }
}

}  // extern "C"
