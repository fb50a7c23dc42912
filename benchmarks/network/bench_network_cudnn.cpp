// bench_network_cudnn - bench_network's whole networks on the GPU: graph/models.hpp through the
// library's executor (and trainer) on memfmt::cudnn::backend, one plan per policy, with the
// activations, parameters and conversions in device memory (runtime/executor.hpp, "device memory");
// conversions run memfmt::cuda::convert's kernels (cuda_kernels.cu).
//
// Benchmark names: BM_network_cudnn/<model>/<f32|f16|bf16>/<fwd|train>/<policy>, policies and
//   counters as bench_network's (network_cases.hpp, shared with it), optimal_calibrated planned with
//   costs runtime::calibrate measured on cuDNN (runtime/cudnn/calibrate.hpp: the timing cache key
//   names the GPU and the cuDNN library) and then select_plan's fastest of three whole networks.
//   No overhead_pct: cuDNN calls return before their work is done, so timing them says nothing.
// Timing: every pass (forward, or training step) ends with the backend's stream synchronized
//   before the clock stops; a pass copies its input in from and its output out to host memory, as
//   a served network does (executor::forward takes host tensors).
// Correctness: as bench_network, every policy's output against all_channels_first's before the
//   first timing, within 2e-2 (float32: cuDNN may convolve in TF32, a 10-bit mantissa) and 5e-2
//   (float16, bfloat16) normalized max error.
// A row the device cannot run keeps its name and says why (Google Benchmark's error): no CUDA
//   device (then every row, and the binary exits 0), bfloat16 below compute capability 8.0, a
//   layer or dtype the backend's support() refuses (forward, or backward for train rows).
// float16 networks get their random parameters drawn in float32 and rounded, as model.half() does.
//
// Environment: bench_network's (MEMFMT_BENCH_BATCH, default 32 here; MEMFMT_BENCH_RESOLUTION;
// MEMFMT_BENCH_MIN_TIME; MEMFMT_BENCH_EXPLAIN; MEMFMT_BENCH_CALIBRATED; MEMFMT_BENCH_TRAIN;
// MEMFMT_BENCH_TIMING_CACHE, a cache file of this GPU).
#include <cuda_runtime_api.h>

#include <string>

#include <memfmt/backends/cudnn/backend.hpp>
#include <memfmt/runtime/cudnn/calibrate.hpp>

#include "network_cases.hpp"

namespace memfmt_bench {
// The plans' conversions, group norms, global pooling, pool backward and broadcast sums through
// memfmt's kernels (cuda_kernels.cu).
memfmt::cudnn::backend_options kernel_options();
}  // namespace memfmt_bench

namespace {

using namespace memfmt;
using namespace memfmt_bench::networks;

// network_cases.hpp's binding to cuDNN.
struct cudnn_binding {
  using backend_type = cudnn::backend;
  static constexpr const char* prefix = "BM_network_cudnn";
  static backend_type& backend() {
    // A throw (no device, no cuDNN) leaves it to be tried again.
    static cudnn::backend b(memfmt_bench::kernel_options());
    return b;
  }
  static std::string refuses(dtype t) {
    try {
      cudnn::require_device("bench_network_cudnn");
      if (t == dtype::bfloat16) {
        cudaDeviceProp p{};
        cudnn::check_cuda(cudaGetDeviceProperties(&p, backend().device()), "cudaGetDeviceProperties");
        if (p.major < 8)
          return "unsupported: bfloat16 on cuDNN needs compute capability 8.0 or newer (" + std::string(p.name) +
                 " is " + std::to_string(p.major) + "." + std::to_string(p.minor) + ")";
      }
      op_query q;
      q.type = t;
      q.format = format_family::channels_last;
      const op_support s = backend().support(q);
      return s.supported ? std::string() : s.reason;
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  static void finish(backend_type& b) { b.synchronize(); }
  static check_tolerances tolerances() { return {2e-2, 5e-2, 2e-2, 1e-1, 1e-1}; }
  static void forward_extras(benchmark::State&, case_state<backend_type>&, const graph::plan&) {}
};

}  // namespace

int main(int argc, char** argv) {
  return run_main<cudnn_binding>(argc, argv, 32, {dtype::float32, dtype::float16, dtype::bfloat16});
}
