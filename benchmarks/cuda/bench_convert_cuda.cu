// bench_convert_cuda - memfmt::cuda::convert against the same run's device-to-device copy of the
// same bytes (cudaMemcpyAsync), the GPU's copy-bandwidth limit. Shapes: the ResNet-50 activations
// of the CPU conversion benchmark plus one 3-D activation; element sizes 1, 2, 4 and 8 bytes; both
// directions. Counters, as in bench_convert: GB/s and memcpy_GB/s (bytes read + written, from the
// fastest of the timed launches) and ratio_to_memcpy. Without a GPU it says so and exits 0.
#include <benchmark/benchmark.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include <memfmt/convert/cuda/convert.cuh>
#include <memfmt/format/layout.hpp>
#include <memfmt/tensor/tensor_view.hpp>

namespace {

using namespace memfmt;

void check(cudaError_t st, const char* what) {
  if (st != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(st));
}

struct device_buffer {
  explicit device_buffer(std::size_t bytes) { check(cudaMalloc(&ptr, bytes), "cudaMalloc"); }
  ~device_buffer() { cudaFree(ptr); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  void* ptr = nullptr;
};

// Times calls with a pair of events on the default stream.
struct event_timer {
  event_timer() {
    check(cudaEventCreate(&start), "cudaEventCreate");
    const cudaError_t st = cudaEventCreate(&stop);
    if (st != cudaSuccess) cudaEventDestroy(start);  // the destructor will not run
    check(st, "cudaEventCreate");
  }
  ~event_timer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  event_timer(const event_timer&) = delete;
  event_timer& operator=(const event_timer&) = delete;
  // Milliseconds of one call of `f`.
  template <class F>
  float ms(F&& f) {
    check(cudaEventRecord(start), "cudaEventRecord");
    f();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    return t;
  }
  cudaEvent_t start{}, stop{};
};

template <class Word, class From, class To>
void measure(benchmark::State& state, const typename layout<From>::extents_type& e) {
  const layout<From> ls = layout<From>::packed(e);
  const layout<To> ld = layout<To>::packed(e);
  const std::size_t bytes = static_cast<std::size_t>(ls.required_span_size()) * sizeof(Word);
  device_buffer a(bytes), b(bytes);
  // Any bytes will do (the kernel moves words without reading them as numbers); fill once so
  // that the first timed pass does not touch fresh pages.
  check(cudaMemset(a.ptr, 0x5a, bytes), "cudaMemset");
  check(cudaMemset(b.ptr, 0, bytes), "cudaMemset");
  const tensor_view<const Word, From> src(static_cast<const Word*>(a.ptr), ls);
  const tensor_view<Word, To> dst(static_cast<Word*>(b.ptr), ld);
  event_timer timer;
  cuda::convert(src, dst);  // warm-up (module load, clocks)
  check(cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
  check(cudaDeviceSynchronize(), "warm-up");
  float best_convert = 1e30f, best_copy = 1e30f;
  for (auto _ : state) {
    const float tc = timer.ms([&] { cuda::convert(src, dst); });
    const float tm =
        timer.ms([&] { check(cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync"); });
    best_convert = std::min(best_convert, tc);
    best_copy = std::min(best_copy, tm);
    state.SetIterationTime(tc * 1e-3);
  }
  const double moved = 2.0 * static_cast<double>(bytes);
  state.counters["GB/s"] = moved / (best_convert * 1e-3) * 1e-9;
  state.counters["memcpy_GB/s"] = moved / (best_copy * 1e-3) * 1e-9;
  state.counters["ratio_to_memcpy"] = static_cast<double>(best_copy) / static_cast<double>(best_convert);
  state.SetBytesProcessed(static_cast<std::int64_t>(moved) * state.iterations());
}

// A CUDA or memfmt error (out of memory, say) marks this case as failed; the others still run.
template <class Word, class From, class To>
void bm_convert(benchmark::State& state, typename layout<From>::extents_type e) {
  try {
    measure<Word, From, To>(state, e);
  } catch (const std::exception& ex) {
    state.SkipWithError(ex.what());
  }
}

template <std::size_t R>
std::string shape_name(const std::array<std::int64_t, R>& e) {
  std::string s;
  for (std::size_t i = 0; i < R; ++i) s += (i ? "x" : "") + std::to_string(e[i]);
  return s;
}

template <class Word, class First, class Last>
void register_pair(const char* type, const typename layout<First>::extents_type& e, const char* first, const char* last,
                   int reps) {
  const std::string tail = std::string("/") + type + "/" + shape_name(e);
  benchmark::RegisterBenchmark(("BM_convert_cuda/" + std::string(first) + "_to_" + last + tail).c_str(),
                               [=](benchmark::State& s) { bm_convert<Word, First, Last>(s, e); })
      ->UseManualTime()
      ->Iterations(reps)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(("BM_convert_cuda/" + std::string(last) + "_to_" + first + tail).c_str(),
                               [=](benchmark::State& s) { bm_convert<Word, Last, First>(s, e); })
      ->UseManualTime()
      ->Iterations(reps)
      ->Unit(benchmark::kMicrosecond);
}

// Element size by the name a user knows it under (the kernel only sees the size).
template <class Word>
void register_type(const char* type, int reps) {
  const std::array<std::int64_t, 4> shapes[] = {
      {64, 3, 224, 224}, {32, 64, 112, 112}, {32, 256, 56, 56}, {32, 2048, 7, 7}, {256, 64, 56, 56}};
  for (const auto& e : shapes) register_pair<Word, nchw, nhwc>(type, e, "nchw", "nhwc", reps);
  register_pair<Word, ncdhw, ndhwc>(type, {8, 64, 16, 56, 56}, "ncdhw", "ndhwc", reps);
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf(
        "bench_convert_cuda: no CUDA device found (cudaGetDeviceCount reports none or fails); nothing to measure.\n");
    return 0;
  }
  const int reps = 50;  // a few seconds in all: each launch takes well under a millisecond on a current GPU
  register_type<std::uint8_t>("i8", reps);
  register_type<std::uint16_t>("bf16", reps);
  register_type<std::uint32_t>("f32", reps);
  register_type<std::uint64_t>("f64", reps);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
