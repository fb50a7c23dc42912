// bench_network_cudnn's format conversions through memfmt::cuda::convert's kernels: the one
// translation unit nvcc compiles (cuda_converter.cuh launches kernels; the benchmark is host C++).
#include <memfmt/backends/cudnn/cuda_converter.cuh>

namespace memfmt_bench {
memfmt::cudnn::format_converter kernel_converter() { return memfmt::cudnn::cuda_converter(); }
}  // namespace memfmt_bench
