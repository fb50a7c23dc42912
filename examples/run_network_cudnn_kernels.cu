// run_network_cudnn's backend options: memfmt's kernels for the plan's conversions, group norm and
// the layers cuDNN has no engine for (ResNet-18's global average pooling). The one file nvcc
// compiles; the example itself is host C++.
#include <memfmt/backends/cudnn/cuda_kernels.cuh>

memfmt::cudnn::backend_options gpu_options() { return memfmt::cudnn::with_cuda_kernels(); }
