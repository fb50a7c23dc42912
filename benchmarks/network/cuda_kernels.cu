// bench_network_cudnn's format conversions through memfmt::cuda::convert's kernels, its group norms
// and the layers cuDNN has no engine for through memfmt's kernels: the one translation unit nvcc
// compiles (cuda_converter.cuh, cuda_group_norm.cuh and cuda_layer_kernels.cuh launch kernels; the
// benchmark is host C++).
#include <memfmt/backends/cudnn/cuda_converter.cuh>
#include <memfmt/backends/cudnn/cuda_group_norm.cuh>
#include <memfmt/backends/cudnn/cuda_layer_kernels.cuh>

namespace memfmt_bench {
memfmt::cudnn::format_converter kernel_converter() { return memfmt::cudnn::cuda_converter(); }
memfmt::cudnn::group_norm_kernels kernel_group_norm() { return memfmt::cudnn::cuda_group_norm(); }
memfmt::cudnn::layer_kernel_set kernel_layer_kernels() { return memfmt::cudnn::cuda_layer_kernels(); }
}  // namespace memfmt_bench
