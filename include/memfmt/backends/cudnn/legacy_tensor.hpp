// memfmt/backends/cudnn/legacy_tensor.hpp - tensor descriptors of cuDNN's legacy (cudnn_ops) API.
//
// A few layers run through legacy calls that are not deprecated in cuDNN 9 (cudnnSoftmaxForward,
// cudnnSoftmaxBackward, cudnnSetTensor). Their descriptors take int dims and strides in logical
// order (N, C, spatial...), so any stride order, NHWC included, is described as it is. Spatial dims
// that are contiguous in every tensor of a call are merged first, so a 3-D tensor becomes the 4-D
// shape every legacy call takes; the shape is plain data so host tests can check it.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "status.hpp"
#include "tensor_desc.hpp"

namespace memfmt::cudnn {

// Dims and strides of one or more tensors of one shape (int, as the legacy API takes them).
struct legacy_shape {
  std::vector<int> dims;
  std::vector<std::vector<int>> strides;  // one stride vector per tensor
};

// Merges adjacent spatial dims that are contiguous in every tensor (stride[d] == dims[d + 1] *
// stride[d + 1]) while more than 4 dims remain, then checks that sizes, strides and the largest
// offset fit in int. Throws unsupported naming `op` otherwise.
inline legacy_shape legacy_shape_of(const std::string& op, std::vector<std::int64_t> dims,
                                    std::vector<std::vector<std::int64_t>> strides) {
  for (std::size_t d = 2; dims.size() > 4 && d + 1 < dims.size();) {
    bool contiguous = true;
    for (const auto& s : strides) contiguous = contiguous && s[d] == dims[d + 1] * s[d + 1];
    if (!contiguous) {
      ++d;
      continue;
    }
    dims[d + 1] *= dims[d];
    dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(d));
    for (auto& s : strides) s.erase(s.begin() + static_cast<std::ptrdiff_t>(d));
  }
  constexpr std::int64_t int_max = std::numeric_limits<int>::max();
  legacy_shape out;
  for (std::int64_t v : dims) {
    if (v > int_max)
      memfmt::detail::fail(errc::unsupported, op + ": sizes " + memfmt::detail::dims_to_string(dims) +
                                                  " exceed the int range of cuDNN's legacy tensor descriptors");
    out.dims.push_back(static_cast<int>(v));
  }
  for (const auto& s : strides) {
    std::int64_t last = 0;  // the offset of the last element, which the API computes in int
    for (std::size_t d = 0; d < s.size(); ++d) last += (dims[d] - 1) * s[d];
    if (last > int_max)
      memfmt::detail::fail(errc::unsupported, op + ": sizes " + memfmt::detail::dims_to_string(dims) + " and strides " +
                                                  memfmt::detail::dims_to_string(s) +
                                                  " exceed the int range of cuDNN's legacy tensor descriptors");
    out.strides.emplace_back(s.begin(), s.end());
  }
  return out;
}

// The views' dims and strides (one shape; the callers validated that).
template <class View, class... Views>
legacy_shape legacy_shape_of(const std::string& op, const View& first, const Views&... rest) {
  const auto e = first.extents();
  std::vector<std::vector<std::int64_t>> strides;
  const auto add = [&](const auto& v) {
    const auto s = v.strides();
    strides.emplace_back(s.begin(), s.end());
  };
  add(first);
  (add(rest), ...);
  return legacy_shape_of(op, std::vector<std::int64_t>(e.begin(), e.end()), std::move(strides));
}

// An owned cudnnTensorDescriptor_t.
class legacy_tensor_desc {
 public:
  legacy_tensor_desc(dtype t, const std::vector<int>& dims, const std::vector<int>& strides) {
    check_cudnn(cudnnCreateTensorDescriptor(&desc_), "cudnnCreateTensorDescriptor");
    const cudnnStatus_t s =
        cudnnSetTensorNdDescriptor(desc_, to_cudnn(t), static_cast<int>(dims.size()), dims.data(), strides.data());
    if (s != CUDNN_STATUS_SUCCESS) cudnnDestroyTensorDescriptor(desc_);
    check_cudnn(s, "cudnnSetTensorNdDescriptor");
  }
  ~legacy_tensor_desc() { cudnnDestroyTensorDescriptor(desc_); }
  legacy_tensor_desc(const legacy_tensor_desc&) = delete;
  legacy_tensor_desc& operator=(const legacy_tensor_desc&) = delete;
  cudnnTensorDescriptor_t get() const noexcept { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

// Scale factors of a legacy call (alpha, beta) point at double for double tensors, float otherwise.
struct legacy_scale {
  double d = 0.0;
  float f = 0.0f;
  explicit legacy_scale(double v) : d(v), f(static_cast<float>(v)) {}
  const void* for_type(dtype t) const noexcept { return t == dtype::float64 ? static_cast<const void*>(&d) : &f; }
};

}  // namespace memfmt::cudnn
