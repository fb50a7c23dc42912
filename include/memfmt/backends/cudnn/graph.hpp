// memfmt/backends/cudnn/graph.hpp - operation descriptors and the operation graph.
//
// graph_builder owns every descriptor of one graph (tensors by unique id, convolution and pointwise
// descriptors, operations) so they outlive the graph, the engine configs and the plan built on it.
// Nothing here needs a GPU: tensors, operations and the graph all finalize on the host, which is
// what the host tests read back.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "conv_desc.hpp"
#include "descriptor.hpp"
#include "tensor_desc.hpp"

namespace memfmt::cudnn {

enum class conv_direction { forward, backward_data, backward_weights };

// Attributes of a pointwise operation beyond its mode: relu with an upper clip (relu6), swish's beta.
struct pointwise_options {
  std::optional<double> relu_upper_clip;
  std::optional<double> relu_lower_clip_slope;  // RELU_FWD / RELU_BWD below the (zero) lower clip
  std::optional<double> swish_beta;
  std::optional<double> elu_alpha;
  std::optional<double> softplus_beta;
};

// A resample (pooling or up-sampling) operation: per spatial dimension window, strides and
// paddings as fractions (up-sampling by 2 is a stride of 1/2).
struct resample_spec {
  cudnnResampleMode_t mode = CUDNN_RESAMPLE_MAXPOOL;
  cudnnPaddingMode_t padding_mode = CUDNN_NEG_INF_PAD;
  cudnnDataType_t compute_type = CUDNN_DATA_FLOAT;
  std::vector<cudnnFraction_t> window, strides, pre_padding, post_padding;

  std::string key() const {
    return "rs" + std::to_string(static_cast<int>(mode)) + "p" + std::to_string(static_cast<int>(padding_mode)) + "c" +
           std::to_string(static_cast<int>(compute_type)) + "w" + fractions_to_string(window) + "s" +
           fractions_to_string(strides) + "b" + fractions_to_string(pre_padding) + "e" +
           fractions_to_string(post_padding);
  }
};

// One operation as the builder was asked for it (unique ids of its x, b and y; -1 when absent).
struct op_record {
  enum class kind { pointwise, reduction_sum, resample, resample_backward, matmul };
  kind op = kind::pointwise;
  cudnnPointwiseMode_t mode = CUDNN_POINTWISE_IDENTITY;  // pointwise only
  pointwise_options options;
  std::int64_t x = -1, b = -1, y = -1;
};

class graph_builder {
 public:
  // The finalized tensor descriptor of `s` (one per unique id; a second spec with the same id must match).
  const descriptor& tensor(const tensor_spec& s) {
    auto it = tensors_.find(s.uid);
    if (it != tensors_.end()) {
      if (specs_.at(s.uid).key() != s.key())
        memfmt::detail::fail(errc::invalid_argument, "cuDNN graph: two different tensors share unique id " +
                                                         std::to_string(s.uid) + ": " + specs_.at(s.uid).key() +
                                                         " and " + s.key());
      return it->second;
    }
    specs_.emplace(s.uid, s);
    return tensors_.emplace(s.uid, make_tensor(s)).first->second;
  }

  // x (*) w -> y, dy (*)^T w -> dx, or x, dy -> dw. For forward: (a, b, c) = (x, w, y);
  // backward_data: (dx, w, dy); backward_weights: (x, dw, dy) - always in the x, w, y roles.
  const descriptor& conv(conv_direction dir, const tensor_spec& x, const tensor_spec& w, const tensor_spec& y,
                         const conv_spec& cs) {
    const descriptor& tx = tensor(x);
    const descriptor& tw = tensor(w);
    const descriptor& ty = tensor(y);
    keep_.push_back(make_convolution(cs));
    const descriptor& conv_desc = keep_.back();
    cudnnBackendDescriptorType_t type = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
    cudnnBackendAttributeName_t ax = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                                aw = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                                ay = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                                ac = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                aa = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                ab = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA;
    if (dir == conv_direction::backward_data) {
      type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
      ax = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX;
      aw = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W;
      ay = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY;
      ac = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC;
      aa = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA;
      ab = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA;
    } else if (dir == conv_direction::backward_weights) {
      type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
      ax = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X;
      aw = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW;
      ay = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY;
      ac = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC;
      aa = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA;
      ab = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA;
    }
    descriptor op(type);
    op.set_desc(ax, tx, "set convolution operation X/DX");
    op.set_desc(aw, tw, "set convolution operation W/DW");
    op.set_desc(ay, ty, "set convolution operation Y/DY");
    op.set_desc(ac, conv_desc, "set convolution operation CONV_DESC");
    // alpha/beta are float for float/half/bf16 compute and double for double compute.
    if (cs.compute_type == CUDNN_DATA_DOUBLE) {
      const double alpha = 1.0, beta = 0.0;
      op.set(aa, CUDNN_TYPE_DOUBLE, 1, &alpha, "set convolution ALPHA");
      op.set(ab, CUDNN_TYPE_DOUBLE, 1, &beta, "set convolution BETA");
    } else {
      const float alpha = 1.0f, beta = 0.0f;
      op.set(aa, CUDNN_TYPE_FLOAT, 1, &alpha, "set convolution ALPHA");
      op.set(ab, CUDNN_TYPE_FLOAT, 1, &beta, "set convolution BETA");
    }
    op.finalize("finalize convolution operation");
    return add_op(std::move(op));
  }

  // y = mode(x[, b]) elementwise with broadcasting of b (e.g. a [1, C, 1, 1] bias). For the
  // backward modes (RELU_BWD, SIGMOID_BWD, ...) pass dy as `x`, the forward input as `b` and get dx
  // as `y` (cuDNN names them DYDESC, XDESC, DXDESC).
  const descriptor& pointwise(cudnnPointwiseMode_t mode, const tensor_spec& x, const tensor_spec* b,
                              const tensor_spec& y, cudnnDataType_t math, const pointwise_options& o = {}) {
    descriptor pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "set CUDNN_ATTR_POINTWISE_MODE");
    pw.set_data_type(CUDNN_ATTR_POINTWISE_MATH_PREC, math, "set CUDNN_ATTR_POINTWISE_MATH_PREC");
    // cuDNN takes these in the math precision's own type (double only for double math).
    const auto set_scalar = [&](cudnnBackendAttributeName_t name, double v, const char* what) {
      if (math == CUDNN_DATA_DOUBLE) {
        pw.set(name, CUDNN_TYPE_DOUBLE, 1, &v, what);
      } else {
        const float f = static_cast<float>(v);
        pw.set(name, CUDNN_TYPE_FLOAT, 1, &f, what);
      }
    };
    if (o.relu_upper_clip || o.relu_lower_clip_slope)
      set_scalar(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, 0.0, "set CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP");
    if (o.relu_upper_clip)
      set_scalar(CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, *o.relu_upper_clip, "set CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP");
    if (o.relu_lower_clip_slope)
      set_scalar(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, *o.relu_lower_clip_slope,
                 "set CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE");
    if (o.swish_beta) set_scalar(CUDNN_ATTR_POINTWISE_SWISH_BETA, *o.swish_beta, "set CUDNN_ATTR_POINTWISE_SWISH_BETA");
    if (o.elu_alpha) set_scalar(CUDNN_ATTR_POINTWISE_ELU_ALPHA, *o.elu_alpha, "set CUDNN_ATTR_POINTWISE_ELU_ALPHA");
    if (o.softplus_beta)
      set_scalar(CUDNN_ATTR_POINTWISE_SOFTPLUS_BETA, *o.softplus_beta, "set CUDNN_ATTR_POINTWISE_SOFTPLUS_BETA");
    pw.finalize("finalize pointwise descriptor");
    log_.push_back({op_record::kind::pointwise, mode, o, x.uid, b ? b->uid : -1, y.uid});
    keep_.push_back(std::move(pw));
    const descriptor& pw_ref = keep_.back();
    descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw_ref,
                "set CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR");
    if (is_backward_mode(mode)) {
      op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, tensor(x), "set CUDNN_ATTR_OPERATION_POINTWISE_DYDESC");
      op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, tensor(*b), "set CUDNN_ATTR_OPERATION_POINTWISE_XDESC");
      op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, tensor(y), "set CUDNN_ATTR_OPERATION_POINTWISE_DXDESC");
    } else {
      op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, tensor(x), "set CUDNN_ATTR_OPERATION_POINTWISE_XDESC");
      if (b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, tensor(*b), "set CUDNN_ATTR_OPERATION_POINTWISE_BDESC");
      op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, tensor(y), "set CUDNN_ATTR_OPERATION_POINTWISE_YDESC");
    }
    op.finalize("finalize pointwise operation");
    return add_op(std::move(op));
  }

  struct norm_forward_tensors {
    tensor_spec x, y, scale, bias, epsilon;
    // training: saved mean / inverse std (outputs), momentum, running stats in and out;
    // inference: mean / inv_variance are inputs (running mean, 1 / sqrt(running var + eps)).
    tensor_spec mean, inv_variance;
    const tensor_spec* momentum = nullptr;
    const tensor_spec* in_running_mean = nullptr;
    const tensor_spec* in_running_var = nullptr;
    const tensor_spec* out_running_mean = nullptr;
    const tensor_spec* out_running_var = nullptr;
  };
  const descriptor& norm_forward(cudnnBackendNormFwdPhase_t phase, const norm_forward_tensors& t) {
    descriptor op(CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR);
    const cudnnBackendNormMode_t mode = CUDNN_BATCH_NORM;
    op.set(CUDNN_ATTR_OPERATION_NORM_FWD_MODE, CUDNN_TYPE_NORM_MODE, 1, &mode,
           "set CUDNN_ATTR_OPERATION_NORM_FWD_MODE");
    op.set(CUDNN_ATTR_OPERATION_NORM_FWD_PHASE, CUDNN_TYPE_NORM_FWD_PHASE, 1, &phase,
           "set CUDNN_ATTR_OPERATION_NORM_FWD_PHASE");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_FWD_XDESC, tensor(t.x), "set NORM_FWD_XDESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC, tensor(t.mean), "set NORM_FWD_MEAN_DESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_FWD_INV_VARIANCE_DESC, tensor(t.inv_variance),
                "set NORM_FWD_INV_VARIANCE_DESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC, tensor(t.scale), "set NORM_FWD_SCALE_DESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_FWD_BIAS_DESC, tensor(t.bias), "set NORM_FWD_BIAS_DESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC, tensor(t.epsilon), "set NORM_FWD_EPSILON_DESC");
    if (t.momentum)
      op.set_desc(CUDNN_ATTR_OPERATION_NORM_FWD_EXP_AVG_FACTOR_DESC, tensor(*t.momentum),
                  "set NORM_FWD_EXP_AVG_FACTOR_DESC");
    if (t.in_running_mean)
      op.set_desc(CUDNN_ATTR_OPERATION_NORM_FWD_INPUT_RUNNING_MEAN_DESC, tensor(*t.in_running_mean),
                  "set NORM_FWD_INPUT_RUNNING_MEAN_DESC");
    if (t.in_running_var)
      op.set_desc(CUDNN_ATTR_OPERATION_NORM_FWD_INPUT_RUNNING_VAR_DESC, tensor(*t.in_running_var),
                  "set NORM_FWD_INPUT_RUNNING_VAR_DESC");
    if (t.out_running_mean)
      op.set_desc(CUDNN_ATTR_OPERATION_NORM_FWD_OUTPUT_RUNNING_MEAN_DESC, tensor(*t.out_running_mean),
                  "set NORM_FWD_OUTPUT_RUNNING_MEAN_DESC");
    if (t.out_running_var)
      op.set_desc(CUDNN_ATTR_OPERATION_NORM_FWD_OUTPUT_RUNNING_VAR_DESC, tensor(*t.out_running_var),
                  "set NORM_FWD_OUTPUT_RUNNING_VAR_DESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_FWD_YDESC, tensor(t.y), "set NORM_FWD_YDESC");
    op.finalize("finalize batch-norm forward operation");
    return add_op(std::move(op));
  }

  struct norm_backward_tensors {
    tensor_spec x, dy, scale, mean, inv_variance, dscale, dbias, dx;
  };
  const descriptor& norm_backward(const norm_backward_tensors& t) {
    descriptor op(CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR);
    const cudnnBackendNormMode_t mode = CUDNN_BATCH_NORM;
    op.set(CUDNN_ATTR_OPERATION_NORM_BWD_MODE, CUDNN_TYPE_NORM_MODE, 1, &mode,
           "set CUDNN_ATTR_OPERATION_NORM_BWD_MODE");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_BWD_XDESC, tensor(t.x), "set NORM_BWD_XDESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_BWD_DYDESC, tensor(t.dy), "set NORM_BWD_DYDESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_BWD_SCALE_DESC, tensor(t.scale), "set NORM_BWD_SCALE_DESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_BWD_MEAN_DESC, tensor(t.mean), "set NORM_BWD_MEAN_DESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_BWD_INV_VARIANCE_DESC, tensor(t.inv_variance),
                "set NORM_BWD_INV_VARIANCE_DESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_BWD_DSCALE_DESC, tensor(t.dscale), "set NORM_BWD_DSCALE_DESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_BWD_DBIAS_DESC, tensor(t.dbias), "set NORM_BWD_DBIAS_DESC");
    op.set_desc(CUDNN_ATTR_OPERATION_NORM_BWD_DXDESC, tensor(t.dx), "set NORM_BWD_DXDESC");
    op.finalize("finalize batch-norm backward operation");
    return add_op(std::move(op));
  }

  // y = sum of x over the dimensions where y has extent 1 (e.g. dbias = sum of dy over N, spatial).
  // (cuDNN 9.19 refuses to finalize a CUDNN_REDUCE_TENSOR_AVG reduction descriptor, so averages
  // are a sum and a pointwise scale.)
  const descriptor& reduction_sum(const tensor_spec& x, const tensor_spec& y, cudnnDataType_t math) {
    descriptor red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnReduceTensorOp_t add = CUDNN_REDUCE_TENSOR_ADD;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &add,
            "set CUDNN_ATTR_REDUCTION_OPERATOR");
    log_.push_back({op_record::kind::reduction_sum, CUDNN_POINTWISE_IDENTITY, {}, x.uid, -1, y.uid});
    red.set_data_type(CUDNN_ATTR_REDUCTION_COMP_TYPE, math, "set CUDNN_ATTR_REDUCTION_COMP_TYPE");
    red.finalize("finalize reduction descriptor");
    keep_.push_back(std::move(red));
    const descriptor& red_ref = keep_.back();
    descriptor op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, tensor(x), "set CUDNN_ATTR_OPERATION_REDUCTION_XDESC");
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, tensor(y), "set CUDNN_ATTR_OPERATION_REDUCTION_YDESC");
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red_ref, "set CUDNN_ATTR_OPERATION_REDUCTION_DESC");
    op.finalize("finalize reduction operation");
    return add_op(std::move(op));
  }

  // y = resample(x): pooling (window, strides, pre/post paddings, padding mode) or up-sampling
  // (nearest / bilinear, the window and strides of the down-scale ratio as fractions).
  const descriptor& resample(const resample_spec& r, const tensor_spec& x, const tensor_spec& y) {
    const descriptor& rs_ref = resample_descriptor(r, x);
    log_.push_back({op_record::kind::resample, CUDNN_POINTWISE_IDENTITY, {}, x.uid, -1, y.uid});
    descriptor op(CUDNN_BACKEND_OPERATION_RESAMPLE_FWD_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_RESAMPLE_FWD_XDESC, tensor(x), "set CUDNN_ATTR_OPERATION_RESAMPLE_FWD_XDESC");
    op.set_desc(CUDNN_ATTR_OPERATION_RESAMPLE_FWD_YDESC, tensor(y), "set CUDNN_ATTR_OPERATION_RESAMPLE_FWD_YDESC");
    op.set_desc(CUDNN_ATTR_OPERATION_RESAMPLE_FWD_DESC, rs_ref, "set CUDNN_ATTR_OPERATION_RESAMPLE_FWD_DESC");
    op.finalize("finalize resample operation");
    return add_op(std::move(op));
  }

  // dx = the gradient of a resample forward (the same spec) given dy. Max pooling also reads the
  // forward input x and output y (to find each window's maximum); the other modes need neither.
  const descriptor& resample_backward(const resample_spec& r, const tensor_spec& dy, const tensor_spec& dx,
                                      const tensor_spec* x = nullptr, const tensor_spec* y = nullptr) {
    const descriptor& rs_ref = resample_descriptor(r, dx);
    log_.push_back({op_record::kind::resample_backward, CUDNN_POINTWISE_IDENTITY, {}, dy.uid, x ? x->uid : -1, dx.uid});
    descriptor op(CUDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DXDESC, tensor(dx), "set CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DXDESC");
    op.set_desc(CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DYDESC, tensor(dy), "set CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DYDESC");
    if (x)
      op.set_desc(CUDNN_ATTR_OPERATION_RESAMPLE_BWD_XDESC, tensor(*x), "set CUDNN_ATTR_OPERATION_RESAMPLE_BWD_XDESC");
    if (y)
      op.set_desc(CUDNN_ATTR_OPERATION_RESAMPLE_BWD_YDESC, tensor(*y), "set CUDNN_ATTR_OPERATION_RESAMPLE_BWD_YDESC");
    op.set_desc(CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DESC, rs_ref, "set CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DESC");
    op.finalize("finalize resample backward operation");
    return add_op(std::move(op));
  }

  // c = a x b over the last two dimensions, batched over the first: a [B, M, K], b [B, K, N],
  // c [B, M, N] (a batch extent of 1 broadcasts).
  const descriptor& matmul(const tensor_spec& a, const tensor_spec& b, const tensor_spec& c, cudnnDataType_t math) {
    descriptor mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    mm.set_data_type(CUDNN_ATTR_MATMUL_COMP_TYPE, math, "set CUDNN_ATTR_MATMUL_COMP_TYPE");
    mm.finalize("finalize matmul descriptor");
    keep_.push_back(std::move(mm));
    const descriptor& mm_ref = keep_.back();
    log_.push_back({op_record::kind::matmul, CUDNN_POINTWISE_IDENTITY, {}, a.uid, b.uid, c.uid});
    descriptor op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, tensor(a), "set CUDNN_ATTR_OPERATION_MATMUL_ADESC");
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, tensor(b), "set CUDNN_ATTR_OPERATION_MATMUL_BDESC");
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, tensor(c), "set CUDNN_ATTR_OPERATION_MATMUL_CDESC");
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm_ref, "set CUDNN_ATTR_OPERATION_MATMUL_DESC");
    op.finalize("finalize matmul operation");
    return add_op(std::move(op));
  }

  // The finalized operation graph over every operation added so far. No handle is attached (that
  // attribute is deprecated in cuDNN 9): the device comes with heuristics and plans (build_plan),
  // the handle at execution.
  descriptor& finalize_graph() {
    std::vector<cudnnBackendDescriptor_t> raw;
    for (auto& op : ops_) raw.push_back(op.get());
    graph_ = descriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph_.set_descs(CUDNN_ATTR_OPERATIONGRAPH_OPS, raw, "set CUDNN_ATTR_OPERATIONGRAPH_OPS");
    graph_.finalize("finalize operation graph");
    return graph_;
  }

  const descriptor& graph() const noexcept { return graph_; }
  const std::deque<descriptor>& operations() const noexcept { return ops_; }
  const descriptor& tensor_by_uid(std::int64_t uid) const { return tensors_.at(uid); }
  const std::map<std::int64_t, tensor_spec>& specs() const noexcept { return specs_; }
  // Convolution / pointwise / reduction descriptors, in the order the operations were added.
  const std::deque<descriptor>& attributes() const noexcept { return keep_; }
  // What was asked of each pointwise, reduction, resample and matmul operation, in order: cuDNN
  // 9.19 cannot read a pointwise descriptor's mode or clips back, so tests read them here.
  const std::vector<op_record>& log() const noexcept { return log_; }

 private:
  // The finalized resample descriptor of `r` for a forward input (or input gradient) `x`.
  const descriptor& resample_descriptor(const resample_spec& r, const tensor_spec& x) {
    const auto n = static_cast<std::int64_t>(r.window.size());
    if (r.strides.size() != r.window.size() || r.pre_padding.size() != r.window.size() ||
        r.post_padding.size() != r.window.size() || n < 1 || n + 2 != static_cast<std::int64_t>(x.dims.size()))
      memfmt::detail::fail(errc::invalid_argument, "cuDNN resample: window " + fractions_to_string(r.window) +
                                                       ", strides " + fractions_to_string(r.strides) + ", paddings " +
                                                       fractions_to_string(r.pre_padding) + " / " +
                                                       fractions_to_string(r.post_padding) +
                                                       " must each have one entry per spatial "
                                                       "dimension of x " +
                                                       memfmt::detail::dims_to_string(x.dims));
    descriptor rs(CUDNN_BACKEND_RESAMPLE_DESCRIPTOR);
    rs.set(CUDNN_ATTR_RESAMPLE_MODE, CUDNN_TYPE_RESAMPLE_MODE, 1, &r.mode, "set CUDNN_ATTR_RESAMPLE_MODE");
    rs.set_data_type(CUDNN_ATTR_RESAMPLE_COMP_TYPE, r.compute_type, "set CUDNN_ATTR_RESAMPLE_COMP_TYPE");
    rs.set_int64(CUDNN_ATTR_RESAMPLE_SPATIAL_DIMS, n, "set CUDNN_ATTR_RESAMPLE_SPATIAL_DIMS");
    rs.set(CUDNN_ATTR_RESAMPLE_WINDOW_DIMS, CUDNN_TYPE_FRACTION, n, r.window.data(),
           "set CUDNN_ATTR_RESAMPLE_WINDOW_DIMS");
    rs.set(CUDNN_ATTR_RESAMPLE_STRIDES, CUDNN_TYPE_FRACTION, n, r.strides.data(), "set CUDNN_ATTR_RESAMPLE_STRIDES");
    rs.set(CUDNN_ATTR_RESAMPLE_PRE_PADDINGS, CUDNN_TYPE_FRACTION, n, r.pre_padding.data(),
           "set CUDNN_ATTR_RESAMPLE_PRE_PADDINGS");
    rs.set(CUDNN_ATTR_RESAMPLE_POST_PADDINGS, CUDNN_TYPE_FRACTION, n, r.post_padding.data(),
           "set CUDNN_ATTR_RESAMPLE_POST_PADDINGS");
    rs.set(CUDNN_ATTR_RESAMPLE_PADDING_MODE, CUDNN_TYPE_PADDING_MODE, 1, &r.padding_mode,
           "set CUDNN_ATTR_RESAMPLE_PADDING_MODE");
    const cudnnNanPropagation_t nan = CUDNN_PROPAGATE_NAN;  // PyTorch's max pooling propagates NaN
    rs.set(CUDNN_ATTR_RESAMPLE_NAN_PROPAGATION, CUDNN_TYPE_NAN_PROPOGATION, 1, &nan,
           "set CUDNN_ATTR_RESAMPLE_NAN_PROPAGATION");
    rs.finalize("finalize resample descriptor");
    keep_.push_back(std::move(rs));
    return keep_.back();
  }
  static bool is_backward_mode(cudnnPointwiseMode_t m) {
    return m == CUDNN_POINTWISE_RELU_BWD || m == CUDNN_POINTWISE_TANH_BWD || m == CUDNN_POINTWISE_SIGMOID_BWD ||
           m == CUDNN_POINTWISE_ELU_BWD || m == CUDNN_POINTWISE_GELU_BWD || m == CUDNN_POINTWISE_SOFTPLUS_BWD ||
           m == CUDNN_POINTWISE_SWISH_BWD || m == CUDNN_POINTWISE_GELU_APPROX_TANH_BWD;
  }
  const descriptor& add_op(descriptor&& op) {
    ops_.push_back(std::move(op));
    return ops_.back();
  }
  std::map<std::int64_t, descriptor> tensors_;
  std::map<std::int64_t, tensor_spec> specs_;
  std::deque<descriptor> keep_;  // convolution / pointwise descriptors the operations refer to
  std::deque<descriptor> ops_;
  std::vector<op_record> log_;
  descriptor graph_;
};

}  // namespace memfmt::cudnn
