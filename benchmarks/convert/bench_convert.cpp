// bench_convert - CPU NCHW<->NHWC conversion against memcpy on the same buffers, in the same run.
//
// Every case times convert() and memcpy (split over the same number of threads) alternately on
// the same two buffers, and reports
//   GB/s             conversion bandwidth, (bytes read + bytes written) / best time
//   memcpy_GB/s      memcpy bandwidth over the same bytes and buffers, best time
//   ratio_to_memcpy  best memcpy time / best conversion time (1.0 = memcpy speed)
//   core_to_core_ns  (2+ threads) where threads 0 and 1 ran: the larger of two cache-line
//                    ping-pong latencies, before and after the case (see core_to_core_ns())
// Best-of times are used because shared machines are noisy.
//
// Cold caches: the conversion is measured as DRAM-bound work (bytes read + written to memory), but
// some cases fit in a last-level cache (32x2048x7x7 f32 is 2 x 12.8 MB), where a warm
// memcpy would run from cache while convert's non-temporal stores always go to memory. So before
// EVERY timed call, convert and memcpy alike, the threads of the call read a flush buffer of twice
// the L3 size between them (untimed): both start with source and destination out of every core's
// caches, dirty lines written back.
// MEMFMT_BENCH_WARM=1 skips the flush (cache-resident behaviour, for comparison).
//
// Environment: MEMFMT_BENCH_QUICK=1 -> 9 timed repetitions per case (the whole suite in about half
// a minute); otherwise 21. Tensors under 32 MB get proportionally more (up to 4x): a 6.4 MB case
// on 2 threads times 0.2 ms, where one disturbance of a shared machine decides a best-of-21.
// Convert and memcpy alternate and get the same count, so the ratio stays like for like.
// MEMFMT_BENCH_NO_STREAM=1 turns streaming stores off (for comparison). MEMFMT_BENCH_PREFETCH=l1|l2
// and MEMFMT_BENCH_STAGE=burst|slices force convert_options::prefetch and ::stage instead of the
// choices the CPU's caches imply. The JSON context records the choices that ran
// (memfmt_far_prefetch, memfmt_stage_stream), where each came from (memfmt_*_from: "caches" or the
// variable), the caches (memfmt_l1d_bytes, memfmt_l2_bytes, memfmt_cache_source) and the kernels
// the build has (memfmt_convert_kernels: avx512, which makes the two choices, avx2 or baseline).
// Case names: BM_convert/<from>_to_<to>/<dtype>/<NxCxHxW>/threads:<t>.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "memfmt/convert/convert.hpp"
#include "../common/bench_util.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

// Two buffers for the largest case, allocated and touched once, huge-page advised.
struct buffers {
  unsigned char* src = nullptr;
  unsigned char* dst = nullptr;
  std::size_t bytes = 0;
  static buffers& get(std::size_t need) {
    static buffers b;
    if (b.bytes < need) {
      std::free(b.src);
      std::free(b.dst);
      const std::size_t align = std::size_t{2} << 20;
      const std::size_t rounded = (need + align - 1) / align * align;
      b.src = static_cast<unsigned char*>(std::aligned_alloc(align, rounded));
      b.dst = static_cast<unsigned char*>(std::aligned_alloc(align, rounded));
      if (!b.src || !b.dst) std::abort();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
      madvise(b.src, rounded, MADV_HUGEPAGE);
      madvise(b.dst, rounded, MADV_HUGEPAGE);
#endif
      for (std::size_t i = 0; i < rounded; ++i) b.src[i] = static_cast<unsigned char>(i * 37 + 11);
      std::memset(b.dst, 0, rounded);
      b.bytes = rounded;
    }
    return b;
  }
};

// Evicts the benchmark buffers from every cache level by reading 2 x L3 of other memory.
struct cache_flusher {
  std::vector<std::uint64_t> data;
  cache_flusher() {
    std::int64_t l3 = memfmt::detail::detected_cache_geometry().l3_bytes;
    if (l3 <= 0) l3 = std::int64_t{32} << 20;
    data.assign(static_cast<std::size_t>(2 * l3) / sizeof(std::uint64_t), 1);
  }
  // Each of `threads` threads reads its share (one load per line), so every core that takes part
  // in the timed call loses its private L2 too, not only the shared L3 (a flush from one core left
  // the other core's L2 warm). Where the machine placed the two cores is what makes 2-thread
  // memcpy vary (core_to_core_ns()); a flush 4x as large changed nothing.
  void flush(int threads) {
    const std::size_t n = data.size();
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads)
    {
      const std::size_t k = static_cast<std::size_t>(omp_get_num_threads()),
                        t = static_cast<std::size_t>(omp_get_thread_num());
      std::uint64_t sum = 0;
      for (std::size_t i = n / k * t / 8 * 8; i < n / k * (t + 1); i += 8) sum += data[i];
      benchmark::DoNotOptimize(sum);
    }
#else
    (void)threads;
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < n; i += 8) sum += data[i];
    benchmark::DoNotOptimize(sum);
#endif
  }
  static void maybe_flush(int threads) {
    static const bool warm = std::getenv("MEMFMT_BENCH_WARM") != nullptr;
    static cache_flusher f;
    if (!warm) f.flush(threads);
  }
};

// One-way latency of a cache line passed between threads 0 and 1 of a team of `threads`, in ns
// (0 for one thread). It tells where the machine placed the two cores: a few tens of ns on one
// core complex (sharing its L3 and memory link), hundreds across dies (each with its own link, so
// 2-thread memcpy is faster); on a virtual machine the placement can change between and during
// runs, and without this the modes read as unexplained noise. Microseconds mean a thread lost its
// core (another job ran); 0 means the team had fewer than two threads.
double core_to_core_ns(int threads) {
#if defined(_OPENMP)
  if (threads < 2) return 0.0;
  alignas(64) static std::atomic<int> turn{0};
  constexpr int trips = 2000;
  double ns = 0.0;
  turn.store(0);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
#pragma omp barrier
    if (t < 2 && omp_get_num_threads() >= 2) {
      const auto t0 = clock_type::now();
      for (int i = 0; i < trips; ++i) {
        const int mine = 2 * i + t, next = mine + 1;
        while (turn.load(std::memory_order_acquire) != mine) {
        }
        turn.store(next, std::memory_order_release);
      }
      if (t == 0) ns = std::chrono::duration<double, std::nano>(clock_type::now() - t0).count() / (2.0 * trips);
    }
  }
  return ns;
#else
  (void)threads;
  return 0.0;
#endif
}

// The value of environment variable `name` among `values` (automatic when unset); anything else
// stops the run (a typo would silently measure the automatic choice).
template <class Enum>
Enum requested(const char* name, std::initializer_list<Enum> values) {
  const char* v = std::getenv(name);
  if (!v || !*v) return Enum::automatic;
  std::string allowed;
  for (const Enum e : values) {
    if (std::strcmp(v, memfmt::to_string(e)) == 0) return e;
    allowed += (allowed.empty() ? "" : " or ") + std::string(memfmt::to_string(e));
  }
  std::fprintf(stderr, "bench_convert: %s must be %s, got '%s'\n", name, allowed.c_str(), v);
  std::exit(2);
}
memfmt::far_prefetch requested_prefetch() {
  static const memfmt::far_prefetch p =
      requested("MEMFMT_BENCH_PREFETCH", {memfmt::far_prefetch::l1, memfmt::far_prefetch::l2});
  return p;
}
memfmt::stage_stream requested_stage() {
  static const memfmt::stage_stream s =
      requested("MEMFMT_BENCH_STAGE", {memfmt::stage_stream::burst, memfmt::stage_stream::slices});
  return s;
}

// The conversion kernels of this build (only the AVX-512 ones make the two tuning choices).
constexpr const char* convert_kernels() {
#if MEMFMT_CONVERT_HAVE_ZMM_TILES
  return "avx512";
#elif defined(__AVX2__)
  return "avx2";
#else
  return "baseline";
#endif
}

template <class T, class From, class To>
void bm_convert(benchmark::State& state, std::array<std::int64_t, 4> e, int threads) {
  const std::int64_t numel = e[0] * e[1] * e[2] * e[3];
  const std::size_t bytes = static_cast<std::size_t>(numel) * sizeof(T);
  buffers& b = buffers::get(bytes);
  const memfmt::tensor_view<const T, From> src(reinterpret_cast<const T*>(b.src), e);
  const memfmt::tensor_view<T, To> dst(reinterpret_cast<T*>(b.dst), e);
  memfmt::convert_options opt;
  opt.num_threads = threads;
  opt.allow_streaming_stores = std::getenv("MEMFMT_BENCH_NO_STREAM") == nullptr;
  opt.prefetch = requested_prefetch();
  opt.stage = requested_stage();
  double best_convert = 1e30, best_memcpy = 1e30;
  const double c2c_before = core_to_core_ns(threads);
  memfmt::convert(src, dst, opt);  // warm-up
  memfmt_bench::parallel_memcpy(b.dst, b.src, bytes, threads);
  for (auto _ : state) {
    cache_flusher::maybe_flush(threads);
    auto t0 = clock_type::now();
    memfmt::convert(src, dst, opt);
    auto t1 = clock_type::now();
    cache_flusher::maybe_flush(threads);
    auto t2 = clock_type::now();
    memfmt_bench::parallel_memcpy(b.dst, b.src, bytes, threads);
    auto t3 = clock_type::now();
    const double tc = std::chrono::duration<double>(t1 - t0).count();
    const double tm = std::chrono::duration<double>(t3 - t2).count();
    best_convert = std::min(best_convert, tc);
    best_memcpy = std::min(best_memcpy, tm);
    state.SetIterationTime(tc);
  }
  const double moved = 2.0 * static_cast<double>(bytes);
  state.counters["GB/s"] = moved / best_convert * 1e-9;
  state.counters["memcpy_GB/s"] = moved / best_memcpy * 1e-9;
  state.counters["ratio_to_memcpy"] = best_memcpy / best_convert;
  if (threads > 1) state.counters["core_to_core_ns"] = std::max(c2c_before, core_to_core_ns(threads));
  state.SetBytesProcessed(static_cast<std::int64_t>(moved) * state.iterations());
}

std::string shape_name(const std::array<std::int64_t, 4>& e) {
  return std::to_string(e[0]) + "x" + std::to_string(e[1]) + "x" + std::to_string(e[2]) + "x" + std::to_string(e[3]);
}

template <class T>
void register_dtype(const char* dtype_name, const std::array<std::int64_t, 4>& e, int threads, int base_reps) {
  const double bytes = static_cast<double>(e[0] * e[1] * e[2] * e[3]) * sizeof(T);
  const double scale = std::min(4.0, std::max(1.0, 32e6 / bytes));
  const int reps = static_cast<int>(base_reps * scale + 0.5);
  const std::string tail = std::string("/") + dtype_name + "/" + shape_name(e) + "/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(("BM_convert/nchw_to_nhwc" + tail).c_str(),
                               [=](benchmark::State& s) { bm_convert<T, memfmt::nchw, memfmt::nhwc>(s, e, threads); })
      ->UseManualTime()
      ->Iterations(reps)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(("BM_convert/nhwc_to_nchw" + tail).c_str(),
                               [=](benchmark::State& s) { bm_convert<T, memfmt::nhwc, memfmt::nchw>(s, e, threads); })
      ->UseManualTime()
      ->Iterations(reps)
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = std::getenv("MEMFMT_BENCH_QUICK") != nullptr;
  const int reps = quick ? 9 : 21;
  int all = 1;
#if defined(_OPENMP)
  all = omp_get_max_threads();
#endif
  // The five ResNet-50 activations the performance target names, then the two stages between them
  // (28 x 28 and 14 x 14: source or destination rows that are not whole lines, or pitches that
  // are multiples of 512 bytes), then three at batch 1 (inference: under the 4 MB streaming
  // threshold, so plain stores; 7 x 7 with C = 2048 goes through run_staged_blocks).
  const std::array<std::int64_t, 4> shapes[] = {
      {64, 3, 224, 224}, {32, 64, 112, 112}, {32, 256, 56, 56}, {32, 2048, 7, 7},  {256, 64, 56, 56},
      {32, 512, 28, 28}, {32, 1024, 14, 14}, {1, 64, 112, 112}, {1, 1024, 14, 14}, {1, 2048, 7, 7}};
  std::vector<int> thread_counts = {1};
  if (all > 1) thread_counts.push_back(all);
  for (const auto& e : shapes)
    for (int t : thread_counts) {
      register_dtype<float>("f32", e, t, reps);
      register_dtype<memfmt::bfloat16>("bf16", e, t, reps);
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // The tuning choices that run, and the caches the automatic ones follow.
  const memfmt::far_prefetch prefetch = requested_prefetch();
  const memfmt::stage_stream stage = requested_stage();
  const auto& caches = memfmt::detail::detected_cache_geometry();
  benchmark::AddCustomContext("memfmt_far_prefetch", memfmt::to_string(memfmt::detail::resolve(prefetch)));
  benchmark::AddCustomContext("memfmt_stage_stream", memfmt::to_string(memfmt::detail::resolve(stage)));
  benchmark::AddCustomContext("memfmt_far_prefetch_from",
                              prefetch == memfmt::far_prefetch::automatic ? "caches" : "MEMFMT_BENCH_PREFETCH");
  benchmark::AddCustomContext("memfmt_stage_stream_from",
                              stage == memfmt::stage_stream::automatic ? "caches" : "MEMFMT_BENCH_STAGE");
  benchmark::AddCustomContext("memfmt_convert_kernels", convert_kernels());
  benchmark::AddCustomContext("memfmt_l1d_bytes", std::to_string(caches.l1d_bytes));
  benchmark::AddCustomContext("memfmt_l2_bytes", std::to_string(caches.l2_bytes));
  benchmark::AddCustomContext("memfmt_cache_source", caches.source);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
