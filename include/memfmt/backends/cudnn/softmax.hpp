// memfmt/backends/cudnn/softmax.hpp - softmax and log-softmax over channels, forward and backward,
// through cuDNN's legacy cudnnSoftmaxForward / cudnnSoftmaxBackward (not deprecated in cuDNN 9).
//
// CUDNN_SOFTMAX_MODE_CHANNEL normalises over C for every sample and position, memfmt's softmax;
// CUDNN_SOFTMAX_ACCURATE subtracts the maximum first, CUDNN_SOFTMAX_LOG is log-softmax. The
// descriptors carry each view's own strides (legacy_tensor.hpp), so both formats run, mixed too.
// The legacy calls are used here for float32, float64 and float16; bfloat16 is refused (the legacy
// API's bfloat16 support is not established for these calls).
#pragma once

#include <cudnn.h>

#include <string>

#include "../../dtype.hpp"
#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../validate.hpp"
#include "legacy_tensor.hpp"
#include "status.hpp"

namespace memfmt::cudnn {

// The element types the legacy softmax calls are run for here.
inline bool softmax_takes(dtype t) noexcept {
  return t == dtype::float32 || t == dtype::float64 || t == dtype::float16;
}

inline void require_softmax_dtype(dtype t, const std::string& op) {
  if (softmax_takes(t)) return;
  memfmt::detail::fail(errc::unsupported_dtype, op + ": element type " + std::string(to_string(t)) +
                                                    " (cuDNN's legacy softmax is run for float32, float64, float16)");
}

inline cudnnSoftmaxAlgorithm_t softmax_algorithm(const softmax_params& p) noexcept {
  return p.log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
}

// y = softmax(x), queued on the stream `handle` is set to.
template <class T, class XF, class YF>
void run_softmax_forward(cudnnHandle_t handle, tensor_view<const T, XF> x, tensor_view<T, YF> y,
                         const softmax_params& p) {
  const std::string op = "cuDNN softmax_forward";
  validate_softmax_forward(x, y);
  require_softmax_dtype(dtype_of_v<T>, op);
  if (y.numel() == 0) return;
  const legacy_shape s = legacy_shape_of(op, x, y);
  const legacy_tensor_desc xd(dtype_of_v<T>, s.dims, s.strides[0]), yd(dtype_of_v<T>, s.dims, s.strides[1]);
  const legacy_scale one(1.0), zero(0.0);
  check_cudnn(cudnnSoftmaxForward(handle, softmax_algorithm(p), CUDNN_SOFTMAX_MODE_CHANNEL, one.for_type(dtype_of_v<T>),
                                  xd.get(), x.data(), zero.for_type(dtype_of_v<T>), yd.get(), y.data()),
              "cudnnSoftmaxForward");
}

// dx = the gradient of softmax_forward, from its output y and the output gradient dy.
template <class T, class YF, class DYF, class DXF>
void run_softmax_backward(cudnnHandle_t handle, tensor_view<const T, YF> y, tensor_view<const T, DYF> dy,
                          tensor_view<T, DXF> dx, const softmax_params& p) {
  const std::string op = "cuDNN softmax_backward";
  validate_softmax_backward(y, dy, dx);
  require_softmax_dtype(dtype_of_v<T>, op);
  if (dx.numel() == 0) return;
  const legacy_shape s = legacy_shape_of(op, y, dy, dx);
  const legacy_tensor_desc yd(dtype_of_v<T>, s.dims, s.strides[0]), dyd(dtype_of_v<T>, s.dims, s.strides[1]),
      dxd(dtype_of_v<T>, s.dims, s.strides[2]);
  const legacy_scale one(1.0), zero(0.0);
  check_cudnn(cudnnSoftmaxBackward(handle, softmax_algorithm(p), CUDNN_SOFTMAX_MODE_CHANNEL,
                                   one.for_type(dtype_of_v<T>), yd.get(), y.data(), dyd.get(), dy.data(),
                                   zero.for_type(dtype_of_v<T>), dxd.get(), dx.data()),
              "cudnnSoftmaxBackward");
}

}  // namespace memfmt::cudnn
