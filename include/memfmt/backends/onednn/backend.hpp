// memfmt/backends/onednn/backend.hpp - convolution, batch norm and the other layers on the CPU through oneDNN.
//
// memfmt::onednn::backend offers the reference backend's operations (same names, same arguments)
// and holds what makes them fast: the oneDNN engine and stream, the primitives (cached by
// operation, shapes, layouts, data type and fusion) and reordered weights.
//
// Activations keep the caller's layout (nchw/nhwc/ncdhw/ndhwc, dense or padded): the backend
// never reorders them. Weights are different: in oneDNN 2.6 a convolution on NHWC data with plain
// OHWI weights runs the reference `ref:any` kernel (~0.1 GFLOP/s), so every convolution is created
// with weights `format_tag::any` and the caller's weights are reordered once into the layout the
// fast kernel wants and kept.
//
// Weight cache contract: a reordered copy is keyed by the weight pointer, its extents/strides and
// the target layout. If you write new values into a weight buffer the backend has already seen,
// call invalidate_weights(ptr) (or invalidate_all_weights()) before the next call, or turn the
// cache off with set_weight_caching(false) (then weights are reordered on every call, e.g. for a
// training loop that updates weights in place every step). Freeing a weight buffer and allocating
// a new one at the same address with the same shape is the same situation: invalidate.
// A bound call (bind_conv_forward) resolves its weights when it is bound: with caching on, weights
// written afterwards are not seen by it (bind again); with caching off it reorders on every run.
//
// Data types: float and bfloat16 (fp32 accumulation); bias is T; batch-norm parameters and
// statistics are float (param_t<T>). Other types throw memfmt::error(unsupported_dtype), as does
// bfloat16 where oneDNN cannot compute in it on this CPU (it needs avx512_core: ask
// onednn::supports(dtype), cpu_support.hpp).
// Errors: arguments are validated before any work, first by the checks every backend shares
// (validate.hpp: same codes and messages as the other backends), then this backend's limits;
// oneDNN failures become memfmt::error(backend_failure) naming oneDNN's status.
// A backend is not thread-safe: use one per thread.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "../../dtype.hpp"
#include "../../dtype_dispatch.hpp"
#include "../../error.hpp"
#include "../../convert/convert.hpp"
#include "../../strided/descriptor.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../../layers/conv_params.hpp"
#include "../cpu/pad.hpp"
#include "../cpu/group_norm.hpp"
#include "../cpu/reduce.hpp"
#include "../cpu/layer_norm.hpp"
#include "../../layers/layer_params.hpp"
#include "../../layers/op_query.hpp"
#include "../reference/linear.hpp"
#include "../reference/lrn.hpp"
#include "../validate.hpp"
#include "cpu_support.hpp"
#include "descriptors.hpp"
#include "backward.hpp"
#include "layers.hpp"
#include "status.hpp"

namespace memfmt::onednn {

// Epilogue fused into conv_forward: y = activation(conv(x, w) + bias + residual), identity for none.
// The residual is added by oneDNN's `sum` post-op (in place when the residual view is y itself), the
// activation by its eltwise post-ops (layers.hpp's eltwise_of), on the accumulator before rounding.
struct conv_fusion {
  activation_params activation = memfmt::activation::identity;
};

class backend;

// One conv_forward resolved for fixed views (backend::bind_conv_forward): validation, the
// primitive, its memory objects and the weights in the primitive's layout are settled when it is
// bound, so a run only executes. For callers that repeat one call with the same views, such as
// the executor's steps; a run costs the primitive's own time and no per-call set-up. It refers to
// the backend, which must outlive it.
class conv_forward_call {
 public:
  void operator()() {
    detail::guarded("conv_forward", [&] {
      if (refresh_weights_) refresh_weights_.execute(*strm_, weights_src_, args_.at(DNNL_ARG_WEIGHTS));
      if (copy_residual_) copy_residual_.execute(*strm_, residual_src_, args_.at(DNNL_ARG_DST));
      prim_.execute(*strm_, args_);
      for (auto& step : *epilogue_) {
        const dnnl::memory& y = args_.at(DNNL_ARG_DST);
        step.execute(*strm_, {{DNNL_ARG_SRC, y}, {DNNL_ARG_DST, y}});
      }
      strm_->wait();
      *last_impl_ = impl_;
    });
  }

 private:
  friend class backend;
  dnnl::stream* strm_ = nullptr;
  dnnl::primitive prim_;
  std::unordered_map<int, dnnl::memory> args_;
  dnnl::reorder refresh_weights_;  // weight caching off: the caller's weights into the scratch, per run
  dnnl::memory weights_src_;
  dnnl::reorder copy_residual_;  // a residual other than y: copied into y, then summed by the post-op
  dnnl::memory residual_src_;
  const std::vector<dnnl::eltwise_forward>* epilogue_ = nullptr;  // the cached entry's
  const std::string* impl_ = nullptr;
  const std::string** last_impl_ = nullptr;
};

enum class conv_op { forward, backward_data, backward_weights };

namespace detail {

template <class T>
struct type_identity {
  using type = T;
};
template <class T>
using identity_t = typename type_identity<T>::type;

template <class Extents>
std::string dims_str(const Extents& e) {
  return memfmt::detail::dims_to_string(e);
}

// oneDNN's spatial vectors: dilation counts the gaps (PyTorch's dilation - 1); the right padding
// is what makes the output size exact (it is negative when the last stride step does not fit).
struct conv_geometry {
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
};

template <class Extents>
conv_geometry geometry_of(const Extents& x, const Extents& w, const Extents& y, const conv_params& p) {
  conv_geometry g;
  const int sr = static_cast<int>(x.size()) - 2;
  for (int i = 0; i < sr; ++i) {
    g.strides.push_back(p.stride[i]);
    g.dilates.push_back(p.dilation[i] - 1);
    g.pad_l.push_back(p.padding[i]);
    const std::int64_t eff = p.dilation[i] * (w[2 + i] - 1) + 1;
    g.pad_r.push_back((y[2 + i] - 1) * p.stride[i] + eff - x[2 + i] - p.padding[i]);
  }
  return g;
}

inline void append_params(std::string& key, const conv_params& p, int spatial_rank) {
  for (int i = 0; i < spatial_rank; ++i) {
    append_key(key, p.stride[i]);
    append_key(key, p.padding[i]);
    append_key(key, p.dilation[i]);
  }
  append_key(key, p.groups);
}

}  // namespace detail

class backend {
 public:
  static constexpr const char* name = "onednn";
  // The types this backend computes in (bfloat16 where the CPU has it: cpu_support.hpp); the
  // executor, trainer and calibration compile no float64 or float16 layer for it.
  using element_types = memfmt::element_types<float, bfloat16>;
  using conv_fusion = onednn::conv_fusion;              // conv_forward's epilogue (the executor fuses with it)
  using conv_forward_call = onednn::conv_forward_call;  // bind_conv_forward's result (the executor's steps)

  backend() : backend(dnnl::engine(dnnl::engine::kind::cpu, 0)) {}
  explicit backend(const dnnl::engine& eng)
      : eng_(eng), strm_(detail::guarded("create stream", [&] { return dnnl::stream(eng); })) {}

  const dnnl::engine& engine() const noexcept { return eng_; }
  dnnl::stream& stream() noexcept { return strm_; }

  // oneDNN's implementation name (e.g. "brgconv:avx512_core") of the last convolution or batch
  // norm primitive this backend ran. Empty before the first call.
  const std::string& last_impl_name() const noexcept {
    static const std::string none;
    return last_impl_ ? *last_impl_ : none;
  }

  // ---- weight cache (see the contract at the top of this file) ----
  void invalidate_weights(const void* data) { weights_.erase(data); }
  void invalidate_all_weights() { weights_.clear(); }
  void set_weight_caching(bool on) {
    cache_weights_ = on;
    if (!on) weights_.clear();
  }
  bool weight_caching() const noexcept { return cache_weights_; }
  std::size_t cached_weight_count() const noexcept {
    std::size_t n = 0;
    for (const auto& kv : weights_) n += kv.second.size();
    return n;
  }
  // Number of cached primitives (all kinds).
  std::size_t cached_primitive_count() const noexcept {
    return conv_fwd_.size() + conv_bwd_data_.size() + conv_bwd_weights_.size() + bn_fwd_.size() + bn_bwd_.size() +
           reorders_.size() + binaries_.size() + eltwise_bwd_.size() + linear_fwd_.size() + linear_bwd_data_.size() +
           linear_bwd_weights_.size() + layers_.size();
  }

  // The implementation oneDNN picks for a convolution on dense tensors of formats F (activations)
  // and WF (user weights) without running it. Same primitive (and cache) as the real call.
  template <class T, class F, class WF = F>
  std::string conv_impl_name(conv_op op, const typename layout<F>::extents_type& x_extents,
                             const typename layout<F>::extents_type& w_extents, const conv_params& p,
                             bool with_bias = false) {
    static_assert(F::rank == WF::rank, "conv_impl_name: activation and weight formats must have the same rank");
    const auto dt = detail::data_type_of<T>("onednn::conv_impl_name");
    const auto ye = conv_output_extents(x_extents, w_extents, p);
    const auto x_md = detail::md_of(layout<F>::packed(x_extents), dt);
    const auto y_md = detail::md_of(layout<F>::packed(ye), dt);
    const auto w_md = detail::weights_md(layout<WF>::packed(w_extents), p.groups, dt);
    const auto g = detail::geometry_of(x_extents, w_extents, ye, p);
    return detail::guarded("conv_impl_name", [&]() -> std::string {
      switch (op) {
        case conv_op::forward: return conv_fwd_entry(x_md, w_md, w_extents, with_bias, y_md, p, g, {}, false).impl;
        case conv_op::backward_data: return conv_bwd_data_entry(x_md, w_md, w_extents, y_md, p, g).impl;
        case conv_op::backward_weights:
          return conv_bwd_weights_entry(x_md, w_md, w_extents, with_bias, y_md, p, g).impl;
      }
      return {};
    });
  }

  // ---- convolution ----
  // y = activation(conv(x, w) + bias [+ residual]) (conv_fusion). x, w may be views of T or const T;
  // bias: K values or nullptr. `residual` (same extents as y; may be y itself) is added before the
  // activation.
  template <class XT, class XF, class WT, class WF, class T, class YF>
  void conv_forward(tensor_view<XT, XF> x, tensor_view<WT, WF> w, const detail::identity_t<T>* bias,
                    tensor_view<T, YF> y, const conv_params& p, const conv_fusion& fusion = {},
                    tensor_view<const detail::identity_t<T>, detail::identity_t<YF>> residual = {}) {
    bind_conv_forward(x, w, bias, y, p, fusion, residual)();
  }

  // conv_forward with these arguments, resolved now and run by calling the result (conv_forward_call).
  template <class XT, class XF, class WT, class WF, class T, class YF>
  conv_forward_call bind_conv_forward(tensor_view<XT, XF> x, tensor_view<WT, WF> w, const detail::identity_t<T>* bias,
                                      tensor_view<T, YF> y, const conv_params& p, const conv_fusion& fusion = {},
                                      tensor_view<const detail::identity_t<T>, detail::identity_t<YF>> residual = {}) {
    static_assert(std::is_same_v<std::remove_const_t<XT>, T> && std::is_same_v<std::remove_const_t<WT>, T>,
                  "onednn::conv_forward: x, w and y must have the same element type");
    static_assert(XF::rank == WF::rank && XF::rank == YF::rank,
                  "onednn::conv_forward: x, w and y must have the same rank (all 2-D or all 3-D formats)");
    const auto ye = validate_conv_forward(x, w, y, p);
    constexpr const char* op = "onednn::conv_forward";
    validate_activation(fusion.activation, op);
    const auto dt = detail::data_type_of<T>(op);
    const bool has_residual = residual.data() != nullptr;
    if (has_residual) {  // the residual fusion is this backend's own
      backend_detail::require_extents(op, "residual", residual.extents(), ye, "(the output's sizes)");
      if (residual.data() == y.data() && residual.strides() != y.strides())
        memfmt::detail::fail(errc::invalid_argument, std::string(op) + ": residual aliases y with different strides " +
                                                         detail::dims_str(residual.strides()) + " vs " +
                                                         detail::dims_str(y.strides()));
    }

    const auto x_md = detail::activation_md(x, dt);
    const auto w_md = detail::weights_md(w.mapping(), p.groups, dt);
    const auto y_md = detail::activation_md(y, dt);
    const auto g = detail::geometry_of(x.extents(), w.extents(), ye, p);
    return detail::guarded("conv_forward", [&] {
      auto& e = conv_fwd_entry(x_md, w_md, w.extents(), bias != nullptr, y_md, p, g, fusion, has_residual);
      conv_forward_call call;
      call.strm_ = &strm_;
      call.prim_ = e.prim;
      call.impl_ = &e.impl;
      call.epilogue_ = &e.epilogue;
      call.last_impl_ = &last_impl_;
      const bound_weights bw = bind_weights(detail::mut(w.data()), w_md, e.pd.weights_desc(), e.w_scratch);
      call.refresh_weights_ = bw.refresh;
      call.weights_src_ = bw.src;
      call.args_ = {{DNNL_ARG_SRC, dnnl::memory(x_md, eng_, detail::mut(x.data()))},
                    {DNNL_ARG_WEIGHTS, bw.weights},
                    {DNNL_ARG_DST, dnnl::memory(y_md, eng_, y.data())}};
      if (bias) call.args_.emplace(DNNL_ARG_BIAS, dnnl::memory(e.pd.bias_desc(), eng_, detail::mut(bias)));
      if (has_residual && residual.data() != y.data()) {
        const auto r_md = detail::activation_md(residual, dt);
        call.copy_residual_ = reorder_for(r_md, y_md);
        call.residual_src_ = dnnl::memory(r_md, eng_, detail::mut(residual.data()));
      }
      return call;
    });
  }

  // dx = conv_backward_data(dy, w): the gradient of conv_forward with respect to x.
  template <class YT, class YF, class WT, class WF, class T, class XF>
  void conv_backward_data(tensor_view<YT, YF> dy, tensor_view<WT, WF> w, tensor_view<T, XF> dx, const conv_params& p) {
    static_assert(std::is_same_v<std::remove_const_t<YT>, T> && std::is_same_v<std::remove_const_t<WT>, T>,
                  "onednn::conv_backward_data: dy, w and dx must have the same element type");
    static_assert(XF::rank == WF::rank && XF::rank == YF::rank,
                  "onednn::conv_backward_data: dy, w and dx must have the same rank");
    const auto ye = validate_conv_backward_data(dy, w, dx, p);
    const auto dt = detail::data_type_of<T>("onednn::conv_backward_data");

    const auto dx_md = detail::activation_md(dx, dt);
    const auto w_md = detail::weights_md(w.mapping(), p.groups, dt);
    const auto dy_md = detail::activation_md(dy, dt);
    const auto g = detail::geometry_of(dx.extents(), w.extents(), ye, p);
    detail::guarded("conv_backward_data", [&] {
      auto& e = conv_bwd_data_entry(dx_md, w_md, w.extents(), dy_md, p, g);
      dnnl::memory wm = weights_for(detail::mut(w.data()), w_md, e.pd.weights_desc(), e.w_scratch);
      e.prim.execute(strm_, {{DNNL_ARG_DIFF_DST, dnnl::memory(dy_md, eng_, detail::mut(dy.data()))},
                             {DNNL_ARG_WEIGHTS, wm},
                             {DNNL_ARG_DIFF_SRC, dnnl::memory(dx_md, eng_, dx.data())}});
      strm_.wait();
      last_impl_ = &e.impl;
    });
  }

  // dw (and dbias, K values, when not null) = gradients of conv_forward with respect to w and bias.
  template <class XT, class XF, class YT, class YF, class T, class WF>
  void conv_backward_weights(tensor_view<XT, XF> x, tensor_view<YT, YF> dy, tensor_view<T, WF> dw,
                             detail::identity_t<T>* dbias, const conv_params& p) {
    static_assert(std::is_same_v<std::remove_const_t<XT>, T> && std::is_same_v<std::remove_const_t<YT>, T>,
                  "onednn::conv_backward_weights: x, dy and dw must have the same element type");
    static_assert(XF::rank == WF::rank && XF::rank == YF::rank,
                  "onednn::conv_backward_weights: x, dy and dw must have the same rank");
    const auto ye = validate_conv_backward_weights(x, dy, dw, p);
    const auto dt = detail::data_type_of<T>("onednn::conv_backward_weights");

    auto x_md = detail::activation_md(x, dt);
    const auto dw_md = detail::weights_md(dw.mapping(), p.groups, dt);
    const auto dy_md = detail::activation_md(dy, dt);
    // A 1x1 conv without padding reads only every stride-th position, so its weight gradient is a
    // stride-1 conv's over those positions, gathered by one reorder. Always done that way: oneDNN
    // 2.6's AVX2 strided 1x1 kernel gives wrong weight gradients on channels_last data
    // (OnednnConv.GridFloat case 1x1_stride2_batch4_downsample, under DNNL_MAX_CPU_ISA=AVX2).
    conv_params q = p;
    bool gathered = true;
    for (int i = 0; i < XF::rank - 2; ++i)
      gathered =
          gathered && dw.extents()[2 + i] == 1 && p.padding[static_cast<std::size_t>(i)] == 0 && p.end_padding(i) == 0;
    gathered = gathered &&
               std::any_of(p.stride.begin(), p.stride.begin() + (XF::rank - 2), [](std::int64_t v) { return v > 1; });
    dnnl::memory x_mem;
    auto xe = x.extents();
    if (gathered) {
      dnnl::memory::dims dims = x_md.dims(), strides(XF::rank);
      for (int d = 0; d < XF::rank; ++d) strides[d] = x.mapping().strides()[static_cast<std::size_t>(d)];
      for (int i = 0; i < XF::rank - 2; ++i) {
        dims[2 + i] = ye[static_cast<std::size_t>(2 + i)];
        xe[static_cast<std::size_t>(2 + i)] = ye[static_cast<std::size_t>(2 + i)];
        strides[2 + i] *= p.stride[static_cast<std::size_t>(i)];
        q.stride[static_cast<std::size_t>(i)] = 1;
      }
      x_md = dnnl::memory::desc(dims, dt, detail::activation_tag<XF>());
      x_mem = dnnl::memory(x_md, eng_);
      // memfmt::convert, not a oneDNN reorder: oneDNN refuses a strided view whose span exceeds the
      // next dimension's stride, as every other row of an odd height does (7 rows -> 4).
      memfmt::convert(x.data(), strided_desc{dims, strides, dtype_of_v<T>},
                      tensor_view<T, XF>(static_cast<T*>(x_mem.get_data_handle()), xe));
    } else {
      x_mem = dnnl::memory(x_md, eng_, detail::mut(x.data()));
    }
    const auto g = detail::geometry_of(xe, dw.extents(), ye, q);
    detail::guarded("conv_backward_weights", [&] {
      auto& e = conv_bwd_weights_entry(x_md, dw_md, dw.extents(), dbias != nullptr, dy_md, q, g);
      dnnl::memory user_dw(dw_md, eng_, dw.data());
      const bool direct = e.pd.diff_weights_desc() == dw_md;
      if (!direct && !e.dw_scratch) e.dw_scratch = dnnl::memory(e.pd.diff_weights_desc(), eng_);
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, x_mem},
                                                 {DNNL_ARG_DIFF_DST, dnnl::memory(dy_md, eng_, detail::mut(dy.data()))},
                                                 {DNNL_ARG_DIFF_WEIGHTS, direct ? user_dw : e.dw_scratch}};
      if (dbias) args.emplace(DNNL_ARG_DIFF_BIAS, dnnl::memory(e.pd.diff_bias_desc(), eng_, dbias));
      e.prim.execute(strm_, args);
      if (!direct) reorder_for(e.pd.diff_weights_desc(), dw_md).execute(strm_, e.dw_scratch, user_dw);
      strm_.wait();
      last_impl_ = &e.impl;
    });
  }

  // ---- batch normalization (per channel over N and spatial) ----
  // Training step: y = relu?(gamma * (x - mean) * invstd + beta [+ residual]) with the batch
  // statistics; running_mean/var are updated with p.momentum (running_var uses the unbiased batch
  // variance, as PyTorch does); saved_mean/saved_invstd receive the batch mean and 1/sqrt(var+eps)
  // for batch_norm_backward. All parameter pointers are required (C values each).
  template <class XT, class T, class F>
  void batch_norm_forward_training(tensor_view<XT, F> x, tensor_view<T, F> y, const param_t<T>* gamma,
                                   const param_t<T>* beta, param_t<T>* running_mean, param_t<T>* running_var,
                                   param_t<T>* saved_mean, param_t<T>* saved_invstd, const batch_norm_params& p,
                                   tensor_view<const detail::identity_t<T>, detail::identity_t<F>> residual = {}) {
    static_assert(std::is_same_v<std::remove_const_t<XT>, T>, "onednn::batch_norm: x and y element types differ");
    validate_batch_norm_forward_training(x, y, gamma, beta, running_mean, running_var, saved_mean, saved_invstd, p,
                                         residual);
    const auto md = bn_check("onednn::batch_norm_forward_training", x, y);
    const std::int64_t c = x.channels();
    const std::int64_t count = x.numel() / c;  // >= 2: validated
    const bool post = has(residual);
    const bool fuse = p.fuse_relu && !post;
    if constexpr (detail::supported_v<T>)
      detail::guarded("batch_norm_forward_training", [&] {
        auto& e = bn_fwd_entry(md, static_cast<float>(p.epsilon), true, fuse);
        stats_.resize(static_cast<std::size_t>(2 * c));
        float* mean = saved_mean;
        float* var = stats_.data();
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(md, eng_, detail::mut(x.data()))},
                                                   {DNNL_ARG_DST, dnnl::memory(md, eng_, y.data())},
                                                   {DNNL_ARG_MEAN, stat_mem(c, mean)},
                                                   {DNNL_ARG_VARIANCE, stat_mem(c, var)},
                                                   {DNNL_ARG_SCALE, stat_mem(c, detail::mut(gamma))},
                                                   {DNNL_ARG_SHIFT, stat_mem(c, detail::mut(beta))}};
        if (fuse) {
          auto& ws = relu_masks_[{x.data(), y.data(), saved_mean}];
          if (!ws || ws.get_desc() != e.pd.workspace_desc()) ws = dnnl::memory(e.pd.workspace_desc(), eng_);
          args.emplace(DNNL_ARG_WORKSPACE, ws);
        } else {
          relu_masks_.erase({x.data(), y.data(), saved_mean});
        }
        e.prim.execute(strm_, args);
        if (post)
          add_residual(md, y.data(), detail::activation_md(residual, md.data_type()), residual.data(), p.fuse_relu);
        strm_.wait();
        last_impl_ = &e.impl;
        const double m = p.momentum;
        const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
        for (std::int64_t i = 0; i < c; ++i) {
          saved_invstd[i] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[i]) + p.epsilon));
          running_mean[i] = static_cast<float>((1 - m) * running_mean[i] + m * mean[i]);
          running_var[i] = static_cast<float>((1 - m) * running_var[i] + m * var[i] * unbias);
        }
      });
  }

  // Inference: y = relu?(gamma * (x - running_mean) / sqrt(running_var + eps) + beta [+ residual]).
  template <class XT, class T, class F>
  void batch_norm_forward_inference(tensor_view<XT, F> x, tensor_view<T, F> y, const param_t<T>* gamma,
                                    const param_t<T>* beta, const param_t<T>* running_mean,
                                    const param_t<T>* running_var, const batch_norm_params& p,
                                    tensor_view<const detail::identity_t<T>, detail::identity_t<F>> residual = {}) {
    static_assert(std::is_same_v<std::remove_const_t<XT>, T>, "onednn::batch_norm: x and y element types differ");
    validate_batch_norm_forward_inference(x, y, gamma, beta, running_mean, running_var, p, residual);
    const auto md = bn_check("onednn::batch_norm_forward_inference", x, y);
    const std::int64_t c = x.channels();
    const bool post = has(residual);
    const bool fuse = p.fuse_relu && !post;
    if constexpr (detail::supported_v<T>)
      detail::guarded("batch_norm_forward_inference", [&] {
        auto& e = bn_fwd_entry(md, static_cast<float>(p.epsilon), false, fuse);
        e.prim.execute(strm_, {{DNNL_ARG_SRC, dnnl::memory(md, eng_, detail::mut(x.data()))},
                               {DNNL_ARG_DST, dnnl::memory(md, eng_, y.data())},
                               {DNNL_ARG_MEAN, stat_mem(c, detail::mut(running_mean))},
                               {DNNL_ARG_VARIANCE, stat_mem(c, detail::mut(running_var))},
                               {DNNL_ARG_SCALE, stat_mem(c, detail::mut(gamma))},
                               {DNNL_ARG_SHIFT, stat_mem(c, detail::mut(beta))}});
        if (post)
          add_residual(md, y.data(), detail::activation_md(residual, md.data_type()), residual.data(), p.fuse_relu);
        strm_.wait();
        last_impl_ = &e.impl;
      });
  }

  // Backward of the training step. With p.fuse_relu, `y` (the forward output) is required: the
  // gradient passes where y > 0. dresidual (optional) receives the gradient of the residual input.
  // After a training step with the ReLU fused and no residual, the mask is the ReLU workspace that
  // step recorded for its x, y and saved_mean buffers (one batch norm call with fuse_norm_relu);
  // other arguments are masked by y's values (an eltwise backward, then the batch norm). Contract,
  // as for the weight cache: a backward with the buffers of an earlier fused step must belong to
  // that step (the trainer's always does: each batch norm owns its saved_mean).
  template <class XT, class YT, class T, class F>
  void batch_norm_backward(tensor_view<XT, F> x, tensor_view<YT, F> dy, tensor_view<T, F> dx, const param_t<T>* gamma,
                           const param_t<T>* saved_mean, const param_t<T>* saved_invstd, param_t<T>* dgamma,
                           param_t<T>* dbeta, const batch_norm_params& p,
                           tensor_view<const detail::identity_t<T>, detail::identity_t<F>> y = {},
                           tensor_view<detail::identity_t<T>, detail::identity_t<F>> dresidual = {}) {
    static_assert(std::is_same_v<std::remove_const_t<XT>, T> && std::is_same_v<std::remove_const_t<YT>, T>,
                  "onednn::batch_norm_backward: x, dy and dx element types differ");
    validate_batch_norm_backward(x, dy, dx, gamma, saved_mean, saved_invstd, dgamma, dbeta, p, y, dresidual);
    constexpr const char* op = "onednn::batch_norm_backward";
    const auto dt = detail::data_type_of<T>(op);
    require_nonempty(op, x);
    const auto md = detail::activation_md(x, dt);
    if (detail::activation_md(dx, dt) != md || detail::activation_md(dy, dt) != md)
      unsupported_strides(op, x.strides(), dy.strides(), dx.strides());
    const std::int64_t c = x.channels();
    const float eps = static_cast<float>(p.epsilon);
    if constexpr (detail::supported_v<T>)
      detail::guarded("batch_norm_backward", [&] {
        // The gradient that reaches the normalisation: dy masked by the ReLU (where y > 0).
        dnnl::memory g(md, eng_, detail::mut(dy.data()));
        const auto mask = relu_masks_.find({x.data(), y.data(), saved_mean});
        const bool by_workspace = p.fuse_relu && dresidual.data() == nullptr && mask != relu_masks_.end();
        // The masked gradient is the residual's: written there directly when dresidual has x's
        // layout (two calls for batch norm + add + relu), else into scratch and reordered.
        const bool into_residual =
            dresidual.data() != nullptr && dresidual.data() != x.data() && detail::activation_md(dresidual, dt) == md;
        const bool masked = p.fuse_relu && !by_workspace;
        if (masked) {
          const auto y_md = detail::activation_md(y, dt);
          auto& r = eltwise_bwd_entry(md, y_md);
          if (into_residual) {
            g = dnnl::memory(md, eng_, dresidual.data());
          } else {
            grad_tmp_.resize(static_cast<std::size_t>(md.get_size()));
            g = dnnl::memory(md, eng_, grad_tmp_.data());
          }
          r.prim.execute(strm_, {{DNNL_ARG_DIFF_DST, dnnl::memory(md, eng_, detail::mut(dy.data()))},
                                 {DNNL_ARG_DST, dnnl::memory(y_md, eng_, detail::mut(y.data()))},
                                 {DNNL_ARG_DIFF_SRC, g}});
        }
        if (dresidual.data() != nullptr && !(masked && into_residual)) {
          const auto r_md = detail::activation_md(dresidual, dt);
          dnnl::memory r(r_md, eng_, dresidual.data());
          reorder_for(md, r_md).execute(strm_, g, r);
        }
        stats_.assign(static_cast<std::size_t>(2 * c), 0.f);
        float* var = stats_.data();
        for (std::int64_t i = 0; i < c; ++i) {
          const double is = saved_invstd[i];
          var[i] = static_cast<float>(1.0 / (is * is) - p.epsilon);
        }
        auto& e = bn_bwd_entry(md, eps, by_workspace);
        std::unordered_map<int, dnnl::memory> args{
            {DNNL_ARG_SRC, dnnl::memory(md, eng_, detail::mut(x.data()))},
            {DNNL_ARG_MEAN, stat_mem(c, detail::mut(saved_mean))},
            {DNNL_ARG_VARIANCE, stat_mem(c, var)},
            {DNNL_ARG_DIFF_DST, g},
            {DNNL_ARG_SCALE, stat_mem(c, detail::mut(gamma))},
            {DNNL_ARG_SHIFT, stat_mem(c, var + c)},  // asked for, unused by the gradient
            {DNNL_ARG_DIFF_SRC, dnnl::memory(md, eng_, dx.data())},
            {DNNL_ARG_DIFF_SCALE, stat_mem(c, dgamma)},
            {DNNL_ARG_DIFF_SHIFT, stat_mem(c, dbeta)}};
        if (by_workspace) args.emplace(DNNL_ARG_WORKSPACE, mask->second);
        e.prim.execute(strm_, args);
        strm_.wait();
        last_impl_ = &e.impl;
      });
  }

  // ---- capability ----
  // What this backend runs: the element types oneDNN computes in on this CPU (cpu_support.hpp), in
  // every format of rank 4 or 5, and every operation below (hardsigmoid, which has no oneDNN 2.6
  // eltwise algorithm, as two: layers.hpp). The answer holds for training too: every operation it
  // runs has its backward pass here.
  op_support support(const op_query& q) const {
    const std::string op = std::string("onednn ") + to_string(q.op);
    if (const dtype_support d = support_for(q.type); !d.supported)
      return op_support::no(errc::unsupported_dtype, op + ": " + d.reason);
    if (q.rank != 4 && q.rank != 5)
      return op_support::no(errc::unsupported, op + ": activations of rank " + std::to_string(q.rank) +
                                                   " (the backends take rank 4 or 5)");
    return op_support::yes();
  }

  // ---- layers other than conv and batch norm (layers.hpp; the reference backend's arguments) ----
  template <class T, class XF, class YF>
  void activation_forward(const activation_params& f, tensor_view<const T, XF> x, tensor_view<T, YF> y) {
    layers_.activation_forward(eng_, strm_, f, x, y);
  }

  template <class T, class AF, class BF, class YF>
  void binary_forward(binary_op kind, tensor_view<const T, AF> a, tensor_view<const T, BF> b, tensor_view<T, YF> y) {
    layers_.binary_forward(eng_, strm_, kind, a, b, y);
  }

  template <class T, class XF, class YF>
  void pool_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const pool_params& p) {
    layers_.pool_forward(eng_, strm_, x, y, p);
  }

  template <class T, class XF, class YF>
  void global_average_pool_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y) {
    layers_.global_average_pool_forward(eng_, strm_, x, y);
  }

  template <class T, class XF, class YF>
  void upsample_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const upsample_params& p) {
    layers_.upsample_forward(eng_, strm_, x, y, p);
  }

  template <class T, class XF, class YF>
  void concat_forward(const std::vector<tensor_view<const T, XF>>& xs, tensor_view<T, YF> y,
                      const concat_params& p = {}) {
    layers_.concat_forward(eng_, strm_, xs, y, p);
  }

  template <class T, class XF, class YF>
  void softmax_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const softmax_params& p) {
    layers_.softmax_forward(eng_, strm_, x, y, p);
  }

  template <class T, class XF, class YF>
  void slice_forward(tensor_view<const T, XF> x, const slice_params& p, tensor_view<T, YF> y) {
    layers_.slice_forward(x, p, y);
  }

  template <class T, class XF, class YF>
  void rearrange_forward(tensor_view<const T, XF> x, const rearrange_params& p, tensor_view<T, YF> y) {
    layers_.rearrange_forward(x, p, y);
  }

  // ---- their backward passes (backward.hpp; the reference backend's arguments) ----
  template <class T, class XF, class DYF, class DXF>
  void activation_backward(const activation_params& f, tensor_view<const T, XF> x, tensor_view<const T, DYF> dy,
                           tensor_view<T, DXF> dx) {
    backward_.activation_backward(layers_, eng_, strm_, f, x, dy, dx);
  }

  template <class T, class AF, class BF, class DYF, class DAF, class DBF>
  void binary_backward(binary_op kind, tensor_view<const T, AF> a, tensor_view<const T, BF> b,
                       tensor_view<const T, DYF> dy, tensor_view<T, DAF> da, tensor_view<T, DBF> db) {
    backward_.binary_backward(layers_, eng_, strm_, kind, a, b, dy, da, db);
  }

  template <class T, class XF, class DYF, class DXF>
  void pool_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                     const pool_params& p) {
    backward_.pool_backward(layers_, eng_, strm_, x, dy, dx, p);
  }

  template <class T, class DYF, class DXF>
  void global_average_pool_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx) {
    backward_.global_average_pool_backward(layers_, eng_, strm_, dy, dx);
  }

  template <class T, class DYF, class DXF>
  void upsample_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx, const upsample_params& p) {
    backward_.upsample_backward(layers_, eng_, strm_, dy, dx, p);
  }

  template <class T, class YF, class DYF, class DXF>
  void softmax_backward(tensor_view<const T, YF> y, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                        const softmax_params& p) {
    backward_.softmax_backward(layers_, eng_, strm_, y, dy, dx, p);
  }

  template <class T, class DYF, class DXF>
  void concat_backward(tensor_view<const T, DYF> dy, const std::vector<tensor_view<T, DXF>>& dxs,
                       const concat_params& p = {}) {
    backward_.concat_backward(layers_, eng_, strm_, dy, dxs, p);
  }

  template <class T, class DYF, class DXF>
  void slice_backward(tensor_view<const T, DYF> dy, const slice_params& p, tensor_view<T, DXF> dx) {
    backward_.slice_backward(dy, p, dx);
  }

  template <class T, class DYF, class DXF>
  void rearrange_backward(tensor_view<const T, DYF> dy, const rearrange_params& p, tensor_view<T, DXF> dx) {
    layers_.rearrange_backward(dy, p, dx);
  }

  // oneDNN 2.6 has no pad primitive: memfmt's own CPU kernels (cpu/pad.hpp) pad and crop. They only
  // move elements, so bfloat16 needs no bfloat16 arithmetic from the CPU.
  template <class T, class XF, class YF>
  void pad_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const pad_params& p) {
    validate_pad_forward(x, y, p);
    if constexpr (cpu::is_pad_type_v<T>) cpu::pad_forward<T, XF, YF>(x, y, p);
    else detail::data_type_of<T>("onednn::pad_forward");  // throws unsupported_dtype
  }

  template <class T, class DYF, class DXF>
  void pad_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx, const pad_params& p) {
    validate_pad_backward(dy, dx, p);
    if constexpr (cpu::is_pad_type_v<T>) cpu::pad_backward<T, DYF, DXF>(dy, dx, p);
    else detail::data_type_of<T>("onednn::pad_backward");  // throws unsupported_dtype
  }

  // Group (and instance) norm: oneDNN 2.6 has no primitive, so memfmt's own CPU kernel runs it
  // (backends/cpu/group_norm.hpp: the reference backend's semantics, either format, OpenMP threads).
  template <class T, class XF, class YF>
  void group_norm_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const param_t<T>* gamma,
                          const param_t<T>* beta, param_t<T>* saved_mean, param_t<T>* saved_invstd,
                          const group_norm_params& p) {
    detail::data_type_of<T>("onednn::group_norm_forward");  // the element types the rest of the backend takes
    if constexpr (detail::supported_v<T>) cpu::group_norm_forward(x, y, gamma, beta, saved_mean, saved_invstd, p);
  }

  template <class T, class XF, class DYF, class DXF>
  void group_norm_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                           const param_t<T>* gamma, const param_t<T>* saved_mean, const param_t<T>* saved_invstd,
                           param_t<T>* dgamma, param_t<T>* dbeta, const group_norm_params& p) {
    detail::data_type_of<T>("onednn::group_norm_backward");
    if constexpr (detail::supported_v<T>)
      cpu::group_norm_backward(x, dy, dx, gamma, saved_mean, saved_invstd, dgamma, dbeta, p);
  }

  // Layer norm over C: memfmt's own CPU kernel (backends/cpu/layer_norm.hpp), which reads both
  // formats in memory order; oneDNN's layer normalisation wants the normalised dim dense.
  template <class T, class XF, class YF>
  void layer_norm_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const param_t<T>* gamma,
                          const param_t<T>* beta, param_t<T>* saved_mean, param_t<T>* saved_invstd,
                          const layer_norm_params& p) {
    detail::data_type_of<T>("onednn::layer_norm_forward");
    if constexpr (detail::supported_v<T>) cpu::layer_norm_forward(x, y, gamma, beta, saved_mean, saved_invstd, p);
  }

  template <class T, class XF, class DYF, class DXF>
  void layer_norm_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                           const param_t<T>* gamma, const param_t<T>* saved_mean, const param_t<T>* saved_invstd,
                           param_t<T>* dgamma, param_t<T>* dbeta, const layer_norm_params& p) {
    detail::data_type_of<T>("onednn::layer_norm_backward");
    if constexpr (detail::supported_v<T>)
      cpu::layer_norm_backward(x, dy, dx, gamma, saved_mean, saved_invstd, dgamma, dbeta, p);
  }

  // Reductions over C and spatial axes: memfmt's own CPU kernel (backends/cpu/reduce.hpp); oneDNN
  // 2.6 has a forward reduction but no backward, and one kernel keeps both passes' arithmetic alike.
  template <class T, class XF, class YF>
  void reduce_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const reduce_params& p) {
    detail::data_type_of<T>("onednn::reduce_forward");
    if constexpr (detail::supported_v<T>) cpu::reduce_forward(x, y, p);
  }

  template <class T, class XF, class YF, class DYF, class DXF>
  void reduce_backward(tensor_view<const T, XF> x, tensor_view<const T, YF> y, tensor_view<const T, DYF> dy,
                       tensor_view<T, DXF> dx, const reduce_params& p) {
    detail::data_type_of<T>("onednn::reduce_backward");
    if constexpr (detail::supported_v<T>) cpu::reduce_backward(x, y, dy, dx, p);
  }

  // Local response norm across C: memfmt's reference loops (reference/lrn.hpp) in every window and
  // format; oneDNN's LRN primitive is not wired in yet (docs/limitations.md).
  template <class T, class XF, class YF>
  void lrn_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const lrn_params& p) {
    detail::data_type_of<T>("onednn::lrn_forward");
    if constexpr (detail::supported_v<T>) reference::lrn_forward<T, XF, YF>(x, y, p);
  }

  template <class T, class XF, class DYF, class DXF>
  void lrn_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                    const lrn_params& p) {
    detail::data_type_of<T>("onednn::lrn_backward");
    if constexpr (detail::supported_v<T>) reference::lrn_backward<T, XF, DYF, DXF>(x, dy, dx, p);
  }

  // y[n, k] = bias[k] + sum_f x[n, f] w[k, f], x [N, C, spatial...] read in PyTorch's flatten order
  // whatever its format, w K x F row-major (reference/linear.hpp). oneDNN's inner product takes x
  // as it is and w as [K, C, spatial...] in plain order, reordered once into its layout (the weight
  // cache above).
  template <class T, class XF, class YF>
  void linear_forward(tensor_view<const T, XF> x, const detail::identity_t<T>* w, const detail::identity_t<T>* bias,
                      tensor_view<T, YF> y) {
    validate_linear_forward(x, w, y);
    const auto dt = detail::data_type_of<T>("onednn::linear_forward");
    const std::int64_t n = x.extent(0), k = y.extent(1);
    if (n == 0 || k == 0) return;
    if (detail::empty(x)) {  // no features: y is the bias (oneDNN takes no empty source)
      if constexpr (detail::supported_v<T>) reference::linear_forward<T, XF, YF>(x, w, bias, y);
      return;
    }
    const auto x_md = detail::activation_md(x, dt);
    dnnl::memory::dims wd{k};
    for (int d = 1; d < XF::rank; ++d) wd.push_back(x.extent(d));
    const dnnl::memory::desc w_md(wd, dt,
                                  XF::rank == 4 ? dnnl::memory::format_tag::oihw : dnnl::memory::format_tag::oidhw);
    const dnnl::memory::desc y_md({n, k}, dt, dnnl::memory::dims{y.stride(0), y.stride(1)});
    detail::guarded("linear_forward", [&] {
      std::string key;
      detail::append_key(key, x_md);
      detail::append_key(key, y_md);
      detail::append_key(key, static_cast<std::int64_t>(bias != nullptr));
      auto it = linear_fwd_.find(key);
      if (it == linear_fwd_.end()) {
        dnnl::inner_product_forward::desc d(dnnl::prop_kind::forward_inference, x_md,
                                            dnnl::memory::desc(wd, dt, dnnl::memory::format_tag::any),
                                            bias ? bias_md(k, dt) : dnnl::memory::desc(), y_md);
        dnnl::inner_product_forward::primitive_desc pd(d, eng_);
        it = linear_fwd_.emplace(std::move(key), linear_cached{pd, dnnl::inner_product_forward(pd), {}}).first;
      }
      auto& e = it->second;
      std::unordered_map<int, dnnl::memory> args{
          {DNNL_ARG_SRC, dnnl::memory(x_md, eng_, detail::mut(x.data()))},
          {DNNL_ARG_WEIGHTS, weights_for(detail::mut(w), w_md, e.pd.weights_desc(), e.w_scratch)},
          {DNNL_ARG_DST, dnnl::memory(y_md, eng_, y.data())}};
      if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e.pd.bias_desc(), eng_, detail::mut(bias)));
      e.prim.execute(strm_, args);
      strm_.wait();
    });
  }

  // dx = dy w: the gradient of linear_forward with respect to x, in x's format and flatten order
  // (inner product backward data, w reordered once into its layout as in linear_forward).
  template <class T, class DYF, class DXF>
  void linear_backward_data(tensor_view<const T, DYF> dy, const detail::identity_t<T>* w, tensor_view<T, DXF> dx) {
    validate_linear_backward_data(dy, w, dx);
    const auto dt = detail::data_type_of<T>("onednn::linear_backward_data");
    if (detail::empty(dx)) return;
    if (detail::empty(dy)) {  // no outputs: dx is zero (oneDNN takes no empty source)
      if constexpr (detail::supported_v<T>) reference::linear_backward_data<T, DYF, DXF>(dy, w, dx);
      return;
    }
    const linear_mds m = linear_mds_of(dx, dy, dt);
    detail::guarded("linear_backward_data", [&] {
      std::string key;
      detail::append_key(key, m.x);
      detail::append_key(key, m.y);
      auto it = linear_bwd_data_.find(key);
      if (it == linear_bwd_data_.end()) {
        dnnl::inner_product_backward_data::desc d(m.x, m.w_any, m.y);
        dnnl::inner_product_backward_data::primitive_desc pd(d, eng_, linear_training_hint(m, false));
        it = linear_bwd_data_
                 .emplace(std::move(key), linear_bwd_data_cached{pd, dnnl::inner_product_backward_data(pd), {}})
                 .first;
      }
      auto& e = it->second;
      e.prim.execute(strm_, {{DNNL_ARG_DIFF_DST, dnnl::memory(m.y, eng_, detail::mut(dy.data()))},
                             {DNNL_ARG_WEIGHTS, weights_for(detail::mut(w), m.w, e.pd.weights_desc(), e.w_scratch)},
                             {DNNL_ARG_DIFF_SRC, dnnl::memory(m.x, eng_, dx.data())}});
      strm_.wait();
    });
  }

  // dw (K x F row-major, PyTorch's order) and dbias (K values, when not null): the gradients of
  // linear_forward with respect to w and bias (inner product backward weights in oneDNN's weight
  // layout, reordered to the caller's).
  template <class T, class XF, class DYF>
  void linear_backward_weights(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, detail::identity_t<T>* dw,
                               detail::identity_t<T>* dbias) {
    validate_linear_backward_weights(x, dy, dw);
    const auto dt = detail::data_type_of<T>("onednn::linear_backward_weights");
    if (detail::empty(x) || detail::empty(dy)) {  // a zero gradient or none (oneDNN takes no empty tensors)
      if constexpr (detail::supported_v<T>) reference::linear_backward_weights<T, XF, DYF>(x, dy, dw, dbias);
      return;
    }
    const linear_mds m = linear_mds_of(x, dy, dt);
    detail::guarded("linear_backward_weights", [&] {
      std::string key;
      detail::append_key(key, m.x);
      detail::append_key(key, m.y);
      detail::append_key(key, static_cast<std::int64_t>(dbias != nullptr));
      auto it = linear_bwd_weights_.find(key);
      if (it == linear_bwd_weights_.end()) {
        const std::int64_t k = dy.extent(1);
        dnnl::inner_product_backward_weights::desc d(m.x, m.w_any, dbias ? bias_md(k, dt) : dnnl::memory::desc(), m.y);
        dnnl::inner_product_backward_weights::primitive_desc pd(d, eng_, linear_training_hint(m, dbias != nullptr));
        it = linear_bwd_weights_
                 .emplace(std::move(key), linear_bwd_weights_cached{pd, dnnl::inner_product_backward_weights(pd), {}})
                 .first;
      }
      auto& e = it->second;
      dnnl::memory user_dw(m.w, eng_, dw);
      const bool direct = e.pd.diff_weights_desc() == m.w;
      if (!direct && !e.dw_scratch) e.dw_scratch = dnnl::memory(e.pd.diff_weights_desc(), eng_);
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(m.x, eng_, detail::mut(x.data()))},
                                                 {DNNL_ARG_DIFF_DST, dnnl::memory(m.y, eng_, detail::mut(dy.data()))},
                                                 {DNNL_ARG_DIFF_WEIGHTS, direct ? user_dw : e.dw_scratch}};
      if (dbias) args.emplace(DNNL_ARG_DIFF_BIAS, dnnl::memory(e.pd.diff_bias_desc(), eng_, dbias));
      e.prim.execute(strm_, args);
      if (!direct) reorder_for(e.pd.diff_weights_desc(), m.w).execute(strm_, e.dw_scratch, user_dw);
      strm_.wait();
    });
  }

 private:
  // An inner product's descriptors: x as it is, y [N, K] by its strides, w [K, C, spatial...] in
  // PyTorch's plain order and with its layout left to oneDNN.
  struct linear_mds {
    dnnl::memory::desc x, y, w, w_any;
  };

  template <class XV, class YV>
  static linear_mds linear_mds_of(const XV& x, const YV& y, dnnl::memory::data_type dt) {
    const int rank = static_cast<int>(x.extents().size());
    dnnl::memory::dims wd{y.extent(1)};
    for (int d = 1; d < rank; ++d) wd.push_back(x.extent(d));
    return {detail::activation_md(x, dt),
            dnnl::memory::desc({y.extent(0), y.extent(1)}, dt, dnnl::memory::dims{y.stride(0), y.stride(1)}),
            dnnl::memory::desc(wd, dt, rank == 4 ? dnnl::memory::format_tag::oihw : dnnl::memory::format_tag::oidhw),
            dnnl::memory::desc(wd, dt, dnnl::memory::format_tag::any)};
  }

  dnnl::inner_product_forward::primitive_desc linear_training_hint(const linear_mds& m, bool bias) {
    const auto dt = m.x.data_type();
    dnnl::inner_product_forward::desc d(dnnl::prop_kind::forward_training, m.x, m.w_any,
                                        bias ? bias_md(m.y.dims()[1], dt) : dnnl::memory::desc(), m.y);
    return dnnl::inner_product_forward::primitive_desc(d, eng_);
  }

  struct linear_bwd_data_cached {
    dnnl::inner_product_backward_data::primitive_desc pd;
    dnnl::inner_product_backward_data prim;
    dnnl::memory w_scratch;
  };
  struct linear_bwd_weights_cached {
    dnnl::inner_product_backward_weights::primitive_desc pd;
    dnnl::inner_product_backward_weights prim;
    dnnl::memory dw_scratch;  // diff weights in oneDNN's layout, reordered to the caller's
  };
  struct linear_cached {
    dnnl::inner_product_forward::primitive_desc pd;
    dnnl::inner_product_forward prim;
    dnnl::memory w_scratch;
  };
  struct conv_fwd_cached {
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::convolution_forward prim;
    std::string impl;
    dnnl::memory w_scratch;                       // reordered weights when caching is off
    std::vector<dnnl::eltwise_forward> epilogue;  // the activation, in place on y, where not a post-op
  };
  struct conv_bwd_data_cached {
    dnnl::convolution_backward_data::primitive_desc pd;
    dnnl::convolution_backward_data prim;
    std::string impl;
    dnnl::memory w_scratch;
  };
  struct conv_bwd_weights_cached {
    dnnl::convolution_backward_weights::primitive_desc pd;
    dnnl::convolution_backward_weights prim;
    std::string impl;
    dnnl::memory dw_scratch;  // diff weights in oneDNN's layout, reordered to the caller's
  };
  struct bn_fwd_cached {
    dnnl::batch_normalization_forward::primitive_desc pd;
    dnnl::batch_normalization_forward prim;
    std::string impl;
  };
  struct bn_bwd_cached {
    dnnl::batch_normalization_backward::primitive_desc pd;
    dnnl::batch_normalization_backward prim;
    std::string impl;
  };
  struct eltwise_bwd_cached {
    dnnl::eltwise_backward prim;
  };

  static dnnl::memory::desc bias_md(std::int64_t k, dnnl::memory::data_type dt) {
    return dnnl::memory::desc({k}, dt, dnnl::memory::format_tag::x);
  }

  template <class Extents>
  static std::string conv_key(char op, const dnnl::memory::desc& x_md, const dnnl::memory::desc& w_md,
                              const Extents& w_ext, bool bias, const dnnl::memory::desc& y_md, const conv_params& p) {
    std::string key(1, op);
    detail::append_key(key, x_md);
    detail::append_key(key, w_md);
    detail::append_key(key, y_md);
    detail::append_key(key, static_cast<std::int64_t>(bias));
    detail::append_key(key, static_cast<std::int64_t>(w_ext[0]));
    detail::append_params(key, p, static_cast<int>(w_ext.size()) - 2);
    return key;
  }

  template <class Extents>
  conv_fwd_cached& conv_fwd_entry(const dnnl::memory::desc& x_md, const dnnl::memory::desc& w_md, const Extents& w_ext,
                                  bool bias, const dnnl::memory::desc& y_md, const conv_params& p,
                                  const detail::conv_geometry& g, const conv_fusion& f, bool residual) {
    // The epilogue's post-ops: the residual's sum, then the activation's eltwise steps.
    const bool activates = f.activation.kind != memfmt::activation::identity;
    const detail::eltwise_steps steps = detail::eltwise_of(f.activation);
    std::string key = conv_key('f', x_md, w_md, w_ext, bias, y_md, p);
    detail::append_key(key, static_cast<std::int64_t>(residual));
    for (int i = 0; activates && i < steps.count; ++i) detail::append_key(key, steps.step[i]);
    auto it = conv_fwd_.find(key);
    if (it != conv_fwd_.end()) return it->second;
    const auto dt = x_md.data_type();
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x_md,
                                      detail::weights_any_md(w_ext, p.groups, dt),
                                      bias ? bias_md(w_ext[0], dt) : dnnl::memory::desc(), y_md, g.strides, g.dilates,
                                      g.pad_l, g.pad_r);
    dnnl::post_ops po;
    if (residual) po.append_sum(1.f);
    for (int i = 0; activates && i < steps.count; ++i)
      po.append_eltwise(1.f, steps.step[i].alg, steps.step[i].alpha, steps.step[i].beta);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    dnnl::convolution_forward::primitive_desc pd(d, attr, eng_);
    std::vector<dnnl::eltwise_forward> epilogue;
    // oneDNN 2.6's GEMM-based convolutions (its choice for channels-first 1x1 convs) apply eltwise
    // post-ops element by element after the GEMM, at 2-10x the conv's own time for relu6, silu or
    // GELU, where one eltwise pass over y costs a memory pass: there the activation runs as its own
    // primitive, in place (bench_network BM_network/convnext_tiny/f32/fwd/all_channels_first).
    if (activates && std::string(pd.impl_info_str()).find("gemm") != std::string::npos) {
      dnnl::post_ops sum_only;
      if (residual) sum_only.append_sum(1.f);
      dnnl::primitive_attr plain;
      plain.set_post_ops(sum_only);
      pd = dnnl::convolution_forward::primitive_desc(d, plain, eng_);
      for (int i = 0; i < steps.count; ++i)
        epilogue.emplace_back(dnnl::eltwise_forward::primitive_desc(
            dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, steps.step[i].alg, y_md,
                                        steps.step[i].alpha, steps.step[i].beta),
            eng_));
    }
    std::string impl = pd.impl_info_str();
    if (!epilogue.empty()) impl += " + eltwise";
    conv_fwd_cached e{pd, dnnl::convolution_forward(pd), std::move(impl), {}, std::move(epilogue)};
    return conv_fwd_.emplace(std::move(key), std::move(e)).first->second;
  }

  template <class Extents>
  dnnl::convolution_forward::primitive_desc training_hint(const dnnl::memory::desc& x_md, const Extents& w_ext,
                                                          bool bias, const dnnl::memory::desc& y_md,
                                                          const conv_params& p, const detail::conv_geometry& g) {
    const auto dt = x_md.data_type();
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, x_md,
                                      detail::weights_any_md(w_ext, p.groups, dt),
                                      bias ? bias_md(w_ext[0], dt) : dnnl::memory::desc(), y_md, g.strides, g.dilates,
                                      g.pad_l, g.pad_r);
    return dnnl::convolution_forward::primitive_desc(d, eng_);
  }

  template <class Extents>
  conv_bwd_data_cached& conv_bwd_data_entry(const dnnl::memory::desc& dx_md, const dnnl::memory::desc& w_md,
                                            const Extents& w_ext, const dnnl::memory::desc& dy_md, const conv_params& p,
                                            const detail::conv_geometry& g) {
    std::string key = conv_key('d', dx_md, w_md, w_ext, false, dy_md, p);
    auto it = conv_bwd_data_.find(key);
    if (it != conv_bwd_data_.end()) return it->second;
    const auto dt = dx_md.data_type();
    dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, dx_md,
                                            detail::weights_any_md(w_ext, p.groups, dt), dy_md, g.strides, g.dilates,
                                            g.pad_l, g.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(d, eng_, training_hint(dx_md, w_ext, false, dy_md, p, g));
    conv_bwd_data_cached e{pd, dnnl::convolution_backward_data(pd), pd.impl_info_str(), {}};
    return conv_bwd_data_.emplace(std::move(key), std::move(e)).first->second;
  }

  template <class Extents>
  conv_bwd_weights_cached& conv_bwd_weights_entry(const dnnl::memory::desc& x_md, const dnnl::memory::desc& dw_md,
                                                  const Extents& w_ext, bool bias, const dnnl::memory::desc& dy_md,
                                                  const conv_params& p, const detail::conv_geometry& g) {
    std::string key = conv_key('w', x_md, dw_md, w_ext, bias, dy_md, p);
    auto it = conv_bwd_weights_.find(key);
    if (it != conv_bwd_weights_.end()) return it->second;
    const auto dt = x_md.data_type();
    dnnl::convolution_backward_weights::desc d(
        dnnl::algorithm::convolution_direct, x_md, detail::weights_any_md(w_ext, p.groups, dt),
        bias ? bias_md(w_ext[0], dt) : dnnl::memory::desc(), dy_md, g.strides, g.dilates, g.pad_l, g.pad_r);
    dnnl::convolution_backward_weights::primitive_desc pd(d, eng_, training_hint(x_md, w_ext, bias, dy_md, p, g));
    conv_bwd_weights_cached e{pd, dnnl::convolution_backward_weights(pd), pd.impl_info_str(), {}};
    return conv_bwd_weights_.emplace(std::move(key), std::move(e)).first->second;
  }

  dnnl::reorder& reorder_for(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
    std::string key;
    detail::append_key(key, from);
    detail::append_key(key, to);
    auto it = reorders_.find(key);
    if (it != reorders_.end()) return it->second;
    dnnl::reorder r(dnnl::reorder::primitive_desc(eng_, from, eng_, to));
    return reorders_.emplace(std::move(key), std::move(r)).first->second;
  }

  void run_reorder(const dnnl::memory::desc& from, void* src, const dnnl::memory::desc& to, void* dst) {
    dnnl::memory s(from, eng_, src), d(to, eng_, dst);
    reorder_for(from, to).execute(strm_, s, d);
  }

  // The caller's weights in the layout `want`: the caller's memory itself when the layouts agree,
  // else a reordered copy, cached per pointer, or with caching off `scratch`, which `refresh`
  // (from `src`) fills before each use.
  struct bound_weights {
    dnnl::memory weights;
    dnnl::reorder refresh;
    dnnl::memory src;
  };
  bound_weights bind_weights(void* data, const dnnl::memory::desc& user, const dnnl::memory::desc& want,
                             dnnl::memory& scratch) {
    dnnl::memory src(user, eng_, data);
    if (user == want) return {src, {}, {}};
    if (!cache_weights_) {
      if (!scratch) scratch = dnnl::memory(want, eng_);
      return {scratch, reorder_for(user, want), src};
    }
    std::string key;
    detail::append_key(key, user);
    detail::append_key(key, want);
    auto& per_ptr = weights_[data];
    auto it = per_ptr.find(key);
    if (it != per_ptr.end()) return {it->second, {}, {}};
    dnnl::memory dst(want, eng_);
    reorder_for(user, want).execute(strm_, src, dst);
    return {per_ptr.emplace(std::move(key), dst).first->second, {}, {}};
  }

  // bind_weights for a call made now.
  dnnl::memory weights_for(void* data, const dnnl::memory::desc& user, const dnnl::memory::desc& want,
                           dnnl::memory& scratch) {
    bound_weights b = bind_weights(data, user, want, scratch);
    if (b.refresh) b.refresh.execute(strm_, b.src, b.weights);
    return b.weights;
  }

  // ---- batch-norm helpers ----
  template <class V>
  static bool has(const V& v) noexcept {
    return v.data() != nullptr;
  }

  template <class S>
  [[noreturn]] static void unsupported_strides(const char* op, const S& x, const S& a, const S& b) {
    memfmt::detail::fail(errc::unsupported, std::string(op) +
                                                ": oneDNN batch norm needs x, y/dy and dx with equal "
                                                "strides; got " +
                                                detail::dims_str(x) + ", " + detail::dims_str(a) + ", " +
                                                detail::dims_str(b));
  }

  // oneDNN's batch norm has no empty tensors (the shared validation allows them).
  template <class XT, class F>
  static void require_nonempty(const char* op, const tensor_view<XT, F>& x) {
    for (int d = 0; d < F::rank; ++d)
      if (x.extent(d) < 1)
        memfmt::detail::fail(errc::invalid_argument,
                             std::string(op) + ": input sizes " + detail::dims_str(x.extents()) + " must be positive");
  }

  // This backend's limits on top of the shared validation: element type, no empty tensors, x and y
  // with the same strides.
  template <class XT, class T, class F>
  dnnl::memory::desc bn_check(const char* op, const tensor_view<XT, F>& x, const tensor_view<T, F>& y) {
    const auto dt = detail::data_type_of<T>(op);
    require_nonempty(op, x);
    const auto md = detail::activation_md(x, dt);
    if (detail::activation_md(y, dt) != md) unsupported_strides(op, x.strides(), y.strides(), y.strides());
    return md;
  }

  dnnl::memory stat_mem(std::int64_t c, float* p) {
    return dnnl::memory(dnnl::memory::desc({c}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::x), eng_, p);
  }

  bn_fwd_cached& bn_fwd_entry(const dnnl::memory::desc& md, float eps, bool training, bool relu) {
    std::string key;
    detail::append_key(key, md);
    detail::append_key(key, static_cast<std::int64_t>(training) * 2 + static_cast<std::int64_t>(relu));
    key.append(reinterpret_cast<const char*>(&eps), sizeof eps);
    auto it = bn_fwd_.find(key);
    if (it != bn_fwd_.end()) return it->second;
    auto pd = bn_fwd_pd(md, eps, training, relu);
    bn_fwd_cached e{pd, dnnl::batch_normalization_forward(pd), pd.impl_info_str()};
    return bn_fwd_.emplace(std::move(key), std::move(e)).first->second;
  }

  dnnl::batch_normalization_forward::primitive_desc bn_fwd_pd(const dnnl::memory::desc& md, float eps, bool training,
                                                              bool relu) {
    auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    if (!training) flags = flags | dnnl::normalization_flags::use_global_stats;
    if (relu) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
    dnnl::batch_normalization_forward::desc d(
        training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, md, eps, flags);
    return dnnl::batch_normalization_forward::primitive_desc(d, eng_);
  }

  bn_bwd_cached& bn_bwd_entry(const dnnl::memory::desc& md, float eps, bool relu) {
    std::string key;
    detail::append_key(key, md);
    detail::append_key(key, static_cast<std::int64_t>(relu));
    key.append(reinterpret_cast<const char*>(&eps), sizeof eps);
    auto it = bn_bwd_.find(key);
    if (it != bn_bwd_.end()) return it->second;
    auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    if (relu) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
    dnnl::batch_normalization_backward::desc d(dnnl::prop_kind::backward, md, md, eps, flags);
    dnnl::batch_normalization_backward::primitive_desc pd(d, eng_, bn_fwd_pd(md, eps, true, relu));
    bn_bwd_cached e{pd, dnnl::batch_normalization_backward(pd), pd.impl_info_str()};
    return bn_bwd_.emplace(std::move(key), std::move(e)).first->second;
  }

  // y = relu?(y + residual), one binary primitive with an eltwise post-op.
  void add_residual(const dnnl::memory::desc& y_md, void* y, const dnnl::memory::desc& r_md, const void* r, bool relu) {
    std::string key;
    detail::append_key(key, y_md);
    detail::append_key(key, r_md);
    detail::append_key(key, static_cast<std::int64_t>(relu));
    auto it = binaries_.find(key);
    if (it == binaries_.end()) {
      dnnl::binary::desc d(dnnl::algorithm::binary_add, y_md, r_md, y_md);
      dnnl::post_ops po;
      if (relu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      dnnl::primitive_attr attr;
      attr.set_post_ops(po);
      it = binaries_.emplace(std::move(key), dnnl::binary(dnnl::binary::primitive_desc(d, attr, eng_))).first;
    }
    dnnl::memory ym(y_md, eng_, y);
    it->second.execute(
        strm_, {{DNNL_ARG_SRC_0, ym}, {DNNL_ARG_SRC_1, dnnl::memory(r_md, eng_, detail::mut(r))}, {DNNL_ARG_DST, ym}});
  }

  // diff = dy where y > 0, else 0 (ReLU backward from its output).
  eltwise_bwd_cached& eltwise_bwd_entry(const dnnl::memory::desc& md, const dnnl::memory::desc& y_md) {
    std::string key;
    detail::append_key(key, md);
    detail::append_key(key, y_md);
    auto it = eltwise_bwd_.find(key);
    if (it != eltwise_bwd_.end()) return it->second;
    const auto alg = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
    dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training, alg, y_md, 0.f, 0.f);
    dnnl::eltwise_forward::primitive_desc hint(fd, eng_);
    dnnl::eltwise_backward::desc d(alg, md, y_md, 0.f, 0.f);
    dnnl::eltwise_backward::primitive_desc pd(d, eng_, hint);
    return eltwise_bwd_.emplace(std::move(key), eltwise_bwd_cached{dnnl::eltwise_backward(pd)}).first->second;
  }

  dnnl::engine eng_;
  dnnl::stream strm_;
  const std::string* last_impl_ = nullptr;  // a cached primitive's name: entries never move
  bool cache_weights_ = true;
  std::unordered_map<std::string, conv_fwd_cached> conv_fwd_;
  std::unordered_map<std::string, conv_bwd_data_cached> conv_bwd_data_;
  std::unordered_map<std::string, conv_bwd_weights_cached> conv_bwd_weights_;
  std::unordered_map<std::string, bn_fwd_cached> bn_fwd_;
  std::unordered_map<std::string, bn_bwd_cached> bn_bwd_;
  std::unordered_map<std::string, dnnl::reorder> reorders_;
  std::unordered_map<std::string, dnnl::binary> binaries_;
  std::unordered_map<std::string, eltwise_bwd_cached> eltwise_bwd_;
  std::unordered_map<std::string, linear_cached> linear_fwd_;
  std::unordered_map<std::string, linear_bwd_data_cached> linear_bwd_data_;
  std::unordered_map<std::string, linear_bwd_weights_cached> linear_bwd_weights_;
  detail::layer_primitives layers_;
  detail::layer_backward backward_;
  std::unordered_map<const void*, std::unordered_map<std::string, dnnl::memory>> weights_;
  // (x, y, saved_mean) of a training step with the ReLU fused -> its ReLU workspace.
  std::map<std::tuple<const void*, const void*, const void*>, dnnl::memory> relu_masks_;
  std::vector<float> stats_;
  std::vector<unsigned char> grad_tmp_;
};

}  // namespace memfmt::onednn
