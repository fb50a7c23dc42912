// bench_network_cudnn's backend options with memfmt's kernels (conversions, group norm, the layers
// cuDNN has no engine for): the one translation unit nvcc compiles; the benchmark is host C++.
#include <memfmt/backends/cudnn/cuda_kernels.cuh>

namespace memfmt_bench {
memfmt::cudnn::backend_options kernel_options() { return memfmt::cudnn::with_cuda_kernels(); }
}  // namespace memfmt_bench
