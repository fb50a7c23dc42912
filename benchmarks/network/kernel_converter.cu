// bench_network_cudnn's format conversions through memfmt::cuda::convert's kernels and its group
// norms through memfmt's kernels: the one translation unit nvcc compiles (cuda_converter.cuh and
// cuda_group_norm.cuh launch kernels; the benchmark is host C++).
#include <memfmt/backends/cudnn/cuda_converter.cuh>
#include <memfmt/backends/cudnn/cuda_group_norm.cuh>

namespace memfmt_bench {
memfmt::cudnn::format_converter kernel_converter() { return memfmt::cudnn::cuda_converter(); }
memfmt::cudnn::group_norm_kernels kernel_group_norm() { return memfmt::cudnn::cuda_group_norm(); }
}  // namespace memfmt_bench
