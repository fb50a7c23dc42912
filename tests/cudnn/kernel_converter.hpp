// The cuDNN backend's kernel converter (cuda_converter.cuh) for the C++ GPU tests: defined in
// test_converter_gpu.cu, the one translation unit nvcc compiles.
#pragma once

#include <memfmt/backends/cudnn/backend.hpp>

namespace memfmt_test {
memfmt::cudnn::format_converter kernel_converter();
}  // namespace memfmt_test
