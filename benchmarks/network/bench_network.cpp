// bench_network - whole networks of graph/models.hpp (and the same networks imported from ONNX)
// through the library's executor and trainer on memfmt::onednn::backend (CPU), one plan per policy.
//
// Benchmark names: BM_network/<model>/<f32|bf16>/<fwd|train>/<policy>, policy one of graph/policy.hpp's
//   all_channels_first, all_channels_last, pytorch_eager, optimal (solve() with the priors and
//   oneDNN's capability query), and for fwd also optimal_calibrated: solve() with the costs
//   runtime::calibrate measured on oneDNN for this model, dtype and batch (once per process; a
//   timing cache file, when named, supplies what was measured before and receives the rest),
//   then, as runtime::channels_last does, the fastest of that plan, optimal and all_channels_last
//   run as whole networks (runtime/select_plan.hpp; the label names the one kept).
//   fwd: executor::forward (inference). train: trainer::train_step (forward in training mode,
//   backward from the gradient of a mean loss; the trainer computes gradients, no optimiser step).
//   Dropout runs at p 0 there (the trainer draws no random mask; MobileNetV2's and VGG's cover only
//   the classifier's features). Where the trainer cannot be built on oneDNN (a layer without a
//   backward there) the row is an error with the reason, and the run goes on.
//   BM_network/onnx:<model>/f32/fwd/<policy>: the ONNX file tools/export_onnx.py wrote for the same
//   model and input size (batch-norm folded, as ONNX Runtime runs it), imported with
//   onnx/import.hpp and its parameters: memfmt and ONNX Runtime on the same file.
// Models (random parameters, runtime/random_parameters.hpp): resnet50, mobilenet_v2, unet,
// resnext50_32x4d, vgg16_bn, r3d_18, shufflenet_v2_x1_0, convnext_tiny, at sizes that keep a case short (below).
// Counters: ms_per_batch (fwd) or ms_per_step (train), images_per_s, conversions (copies per pass;
// per step for train, the gradients' conversions back included), conversion_ms (those copies timed
// one by one with the executor's memfmt::convert at their extents, median of a few runs, summed; a
// train step converts each value forward and its gradient back), arena_bytes (peak activation
// memory: the arena with liveness reuse; for train, activations, gradients and scratch),
// arena_ratio (arena / one buffer per value), fusions (fwd), overhead_pct (fwd: the share of a pass
// spent outside backend calls, from a few extra passes with every backend call timed) and, on
// optimal_calibrated rows, calibration_s (the seconds calibrate took; near 0 when the cache had it).
// Correctness (cannot be skipped): before the first timing of a model and dtype every policy runs
// once and its output is compared with all_channels_first's; a normalized max error
// (max |a - b| / max |reference|) above 1e-4 (f32) / 3e-2 (bf16) turns every benchmark of that
// model and dtype into an error naming the policy and the error. train rows compare one step's
// output the same way (1e-3 f32 / 1e-1 bf16: batch statistics sum in another order per format)
// and every parameter gradient norm-wise, ||a - b|| over the larger of ||reference|| and the norm
// the tensor would have at the average magnitude of all gradients (1e-1, f32 only): a
// full-width network has ReLU inputs and max-pool windows within rounding of a tie, and where the
// two formats' rounding lands on opposite sides, one element's gradient goes another way, which
// moves the gradients of the layers before it by percent (docs/networks.md, "Gradients near a
// tie"); some gradients are zero but for rounding (a batch norm's bias whose shift the next batch
// norm removes); a gradient in a wrong layout is off by its own size (sqrt 2 when unrelated).
// bf16 train rows check the output only: at full width their gradients are rounding in every
// format, as far from a float64 step in one as in the other (docs/networks.md); the trainer's
// bf16 gradients are tested at reduced widths (test_trainer_onednn). bf16 where oneDNN computes in it on this CPU,
// else an error naming the ISA it needs.
//
// Environment: MEMFMT_BENCH_BATCH (2), MEMFMT_BENCH_RESOLUTION (every 2-D model's input size;
// default per model), MEMFMT_BENCH_MIN_TIME (0.5 s), MEMFMT_BENCH_EXPLAIN=1 (print the optimal plans),
// MEMFMT_BENCH_CALIBRATED and MEMFMT_BENCH_TRAIN (comma-separated models that get
// optimal_calibrated / train rows; "all" (default) or "none"), MEMFMT_BENCH_TIMING_CACHE (a timing
// cache file, io/timing_cache_json.hpp, read when it exists and written after each calibration),
// MEMFMT_BENCH_ONNX_DIR (a folder with <model>_<R>x<R>.onnx, r3d_18_<F>x<R>x<R>.onnx: the ONNX rows).
// The models, plans, checks, counters and row names are network_cases.hpp's, shared with
// bench_network_cudnn; this file binds them to oneDNN and adds overhead_pct.
#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>

#include <memfmt/backends/onednn/backend.hpp>
#include <memfmt/runtime/onednn/calibrate.hpp>

#include "network_cases.hpp"

namespace {

using namespace memfmt;
using namespace memfmt_bench::networks;

onednn::backend& shared_backend() {
  static onednn::backend b;
  return b;
}

// The oneDNN backend with every call timed: the time spent inside the backend during a pass.
struct timed_backend {
  static constexpr const char* name = "onednn";
  // The executor fuses and binds convs as it does on the oneDNN backend itself.
  using conv_fusion = onednn::conv_fusion;
  using conv_forward_call = std::function<void()>;
  using element_types = onednn::backend::element_types;
  onednn::backend& b;
  double seconds = 0;

  op_support support(const op_query& q) const { return b.support(q); }
  void invalidate_weights(const void* w) { b.invalidate_weights(w); }

  template <class Fn>
  void timed(Fn&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  template <class... A>
  conv_forward_call bind_conv_forward(A&&... a) {
    return [this, call = b.bind_conv_forward(std::forward<A>(a)...)]() mutable { timed(call); };
  }
  // clang-format off
  template <class... A> void conv_forward(A&&... a) { timed([&] { b.conv_forward(std::forward<A>(a)...); }); }
  template <class... A> void conv_backward_data(A&&... a) { timed([&] { b.conv_backward_data(std::forward<A>(a)...); }); }
  template <class... A> void batch_norm_forward_inference(A&&... a) { timed([&] { b.batch_norm_forward_inference(std::forward<A>(a)...); }); }
  template <class... A> void group_norm_forward(A&&... a) { timed([&] { b.group_norm_forward(std::forward<A>(a)...); }); }
  template <class... A> void layer_norm_forward(A&&... a) { timed([&] { b.layer_norm_forward(std::forward<A>(a)...); }); }
  template <class... A> void activation_forward(A&&... a) { timed([&] { b.activation_forward(std::forward<A>(a)...); }); }
  template <class... A> void binary_forward(A&&... a) { timed([&] { b.binary_forward(std::forward<A>(a)...); }); }
  template <class... A> void pool_forward(A&&... a) { timed([&] { b.pool_forward(std::forward<A>(a)...); }); }
  template <class... A> void global_average_pool_forward(A&&... a) { timed([&] { b.global_average_pool_forward(std::forward<A>(a)...); }); }
  template <class... A> void upsample_forward(A&&... a) { timed([&] { b.upsample_forward(std::forward<A>(a)...); }); }
  template <class... A> void pad_forward(A&&... a) { timed([&] { b.pad_forward(std::forward<A>(a)...); }); }
  template <class... A> void softmax_forward(A&&... a) { timed([&] { b.softmax_forward(std::forward<A>(a)...); }); }
  template <class... A> void linear_forward(A&&... a) { timed([&] { b.linear_forward(std::forward<A>(a)...); }); }
  template <class... A> void concat_forward(A&&... a) { timed([&] { b.concat_forward(std::forward<A>(a)...); }); }
  template <class... A> void slice_forward(A&&... a) { timed([&] { b.slice_forward(std::forward<A>(a)...); }); }
  template <class... A> void rearrange_forward(A&&... a) { timed([&] { b.rearrange_forward(std::forward<A>(a)...); }); }
  // clang-format on
};

// network_cases.hpp's binding to oneDNN: its rows are BM_network/..., bfloat16 where the CPU has it.
struct onednn_binding {
  using backend_type = onednn::backend;
  static constexpr const char* prefix = "BM_network";
  static backend_type& backend() { return shared_backend(); }
  static std::string refuses(dtype t) {
    const auto s = onednn::support_for(t);
    return s.supported ? std::string() : s.reason.empty() ? std::string("unsupported dtype") : s.reason;
  }
  static void finish(backend_type&) {}  // oneDNN's calls return when their work is done
  static check_tolerances tolerances() { return {1e-4, 3e-2, 1e-3, 1e-1, 1e-1}; }
  // overhead_pct: the share of a pass outside the backend, from passes with every backend call timed.
  static void forward_extras(benchmark::State& state, case_state<backend_type>& st, const graph::plan& plan) {
    timed_backend tb{shared_backend()};
    runtime::executor<timed_backend> timed(st.net, plan, tb, st.params);
    st.forward(timed);
    tb.seconds = 0;
    constexpr int timed_passes = 2;
    const auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < timed_passes; ++i) st.forward(timed);
    const double whole = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    state.counters["overhead_pct"] = whole > 0 ? 100.0 * (whole - tb.seconds) / whole : 0.0;
  }
};

}  // namespace

int main(int argc, char** argv) { return run_main<onednn_binding>(argc, argv, 2, {dtype::float32, dtype::bfloat16}); }
