// memfmt/backends/cudnn/cuda_kernels.cuh - every kernel memfmt brings to the cuDNN backend, in one
// call: the format conversions (cuda_converter.cuh), group and instance norm (cuda_group_norm.cuh)
// and the layers cuDNN has no engine for (cuda_layer_kernels.cuh: global average pooling, pooling
// backward, the sums of a broadcast operand's gradient). Needs nvcc: call it from one .cu file
// and hand the options to the backend in host C++.
//
//   // kernels.cu
//   memfmt::cudnn::backend_options my_options() { return memfmt::cudnn::with_cuda_kernels(); }
//   // main.cpp
//   memfmt::cudnn::backend gpu(my_options());   // every network the executor plans runs
#pragma once

#include "backend.hpp"
#include "cuda_converter.cuh"
#include "cuda_group_norm.cuh"
#include "cuda_layer_kernels.cuh"

namespace memfmt::cudnn {

// `o` with the converter, group norm kernels and layer kernels set; its other fields unchanged.
inline backend_options with_cuda_kernels(backend_options o = {}) {
  o.converter = cuda_converter();
  o.group_norm = cuda_group_norm();
  o.layer_kernels = cuda_layer_kernels();
  return o;
}

}  // namespace memfmt::cudnn
