// memfmt/backends/cudnn/layer_kernels_hook.hpp - how the cuDNN backend reaches memfmt's own layer
// kernels (cuda_layer_kernels.cuh): global average pooling forward and backward, the sums of a
// broadcast operand's gradient, pooling backward, a linear layer's bias gradient and binary ops
// with an operand broadcast over several samples, which cuDNN 9.19 on an H100 ran no engine for or
// crashed in (layer_kernels_index.hpp says what each computes). As with group norm, the kernels need nvcc
// while the backend is host C++: backend_options::layer_kernels = cudnn::cuda_layer_kernels(),
// from one .cu file. Without them those layers go through cuDNN graphs, where an engine exists.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "../../dtype.hpp"
#include "../../layers/layer_params.hpp"
#include "layer_kernels_index.hpp"

namespace memfmt::cudnn {

// dst = scale * (the sum of src over dst's extent-1 dimensions), or, for expand, dst = scale * src
// broadcast over them. Device pointers; dst has elements.
struct reduce_args {
  dtype type = dtype::float32;
  lk::view5 src, dst;
  const void* src_data = nullptr;
  void* dst_data = nullptr;
  double scale = 1.0;
  cudaStream_t stream = nullptr;
};

// dx of pooling (x read by max pooling only). Device pointers; dx has elements.
struct pool_backward_args {
  dtype type = dtype::float32;
  lk::pool_geometry geometry;
  lk::view5 x, dy, dx;
  const void* x_data = nullptr;
  const void* dy_data = nullptr;
  void* dx_data = nullptr;
  cudaStream_t stream = nullptr;
};

// The kernels' view of a tensor view (any format, 4-D or 5-D).
template <class View>
lk::view5 view5_of(const View& v) {
  const auto e = v.extents();
  const auto s = v.strides();
  return lk::make_view5(std::vector<std::int64_t>(e.begin(), e.end()), std::vector<std::int64_t>(s.begin(), s.end()));
}

// Pooling p over dx's spatial extents into dy's: pool_params' (H, W) or (D, H, W) in the (D, H, W)
// slots, a 2-D pooling's D a no-op (kernel 1, stride 1, no padding).
inline lk::pool_geometry pool_geometry_of(const lk::view5& dx, const lk::view5& dy, int spatial_rank,
                                          const pool_params& p) {
  lk::pool_geometry g;
  const int first = 3 - spatial_rank;  // the slot of p's first entry
  for (int d = 0; d < 3; ++d) {
    g.in[d] = dx.ext[2 + d];
    g.out[d] = dy.ext[2 + d];
    if (d < first) continue;
    g.kernel[d] = p.kernel[static_cast<std::size_t>(d - first)];
    g.stride[d] = p.stride[static_cast<std::size_t>(d - first)];
    g.pad[d] = p.padding[static_cast<std::size_t>(d - first)];
    g.pad_end[d] = p.padding_end[static_cast<std::size_t>(d - first)];
  }
  g.max = p.kind == pool_kind::max;
  g.count_include_pad = p.count_include_pad;
  return g;
}

// out = a op b (out at the output's extents), or with grad, out = d(a op b)/d(a or b, of_b) * dy
// at dy's extents; a and b broadcast to out's extents. Device pointers; out has elements.
struct binary_args {
  dtype type = dtype::float32;
  binary_op op = binary_op::add;
  bool grad = false, of_b = false;
  lk::view5 a, b, dy, out;
  const void* a_data = nullptr;
  const void* b_data = nullptr;
  const void* dy_data = nullptr;  // grad only
  void* out_data = nullptr;
  cudaStream_t stream = nullptr;
};

struct layer_kernel_set {
  std::function<void(const reduce_args&)> reduce_sum;
  std::function<void(const reduce_args&)> expand;
  std::function<void(const pool_backward_args&)> pool_backward;
  std::function<void(const binary_args&)> binary;
  explicit operator bool() const { return reduce_sum && expand && pool_backward && binary; }
};

}  // namespace memfmt::cudnn
