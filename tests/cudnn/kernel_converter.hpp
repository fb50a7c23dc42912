// The cuDNN backend's kernel converter (cuda_converter.cuh), group norm kernels
// (cuda_group_norm.cuh) and layer kernels (cuda_layer_kernels.cuh) for the C++ GPU tests: defined
// in test_converter_gpu.cu, the one translation unit nvcc compiles.
#pragma once

#include <memfmt/backends/cudnn/backend.hpp>

namespace memfmt_test {
memfmt::cudnn::format_converter kernel_converter();
memfmt::cudnn::group_norm_kernels kernel_group_norm();
memfmt::cudnn::layer_kernel_set kernel_layer_kernels();

// Backend options with the layer kernels, which global average pooling and pooling backward need.
inline memfmt::cudnn::backend_options with_layer_kernels(memfmt::cudnn::backend_options o = {}) {
  o.layer_kernels = kernel_layer_kernels();
  return o;
}
}  // namespace memfmt_test
