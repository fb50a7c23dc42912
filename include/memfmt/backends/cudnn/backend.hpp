// memfmt/backends/cudnn/backend.hpp - the cuDNN 9 backend: the reference backend's operations on
// device pointers, through the graph (backend) API.
//
//   memfmt::cudnn::backend be;                 // handle, device, version check, plan cache, workspace
//   be.conv_forward<half>(x, w, bias, y, p);   // views of device memory, any supported format
//
// Per call: validate (the checks shared by every backend, validate.hpp, then cuDNN's own limits:
// memfmt errors, no cuDNN call), look the plan up in the cache (keyed by op,
// shapes, strides, dtypes, alignment, attributes), or build it (graph -> heuristics mode A ->
// first engine config that finalizes), grow the workspace if needed, execute on the stream.
// Fusions (conv + bias, batch norm + residual + relu) are tried first; when no engine supports the
// fused graph, the same result is computed by a second, in-place graph. Calls are asynchronous on
// the backend's stream, like cuDNN's.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../../layers/conv_params.hpp"
#include "../../layers/layer_params.hpp"
#include "../../layers/op_query.hpp"
#include "../slice.hpp"
#include "backward.hpp"
#include "channel_padding.hpp"
#include "graphs.hpp"
#include "group_norm_hook.hpp"
#include "layer_kernels_hook.hpp"
#include "matmul.hpp"
#include "plan.hpp"
#include "pointwise.hpp"
#include "reduction.hpp"
#include "resample.hpp"
#include "softmax.hpp"
#include "spatial_pad.hpp"
#include "status.hpp"
#include "strided_copy.hpp"
#include "support.hpp"

namespace memfmt::cudnn {

// Device memory for workspaces and scratch. Empty functions mean cudaMalloc / cudaFree.
struct device_allocator {
  std::function<void*(std::size_t bytes)> allocate;
  std::function<void(void* ptr, std::size_t bytes)> deallocate;
};

// Converts a packed device tensor `from` (at src) into the other format family (at dst, packed),
// asynchronously on `stream`.
using format_converter = std::function<void(const packed_shape& from, const void* src, void* dst, cudaStream_t stream)>;

struct backend_options {
  // Zero-pad C of the input and weight of forward convolutions up to 8 (fp16/bf16) or 4 (fp32,
  // TF32) so tensor-core kernels apply (packed tensors, groups == 1). Results are unchanged.
  bool pad_channels_for_tensor_cores = false;
  device_allocator allocator{};
  std::size_t plan_cache_capacity = 1024;
  cudaStream_t stream = nullptr;
  // The format conversions of convert() (the executor's and the trainer's). Empty: 2-D copies of
  // single elements (strided_copy.hpp), which need no kernel but are slow; cuda_converter()
  // (cuda_converter.cuh, compiled by nvcc) runs memfmt::cuda::convert's transposing kernels.
  format_converter converter;
  // Group norm (and instance norm): no cuDNN graph computes it, so it runs memfmt's own kernels,
  // set by cuda_group_norm() (cuda_group_norm.cuh, compiled by nvcc). Empty: unsupported.
  group_norm_kernels group_norm;
  // Global average pooling (forward and backward), the sums of a broadcast operand's gradient and
  // pooling backward through memfmt's kernels, set by cuda_layer_kernels() (cuda_layer_kernels.cuh,
  // compiled by nvcc): cuDNN 9.19 on an H100 ran no engine for the first two and crashed in the
  // last. Empty: cuDNN graphs, where the loaded library has an engine.
  layer_kernel_set layer_kernels;
};

namespace detail {

// A grow-only device buffer from an allocator.
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(const device_allocator* a) : alloc_(a) {}
  device_buffer(device_buffer&& o) noexcept
      : alloc_(o.alloc_), ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      release();
      alloc_ = o.alloc_;
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~device_buffer() { release(); }

  // At least `bytes` bytes (contents not preserved when it grows). Synchronises the device before
  // freeing an older, smaller buffer that queued work may still use.
  void* ensure(std::size_t bytes) {
    if (bytes <= size_) return ptr_;
    if (ptr_) check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before growing a workspace)");
    release();
    if (alloc_ && alloc_->allocate) {
      ptr_ = alloc_->allocate(bytes);
      if (!ptr_)
        memfmt::detail::fail(errc::backend_failure,
                             "cuDNN backend: the user allocator returned null for " + std::to_string(bytes) + " bytes");
    } else {
      check_cuda(cudaMalloc(&ptr_, bytes), ("cudaMalloc(" + std::to_string(bytes) + " bytes)").c_str());
    }
    size_ = bytes;
    return ptr_;
  }
  void* get() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  void release() noexcept {
    if (!ptr_) return;
    if (alloc_ && alloc_->deallocate) alloc_->deallocate(ptr_, size_);
    else cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
  }

 private:
  const device_allocator* alloc_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
};

// Bump allocation of several scratch pieces inside one buffer, each 256-byte aligned.
struct scratch_layout {
  std::size_t total = 0;
  std::size_t add(std::size_t bytes) {
    const std::size_t off = total;
    total += (bytes + 255) / 256 * 256;
    return off;
  }
};

}  // namespace detail

class backend {
 public:
  static constexpr const char* name = "cudnn";

  explicit backend(backend_options o = {})
      : opts_(std::make_unique<backend_options>(std::move(o))), cache_(opts_->plan_cache_capacity) {
    version_ = check_version();  // throws on a major mismatch, before touching the GPU
    require_device_properties(version_.loaded);
    check_cudnn(cudnnCreate(&handle_), "cudnnCreate (is there a usable GPU and driver?)");
    check_cuda(cudaGetDevice(&device_), "cudaGetDevice");
    device_props_ = device_properties(handle_);
    workspace_ = detail::device_buffer(&opts_->allocator);
    scratch_ = detail::device_buffer(&opts_->allocator);
    ones_ = detail::device_buffer(&opts_->allocator);
    stream_ = opts_->stream;
  }
  ~backend() {
    if (handle_) {
      if (workspace_.get() || scratch_.get() || ones_.get()) cudaStreamSynchronize(stream_);
      cache_.clear();  // plans and the device descriptor go before the handle they were built on
      device_props_.reset();
      cudnnDestroy(handle_);
    }
  }
  // The handle moves (a defaulted move would copy the raw handle and destroy it twice).
  backend(backend&& o) noexcept
      : opts_(std::move(o.opts_)),
        handle_(std::exchange(o.handle_, nullptr)),
        device_(o.device_),
        device_props_(std::move(o.device_props_)),
        stream_(o.stream_),
        version_(std::move(o.version_)),
        cache_(std::move(o.cache_)),
        workspace_(std::move(o.workspace_)),
        scratch_(std::move(o.scratch_)),
        ones_(std::move(o.ones_)),
        ones_type_(o.ones_type_),
        ones_count_(std::exchange(o.ones_count_, 0)),
        last_engine_(std::move(o.last_engine_)) {}
  backend& operator=(backend&&) = delete;
  backend(const backend&) = delete;
  backend& operator=(const backend&) = delete;

  void set_stream(cudaStream_t s) noexcept { stream_ = s; }
  cudaStream_t stream() const noexcept { return stream_; }
  cudnnHandle_t handle() const noexcept { return handle_; }
  int device() const noexcept { return device_; }  // the CUDA device current at construction
  const version_report& versions() const noexcept { return version_; }
  // The engine of the last main operation run ("eng<index>[+tc]"), for labels and logs.
  const std::string& last_engine() const noexcept { return last_engine_; }
  const plan_cache<std::shared_ptr<execution_plan>>& cache() const noexcept { return cache_; }
  std::size_t workspace_bytes() const noexcept { return workspace_.size(); }
  void synchronize() const { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  // ------------------------------------------------------------ convolution

  template <class T, class XF, class WF, class YF>
  void conv_forward(tensor_view<const T, XF> x, tensor_view<const T, WF> w, const T* bias, tensor_view<T, YF> y,
                    const conv_params& p) {
    conv_problem pr = make_conv_problem(conv_direction::forward, x, w, y, p, bias != nullptr, bias);
    if (y.numel() == 0) return;
    const void* xp = x.data();
    const void* wp = w.data();
    const std::int64_t mult = tensor_core_channel_multiple(dtype_of_v<T>);
    const std::int64_t cpad = round_up(x.channels(), mult);
    if (opts_->pad_channels_for_tensor_cores && p.groups == 1 && cpad != x.channels() && x.is_packed() &&
        w.is_packed()) {
      // Zero-pad C of x and w into scratch (a 2-D copy each), then convolve the padded tensors.
      const pad_copy px = pad_copy_for<XF>(x.extents(), cpad, sizeof(T));
      const pad_copy pw = pad_copy_for<WF>(w.extents(), cpad, sizeof(T));
      detail::scratch_layout sl;
      const std::size_t ox = sl.add(px.dst_bytes), ow = sl.add(pw.dst_bytes);
      auto* base = static_cast<unsigned char*>(scratch_.ensure(sl.total));
      device_pad(x.data(), base + ox, px);
      device_pad(w.data(), base + ow, pw);
      const auto xpv = tensor_view<const T, XF>(reinterpret_cast<const T*>(base + ox),
                                                layout<XF>::packed(with_channels(x.extents(), cpad)));
      const auto wpv = tensor_view<const T, WF>(reinterpret_cast<const T*>(base + ow),
                                                layout<WF>::packed(with_channels(w.extents(), cpad)));
      pr = make_conv_problem(conv_direction::forward, xpv, wpv, y, p, bias != nullptr, bias);
      xp = base + ox;
      wp = base + ow;
    }
    run_conv_with_bias(pr, xp, wp, y.data(), bias);
  }

  template <class T, class YF, class WF, class XF>
  void conv_backward_data(tensor_view<const T, YF> dy, tensor_view<const T, WF> w, tensor_view<T, XF> dx,
                          const conv_params& p) {
    conv_problem pr = make_conv_problem(conv_direction::backward_data, dx, w, dy, p, false, nullptr);
    if (dx.numel() == 0) return;
    execution_plan* plan = require_plan(pr.key(), [&] { return conv_graph(pr); });
    execute(*plan, {{uid::x, dx.data()}, {uid::w, const_cast<T*>(w.data())}, {uid::y, const_cast<T*>(dy.data())}});
    last_engine_ = plan->engine_name;
  }

  template <class T, class XF, class YF, class WF>
  void conv_backward_weights(tensor_view<const T, XF> x, tensor_view<const T, YF> dy, tensor_view<T, WF> dw, T* dbias,
                             const conv_params& p) {
    conv_problem pr = make_conv_problem(conv_direction::backward_weights, x, dw, dy, p, dbias != nullptr, dbias);
    if (dw.numel() > 0 && dy.numel() > 0) {
      execution_plan* plan = require_plan(pr.key(), [&] { return conv_graph(pr); });
      execute(*plan, {{uid::x, const_cast<T*>(x.data())}, {uid::w, dw.data()}, {uid::y, const_cast<T*>(dy.data())}});
      last_engine_ = plan->engine_name;
    }
    if (dbias && dy.numel() > 0) {
      const std::string key = "dbias|" + pr.y.key() + "|" + pr.bias->key();
      if (execution_plan* bp = find_plan(key, [&] { return bias_grad_graph(pr.y, *pr.bias, pr.conv.compute_type); })) {
        execute(*bp, {{uid::y, const_cast<T*>(dy.data())}, {uid::bias, dbias}});
        return;
      }
      // The reduction runs on cuDNN's runtime-fusion engine, which takes channels-last dy only
      // (H100, cuDNN 9.19: "!is_NHWC"). The same sum is the weight gradient of a 1x1 convolution
      // whose input is all ones: dbias[k] = sum over n, spatial of dy[n, k, ...] * 1. The
      // weight-gradient engines take every layout. (C == 1: the ones are the same bytes in any format.)
      auto ones_extents = dy.extents();
      ones_extents[1] = 1;
      auto dbias_extents = dw.extents();
      for (std::size_t d = 1; d < dbias_extents.size(); ++d) dbias_extents[d] = 1;
      const tensor_view<const T, YF> ones(static_cast<const T*>(ones_of<T>(dy.numel() / dy.channels())),
                                          layout<YF>::packed(ones_extents));
      const tensor_view<T, WF> db(dbias, layout<WF>::packed(dbias_extents));
      const conv_problem wg =
          make_conv_problem(conv_direction::backward_weights, ones, db, dy, conv_params{}, false, nullptr);
      execution_plan* wp = require_plan("dbias_wgrad|" + wg.key(), [&] { return conv_graph(wg); });
      execute(*wp, {{uid::x, const_cast<T*>(ones.data())}, {uid::w, dbias}, {uid::y, const_cast<T*>(dy.data())}});
    }
  }

  // ------------------------------------------------------------ batch norm

  template <class T, class F>
  void batch_norm_forward_training(tensor_view<const T, F> x, tensor_view<T, F> y, const param_t<T>* gamma,
                                   const param_t<T>* beta, param_t<T>* running_mean, param_t<T>* running_var,
                                   param_t<T>* saved_mean, param_t<T>* saved_invstd, const batch_norm_params& p,
                                   tensor_view<const T, F> residual = {}) {
    bn_problem pr = make_bn_training_problem<T, F>(x, y, gamma, beta, running_mean, running_var, saved_mean,
                                                   saved_invstd, p, residual);
    if (x.numel() == 0) return;
    using P = param_t<T>;
    const P eps = static_cast<P>(p.epsilon), momentum = static_cast<P>(p.momentum);
    const std::size_t cbytes = static_cast<std::size_t>(x.channels()) * sizeof(P);
    // Updated running statistics go to scratch and are copied back: no aliasing of in and out.
    void* rm_out = nullptr;
    void* rv_out = nullptr;
    if (pr.update_running) {
      detail::scratch_layout sl;
      const std::size_t om = sl.add(cbytes), ov = sl.add(cbytes);
      auto* base = static_cast<unsigned char*>(scratch_.ensure(sl.total));
      rm_out = base + om;
      rv_out = base + ov;
    }
    std::vector<std::pair<std::int64_t, void*>> ptrs = {
        {uid::x, const_cast<T*>(x.data())},  {uid::y, y.data()},      {uid::scale, const_cast<P*>(gamma)},
        {uid::shift, const_cast<P*>(beta)},  {uid::mean, saved_mean}, {uid::inv_variance, saved_invstd},
        {uid::epsilon, const_cast<P*>(&eps)}};
    if (pr.update_running) {
      ptrs.insert(ptrs.end(), {{uid::momentum, const_cast<P*>(&momentum)},
                               {uid::running_mean_in, running_mean},
                               {uid::running_var_in, running_var},
                               {uid::running_mean_out, rm_out},
                               {uid::running_var_out, rv_out}});
    }
    run_bn_forward(pr, true, ptrs, residual.data());
    if (pr.update_running) {
      check_cuda(cudaMemcpyAsync(running_mean, rm_out, cbytes, cudaMemcpyDeviceToDevice, stream_),
                 "cudaMemcpyAsync running_mean");
      check_cuda(cudaMemcpyAsync(running_var, rv_out, cbytes, cudaMemcpyDeviceToDevice, stream_),
                 "cudaMemcpyAsync running_var");
    }
  }

  template <class T, class F>
  void batch_norm_forward_inference(tensor_view<const T, F> x, tensor_view<T, F> y, const param_t<T>* gamma,
                                    const param_t<T>* beta, const param_t<T>* running_mean,
                                    const param_t<T>* running_var, const batch_norm_params& p,
                                    tensor_view<const T, F> residual = {}) {
    bn_problem pr = make_bn_inference_problem<T, F>(x, y, gamma, beta, running_mean, running_var, p, residual);
    if (x.numel() == 0) return;
    using P = param_t<T>;
    const P eps = static_cast<P>(p.epsilon);
    // 1 / sqrt(running_var + eps) into scratch, then the norm op in inference phase.
    void* inv = scratch_.ensure(static_cast<std::size_t>(x.channels()) * sizeof(P));
    execution_plan* ip = require_plan("bn_invstd|" + pr.key("inf"), [&] { return inv_std_graph(pr); });
    execute(*ip, {{uid::running_var_in, const_cast<P*>(running_var)},
                  {uid::epsilon, const_cast<P*>(&eps)},
                  {uid::inv_variance, inv}});
    std::vector<std::pair<std::int64_t, void*>> ptrs = {
        {uid::x, const_cast<T*>(x.data())},        {uid::y, y.data()},
        {uid::scale, const_cast<P*>(gamma)},       {uid::shift, const_cast<P*>(beta)},
        {uid::mean, const_cast<P*>(running_mean)}, {uid::inv_variance, inv},
        {uid::epsilon, const_cast<P*>(&eps)}};
    run_bn_forward(pr, false, ptrs, residual.data());
  }

  template <class T, class F>
  void batch_norm_backward(tensor_view<const T, F> x, tensor_view<const T, F> dy, tensor_view<T, F> dx,
                           const param_t<T>* gamma, const param_t<T>* saved_mean, const param_t<T>* saved_invstd,
                           param_t<T>* dgamma, param_t<T>* dbeta, const batch_norm_params& p,
                           tensor_view<const T, F> y = {}, tensor_view<T, F> dresidual = {}) {
    bn_problem pr =
        make_bn_backward_problem<T, F>(x, dy, dx, gamma, saved_mean, saved_invstd, dgamma, dbeta, p, y, dresidual);
    if (x.numel() == 0) return;
    using P = param_t<T>;
    const bool masked = p.fuse_relu || pr.has_dresidual;
    void* grad = nullptr;
    if (masked) {
      // The gradient entering the norm: relu'(y) * dy (or dy itself), kept as dresidual when asked.
      if (pr.has_dresidual) {
        pr.grad = spec_of(dresidual, uid::grad);
        grad = dresidual.data();
      } else {
        pr.grad = spec_of(tensor_view<const T, F>(nullptr, layout<F>::packed(x.extents())), uid::grad);
        grad = scratch_.ensure(static_cast<std::size_t>(x.numel()) * sizeof(T));
      }
      execution_plan* gp = require_pointwise_plan("cuDNN batch_norm_backward (relu / residual gradient)", pr.dy,
                                                  "bn_grad|" + pr.key("bwd") + "|" + pr.dy.key() + "|" + pr.grad.key(),
                                                  [&] { return relu_grad_graph(pr); });
      execute(*gp, {{uid::dy, const_cast<T*>(dy.data())}, {uid::y, const_cast<T*>(y.data())}, {uid::grad, grad}});
    }
    execution_plan* plan = require_plan(
        "bn_bwd|" + pr.key("bwd") + "|" + pr.dy.key() + "|" + pr.dx.key() + (masked ? "|" + pr.grad.key() : ""),
        [&] { return bn_backward_graph(pr, masked); });
    execute(*plan, {{uid::x, const_cast<T*>(x.data())},
                    {masked ? uid::grad : uid::dy, masked ? grad : const_cast<T*>(dy.data())},
                    {uid::scale, const_cast<P*>(gamma)},
                    {uid::mean, const_cast<P*>(saved_mean)},
                    {uid::inv_variance, const_cast<P*>(saved_invstd)},
                    {uid::dscale, dgamma},
                    {uid::dshift, dbeta},
                    {uid::dx, dx.data()}});
    last_engine_ = plan->engine_name;
  }

  // ------------------------------------------------------------ the other layers (the executor's)
  // Graphs built once per signature and cached like the convolutions'; concatenation, slices and
  // rearrangements are 2-D copies on the stream (strided_copy.hpp).

  // What this backend runs (support.hpp); the executor and the planner ask before any work.
  op_support support(const op_query& q) const {
    return layer_support(q, static_cast<bool>(opts_->group_norm), static_cast<bool>(opts_->layer_kernels));
  }

  template <class T, class XF, class YF>
  void activation_forward(const activation_params& f, tensor_view<const T, XF> x, tensor_view<T, YF> y) {
    const pointwise_problem pr = make_activation_problem(f, x, y);
    if (y.numel() == 0) return;
    run_pointwise("cuDNN activation_forward", pr, {{uid::x, const_cast<T*>(x.data())}, {uid::y, y.data()}});
  }

  template <class T, class AF, class BF, class YF>
  void binary_forward(binary_op kind, tensor_view<const T, AF> a, tensor_view<const T, BF> b, tensor_view<T, YF> y) {
    const pointwise_problem pr = make_binary_problem(kind, a, b, y);
    if (y.numel() == 0) return;
    const lk::view5 av = view5_of(a), bv = view5_of(b), yv = view5_of(y);
    if (opts_->layer_kernels && !(lk::same_extents(av, yv) && lk::same_extents(bv, yv))) {
      // A broadcast operand: memfmt's kernel (cuDNN 9.19 on an H100 refused [N > 1, C, 1, 1] ones).
      run_binary_kernel(kind, false, false, dtype_of_v<T>, av, bv, yv, yv, a.data(), b.data(), nullptr, y.data());
      return;
    }
    run_pointwise("cuDNN binary_forward", pr,
                  {{uid::x, const_cast<T*>(a.data())}, {uid::bias, const_cast<T*>(b.data())}, {uid::y, y.data()}});
  }

  template <class T, class XF, class YF>
  void pool_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const pool_params& p) {
    const resample_problem pr = make_pool_problem(x, y, p);
    if (y.numel() == 0) return;
    run_graph(pr.key(), [&] { return resample_graph(pr); }, {{uid::x, const_cast<T*>(x.data())}, {uid::y, y.data()}});
  }

  template <class T, class XF, class YF>
  void upsample_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const upsample_params& p) {
    const resample_problem pr = make_upsample_problem(x, y, p);
    if (y.numel() == 0) return;
    run_graph(pr.key(), [&] { return resample_graph(pr); }, {{uid::x, const_cast<T*>(x.data())}, {uid::y, y.data()}});
  }

  template <class T, class XF, class YF>
  void global_average_pool_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y) {
    const global_pool_problem pr = make_global_average_pool_problem(x, y);
    if (y.numel() == 0) return;
    if (opts_->layer_kernels) {
      run_reduce(opts_->layer_kernels.reduce_sum, dtype_of_v<T>, view5_of(x), view5_of(y), x.data(), y.data(),
                 1.0 / static_cast<double>(pr.positions), "memfmt global_average_pool kernel");
      return;
    }
    const auto constants = pr.constants();  // by value: read when the plan is launched
    std::vector<std::pair<std::int64_t, void*>> ptrs = {{uid::x, const_cast<T*>(x.data())}, {uid::y, y.data()}};
    for (const graph_constant& c : constants) ptrs.push_back({c.uid, const_cast<float*>(&c.value)});
    run_graph(
        pr.key(), [&] { return global_average_pool_graph(pr); }, ptrs);
  }

  template <class T, class XF, class YF>
  void linear_forward(tensor_view<const T, XF> x, const T* w, const T* bias, tensor_view<T, YF> y) {
    const linear_problem pr = make_linear_problem(x, w, bias, y);
    if (y.numel() == 0) return;
    run_graph(pr.key(), [&] { return linear_graph(pr); },
              {{uid::x, const_cast<T*>(x.data())},
               {uid::w, const_cast<T*>(w)},
               {uid::bias, const_cast<T*>(bias)},
               {uid::y, y.data()}});
  }

  // Each part is a slice of y: its slice copy reversed (slice.hpp), as a rearrangement.
  template <class T, class XF, class YF>
  void concat_forward(const std::vector<tensor_view<const T, XF>>& xs, tensor_view<T, YF> y,
                      const concat_params& p = {}) {
    const std::vector<slice_copy> copies = concat_copies("cuDNN concat_forward", xs, "output y", y, p);
    for (std::size_t i = 0; i < xs.size(); ++i)
      for (const copy_2d& k : permuted_copies(copies[i].copy.reversed(), sizeof(T)))
        run_copy(k, y.data() + copies[i].offset, xs[i].data(), stream_);
  }

  // A slice: the 2-D copies of its permuted copy from an offset (slice.hpp), as a rearrangement.
  template <class T, class XF, class YF>
  void slice_forward(tensor_view<const T, XF> x, const slice_params& p, tensor_view<T, YF> y) {
    const slice_copy m = slice_copy_of("cuDNN slice_forward", p, x, y);
    if (y.empty()) return;
    for (const copy_2d& k : permuted_copies(m.copy, sizeof(T))) run_copy(k, y.data(), x.data() + m.offset, stream_);
  }

  // Channel shuffle, depth to space, space to depth: 2-D copies of the permuted copy
  // (strided_copy.hpp); a fallback where the rows are single elements (channels-last shuffles).
  template <class T, class XF, class YF>
  void rearrange_forward(tensor_view<const T, XF> x, const rearrange_params& p, tensor_view<T, YF> y) {
    for (const copy_2d& k : permuted_copies(rearrange_copy("cuDNN rearrange_forward", p, x, y), sizeof(T)))
      run_copy(k, y.data(), x.data(), stream_);
  }

  // ------------------------------------------------------------ their backward passes (the trainer's)
  // The reference backend's arguments and results (backward.hpp builds the graphs).

  template <class T, class XF, class DYF, class DXF>
  void activation_backward(const activation_params& f, tensor_view<const T, XF> x, tensor_view<const T, DYF> dy,
                           tensor_view<T, DXF> dx) {
    const activation_backward_problem pr = make_activation_backward_problem(f, x, dy, dx);
    if (dx.numel() == 0) return;
    execution_plan* p = require_pointwise_plan("cuDNN activation_backward", pr.dx, pr.key(),
                                               [&] { return activation_backward_graph(pr); });
    const auto constants = pr.constants();  // by value: read when the plan is launched
    std::vector<std::pair<std::int64_t, void*>> ptrs = {
        {uid::x, const_cast<T*>(x.data())}, {uid::dy, const_cast<T*>(dy.data())}, {uid::dx, dx.data()}};
    for (const graph_constant& c : constants) ptrs.push_back({c.uid, const_cast<float*>(&c.value)});
    execute(*p, ptrs);
    last_engine_ = p->engine_name;
  }

  // da and db are optional (null data: not wanted). A broadcast operand's gradient is computed at
  // dy's extents into scratch and summed; every plan is found before anything runs.
  template <class T, class AF, class BF, class DYF, class DAF, class DBF>
  void binary_backward(binary_op kind, tensor_view<const T, AF> a, tensor_view<const T, BF> b,
                       tensor_view<const T, DYF> dy, tensor_view<T, DAF> da, tensor_view<T, DBF> db) {
    const auto problems = make_binary_backward_problems(kind, a, b, dy, da, db);
    if (dy.numel() == 0) {
      // Nothing flows back: a wanted gradient is zero (a broadcast operand may still have elements).
      if (da.data() && da.numel() > 0) zero_packed(da, "cuDNN binary_backward (da)");
      if (db.data() && db.numel() > 0) zero_packed(db, "cuDNN binary_backward (db)");
      return;
    }
    const lk::view5 av = view5_of(a), bv = view5_of(b), dyv = view5_of(dy);
    if (opts_->layer_kernels && !(lk::same_extents(av, dyv) && lk::same_extents(bv, dyv))) {
      // A broadcast operand: memfmt's kernels compute each gradient at dy's extents (into scratch,
      // packed in dy's format, where the operand is broadcast) and sum it over the broadcast dims.
      const lk::view5 full = view5_of(tensor_view<const T, DYF>(nullptr, layout<DYF>::packed(dy.extents())));
      const auto grad_of = [&](bool of_b, const lk::view5& gv, T* g) {
        if (lk::same_extents(gv, dyv)) {
          run_binary_kernel(kind, true, of_b, dtype_of_v<T>, av, bv, dyv, gv, a.data(), b.data(), dy.data(), g);
          return;
        }
        void* scratch = scratch_.ensure(static_cast<std::size_t>(dy.numel()) * sizeof(T));
        run_binary_kernel(kind, true, of_b, dtype_of_v<T>, av, bv, dyv, full, a.data(), b.data(), dy.data(), scratch);
        run_reduce(opts_->layer_kernels.reduce_sum, dtype_of_v<T>, full, gv, scratch, g, 1.0,
                   "memfmt broadcast gradient sum kernel");
      };
      if (da.data()) grad_of(false, view5_of(da), da.data());
      if (db.data()) grad_of(true, view5_of(db), db.data());
      return;
    }
    struct step {
      execution_plan* pointwise = nullptr;
      execution_plan* reduction = nullptr;
      void* grad = nullptr;
    };
    std::vector<step> steps;
    for (const binary_grad_problem& pr : problems) {
      step s;
      s.grad = pr.of_b ? static_cast<void*>(db.data()) : static_cast<void*>(da.data());
      if (pr.pointwise)
        s.pointwise = require_pointwise_plan("cuDNN binary_backward", pr.dy, pr.key("pw"),
                                             [&] { return binary_grad_pointwise_graph(pr); });
      if (pr.reduce) s.reduction = require_plan(pr.key("sum"), [&] { return binary_grad_reduction_graph(pr); });
      steps.push_back(s);
    }
    void* scratch = nullptr;
    for (const binary_grad_problem& pr : problems)
      if (pr.reduce && pr.pointwise) scratch = scratch_.ensure(static_cast<std::size_t>(dy.numel()) * sizeof(T));
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const binary_grad_problem& pr = problems[i];
      void* full = pr.reduce ? (pr.pointwise ? scratch : const_cast<T*>(dy.data())) : steps[i].grad;
      const std::vector<std::pair<std::int64_t, void*>> ptrs = {{uid::x, const_cast<T*>(a.data())},
                                                                {uid::bias, const_cast<T*>(b.data())},
                                                                {uid::dy, const_cast<T*>(dy.data())},
                                                                {uid::grad, full},
                                                                {uid::dx, steps[i].grad}};
      if (steps[i].pointwise) execute(*steps[i].pointwise, ptrs);
      if (steps[i].reduction) execute(*steps[i].reduction, ptrs);
      last_engine_ = (steps[i].reduction ? steps[i].reduction : steps[i].pointwise)->engine_name;
    }
  }

  // Max pooling recomputes the forward output into scratch (its backward reads x and y), as does
  // channels-first average pooling (backward.hpp).
  template <class T, class XF, class DYF, class DXF>
  void pool_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                     const pool_params& p) {
    const resample_backward_problem pr = make_pool_backward_problem(x, dy, dx, p);
    if (dx.numel() == 0) return;
    if (dy.numel() == 0) {
      zero_packed(dx, "cuDNN pool_backward");
      return;
    }
    if (opts_->layer_kernels) {
      pool_backward_args a;
      a.type = dtype_of_v<T>;
      a.x = view5_of(x);
      a.dy = view5_of(dy);
      a.dx = view5_of(dx);
      a.geometry = pool_geometry_of(a.dx, a.dy, DXF::rank - 2, p);
      a.x_data = x.data();
      a.dy_data = dy.data();
      a.dx_data = dx.data();
      a.stream = stream_;
      opts_->layer_kernels.pool_backward(a);
      last_engine_ = "memfmt pool_backward kernel";
      return;
    }
    run_resample_backward(pr, x.data(), dy.data(), dx.data(), sizeof(T));
  }

  template <class T, class DYF, class DXF>
  void upsample_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx, const upsample_params& p) {
    const resample_backward_problem pr = make_upsample_backward_problem(dy, dx, p);
    if (dx.numel() == 0) return;
    run_resample_backward(pr, nullptr, dy.data(), dx.data(), sizeof(T));
  }

  template <class T, class DYF, class DXF>
  void global_average_pool_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx) {
    const resample_backward_problem pr = make_global_average_pool_backward_problem(dy, dx);
    if (dx.numel() == 0) return;
    if (opts_->layer_kernels) {
      std::int64_t positions = 1;
      for (int d = 2; d < DXF::rank; ++d) positions *= dx.extent(d);
      run_reduce(opts_->layer_kernels.expand, dtype_of_v<T>, view5_of(dy), view5_of(dx), dy.data(), dx.data(),
                 1.0 / static_cast<double>(positions), "memfmt global_average_pool_backward kernel");
      return;
    }
    run_resample_backward(pr, nullptr, dy.data(), dx.data(), sizeof(T));
  }

  // dx = dy w, in dx's format and flatten order.
  template <class T, class DYF, class DXF>
  void linear_backward_data(tensor_view<const T, DYF> dy, const T* w, tensor_view<T, DXF> dx) {
    const linear_problem pr = make_linear_backward_data_problem(dy, w, dx);
    if (dx.numel() == 0) return;
    if (dy.numel() == 0) {  // no outputs: nothing flows back
      zero_packed(dx, "cuDNN linear_backward_data");
      return;
    }
    run_graph(pr.key(), [&] { return matmul_graph(pr); },
              {{uid::dy, const_cast<T*>(dy.data())}, {uid::w, const_cast<T*>(w)}, {uid::dx, dx.data()}});
  }

  // dw (K x F row-major) and dbias (K values, when not null).
  template <class T, class XF, class DYF>
  void linear_backward_weights(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, T* dw, T* dbias) {
    const linear_problem pr = make_linear_backward_weights_problem(x, dy, dw, dbias);
    const std::size_t k = static_cast<std::size_t>(pr.outputs), f = static_cast<std::size_t>(pr.features);
    if (pr.batch == 0) {  // no samples: zero gradients
      if (k * f > 0) check_cuda(cudaMemsetAsync(dw, 0, k * f * sizeof(T), stream_), "cudaMemsetAsync (dw)");
      if (dbias && k > 0) check_cuda(cudaMemsetAsync(dbias, 0, k * sizeof(T), stream_), "cudaMemsetAsync (dbias)");
      return;
    }
    execution_plan* mp = k * f > 0 ? require_plan(pr.key(), [&] { return matmul_graph(pr); }) : nullptr;
    // dbias through memfmt's reduce kernel where the backend has it: cuDNN 9.19 on an H100 found no
    // engine for the reduction graph.
    const bool dbias_kernel = dbias && k > 0 && static_cast<bool>(opts_->layer_kernels);
    execution_plan* bp = dbias && k > 0 && !dbias_kernel
                             ? require_plan("linear_dbias|" + pr.key(), [&] { return linear_dbias_graph(pr); })
                             : nullptr;
    const std::vector<std::pair<std::int64_t, void*>> ptrs = {
        {uid::x, const_cast<T*>(x.data())}, {uid::dy, const_cast<T*>(dy.data())}, {uid::w, dw}, {uid::bias, dbias}};
    if (mp) {
      execute(*mp, ptrs);
      last_engine_ = mp->engine_name;
    }
    if (bp) execute(*bp, ptrs);
    if (dbias_kernel) {
      lk::view5 bias_view;  // [1, K]: the sum of dy over the samples
      bias_view.ext[1] = static_cast<std::int64_t>(k);
      bias_view.str[1] = 1;
      run_reduce(opts_->layer_kernels.reduce_sum, dtype_of_v<T>, view5_of(dy), bias_view, dy.data(), dbias, 1.0,
                 "memfmt linear dbias kernel");
      if (mp) last_engine_ = mp->engine_name;
    }
  }

  template <class T, class DYF, class DXF>
  void concat_backward(tensor_view<const T, DYF> dy, const std::vector<tensor_view<T, DXF>>& dxs,
                       const concat_params& p = {}) {
    const std::vector<slice_copy> copies = concat_copies("cuDNN concat_backward", dxs, "output gradient dy", dy, p);
    for (std::size_t i = 0; i < dxs.size(); ++i)
      for (const copy_2d& k : permuted_copies(copies[i].copy, sizeof(T)))
        run_copy(k, dxs[i].data(), dy.data() + copies[i].offset, stream_);
  }

  // dx is zero outside the slice's positions.
  template <class T, class DYF, class DXF>
  void slice_backward(tensor_view<const T, DYF> dy, const slice_params& p, tensor_view<T, DXF> dx) {
    const slice_copy m = slice_copy_of("cuDNN slice_backward", p, dx, dy, "input gradient dx", "output gradient dy");
    zero_packed(dx, "cuDNN slice_backward");
    if (dy.empty()) return;
    for (const copy_2d& k : permuted_copies(m.copy.reversed(), sizeof(T)))
      run_copy(k, dx.data() + m.offset, dy.data(), stream_);
  }

  template <class T, class DYF, class DXF>
  void rearrange_backward(tensor_view<const T, DYF> dy, const rearrange_params& p, tensor_view<T, DXF> dx) {
    const permuted_copy m = rearrange_backward_copy("cuDNN rearrange_backward", p, dy, dx);
    for (const copy_2d& k : permuted_copies(m, sizeof(T))) run_copy(k, dx.data(), dy.data(), stream_);
  }

  // Padding: 2-D copies of packed tensors of one format (spatial_pad.hpp); the backward of
  // constant padding only.
  template <class T, class XF, class YF>
  void pad_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const pad_params& p) {
    run_pad_forward(handle_, stream_, x, y, p);
  }
  template <class T, class DYF, class DXF>
  void pad_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx, const pad_params& p) {
    run_pad_backward(stream_, dy, dx, p);
  }

  // Softmax over channels through cuDNN's legacy softmax calls, any strides (softmax.hpp).
  template <class T, class XF, class YF>
  void softmax_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const softmax_params& p) {
    check_cudnn(cudnnSetStream(handle_, stream_), "cudnnSetStream");
    run_softmax_forward(handle_, x, y, p);
  }
  template <class T, class YF, class DYF, class DXF>
  void softmax_backward(tensor_view<const T, YF> y, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                        const softmax_params& p) {
    check_cudnn(cudnnSetStream(handle_, stream_), "cudnnSetStream");
    run_softmax_backward(handle_, y, dy, dx, p);
  }

  // Group norm through backend_options::group_norm (memfmt's kernels, group_norm_hook.hpp): packed
  // tensors of either format. Without them support() refuses the layer before any work. An empty x
  // launches nothing (gn::launches): the forward writes nothing, the backward zeroes dgamma, dbeta.
  template <class T, class XF, class YF>
  void group_norm_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const param_t<T>* gamma,
                          const param_t<T>* beta, param_t<T>* saved_mean, param_t<T>* saved_invstd,
                          const group_norm_params& p) {
    require_group_norm_kernels("cudnn::group_norm_forward");
    validate_group_norm_forward(x, y, saved_mean, saved_invstd, p);
    (void)packed_shape_of(y);
    group_norm_forward_args a;
    fill_group_norm_args(a, x, gamma, p, /*backward=*/false);
    if (!gn::launches(a.shape)) return;
    a.y_channels_last = YF::channels_last;
    a.epsilon = p.epsilon;
    a.y = y.data();
    a.beta = beta;
    a.saved_mean = saved_mean;
    a.saved_invstd = saved_invstd;
    opts_->group_norm.forward(a);
  }
  template <class T, class XF, class DYF, class DXF>
  void group_norm_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                           const param_t<T>* gamma, const param_t<T>* saved_mean, const param_t<T>* saved_invstd,
                           param_t<T>* dgamma, param_t<T>* dbeta, const group_norm_params& p) {
    require_group_norm_kernels("cudnn::group_norm_backward");
    validate_group_norm_backward(x, dy, dx, saved_mean, saved_invstd, p);
    (void)packed_shape_of(dy);
    (void)packed_shape_of(dx);
    group_norm_backward_args a;
    fill_group_norm_args(a, x, gamma, p, /*backward=*/true);
    const auto zero_bytes = static_cast<std::size_t>(gn::param_grad_zeros(a.shape)) * sizeof(param_t<T>);
    for (param_t<T>* d : {dgamma, dbeta})
      if (d && zero_bytes > 0)
        check_cuda(cudaMemsetAsync(d, 0, zero_bytes, stream_), "cudaMemsetAsync (dgamma, dbeta)");
    if (!gn::launches(a.shape)) return;
    a.dy_channels_last = DYF::channels_last;
    a.dx_channels_last = DXF::channels_last;
    a.dy = dy.data();
    a.dx = dx.data();
    a.saved_mean = saved_mean;
    a.saved_invstd = saved_invstd;
    a.dgamma = dgamma;
    a.dbeta = dbeta;
    opts_->group_norm.backward(a);
  }

  // ------------------------------------------------------------ device memory (the executor's hooks)
  // An executor over this backend keeps its activations and parameters in device memory from
  // these (runtime/executor.hpp, "device memory").

  void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    if (opts_->allocator.allocate) {
      void* p = opts_->allocator.allocate(bytes);
      if (!p)
        memfmt::detail::fail(errc::backend_failure,
                             "cuDNN backend: the user allocator returned null for " + std::to_string(bytes) + " bytes");
      return p;
    }
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, bytes), ("cudaMalloc(" + std::to_string(bytes) + " bytes)").c_str());
    return p;
  }
  void deallocate(void* p, std::size_t bytes) noexcept {
    if (!p) return;
    cudaStreamSynchronize(stream_);  // queued work may still read it
    if (opts_->allocator.deallocate) opts_->allocator.deallocate(p, bytes);
    else cudaFree(p);
  }
  // Host to device; the host bytes may be reused when it returns.
  void copy_in(void* device, const void* host, std::size_t bytes) {
    if (bytes == 0) return;
    check_cuda(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (copy in)");
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (copy in)");
  }
  // Device to host, after everything queued before it.
  void copy_out(void* host, const void* device, std::size_t bytes) {
    if (bytes == 0) return;
    check_cuda(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (copy out)");
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (copy out)");
  }
  // A packed device tensor into another format: backend_options::converter, or 2-D copies
  // (strided_copy.hpp).
  template <class T, class From, class To>
  void convert(tensor_view<const T, From> src, tensor_view<T, To> dst) {
    static_assert(From::rank == To::rank, "cuDNN convert: one rank");
    if (src.extents() != dst.extents())
      memfmt::detail::fail(errc::shape_mismatch,
                           "cuDNN convert: source " + memfmt::detail::dims_to_string(src.extents()) +
                               " and destination " + memfmt::detail::dims_to_string(dst.extents()) + " differ");
    const packed_shape from = packed_shape_of(src);
    (void)packed_shape_of(dst);
    if (From::channels_last == To::channels_last) {
      const std::size_t bytes = static_cast<std::size_t>(src.numel()) * sizeof(T);
      run_copy(copy_2d{0, 0, bytes, bytes, bytes, 1}, dst.data(), src.data(), stream_);  // pitches >= width
      return;
    }
    if (opts_->converter) {
      opts_->converter(from, src.data(), dst.data(), stream_);
      return;
    }
    for (const copy_2d& k : format_conversion_copies(from)) run_copy(k, dst.data(), src.data(), stream_);
  }

  // Runs a plan with the given (uid, pointer) pairs; grows the workspace to the plan's size. Pairs
  // whose uid is not a tensor of the plan's graph are left out (one list serves alternative graphs).
  void execute(execution_plan& plan, const std::vector<std::pair<std::int64_t, void*>>& ptrs) {
    std::vector<std::int64_t> uids;
    std::vector<void*> data;
    const auto& specs = plan.graph.specs();
    for (const auto& [id, ptr] : ptrs) {
      if (specs.find(id) == specs.end()) continue;
      uids.push_back(id);
      data.push_back(ptr);
    }
    void* ws = plan.workspace_bytes > 0 ? workspace_.ensure(static_cast<std::size_t>(plan.workspace_bytes)) : nullptr;
    descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set_int64s(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids, "set CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS");
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<std::int64_t>(data.size()),
             data.data(), "set CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS");
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws, "set CUDNN_ATTR_VARIANT_PACK_WORKSPACE");
    pack.finalize("finalize variant pack");
    check_cudnn(cudnnSetStream(handle_, stream_), "cudnnSetStream");
    check_cudnn(cudnnBackendExecute(handle_, plan.plan.get(), pack.get()), "cudnnBackendExecute");
  }

 private:
  // Zeroes a packed tensor on the stream.
  template <class T, class F>
  void zero_packed(const tensor_view<T, F>& v, const char* op) {
    if (!v.is_packed())
      memfmt::detail::fail(errc::unsupported, std::string(op) + ": a " + F::name + " gradient " +
                                                  memfmt::detail::dims_to_string(v.extents()) +
                                                  " that is not packed (it is zeroed as one block)");
    check_cuda(cudaMemsetAsync(v.data(), 0, static_cast<std::size_t>(v.numel()) * sizeof(T), stream_),
               (std::string("cudaMemsetAsync (") + op + ")").c_str());
  }

  // RESAMPLE_BWD of `pr`; for max pooling first the forward from x into scratch (y). Both plans are
  // found before anything runs.
  // memfmt's binary kernel (layer_kernels_hook.hpp) on the backend's stream.
  void run_binary_kernel(binary_op op, bool grad, bool of_b, dtype type, const lk::view5& av, const lk::view5& bv,
                         const lk::view5& dyv, const lk::view5& outv, const void* a, const void* b, const void* dy,
                         void* out) {
    binary_args k;
    k.type = type;
    k.op = op;
    k.grad = grad;
    k.of_b = of_b;
    k.a = av;
    k.b = bv;
    k.dy = dyv;
    k.out = outv;
    k.a_data = a;
    k.b_data = b;
    k.dy_data = dy;
    k.out_data = out;
    k.stream = stream_;
    opts_->layer_kernels.binary(k);
    last_engine_ = grad ? "memfmt binary gradient kernel" : "memfmt binary kernel";
  }

  // One of memfmt's reduce / expand kernels (layer_kernels_hook.hpp) on the backend's stream.
  void run_reduce(const std::function<void(const reduce_args&)>& kernel, dtype type, const lk::view5& src,
                  const lk::view5& dst, const void* src_data, void* dst_data, double scale, const char* engine) {
    reduce_args a;
    a.type = type;
    a.src = src;
    a.dst = dst;
    a.src_data = src_data;
    a.dst_data = dst_data;
    a.scale = scale;
    a.stream = stream_;
    kernel(a);
    last_engine_ = engine;
  }

  void run_resample_backward(const resample_backward_problem& pr, const void* x, const void* dy, void* dx,
                             std::size_t element_bytes) {
    execution_plan* fp =
        pr.forward ? require_plan(pr.forward->key(), [&] { return resample_graph(*pr.forward); }) : nullptr;
    execution_plan* bp = require_plan(pr.key(), [&] { return resample_backward_graph(pr); });
    void* y = pr.xy_alias ? const_cast<void*>(dy) : nullptr;
    if (pr.xy_alias) x = dx;
    if (pr.forward) {
      std::size_t count = 1;
      for (const std::int64_t d : pr.dy.dims) count *= static_cast<std::size_t>(d);
      y = scratch_.ensure(count * element_bytes);
      execute(*fp, {{uid::x, const_cast<void*>(x)}, {uid::y, y}});
    }
    execute(*bp, {{uid::x, const_cast<void*>(x)}, {uid::y, y}, {uid::dy, const_cast<void*>(dy)}, {uid::dx, dx}});
    last_engine_ = bp->engine_name;
  }

  void device_pad(const void* src, void* dst, const pad_copy& pc) {
    check_cuda(cudaMemsetAsync(dst, 0, pc.dst_bytes, stream_), "cudaMemsetAsync (channel padding)");
    check_cuda(cudaMemcpy2DAsync(dst, pc.dst_pitch, src, pc.src_pitch, pc.row_bytes, pc.rows, cudaMemcpyDeviceToDevice,
                                 stream_),
               "cudaMemcpy2DAsync (channel padding)");
  }

  // The cached plan for `key`, or a new one from `make_graph()`; nullptr when no engine supports
  // the graph (remembered, so an unsupported fusion is tried once).
  template <class MakeGraph>
  execution_plan* find_plan(const std::string& key, MakeGraph&& make_graph) {
    execution_plan* p = lookup_plan(key, make_graph);
    return p->unsupported.empty() ? p : nullptr;
  }
  template <class MakeGraph>
  execution_plan* require_plan(const std::string& key, MakeGraph&& make_graph) {
    execution_plan* p = lookup_plan(key, make_graph);
    if (p->unsupported.empty()) return p;
    memfmt::detail::fail(errc::unsupported, p->unsupported);
  }
  // The cached entry for `key`: a plan, or the reason no engine supports the graph.
  template <class MakeGraph>
  execution_plan* lookup_plan(const std::string& key, MakeGraph&& make_graph) {
    const std::string full = "dev" + std::to_string(device_) + "|" + key;
    if (auto* hit = cache_.find(full)) return hit->get();
    std::shared_ptr<execution_plan> p;
    try {
      p = build_plan(make_graph(), device_props_, key);
    } catch (const memfmt::error& e) {
      if (e.code() != errc::unsupported) throw;
      p = std::make_shared<execution_plan>();
      p->unsupported = e.what();
    }
    return cache_.insert(full, std::move(p)).get();
  }

  // require_plan for a pointwise graph over `main`. cuDNN 9's pointwise engine takes channels-last
  // tensors only (H100, cuDNN 9.19; pointwise_frame tells what was tried): for a channels-first
  // tensor the error says so and what to do, with the tensor's sizes and strides.
  template <class MakeGraph>
  execution_plan* require_pointwise_plan(const char* op, const tensor_spec& main, const std::string& key,
                                         MakeGraph&& make_graph) {
    execution_plan* p = lookup_plan(key, make_graph);
    if (p->unsupported.empty()) return p;
    const auto shape = dense_shape_of(main);
    memfmt::detail::fail(errc::unsupported,
                         std::string(op) + ": no cuDNN engine runs this pointwise step on a tensor of sizes " +
                             memfmt::detail::dims_to_string(main.dims) + " and strides " +
                             memfmt::detail::dims_to_string(main.strides) +
                             (shape && !shape->channels_last
                                  ? " (channels-first: cuDNN 9.19 on an H100 ran pointwise graphs on channels-last "
                                    "tensors only; convert to channels-last, e.g. with memfmt::cuda::convert)"
                                  : "") +
                             "; " + p->unsupported);
  }

  // The (channels-last) pointwise graph of `pr`, cached, with its by-value constants.
  void run_pointwise(const char* op, const pointwise_problem& pr, std::vector<std::pair<std::int64_t, void*>> ptrs) {
    execution_plan* p = require_pointwise_plan(op, pr.y, pr.key(), [&] { return pointwise_graph(pr); });
    const auto constants = pr.constants();  // by value: read when the plan is launched
    for (const graph_constant& c : constants) ptrs.push_back({c.uid, const_cast<float*>(&c.value)});
    execute(*p, ptrs);
    last_engine_ = p->engine_name;
  }
  template <class MakeGraph>
  void run_graph(const std::string& key, MakeGraph&& make_graph,
                 const std::vector<std::pair<std::int64_t, void*>>& ptrs) {
    execution_plan* p = require_plan(key, make_graph);
    execute(*p, ptrs);
    last_engine_ = p->engine_name;
  }

  void require_group_norm_kernels(const char* op) const {
    if (!opts_->group_norm)
      memfmt::detail::fail(errc::unsupported, std::string(op) +
                                                  ": no cuDNN graph for group norm; memfmt's kernels run it when "
                                                  "backend_options::group_norm = cudnn::cuda_group_norm() is set "
                                                  "(cuda_group_norm.cuh, from a .cu file)");
  }
  // The fields both passes share (group_norm_common_args); the workspace sized for the pass.
  template <class T, class XF>
  void fill_group_norm_args(group_norm_common_args& a, const tensor_view<const T, XF>& x, const param_t<T>* gamma,
                            const group_norm_params& p, bool backward) {
    const packed_shape ps = packed_shape_of(x);
    a.shape = gn::shape{ps.n, ps.c, ps.s, p.groups};
    a.type = dtype_of_v<T>;
    a.x_channels_last = XF::channels_last;
    a.x = x.data();
    a.gamma = gamma;
    a.workspace = workspace_.ensure(
        static_cast<std::size_t>(group_norm_workspace_bytes(a.shape, XF::channels_last, a.type, backward)));
    a.stream = stream_;
  }

  // A packed view as (N, C, positions); throws unsupported for a padded or strided view.
  template <class T, class F>
  static packed_shape packed_shape_of(const tensor_view<T, F>& v) {
    if (!v.is_packed())
      memfmt::detail::fail(errc::unsupported, std::string("cuDNN backend: a ") + F::name + " tensor " +
                                                  memfmt::detail::dims_to_string(v.extents()) +
                                                  " that is not packed (strided copies take packed tensors)");
    packed_shape s;
    s.n = v.extent(0);
    s.c = v.extent(1);
    for (int d = 2; d < F::rank; ++d) s.s *= v.extent(d);
    s.element_bytes = sizeof(T);
    s.channels_last = F::channels_last;
    return s;
  }

  // A device array of `count` ones of type T, kept between calls (the dbias weight gradient's input).
  template <class T>
  const void* ones_of(std::int64_t count) {
    const auto n = static_cast<std::size_t>(count);
    if (ones_type_ != dtype_of_v<T> || ones_count_ < n) {
      void* d = ones_.ensure(n * sizeof(T));
      const std::vector<T> host(n, T(1.0f));
      check_cuda(cudaMemcpyAsync(d, host.data(), n * sizeof(T), cudaMemcpyHostToDevice, stream_),
                 "cudaMemcpyAsync (ones for dbias)");
      check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (ones for dbias)");  // `host` dies here
      ones_type_ = dtype_of_v<T>;
      ones_count_ = n;
    }
    return ones_.get();
  }

  void run_conv_with_bias(const conv_problem& pr, const void* x, const void* w, void* y, const void* bias) {
    const std::vector<std::pair<std::int64_t, void*>> base = {
        {uid::x, const_cast<void*>(x)}, {uid::w, const_cast<void*>(w)}, {uid::y, y}};
    if (bias) {
      if (execution_plan* fused = find_plan(pr.key() + "|fused", [&] { return conv_bias_graph(pr); })) {
        auto ptrs = base;
        ptrs.push_back({uid::bias, const_cast<void*>(bias)});
        execute(*fused, ptrs);
        last_engine_ = fused->engine_name;
        return;
      }
    }
    conv_problem plain = pr;
    plain.bias.reset();
    execution_plan* plan = require_plan(plain.key(), [&] { return conv_graph(plain); });
    execution_plan* bp = bias ? require_pointwise_plan(
                                    "cuDNN conv_forward (bias)", pr.y, "bias_add|" + pr.y.key() + "|" + pr.bias->key(),
                                    [&] { return bias_add_graph(pr.y, *pr.bias, pr.conv.compute_type); })
                              : nullptr;
    execute(*plan, base);
    last_engine_ = plan->engine_name;
    if (bp) execute(*bp, {{uid::y, y}, {uid::bias, const_cast<void*>(bias)}, {uid::aux, y}});
  }

  void run_bn_forward(const bn_problem& pr, bool training, std::vector<std::pair<std::int64_t, void*>> ptrs,
                      const void* residual) {
    const char* phase = training ? "bn_fwd_train" : "bn_fwd_inf";
    const bool has_epilogue = pr.has_residual || pr.fuse_relu;
    if (has_epilogue) {
      if (execution_plan* fused =
              find_plan(pr.key(phase) + "|fused", [&] { return bn_forward_graph(pr, training, true); })) {
        auto all = ptrs;
        if (pr.has_residual) all.push_back({uid::residual, const_cast<void*>(residual)});
        execute(*fused, all);
        last_engine_ = fused->engine_name;
        return;
      }
    }
    bn_problem plain = pr;
    plain.has_residual = false;
    plain.fuse_relu = false;
    execution_plan* plan = find_plan(plain.key(phase), [&] { return bn_forward_graph(plain, training, false); });
    if (!plan && !training) {
      // No NORM_FORWARD engine for batch-norm inference (H100, cuDNN 9.19): the same arithmetic as
      // one pointwise graph, the epilogue included.
      execution_plan* pw =
          require_pointwise_plan("cuDNN batch_norm_forward_inference", pr.x, "bn_inf_pointwise|" + pr.key(phase),
                                 [&] { return bn_inference_pointwise_graph(pr); });
      auto all = ptrs;
      if (pr.has_residual) all.push_back({uid::residual, const_cast<void*>(residual)});
      execute(*pw, all);
      last_engine_ = pw->engine_name;
      return;
    }
    if (!plan) plan = require_plan(plain.key(phase), [&] { return bn_forward_graph(plain, training, false); });
    // Every plan is found before anything runs: an unsupported epilogue leaves no output half written.
    execution_plan* ep =
        has_epilogue ? require_pointwise_plan("cuDNN batch_norm_forward (residual / relu)", pr.y,
                                              "bn_epilogue|" + pr.key(phase), [&] { return epilogue_graph(pr); })
                     : nullptr;
    execute(*plan, ptrs);
    last_engine_ = plan->engine_name;
    if (ep) {
      void* y = nullptr;
      for (const auto& [id, ptr] : ptrs)
        if (id == uid::y) y = ptr;
      std::vector<std::pair<std::int64_t, void*>> eptrs = {{uid::y, y}, {uid::aux, y}};
      if (pr.has_residual) eptrs.push_back({uid::residual, const_cast<void*>(residual)});
      execute(*ep, eptrs);
    }
  }

  std::unique_ptr<backend_options> opts_;  // stable address: the buffers point at its allocator
  cudnnHandle_t handle_ = nullptr;
  int device_ = 0;
  descriptor device_props_;  // the GPU that heuristics and plans are built for
  cudaStream_t stream_ = nullptr;
  version_report version_{};
  plan_cache<std::shared_ptr<execution_plan>> cache_;
  detail::device_buffer workspace_;
  detail::device_buffer scratch_;
  detail::device_buffer ones_;
  dtype ones_type_ = dtype::float32;
  std::size_t ones_count_ = 0;
  std::string last_engine_;
};

}  // namespace memfmt::cudnn
