#include "cudnn_kernels.hpp"

#include <memfmt/backends/cudnn/cuda_kernels.cuh>

namespace memfmt_cli {
memfmt::cudnn::backend_options cudnn_options() { return memfmt::cudnn::with_cuda_kernels(); }
}  // namespace memfmt_cli
