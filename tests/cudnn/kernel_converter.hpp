// The cuDNN backend's kernel converter (cuda_converter.cuh) and group norm kernels
// (cuda_group_norm.cuh) for the C++ GPU tests: defined in test_converter_gpu.cu, the one
// translation unit nvcc compiles.
#pragma once

#include <memfmt/backends/cudnn/backend.hpp>

namespace memfmt_test {
memfmt::cudnn::format_converter kernel_converter();
memfmt::cudnn::group_norm_kernels kernel_group_norm();
}  // namespace memfmt_test
