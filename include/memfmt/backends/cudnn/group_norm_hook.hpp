// memfmt/backends/cudnn/group_norm_hook.hpp - how the cuDNN backend reaches its group norm kernels.
//
// cuDNN 9's graph API has no group norm memfmt can use, so the backend runs memfmt's own kernels
// (cuda_group_norm.cuh). Those need nvcc while the backend is host C++, so the backend holds them
// type-erased: backend_options::group_norm = cudnn::cuda_group_norm(), from one .cu file. The
// arguments are plain: packed tensors as (N, C, S), their formats, element type, device pointers
// (parameters and statistics are param_t of the element type: float, or double for double), a
// workspace of the pass's size (workspace_bytes) and the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

#include "../../dtype.hpp"
#include "group_norm_index.hpp"

namespace memfmt::cudnn {

struct group_norm_forward_args {
  gn::shape shape;
  dtype type = dtype::float32;
  bool x_channels_last = false, y_channels_last = false;
  double epsilon = 1e-5;
  const void* x = nullptr;
  void* y = nullptr;
  const void* gamma = nullptr;  // optional (null: 1)
  const void* beta = nullptr;   // optional (null: 0)
  void* saved_mean = nullptr;
  void* saved_invstd = nullptr;
  void* workspace = nullptr;
  cudaStream_t stream = nullptr;
};

struct group_norm_backward_args {
  gn::shape shape;
  dtype type = dtype::float32;
  bool x_channels_last = false, dy_channels_last = false, dx_channels_last = false;
  const void* x = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  const void* gamma = nullptr;  // optional
  const void* saved_mean = nullptr;
  const void* saved_invstd = nullptr;
  void* dgamma = nullptr;  // optional
  void* dbeta = nullptr;   // optional
  void* workspace = nullptr;
  cudaStream_t stream = nullptr;
};

struct group_norm_kernels {
  std::function<void(const group_norm_forward_args&)> forward;
  std::function<void(const group_norm_backward_args&)> backward;
  explicit operator bool() const { return forward && backward; }
};

// The workspace a pass needs (the reduction partials; statistics accumulate in float, or double
// for double). The blocks follow x's format.
inline std::int64_t group_norm_workspace_bytes(const gn::shape& sh, bool x_channels_last, dtype type, bool backward) {
  const gn::reduce_plan p = gn::make_reduce_plan(sh, x_channels_last);
  if (type == dtype::float64)
    return backward ? gn::backward_workspace_bytes<double>(p) : gn::forward_workspace_bytes<double>(p);
  return backward ? gn::backward_workspace_bytes<float>(p) : gn::forward_workspace_bytes<float>(p);
}

}  // namespace memfmt::cudnn
