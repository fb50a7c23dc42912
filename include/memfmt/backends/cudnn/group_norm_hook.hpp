// memfmt/backends/cudnn/group_norm_hook.hpp - how the cuDNN backend reaches its group norm kernels.
//
// cuDNN 9's graph API has no group norm memfmt can use, so the backend runs memfmt's own kernels
// (cuda_group_norm.cuh). Those need nvcc while the backend is host C++, so the backend holds them
// type-erased: backend_options::group_norm = cudnn::cuda_group_norm(), from one .cu file. The
// arguments are plain: packed tensors as (N, C, S), their formats, element type, device pointers
// (parameters and statistics are param_t of the element type: float, or double for double), a
// workspace of the pass's size (group_norm_workspace_bytes) and the stream. The backend calls a
// hook only for an x with elements (gn::launches); an empty x it finishes itself.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

#include "../../dtype.hpp"
#include "group_norm_index.hpp"

namespace memfmt::cudnn {

// What both passes read: the problem, x and its format, the scale, the scratch and the stream.
struct group_norm_common_args {
  gn::shape shape;  // n, c, s >= 1
  dtype type = dtype::float32;
  bool x_channels_last = false;
  const void* x = nullptr;
  const void* gamma = nullptr;  // optional (null: 1)
  void* workspace = nullptr;    // group_norm_workspace_bytes of the pass
  cudaStream_t stream = nullptr;
};

// y = (x - mean) * invstd * gamma + beta; writes the statistics the backward reads.
struct group_norm_forward_args : group_norm_common_args {
  bool y_channels_last = false;
  double epsilon = 1e-5;
  void* y = nullptr;
  const void* beta = nullptr;  // optional (null: 0)
  void* saved_mean = nullptr;
  void* saved_invstd = nullptr;
};

// dx from dy and the forward's statistics; dgamma and dbeta when asked for.
struct group_norm_backward_args : group_norm_common_args {
  bool dy_channels_last = false, dx_channels_last = false;
  const void* dy = nullptr;
  void* dx = nullptr;
  const void* saved_mean = nullptr;
  const void* saved_invstd = nullptr;
  void* dgamma = nullptr;  // optional
  void* dbeta = nullptr;   // optional
};

struct group_norm_kernels {
  std::function<void(const group_norm_forward_args&)> forward;
  std::function<void(const group_norm_backward_args&)> backward;
  explicit operator bool() const { return forward && backward; }
};

// The workspace a pass needs (the reduction partials; statistics accumulate in float, or double
// for double). The blocks follow x's format; an empty x needs none.
inline std::int64_t group_norm_workspace_bytes(const gn::shape& sh, bool x_channels_last, dtype type, bool backward) {
  if (!gn::launches(sh)) return 0;
  const gn::reduce_plan p = gn::make_reduce_plan(sh, x_channels_last);
  if (type == dtype::float64)
    return backward ? gn::backward_workspace_bytes<double>(p) : gn::forward_workspace_bytes<double>(p);
  return backward ? gn::backward_workspace_bytes<float>(p) : gn::forward_workspace_bytes<float>(p);
}

}  // namespace memfmt::cudnn
