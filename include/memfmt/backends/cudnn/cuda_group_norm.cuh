// memfmt/backends/cudnn/cuda_group_norm.cuh - the cuDNN backend's group norm (and instance norm)
// as memfmt's own CUDA kernels. Needs nvcc: include it in one .cu file.
//
//   memfmt::cudnn::backend_options o;
//   o.group_norm = memfmt::cudnn::cuda_group_norm();
//   memfmt::cudnn::backend be(o);   // group_norm_forward / backward now run, in both formats
//
// Forward: per (sample, channel tile, position chunk) Welford moments (the partition and all the
// arithmetic are group_norm_index.hpp's), a merge per (n, group) into saved mean and invstd, then
// one elementwise pass writing y. Backward: per (sample, channel tile, chunk) sums of dy and
// dy * xhat, merges per (n, group) (sum(g), sum(g xhat)) and per channel (dgamma, dbeta), then an
// elementwise pass writing dx. float, float16 and bfloat16 accumulate in float, double in double.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>

#include "../../dtype.hpp"
#include "../../dtype_dispatch.hpp"
#include "../../error.hpp"
#include "backend.hpp"
#include "group_norm_hook.hpp"
#include "group_norm_index.hpp"

namespace memfmt::cudnn {
namespace detail {

// Element loads and stores in the accumulation type A (float16 / bfloat16 round to nearest even).
template <class A>
__device__ __forceinline__ A gn_load(const float* p, std::int64_t i) {
  return static_cast<A>(p[i]);
}
template <class A>
__device__ __forceinline__ A gn_load(const double* p, std::int64_t i) {
  return static_cast<A>(p[i]);
}
template <class A>
__device__ __forceinline__ A gn_load(const memfmt::half* p, std::int64_t i) {
  return __half2float(reinterpret_cast<const __half*>(p)[i]);
}
template <class A>
__device__ __forceinline__ A gn_load(const memfmt::bfloat16* p, std::int64_t i) {
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
}
__device__ __forceinline__ void gn_store(float* p, std::int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void gn_store(double* p, std::int64_t i, double v) { p[i] = v; }
__device__ __forceinline__ void gn_store(memfmt::half* p, std::int64_t i, float v) {
  reinterpret_cast<__half*>(p)[i] = __float2half_rn(v);
}
__device__ __forceinline__ void gn_store(memfmt::bfloat16* p, std::int64_t i, float v) {
  reinterpret_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}

// The tree reduction of a block's slots over the lanes of each channel (gn::tree_step); the
// caller has stored its slot. Afterwards row 0 of each channel holds the block's result.
template <class V, class Combine>
__device__ __forceinline__ void gn_block_reduce(V* slots, bool channels_last, Combine combine) {
  __syncthreads();
  for (int stride = gn::tiling_for(channels_last).lanes / 2; stride > 0; stride /= 2) {
    gn::tree_step(slots, channels_last, static_cast<int>(threadIdx.x), stride, combine);
    __syncthreads();
  }
}

template <class T, class A>
__global__ void __launch_bounds__(gn::block_threads)
    gn_moments_kernel(gn::reduce_plan p, const T* x, gn::moments<A>* part) {
  __shared__ alignas(16) unsigned char raw[gn::block_threads * sizeof(gn::moments<A>)];
  auto* slots = reinterpret_cast<gn::moments<A>*>(raw);
  const gn::block_origin o = gn::block_at(p, blockIdx.x);
  const gn::lane l = gn::lane_of(p.channels_last, static_cast<int>(threadIdx.x));
  const std::int64_t c = gn::channel_of(p, o, l);
  gn::moments<A> m;
  if (c < p.sh.c)
    gn::for_each_position(
        p, o, l, [&](std::int64_t s) { gn::push(m, gn_load<A>(x, gn::offset(p.channels_last, p.sh, o.n, c, s))); });
  slots[gn::slot(p.channels_last, l)] = m;
  gn_block_reduce(slots, p.channels_last, gn::merge_moments{});
  if (l.row == 0 && c < p.sh.c) part[gn::partial_index(p, o.n, o.chunk, c)] = slots[gn::slot(p.channels_last, l)];
}

template <class A>
__global__ void gn_stats_kernel(gn::reduce_plan p, const gn::moments<A>* part, double epsilon, A* mean, A* invstd) {
  const std::int64_t i = gn::item_of(blockIdx.x, static_cast<int>(threadIdx.x));
  if (i >= p.sh.n * p.sh.groups) return;
  const gn::group_stats<A> st = gn::merge_group(p, part, i, epsilon);
  mean[i] = st.mean;
  invstd[i] = st.invstd;
}

template <class T, class A>
__global__ void __launch_bounds__(gn::block_threads)
    gn_normalize_kernel(gn::shape sh, bool x_cl, bool y_cl, const T* x, T* y, const A* gamma, const A* beta,
                        const A* mean, const A* invstd) {
  gn::for_each_element(gn::numel(sh), gridDim.x, blockIdx.x, static_cast<int>(threadIdx.x), [&](std::int64_t j) {
    const gn::position q = gn::position_at(y_cl, sh, j);
    const std::int64_t i = gn::stat_index(sh, q.n, q.c);
    gn_store(y, j,
             gn::normalize(gn_load<A>(x, gn::offset(x_cl, sh, q.n, q.c, q.s)), gn::group_stats<A>{mean[i], invstd[i]},
                           gamma, beta, q.c));
  });
}

template <class T, class A>
__global__ void __launch_bounds__(gn::block_threads)
    gn_grad_sums_kernel(gn::reduce_plan p, bool dy_cl, const T* x, const T* dy, const A* mean, const A* invstd,
                        gn::grad_sums<A>* part) {
  __shared__ alignas(16) unsigned char raw[gn::block_threads * sizeof(gn::grad_sums<A>)];
  auto* slots = reinterpret_cast<gn::grad_sums<A>*>(raw);
  const gn::block_origin o = gn::block_at(p, blockIdx.x);
  const gn::lane l = gn::lane_of(p.channels_last, static_cast<int>(threadIdx.x));
  const std::int64_t c = gn::channel_of(p, o, l);
  gn::grad_sums<A> r;
  if (c < p.sh.c) {
    const std::int64_t i = gn::stat_index(p.sh, o.n, c);
    const A mu = mean[i], is = invstd[i];
    gn::for_each_position(p, o, l, [&](std::int64_t s) {
      const A g = gn_load<A>(dy, gn::offset(dy_cl, p.sh, o.n, c, s));
      const A xhat = (gn_load<A>(x, gn::offset(p.channels_last, p.sh, o.n, c, s)) - mu) * is;
      r.dy += g;
      r.dy_xhat += g * xhat;
    });
  }
  slots[gn::slot(p.channels_last, l)] = r;
  gn_block_reduce(slots, p.channels_last, gn::add_sums{});
  if (l.row == 0 && c < p.sh.c) part[gn::partial_index(p, o.n, o.chunk, c)] = slots[gn::slot(p.channels_last, l)];
}

template <class A>
__global__ void gn_group_grads_kernel(gn::reduce_plan p, const gn::grad_sums<A>* part, const A* gamma,
                                      gn::grad_sums<A>* group) {
  const std::int64_t i = gn::item_of(blockIdx.x, static_cast<int>(threadIdx.x));
  if (i < p.sh.n * p.sh.groups) group[i] = gn::merge_group_grads(p, part, gamma, i);
}

template <class A>
__global__ void gn_channel_grads_kernel(gn::reduce_plan p, const gn::grad_sums<A>* part, A* dgamma, A* dbeta) {
  const std::int64_t c = gn::item_of(blockIdx.x, static_cast<int>(threadIdx.x));
  if (c >= p.sh.c) return;
  const gn::grad_sums<A> r = gn::merge_channel_grads(p, part, c);
  if (dgamma) dgamma[c] = r.dy_xhat;
  if (dbeta) dbeta[c] = r.dy;
}

template <class T, class A>
__global__ void __launch_bounds__(gn::block_threads)
    gn_input_grad_kernel(gn::shape sh, bool x_cl, bool dy_cl, bool dx_cl, const T* x, const T* dy, T* dx,
                         const A* gamma, const A* mean, const A* invstd, const gn::grad_sums<A>* group) {
  const A m = static_cast<A>(gn::per_group(sh) * sh.s);
  gn::for_each_element(gn::numel(sh), gridDim.x, blockIdx.x, static_cast<int>(threadIdx.x), [&](std::int64_t j) {
    const gn::position q = gn::position_at(dx_cl, sh, j);
    const std::int64_t i = gn::stat_index(sh, q.n, q.c);
    gn_store(dx, j,
             gn::input_grad(gn_load<A>(x, gn::offset(x_cl, sh, q.n, q.c, q.s)),
                            gn_load<A>(dy, gn::offset(dy_cl, sh, q.n, q.c, q.s)),
                            gn::group_stats<A>{mean[i], invstd[i]}, group[i], gamma, q.c, m));
  });
}

// Grid sizes as CUDA takes them; a grid past its limit is an error, not a wrapped count.
inline unsigned gn_grid(std::int64_t blocks, const char* kernel) {
  if (blocks < 1 || blocks > std::numeric_limits<int>::max())
    memfmt::detail::fail(errc::unsupported, std::string("cudnn::cuda_group_norm: ") + kernel + " needs " +
                                                std::to_string(blocks) + " blocks (1 to 2^31 - 1)");
  return static_cast<unsigned>(blocks);
}

// A launch's error, named by who launched what (memfmt::error backend_failure).
inline void check_kernel_launch(const char* who, const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    memfmt::detail::fail(errc::backend_failure, std::string(who) + ": " + what + " launch failed: " +
                                                    cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}
inline void gn_check_launch(const char* what) { check_kernel_launch("cudnn::cuda_group_norm", what); }

template <class T>
void gn_forward(const group_norm_forward_args& a) {
  using A = param_t<T>;
  const gn::reduce_plan p = gn::make_reduce_plan(a.shape, a.x_channels_last);
  auto* part = static_cast<gn::moments<A>*>(a.workspace);
  auto* mean = static_cast<A*>(a.saved_mean);
  auto* invstd = static_cast<A*>(a.saved_invstd);
  const auto* x = static_cast<const T*>(a.x);
  gn_moments_kernel<T, A><<<gn_grid(gn::blocks(p), "moments"), gn::block_threads, 0, a.stream>>>(p, x, part);
  gn_check_launch("moments kernel");
  gn_stats_kernel<A><<<gn_grid(gn::item_blocks(p.sh.n * p.sh.groups), "stats"), gn::block_threads, 0, a.stream>>>(
      p, part, a.epsilon, mean, invstd);
  gn_check_launch("statistics kernel");
  gn_normalize_kernel<T, A>
      <<<gn_grid(gn::elementwise_blocks(gn::numel(a.shape)), "normalize"), gn::block_threads, 0, a.stream>>>(
          a.shape, a.x_channels_last, a.y_channels_last, x, static_cast<T*>(a.y), static_cast<const A*>(a.gamma),
          static_cast<const A*>(a.beta), mean, invstd);
  gn_check_launch("normalize kernel");
}

template <class T>
void gn_backward(const group_norm_backward_args& a) {
  using A = param_t<T>;
  const gn::reduce_plan p = gn::make_reduce_plan(a.shape, a.x_channels_last);
  auto* part = static_cast<gn::grad_sums<A>*>(a.workspace);
  gn::grad_sums<A>* group = part + gn::partials(p);
  const auto* x = static_cast<const T*>(a.x);
  const auto* dy = static_cast<const T*>(a.dy);
  const auto* gamma = static_cast<const A*>(a.gamma);
  const auto* mean = static_cast<const A*>(a.saved_mean);
  const auto* invstd = static_cast<const A*>(a.saved_invstd);
  gn_grad_sums_kernel<T, A><<<gn_grid(gn::blocks(p), "gradient sums"), gn::block_threads, 0, a.stream>>>(
      p, a.dy_channels_last, x, dy, mean, invstd, part);
  gn_check_launch("gradient sums kernel");
  gn_group_grads_kernel<A>
      <<<gn_grid(gn::item_blocks(p.sh.n * p.sh.groups), "group sums"), gn::block_threads, 0, a.stream>>>(p, part, gamma,
                                                                                                         group);
  gn_check_launch("group sums kernel");
  if (a.dgamma || a.dbeta) {
    gn_channel_grads_kernel<A>
        <<<gn_grid(gn::item_blocks(p.sh.c), "parameter gradients"), gn::block_threads, 0, a.stream>>>(
            p, part, static_cast<A*>(a.dgamma), static_cast<A*>(a.dbeta));
    gn_check_launch("parameter gradients kernel");
  }
  gn_input_grad_kernel<T, A>
      <<<gn_grid(gn::elementwise_blocks(gn::numel(a.shape)), "input gradient"), gn::block_threads, 0, a.stream>>>(
          a.shape, a.x_channels_last, a.dy_channels_last, a.dx_channels_last, x, dy, static_cast<T*>(a.dx), gamma, mean,
          invstd, group);
  gn_check_launch("input gradient kernel");
}

// Runs a pass's launcher for the arguments' element type: launch(T{}), T the element type.
template <class Launch>
void gn_run(const group_norm_common_args& a, const char* pass, Launch launch) {
  const std::string who = std::string("cudnn::cuda_group_norm ") + pass;
  if (!gn::launches(a.shape))  // a reduce plan divides by S; the backend finishes an empty x itself
    memfmt::detail::fail(errc::invalid_argument, who + ": an empty x (N " + std::to_string(a.shape.n) + ", C " +
                                                     std::to_string(a.shape.c) + ", positions " +
                                                     std::to_string(a.shape.s) + ") launches no kernel");
  memfmt::detail::dispatch_float_dtype(a.type, who, launch);
}

}  // namespace detail

inline group_norm_kernels cuda_group_norm() {
  group_norm_kernels k;
  k.forward = [](const group_norm_forward_args& a) {
    detail::gn_run(a, "forward", [&](auto t) { detail::gn_forward<decltype(t)>(a); });
  };
  k.backward = [](const group_norm_backward_args& a) {
    detail::gn_run(a, "backward", [&](auto t) { detail::gn_backward<decltype(t)>(a); });
  };
  return k;
}

}  // namespace memfmt::cudnn
