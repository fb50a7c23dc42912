// memfmt/convert/cuda/convert.cuh - NCHW <-> NHWC (and NCDHW <-> NDHWC) conversion on the GPU.
//
//   memfmt::cuda::convert(src_view, dst_view, stream);
//
// Converts between the channels-first and channels-last format of the same rank, or copies
// between two strided views of one format; views may be padded slices of larger buffers. The
// pointers are device memory (or memory the device can access). Arguments are validated on the
// host before anything is launched; the launch is asynchronous on `stream`, and launch errors
// are reported as memfmt::error(backend_failure). Errors during execution surface, as usual in
// CUDA, at the next synchronising call.
//
// Each block transposes tiles of an image's (C) x (spatial) plane through shared memory. Dense
// tensors of opposite formats take a lean kernel with compile-time tiles, or, with fewer than 16
// channels or positions, one without tiles (dense_transpose.hpp); everything else (padded views,
// copies) the general one (tile_plan.hpp). The CPU tests replay all three launch by launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "dense_transpose.hpp"
#include "tile_plan.hpp"
#include "validate.hpp"

namespace memfmt::cuda {
namespace detail {

template <std::size_t Bytes>
struct word_of;
template <>
struct word_of<1> {
  using type = std::uint8_t;
};
template <>
struct word_of<2> {
  using type = std::uint16_t;
};
template <>
struct word_of<4> {
  using type = std::uint32_t;
};
template <>
struct word_of<8> {
  using type = std::uint64_t;
};

// One instantiation per element size: the kernel moves bytes, never interprets them.
template <class Word>
__global__ void __launch_bounds__(block_threads)
    convert_tiles(const convert_plan p, const Word* __restrict__ src, Word* __restrict__ dst) {
  __shared__ Word tile[tile_slots(sizeof(Word))];
  const int thread = static_cast<int>(threadIdx.x);
  // Grid-stride over tiles (64-bit): covers any tile count with a grid within CUDA's limits.
  for (std::int64_t i = blockIdx.x; i < p.total_tiles; i += gridDim.x) {
    const tile_origin t = tile_at(p, i);
    read_tile_part(p, t, thread, src, tile);
    __syncthreads();
    write_tile_part(p, t, thread, tile, dst);
    __syncthreads();  // the next tile overwrites the shared tile
  }
}

// The dense fast path (dense_transpose.hpp): Elem-byte words, VK-element loads, VR-element
// stores, tiles of dense_mode Mode.
template <class Word, int VK, int VR, int Mode>
__global__ void __launch_bounds__(dense_threads)
    dense_convert(const dense_plan p, const Word* __restrict__ src, Word* __restrict__ dst) {
  constexpr int e = static_cast<int>(sizeof(Word));
  using T = dense_tile<e, VK, VR, Mode>;
  __shared__ alignas(16) Word tile[T::slots];
  const int thread = static_cast<int>(threadIdx.x);
  for (std::int64_t i = blockIdx.x; i < p.total_tiles; i += gridDim.x) {
    const dense_origin o = dense_tile_at(p, i, T::rows, T::cols);
    dense_read<e, VK, VR, Mode>(p, o, thread, src, tile);
    __syncthreads();
    dense_write<e, VK, VR, Mode>(p, o, thread, tile, dst);
    __syncthreads();  // the next tile overwrites the shared tile
  }
}

template <class Word, int VK, int VR, int Mode = dense_square>
cudaError_t launch_dense(const dense_plan& p, const Word* src, Word* dst, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(grid_blocks(p.total_tiles));
  dense_convert<Word, VK, VR, Mode><<<blocks, dense_threads, 0, stream>>>(p, src, dst);
  return cudaGetLastError();
}

// The plan's vector widths are the widest ones or 1 (make_dense_plan), so four instantiations of
// square tiles; runs of short rows take the widest vectors only.
template <class Word>
cudaError_t run_dense(const dense_plan& p, const Word* src, Word* dst, cudaStream_t stream) {
  constexpr int e = static_cast<int>(sizeof(Word));
  constexpr int vk = dense_max_load_vec(e), vr = dense_max_store_vec(e);
  if (p.mode == dense_run_r) return launch_dense<Word, vk, vr, dense_run_r>(p, src, dst, stream);
  if (p.mode == dense_run_k) return launch_dense<Word, vk, vr, dense_run_k>(p, src, dst, stream);
  if (p.load_vec == vk)
    return p.store_vec == vr ? launch_dense<Word, vk, vr>(p, src, dst, stream)
                             : launch_dense<Word, vk, 1>(p, src, dst, stream);
  return p.store_vec == vr ? launch_dense<Word, 1, vr>(p, src, dst, stream)
                           : launch_dense<Word, 1, 1>(p, src, dst, stream);
}

template <class Word, int V>
__global__ void __launch_bounds__(dense_threads)
    narrow_convert(const narrow_plan p, const Word* __restrict__ src, Word* __restrict__ dst) {
  __shared__ alignas(narrow_vector_bytes) Word tile[narrow_tile_bytes / sizeof(Word)];
  const int thread = static_cast<int>(threadIdx.x);
  for (std::int64_t i = blockIdx.x; i < p.total_blocks; i += gridDim.x) {
    const narrow_origin o = narrow_at(p, i);
    narrow_read<V>(p, o, thread, src, tile);
    __syncthreads();
    narrow_write<V>(p, o, thread, tile, dst);
    __syncthreads();  // the next block of the loop overwrites the tile
  }
}

// A warp takes 32 consecutive units at a time (see narrow_bytes_store_run).
template <int N>
__global__ void __launch_bounds__(narrow_byte_threads)
    narrow_bytes_convert(const narrow_plan p, const std::int64_t units, const std::uint8_t* __restrict__ src,
                         std::uint8_t* __restrict__ dst) {
  constexpr int warps = narrow_byte_threads / 32;
  extern __shared__ __align__(16) std::uint8_t stage[];  // 16 * N bytes a thread, for rows -> run only
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  std::uint8_t* const warp_stage = stage + warp * 32 * 16 * N;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * warps;
  for (std::int64_t w = static_cast<std::int64_t>(blockIdx.x) * warps + warp; w * 32 < units; w += step) {
    const std::int64_t first = w * 32, u = first + lane;
    if (p.narrow_rows) {
      if (u < units) narrow_bytes_stage_run<N>(p, u, src, warp_stage + 16 * N * lane);
      __syncwarp();
      narrow_bytes_store_run<N>(first, units, lane, warp_stage, dst);
      __syncwarp();  // the warp's next units overwrite the staging area
    } else if (u < units) {
      narrow_bytes_unit_to_rows<N>(p, u, src, dst);
    }
  }
}

template <int N>
void launch_narrow_bytes_n(const narrow_plan& p, std::int64_t units, const std::uint8_t* src, std::uint8_t* dst,
                           unsigned blocks, cudaStream_t stream) {
  const std::size_t staging = p.narrow_rows ? std::size_t{narrow_byte_threads} * 16 * N : 0;
  narrow_bytes_convert<N><<<blocks, narrow_byte_threads, staging, stream>>>(p, units, src, dst);
}

// The kernel for the plan's narrow side, 1 .. dense_min_side - 1.
template <int... N>
cudaError_t launch_narrow_bytes(const narrow_plan& p, const std::uint8_t* src, std::uint8_t* dst, cudaStream_t stream,
                                std::integer_sequence<int, N...>) {
  using launcher =
      void (*)(const narrow_plan&, std::int64_t, const std::uint8_t*, std::uint8_t*, unsigned, cudaStream_t);
  constexpr launcher by_narrow[] = {&launch_narrow_bytes_n<N + 1>...};
  const std::int64_t units = narrow_byte_units(p);
  const auto blocks = static_cast<unsigned>(grid_blocks((units + narrow_byte_threads - 1) / narrow_byte_threads));
  by_narrow[p.narrow - 1](p, units, src, dst, blocks, stream);
  return cudaGetLastError();
}

// The plan's vector is 16 bytes' worth (1- and 2-byte elements only) or one element
// (make_narrow_plan). 1-byte elements in vectors take the register path.
template <class Word>
cudaError_t run_narrow(const narrow_plan& p, const Word* src, Word* dst, cudaStream_t stream) {
  constexpr int v = narrow_vector_bytes / static_cast<int>(sizeof(Word));
  const auto blocks = static_cast<unsigned>(grid_blocks(p.total_blocks));
  if constexpr (sizeof(Word) == 1) {
    if (p.vec == v)
      return launch_narrow_bytes(p, src, dst, stream,
                                 std::make_integer_sequence<int, static_cast<int>(dense_min_side) - 1>{});
  } else if constexpr (sizeof(Word) == 2) {
    if (p.vec == v) {
      narrow_convert<Word, v><<<blocks, dense_threads, 0, stream>>>(p, src, dst);
      return cudaGetLastError();
    }
  }
  narrow_convert<Word, 1><<<blocks, dense_threads, 0, stream>>>(p, src, dst);
  return cudaGetLastError();
}

}  // namespace detail

template <class T, class From, class To>
void convert(tensor_view<const T, From> src, tensor_view<T, To> dst, cudaStream_t stream = 0) {
  if (detail::validate_convert(src, dst) == 0) return;
  using word = typename detail::word_of<sizeof(T)>::type;
  const auto* from = reinterpret_cast<const word*>(src.data());
  auto* to = reinterpret_cast<word*>(dst.data());
  const auto src_addr = reinterpret_cast<std::uintptr_t>(src.data());
  const auto dst_addr = reinterpret_cast<std::uintptr_t>(dst.data());
  // Launch errors name the path, the sizes and CUDA's error.
  const auto check_launch = [&](cudaError_t status, const std::string& path) {
    if (status != cudaSuccess)
      memfmt::detail::fail(errc::backend_failure,
                           detail::convert_name<From, To>() + ": kernel launch failed for sizes " +
                               memfmt::detail::dims_to_string(src.extents()) + " (" + path +
                               "): " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
  };
  const detail::dense_plan dense =
      detail::make_dense_plan(src.mapping(), dst.mapping(), src_addr, dst_addr, static_cast<int>(sizeof(T)));
  if (dense.total_tiles > 0) {
    check_launch(detail::run_dense<word>(dense, from, to, stream),
                 "dense path, " + std::to_string(dense.total_tiles) + " tiles");
    return;
  }
  const detail::narrow_plan narrow =
      detail::make_narrow_plan(src.mapping(), dst.mapping(), src_addr, dst_addr, static_cast<int>(sizeof(T)));
  if (narrow.total_blocks > 0) {
    check_launch(detail::run_narrow<word>(narrow, from, to, stream),
                 "narrow path, " + std::to_string(narrow.total_blocks) + " blocks");
    return;
  }
  const detail::convert_plan plan =
      detail::make_plan(src.mapping(), dst.mapping(), src_addr, dst_addr, static_cast<int>(sizeof(T)));
  const std::int64_t blocks = detail::grid_blocks(plan);
  detail::convert_tiles<word><<<static_cast<unsigned>(blocks), detail::block_threads, 0, stream>>>(plan, from, to);
  check_launch(cudaGetLastError(),
               std::to_string(blocks) + " blocks of " + std::to_string(detail::block_threads) + " threads");
}

// A mutable source view converts to const here (deduction alone would not do it).
template <class T, class From, class To, class = std::enable_if_t<!std::is_const_v<T>>>
void convert(tensor_view<T, From> src, tensor_view<T, To> dst, cudaStream_t stream = 0) {
  cuda::convert(tensor_view<const T, From>(src), dst, stream);
}

}  // namespace memfmt::cuda
