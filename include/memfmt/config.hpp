// memfmt/config.hpp - portability macros and the library version.
//
// MEMFMT_HOST_DEVICE marks functions that run on both host and device. Under nvcc it becomes
// `__host__ __device__ __forceinline__`; in plain C++ it is just `inline`, so every header that
// uses it compiles without CUDA.
#pragma once

#define MEMFMT_VERSION_MAJOR 0
#define MEMFMT_VERSION_MINOR 1
#define MEMFMT_VERSION_PATCH 0

#if defined(__CUDACC__) || defined(__HIPCC__)
#define MEMFMT_HOST_DEVICE __host__ __device__ __forceinline__
#define MEMFMT_DEVICE_COMPILE 1
#else
#define MEMFMT_HOST_DEVICE inline
#define MEMFMT_DEVICE_COMPILE 0
#endif

#if defined(__CUDA_ARCH__)
#define MEMFMT_IN_DEVICE_CODE 1
#else
#define MEMFMT_IN_DEVICE_CODE 0
#endif

// Asks nvcc to unroll the loop that follows (a loop of constant trip count whose iterations should
// overlap); nothing for other compilers, which would warn about an unknown pragma.
#if MEMFMT_IN_DEVICE_CODE
#define MEMFMT_UNROLL _Pragma("unroll")
#else
#define MEMFMT_UNROLL
#endif
