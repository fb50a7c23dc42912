// memfmt/backends/cudnn/cuda_layer_kernels.cuh - memfmt's CUDA kernels for the layers cuDNN 9 runs
// no engine for (layer_kernels_hook.hpp). Needs nvcc: include it in one .cu file.
//
//   memfmt::cudnn::backend_options o;
//   o.layer_kernels = memfmt::cudnn::cuda_layer_kernels();
//   memfmt::cudnn::backend be(o);   // global average pooling, broadcast gradients, pooling backward
//
// One thread per output element in a grid-stride loop (layer_kernels_index.hpp does the work);
// float, float16 and bfloat16 accumulate in float, double in double.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "../../dtype.hpp"
#include "../../dtype_dispatch.hpp"
#include "../../error.hpp"
#include "cuda_group_norm.cuh"
#include "layer_kernels_hook.hpp"
#include "layer_kernels_index.hpp"

namespace memfmt::cudnn {
namespace detail {

template <class T, class A>
__global__ void lk_reduce_sum_kernel(lk::view5 src, lk::view5 dst, const T* x, T* y, A scale) {
  const std::int64_t total = lk::numel(dst);
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t at[5];
    lk::unravel(dst, i, at);
    const A v = lk::reduce_sum_at<A>(src, dst, i, scale, [&](std::int64_t o) { return gn_load<A>(x, o); });
    gn_store(y, lk::offset(dst, at), v);
  }
}

template <class T, class A>
__global__ void lk_expand_kernel(lk::view5 src, lk::view5 dst, const T* x, T* y, A scale) {
  const std::int64_t total = lk::numel(dst);
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t at[5];
    lk::unravel(dst, i, at);
    gn_store(y, lk::offset(dst, at), gn_load<A>(x, lk::expand_source_offset(src, dst, i)) * scale);
  }
}

template <class T, class A>
__global__ void lk_pool_backward_kernel(lk::pool_geometry g, lk::view5 xv, lk::view5 dyv, lk::view5 dxv, const T* x,
                                        const T* dy, T* dx) {
  const std::int64_t total = lk::numel(dxv);
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t at[5];
    lk::unravel(dxv, i, at);
    const A v = lk::pool_backward_at<A>(
        g, xv, dyv, at, [&](std::int64_t o) { return gn_load<A>(x, o); },
        [&](std::int64_t o) { return gn_load<A>(dy, o); });
    gn_store(dx, lk::offset(dxv, at), v);
  }
}

template <class T, class A>
__global__ void lk_binary_kernel(int op, bool grad, bool of_b, lk::view5 av, lk::view5 bv, lk::view5 dyv,
                                 lk::view5 outv, const T* a, const T* b, const T* dy, T* out) {
  const std::int64_t total = lk::numel(outv);
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t at[5];
    lk::unravel(outv, i, at);
    const A x = gn_load<A>(a, lk::expand_source_offset(av, outv, i));
    const A y = gn_load<A>(b, lk::expand_source_offset(bv, outv, i));
    const A v =
        grad ? lk::binary_grad_at<A>(op, of_b, gn_load<A>(dy, lk::offset(dyv, at)), x, y) : lk::binary_at<A>(op, x, y);
    gn_store(out, lk::offset(outv, at), v);
  }
}

inline unsigned lk_grid(std::int64_t total) { return static_cast<unsigned>(gn::elementwise_blocks(total)); }

inline void lk_check_launch(const char* what) { check_kernel_launch("cudnn::cuda_layer_kernels", what); }

}  // namespace detail

inline layer_kernel_set cuda_layer_kernels() {
  layer_kernel_set k;
  k.reduce_sum = [](const reduce_args& a) {
    memfmt::detail::dispatch_float_dtype(a.type, "cudnn::cuda_layer_kernels reduce_sum", [&](auto t) {
      using T = decltype(t);
      using A = param_t<T>;
      detail::lk_reduce_sum_kernel<T, A><<<detail::lk_grid(lk::numel(a.dst)), gn::block_threads, 0, a.stream>>>(
          a.src, a.dst, static_cast<const T*>(a.src_data), static_cast<T*>(a.dst_data), static_cast<A>(a.scale));
      detail::lk_check_launch("reduce_sum");
    });
  };
  k.expand = [](const reduce_args& a) {
    memfmt::detail::dispatch_float_dtype(a.type, "cudnn::cuda_layer_kernels expand", [&](auto t) {
      using T = decltype(t);
      using A = param_t<T>;
      detail::lk_expand_kernel<T, A><<<detail::lk_grid(lk::numel(a.dst)), gn::block_threads, 0, a.stream>>>(
          a.src, a.dst, static_cast<const T*>(a.src_data), static_cast<T*>(a.dst_data), static_cast<A>(a.scale));
      detail::lk_check_launch("expand");
    });
  };
  k.pool_backward = [](const pool_backward_args& a) {
    memfmt::detail::dispatch_float_dtype(a.type, "cudnn::cuda_layer_kernels pool_backward", [&](auto t) {
      using T = decltype(t);
      using A = param_t<T>;
      detail::lk_pool_backward_kernel<T, A><<<detail::lk_grid(lk::numel(a.dx)), gn::block_threads, 0, a.stream>>>(
          a.geometry, a.x, a.dy, a.dx, static_cast<const T*>(a.x_data), static_cast<const T*>(a.dy_data),
          static_cast<T*>(a.dx_data));
      detail::lk_check_launch("pool_backward");
    });
  };
  k.binary = [](const binary_args& a) {
    memfmt::detail::dispatch_float_dtype(a.type, "cudnn::cuda_layer_kernels binary", [&](auto t) {
      using T = decltype(t);
      using A = param_t<T>;
      detail::lk_binary_kernel<T, A><<<detail::lk_grid(lk::numel(a.out)), gn::block_threads, 0, a.stream>>>(
          static_cast<int>(a.op), a.grad, a.of_b, a.a, a.b, a.dy, a.out, static_cast<const T*>(a.a_data),
          static_cast<const T*>(a.b_data), static_cast<const T*>(a.dy_data), static_cast<T*>(a.out_data));
      detail::lk_check_launch("binary");
    });
  };
  return k;
}

}  // namespace memfmt::cudnn
