// memfmt/backends/cudnn/graphs.hpp - the graphs the backend runs, built from validated problems.
//
// Each backend operation is first turned into a *problem* (tensor specs + attributes), validated
// entirely in memfmt - shapes, groups, dtypes, pointers - before any cuDNN call; then into one or
// more graph_builders. Building a graph needs no GPU, so the host tests build exactly these graphs,
// finalize them through cuDNN and read every descriptor back.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "../../dtype.hpp"
#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../../layers/conv_params.hpp"
#include "../validate.hpp"
#include "conv_desc.hpp"
#include "graph.hpp"
#include "tensor_desc.hpp"

namespace memfmt::cudnn {

// Tensor unique ids: unique within every graph the backend builds.
namespace uid {
inline constexpr std::int64_t x = 1, w = 2, y = 3, bias = 4, aux = 5, dy = 6, dx = 7,
                              residual = 8;  // aux: in-place output alias
inline constexpr std::int64_t scale = 10, shift = 11, mean = 12, inv_variance = 13, epsilon = 14, momentum = 15,
                              running_mean_in = 16, running_var_in = 17, running_mean_out = 18, running_var_out = 19,
                              dscale = 20, dshift = 21, grad = 22;
inline constexpr std::int64_t constant_base = 50;  // by-value scalars of a layer graph: 50, 51, ...
inline constexpr std::int64_t virtual_base = 100;  // fused intermediates: 100, 101, ...
}  // namespace uid

// The float intermediates of one graph, shaped like `like` and numbered from uid::virtual_base up
// in the order they are asked for.
class virtual_tensors {
 public:
  explicit virtual_tensors(tensor_spec like) : like_(std::move(like)) {}
  tensor_spec operator()() { return virtual_like(like_, dtype::float32, next_++); }

 private:
  tensor_spec like_;
  std::int64_t next_ = uid::virtual_base;
};

// ---------------------------------------------------------------- convolution

struct conv_problem {
  conv_direction direction = conv_direction::forward;
  tensor_spec x, w, y;  // in the x, w, y roles (dx, dw, dy for the backward directions)
  conv_spec conv;
  std::optional<tensor_spec> bias;  // forward: bias [1, K, 1, 1]; backward_weights: dbias

  std::string key() const {
    return std::string(direction == conv_direction::forward         ? "fprop"
                       : direction == conv_direction::backward_data ? "dgrad"
                                                                    : "wgrad") +
           "|" + x.key() + "|" + w.key() + "|" + y.key() + "|" + conv.key() + (bias ? "|" + bias->key() : "");
  }
};

namespace detail {
template <class T>
void require_supported(const char* op) {
  (void)op;
  (void)to_cudnn(dtype_of_v<std::remove_cv_t<T>>);  // throws unsupported_dtype naming the type
}
}  // namespace detail

// x, w, y are the forward roles: for backward_data x is dx (written) and y is dy (read); for
// backward_weights w is dw (written). Every check happens here, before any cuDNN call: first the
// checks all backends share (validate.hpp), then this backend's (element type, alignment).
template <class XT, class XF, class WT, class WF, class YT, class YF>
conv_problem make_conv_problem(conv_direction dir, const tensor_view<XT, XF>& x, const tensor_view<WT, WF>& w,
                               const tensor_view<YT, YF>& y, const conv_params& p, bool has_bias,
                               const void* bias_ptr) {
  static_assert(XF::rank == WF::rank && WF::rank == YF::rank,
                "cuDNN conv: input, weight and output must have the same rank (all 2-D or all 3-D formats)");
  using T = std::remove_cv_t<XT>;
  static_assert(std::is_same_v<T, std::remove_cv_t<WT>> && std::is_same_v<T, std::remove_cv_t<YT>>,
                "cuDNN conv: one element type for input, weight and output");
  const char* op = dir == conv_direction::forward         ? "cuDNN conv_forward"
                   : dir == conv_direction::backward_data ? "cuDNN conv_backward_data"
                                                          : "cuDNN conv_backward_weights";
  if (dir == conv_direction::forward) validate_conv_forward(x, w, y, p);
  else if (dir == conv_direction::backward_data) validate_conv_backward_data(y, w, x, p);
  else validate_conv_backward_weights(x, y, w, p);
  detail::require_supported<T>(op);
  conv_problem pr;
  pr.direction = dir;
  pr.x = spec_of(x, uid::x);
  pr.w = spec_of(w, uid::w);
  pr.y = spec_of(y, uid::y);
  pr.conv = conv_spec_of(p, XF::rank - 2, compute_type_for(dtype_of_v<T>));
  if (has_bias) pr.bias = channel_spec(w.extent(0), XF::rank, dtype_of_v<T>, uid::bias, bias_ptr);
  return pr;
}

// The convolution alone (the bias, if any, is left to a fused or a separate graph).
inline graph_builder conv_graph(const conv_problem& pr) {
  graph_builder g;
  g.conv(pr.direction, pr.x, pr.w, pr.y, pr.conv);
  return g;
}

// Forward convolution with the bias fused: conv -> virtual (compute type) -> + bias -> y.
inline graph_builder conv_bias_graph(const conv_problem& pr) {
  graph_builder g;
  const dtype acc = pr.conv.compute_type == CUDNN_DATA_DOUBLE ? dtype::float64 : dtype::float32;
  const tensor_spec t = virtual_like(pr.y, acc, uid::virtual_base);
  g.conv(conv_direction::forward, pr.x, pr.w, t, pr.conv);
  g.pointwise(CUDNN_POINTWISE_ADD, t, &*pr.bias, pr.y, pr.conv.compute_type);
  return g;
}

// y = y + bias in place (the unfused fallback): y is read under uid::y and written under uid::aux.
inline graph_builder bias_add_graph(const tensor_spec& y, const tensor_spec& bias, cudnnDataType_t math) {
  graph_builder g;
  const pointwise_frame f(y);
  const tensor_spec in = f.full(y), b = f.param(bias);
  tensor_spec out = in;
  out.uid = uid::aux;
  g.pointwise(CUDNN_POINTWISE_ADD, in, &b, out, math);
  return g;
}

// dbias = sum of dy over N and spatial.
inline graph_builder bias_grad_graph(const tensor_spec& dy, const tensor_spec& dbias, cudnnDataType_t math) {
  graph_builder g;
  g.reduction_sum(dy, dbias, math);
  return g;
}

// ---------------------------------------------------------------- batch norm

struct bn_problem {
  int rank = 4;
  dtype param_type = dtype::float32;
  cudnnDataType_t math = CUDNN_DATA_FLOAT;
  tensor_spec x, y, residual, dy, dx, grad;  // grad: dy masked by relu (backward)
  bool has_residual = false, fuse_relu = false, update_running = false, has_dresidual = false;
  std::int64_t channels = 0;

  tensor_spec channel(std::int64_t id) const { return channel_spec(channels, rank, param_type, id); }
  tensor_spec scalar(std::int64_t id) const { return scalar_spec(rank, param_type, id); }
  std::string key(const char* op) const {
    std::string k = std::string(op) + "|" + x.key() + "|" + y.key() + "|" + std::string(to_string(param_type));
    if (has_residual) k += "|res" + residual.key();
    if (fuse_relu) k += "|relu";
    if (update_running) k += "|running";
    if (has_dresidual) k += "|dres";
    return k;
  }
};

// The specs of a batch-norm problem (checks only the element type). y_out is the forward output,
// y_in the forward output read by the backward pass (optional). The arguments are validated by the
// make_bn_*_problem functions below, which the backend calls.
template <class T, class F>
bn_problem make_bn_problem(const char* op, tensor_view<const T, F> x, tensor_view<const T, F> y_in,
                           tensor_view<T, F> y_out, const batch_norm_params& p) {
  detail::require_supported<T>(op);
  bn_problem pr;
  pr.rank = F::rank;
  pr.param_type = dtype_of_v<param_t<T>>;
  pr.math = compute_type_for(dtype_of_v<T>);
  pr.channels = x.channels();
  pr.fuse_relu = p.fuse_relu;
  pr.x = spec_of(x, uid::x);
  if (y_out.data() != nullptr || y_out.numel() > 0) pr.y = spec_of(y_out, uid::y);
  else if (y_in.data() != nullptr) pr.y = spec_of(y_in, uid::y);
  return pr;
}

// Validated problems of the three batch-norm operations: the shared checks (validate.hpp), then
// the element type and alignment, all before any cuDNN call.
template <class T, class F>
bn_problem make_bn_training_problem(tensor_view<const T, F> x, tensor_view<T, F> y, const param_t<T>* gamma,
                                    const param_t<T>* beta, const param_t<T>* running_mean,
                                    const param_t<T>* running_var, const param_t<T>* saved_mean,
                                    const param_t<T>* saved_invstd, const batch_norm_params& p,
                                    tensor_view<const T, F> residual = {}) {
  validate_batch_norm_forward_training(x, y, gamma, beta, running_mean, running_var, saved_mean, saved_invstd, p,
                                       residual);
  bn_problem pr = make_bn_problem<T, F>("cuDNN batch_norm_forward_training", x, {}, y, p);
  pr.update_running = running_mean != nullptr;  // null only when there are no channels
  pr.has_residual = residual.data() != nullptr;
  if (pr.has_residual) pr.residual = spec_of(residual, uid::residual);
  return pr;
}

template <class T, class F>
bn_problem make_bn_inference_problem(tensor_view<const T, F> x, tensor_view<T, F> y, const param_t<T>* gamma,
                                     const param_t<T>* beta, const param_t<T>* running_mean,
                                     const param_t<T>* running_var, const batch_norm_params& p,
                                     tensor_view<const T, F> residual = {}) {
  validate_batch_norm_forward_inference(x, y, gamma, beta, running_mean, running_var, p, residual);
  bn_problem pr = make_bn_problem<T, F>("cuDNN batch_norm_forward_inference", x, {}, y, p);
  pr.has_residual = residual.data() != nullptr;
  if (pr.has_residual) pr.residual = spec_of(residual, uid::residual);
  return pr;
}

template <class T, class F>
bn_problem make_bn_backward_problem(tensor_view<const T, F> x, tensor_view<const T, F> dy, tensor_view<T, F> dx,
                                    const param_t<T>* gamma, const param_t<T>* saved_mean,
                                    const param_t<T>* saved_invstd, const param_t<T>* dgamma, const param_t<T>* dbeta,
                                    const batch_norm_params& p, tensor_view<const T, F> y = {},
                                    tensor_view<T, F> dresidual = {}) {
  validate_batch_norm_backward(x, dy, dx, gamma, saved_mean, saved_invstd, dgamma, dbeta, p, y, dresidual);
  bn_problem pr = make_bn_problem<T, F>("cuDNN batch_norm_backward", x, y, {}, p);
  pr.dy = spec_of(dy, uid::dy);
  pr.dx = spec_of(dx, uid::dx);
  pr.has_dresidual = dresidual.data() != nullptr;
  return pr;
}

// Forward (training or inference) with its epilogue: norm -> [+ residual] -> [relu] -> y. With
// `fused` false the norm writes y directly and the epilogue is left to epilogue_graph().
inline graph_builder bn_forward_graph(const bn_problem& pr, bool training, bool fused) {
  graph_builder g;
  const bool epilogue = fused && (pr.has_residual || pr.fuse_relu);
  const tensor_spec norm_out = epilogue ? virtual_like(pr.y, dtype::float32, uid::virtual_base) : pr.y;
  graph_builder::norm_forward_tensors t;
  t.x = pr.x;
  t.y = norm_out;
  t.scale = pr.channel(uid::scale);
  t.bias = pr.channel(uid::shift);
  t.epsilon = pr.scalar(uid::epsilon);
  t.mean = pr.channel(uid::mean);
  t.inv_variance = pr.channel(uid::inv_variance);
  const tensor_spec momentum = pr.scalar(uid::momentum), rm_in = pr.channel(uid::running_mean_in),
                    rv_in = pr.channel(uid::running_var_in), rm_out = pr.channel(uid::running_mean_out),
                    rv_out = pr.channel(uid::running_var_out);
  if (training && pr.update_running) {
    t.momentum = &momentum;
    t.in_running_mean = &rm_in;
    t.in_running_var = &rv_in;
    t.out_running_mean = &rm_out;
    t.out_running_var = &rv_out;
  }
  g.norm_forward(training ? CUDNN_NORM_FWD_TRAINING : CUDNN_NORM_FWD_INFERENCE, t);
  if (epilogue) {
    tensor_spec cur = norm_out;
    if (pr.has_residual) {
      const tensor_spec sum = pr.fuse_relu ? virtual_like(pr.y, dtype::float32, uid::virtual_base + 1) : pr.y;
      g.pointwise(CUDNN_POINTWISE_ADD, cur, &pr.residual, sum, CUDNN_DATA_FLOAT);
      cur = sum;
    }
    if (pr.fuse_relu) g.pointwise(CUDNN_POINTWISE_RELU_FWD, cur, nullptr, pr.y, CUDNN_DATA_FLOAT);
  }
  return g;
}

// The unfused epilogue, in place on y: y (uid::y) [+ residual] [relu] -> y (uid::aux, same memory).
inline graph_builder epilogue_graph(const bn_problem& pr) {
  graph_builder g;
  const pointwise_frame f(pr.y);
  const tensor_spec y = f.full(pr.y), residual = f.full(pr.residual);
  tensor_spec out = y;
  out.uid = uid::aux;
  tensor_spec cur = y;
  if (pr.has_residual) {
    const tensor_spec sum = pr.fuse_relu ? virtual_like(y, dtype::float32, uid::virtual_base) : out;
    g.pointwise(CUDNN_POINTWISE_ADD, cur, &residual, sum, CUDNN_DATA_FLOAT);
    cur = sum;
  }
  if (pr.fuse_relu) g.pointwise(CUDNN_POINTWISE_RELU_FWD, cur, nullptr, out, CUDNN_DATA_FLOAT);
  return g;
}

// inv_variance = 1 / sqrt(running_var + eps) per channel (inference feeds it to the norm op).
inline graph_builder inv_std_graph(const bn_problem& pr) {
  graph_builder g;
  const tensor_spec var = pr.channel(uid::running_var_in), eps = pr.scalar(uid::epsilon),
                    out = pr.channel(uid::inv_variance);
  const tensor_spec sum = virtual_like(var, dtype::float32, uid::virtual_base);
  g.pointwise(CUDNN_POINTWISE_ADD, var, &eps, sum, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_RSQRT, sum, nullptr, out, CUDNN_DATA_FLOAT);
  return g;
}

// Batch-norm inference as one pointwise graph: y = (x - mean) * inv_variance * gamma + beta, then
// [+ residual] [relu]. cuDNN 9's NORM_FORWARD runs the inference phase of layer and instance norm,
// but may have no batch-norm engine for it; the runtime-fusion engine runs this graph instead.
inline graph_builder bn_inference_pointwise_graph(const bn_problem& pr) {
  graph_builder g;
  const pointwise_frame f(pr.x);
  const tensor_spec x = f.full(pr.x), y = f.full(pr.y), residual = f.full(pr.residual);
  const tensor_spec mean = f.param(pr.channel(uid::mean)), inv = f.param(pr.channel(uid::inv_variance)),
                    gamma = f.param(pr.channel(uid::scale)), beta = f.param(pr.channel(uid::shift));
  virtual_tensors tmp(y);
  const tensor_spec centered = tmp(), normed = tmp(), scaled = tmp();
  g.pointwise(CUDNN_POINTWISE_SUB, x, &mean, centered, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, centered, &inv, normed, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, normed, &gamma, scaled, CUDNN_DATA_FLOAT);
  const bool more = pr.has_residual || pr.fuse_relu;
  tensor_spec cur = more ? tmp() : y;
  g.pointwise(CUDNN_POINTWISE_ADD, scaled, &beta, cur, CUDNN_DATA_FLOAT);
  if (pr.has_residual) {
    const tensor_spec sum = pr.fuse_relu ? tmp() : y;
    g.pointwise(CUDNN_POINTWISE_ADD, cur, &residual, sum, CUDNN_DATA_FLOAT);
    cur = sum;
  }
  if (pr.fuse_relu) g.pointwise(CUDNN_POINTWISE_RELU_FWD, cur, nullptr, y, CUDNN_DATA_FLOAT);
  return g;
}

// grad = relu'(y) * dy (fuse_relu) or a copy of dy, into the dresidual buffer or scratch.
inline graph_builder relu_grad_graph(const bn_problem& pr) {
  graph_builder g;
  const pointwise_frame f(pr.dy);
  const tensor_spec dy = f.full(pr.dy), y = f.full(pr.y), grad = f.full(pr.grad);
  if (pr.fuse_relu) g.pointwise(CUDNN_POINTWISE_RELU_BWD, dy, &y, grad, CUDNN_DATA_FLOAT);
  else g.pointwise(CUDNN_POINTWISE_IDENTITY, dy, nullptr, grad, CUDNN_DATA_FLOAT);
  return g;
}

// dx, dgamma, dbeta from x, the (masked) gradient, gamma and the saved statistics.
inline graph_builder bn_backward_graph(const bn_problem& pr, bool masked) {
  graph_builder g;
  graph_builder::norm_backward_tensors t;
  t.x = pr.x;
  t.dy = masked ? pr.grad : pr.dy;
  t.scale = pr.channel(uid::scale);
  t.mean = pr.channel(uid::mean);
  t.inv_variance = pr.channel(uid::inv_variance);
  t.dscale = pr.channel(uid::dscale);
  t.dbias = pr.channel(uid::dshift);
  t.dx = pr.dx;
  g.norm_backward(t);
  return g;
}

}  // namespace memfmt::cudnn
