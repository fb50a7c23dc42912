// bench_conv_cudnn - cuDNN convolutions through memfmt::cudnn, NCHW vs NHWC, fp32 / fp16 / bf16,
// forward and forward + backward (data and weights), on the same layer set as the CPU benchmark:
// ResNet-50 stem, 1x1 / 3x3 at 56, 28, 14, 7, MobileNetV2 depthwise + pointwise, ResNeXt grouped 3x3
// and a 3-D convolution. Counters: GFLOP/s (2 * MACs per pass); the label names the engine.
// Without a GPU it says so and exits 0.
// Environment: MEMFMT_BENCH_MIN_TIME (seconds per benchmark, default 0.05: the 156 cases take about
// half a minute on an H100; Google Benchmark's own default of 0.5 s made it several minutes).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include <memfmt/backends/cudnn/backend.hpp>

#include "../common/bench_util.hpp"

using namespace memfmt;

namespace {

struct layer {
  const char* name;
  std::int64_t n, c, k, h, w, r, stride, pad, groups, d;  // d > 0: 3-D with depth d (and kernel r^3)
};

const layer layers[] = {
    {"resnet50_stem_7x7s2", 32, 3, 64, 224, 224, 7, 2, 3, 1, 0},
    {"1x1_56", 32, 256, 64, 56, 56, 1, 1, 0, 1, 0},
    {"3x3_56", 32, 64, 64, 56, 56, 3, 1, 1, 1, 0},
    {"1x1_28", 32, 512, 128, 28, 28, 1, 1, 0, 1, 0},
    {"3x3_28", 32, 128, 128, 28, 28, 3, 1, 1, 1, 0},
    {"1x1_14", 32, 1024, 256, 14, 14, 1, 1, 0, 1, 0},
    {"3x3_14", 32, 256, 256, 14, 14, 3, 1, 1, 1, 0},
    {"1x1_7", 32, 2048, 512, 7, 7, 1, 1, 0, 1, 0},
    {"3x3_7", 32, 512, 512, 7, 7, 3, 1, 1, 1, 0},
    {"mbv2_dw3x3_56", 32, 144, 144, 56, 56, 3, 1, 1, 144, 0},
    {"mbv2_pw1x1_56", 32, 144, 24, 56, 56, 1, 1, 0, 1, 0},
    {"resnext_g32_3x3_28", 32, 256, 256, 28, 28, 3, 1, 1, 32, 0},
    {"conv3d_3x3x3_16", 4, 64, 64, 56, 56, 3, 1, 1, 1, 16},
};

template <class T>
struct dev_buf {
  T* p = nullptr;
  explicit dev_buf(std::int64_t n) {
    cudnn::check_cuda(cudaMalloc(reinterpret_cast<void**>(&p), static_cast<std::size_t>(n > 0 ? n : 1) * sizeof(T)),
                      "cudaMalloc");
  }
  ~dev_buf() { cudaFree(p); }
};

cudnn::backend& shared_backend() {
  static cudnn::backend be;
  return be;
}

template <class T, class F>
void run(benchmark::State& state, const layer& L, bool backward) {
  using E = std::array<std::int64_t, F::rank>;
  E xe{}, we{};
  conv_params p;
  p.groups = L.groups;
  if constexpr (F::rank == 4) {
    xe = {L.n, L.c, L.h, L.w};
    we = {L.k, L.c / L.groups, L.r, L.r};
  } else {
    xe = {L.n, L.c, L.d, L.h, L.w};
    we = {L.k, L.c / L.groups, L.r, L.r, L.r};
  }
  p.stride = {L.stride, L.stride, L.stride};
  p.padding = {L.pad, L.pad, L.pad};
  const E ye = conv_output_extents(xe, we, p);
  const layout<F> xl = layout<F>::packed(xe), wl = layout<F>::packed(we), yl = layout<F>::packed(ye);
  dev_buf<T> x(xl.numel()), w(wl.numel()), y(yl.numel()), dx(xl.numel()), dw(wl.numel());
  cudnn::check_cuda(cudaMemset(x.p, 0, static_cast<std::size_t>(xl.numel()) * sizeof(T)), "cudaMemset");
  cudnn::check_cuda(cudaMemset(w.p, 0, static_cast<std::size_t>(wl.numel()) * sizeof(T)), "cudaMemset");
  auto& be = shared_backend();
  std::string engine;
  auto once = [&] {
    be.conv_forward<T, F, F, F>(tensor_view<const T, F>(x.p, xl), tensor_view<const T, F>(w.p, wl), nullptr,
                                tensor_view<T, F>(y.p, yl), p);
    engine = be.last_engine();
    if (backward) {
      be.conv_backward_data<T, F, F, F>(tensor_view<const T, F>(y.p, yl), tensor_view<const T, F>(w.p, wl),
                                        tensor_view<T, F>(dx.p, xl), p);
      engine += "/" + be.last_engine();
      be.conv_backward_weights<T, F, F, F>(tensor_view<const T, F>(x.p, xl), tensor_view<const T, F>(y.p, yl),
                                           tensor_view<T, F>(dw.p, wl), nullptr, p);
      engine += "/" + be.last_engine();
    }
  };
  try {
    once();  // plans are built (and cached) outside the timed loop
    be.synchronize();
  } catch (const memfmt::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (auto _ : state) {
    cudaEventRecord(start, be.stream());
    once();
    cudaEventRecord(stop, be.stream());
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  double macs = static_cast<double>(layout<F>::packed(ye).numel()) * static_cast<double>(we[1]);
  for (int d = 2; d < F::rank; ++d) macs *= static_cast<double>(we[static_cast<std::size_t>(d)]);
  const double flops = 2.0 * macs * (backward ? 3.0 : 1.0);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(engine);
}

template <class T>
const char* type_name() {
  return std::is_same_v<T, float> ? "fp32" : (std::is_same_v<T, half> ? "fp16" : "bf16");
}

template <class T>
void register_type() {
  const double min_time = memfmt_bench::env_double("MEMFMT_BENCH_MIN_TIME", 0.05);
  for (const layer& L : layers)
    for (bool bwd : {false, true}) {
      const std::string base = std::string(L.name) + "/" + type_name<T>() + "/" + (bwd ? "fwd+bwd" : "fwd") + "/";
      const auto add = [&](const char* format, auto run_format) {
        benchmark::RegisterBenchmark((base + format).c_str(),
                                     [&L, bwd, run_format](benchmark::State& s) { run_format(s, L, bwd); })
            ->UseManualTime()
            ->MinTime(min_time);
      };
      if (L.d > 0) {
        add("ncdhw", run<T, ncdhw>);
        add("ndhwc", run<T, ndhwc>);
      } else {
        add("nchw", run<T, nchw>);
        add("nhwc", run<T, nhwc>);
      }
    }
}

}  // namespace

int main(int argc, char** argv) {
  if (cudnn::device_count() == 0) {
    std::printf(
        "bench_conv_cudnn: no CUDA device found (cudaGetDeviceCount reports none or fails); nothing to measure.\n");
    return 0;
  }
  register_type<float>();
  register_type<half>();
  register_type<bfloat16>();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
