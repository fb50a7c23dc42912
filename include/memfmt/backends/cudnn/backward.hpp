// memfmt/backends/cudnn/backward.hpp - the backward passes of the layer graphs (the trainer's).
//
// Built like the forwards (pointwise.hpp, resample.hpp, reduction.hpp, matmul.hpp): each call is
// validated into a problem (the checks every backend shares, then the element type) before any
// cuDNN call, then turned into graphs.
//   - activations: cuDNN's backward pointwise modes on (dy, x); hardsigmoid, hardswish and clip,
//     which have none, from RELU_BWD on a shifted x (its window is the derivative's) and a few muls.
//   - binary ops: each operand's gradient at dy's extents as a pointwise graph, summed over the
//     dimensions the operand is broadcast along by a reduction graph.
//   - pooling, up-sampling, global average pooling: RESAMPLE_BWD with the forward's spec (global
//     average pooling is average pooling over the whole input); max pooling (and channels-first
//     average pooling) reads x and the forward output y, recomputed into scratch by the backend;
//     where cuDNN wants X and Y only as descriptors, they are bound to dx and dy (xy_alias).
//   - linear: matmul graphs dx = dy w and dw = dy^T x (x and dx in flatten order), dbias = the sum
//     of dy over N.
#pragma once

#include <cudnn.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../validate.hpp"
#include "graph.hpp"
#include "graphs.hpp"
#include "matmul.hpp"
#include "pointwise.hpp"
#include "resample.hpp"
#include "tensor_desc.hpp"

namespace memfmt::cudnn {

// ---------------------------------------------------------------- activations

struct activation_backward_problem {
  activation_params function = activation::identity;
  tensor_spec x, dy, dx;
  int rank = 4;

  // The by-value scalars (detail::activation_constants; clip's backward reads its bounds too).
  std::vector<graph_constant> constants() const { return detail::activation_constants(function); }
  std::string key() const {
    return "activation_bwd " + to_string(function) + "|" + x.key() + "|" + dy.key() + "|" + dx.key();
  }
};

template <class T, class XF, class DYF, class DXF>
activation_backward_problem make_activation_backward_problem(const activation_params& f, tensor_view<const T, XF> x,
                                                             tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx) {
  detail::static_check_pointwise_ranks<XF, DXF>();
  validate_activation_backward(f, x, dy, dx);
  require_layer_dtype(dtype_of_v<T>, "cuDNN activation_backward");
  activation_backward_problem pr;
  pr.function = f;
  pr.rank = XF::rank;
  pr.x = one_position_as_channels_last(spec_of(x, uid::x));
  pr.dy = one_position_as_channels_last(spec_of(dy, uid::dy));
  pr.dx = one_position_as_channels_last(spec_of(dx, uid::dx));
  return pr;
}

inline graph_builder activation_backward_graph(const activation_backward_problem& pr) {
  graph_builder g;
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  virtual_tensors tmp(pr.dx);
  pointwise_options clip6;
  clip6.relu_upper_clip = 6.0;
  const activation_params& f = pr.function;
  switch (f.kind) {
    case activation::identity: g.pointwise(CUDNN_POINTWISE_IDENTITY, pr.dy, nullptr, pr.dx, math); break;
    case activation::relu: g.pointwise(CUDNN_POINTWISE_RELU_BWD, pr.dy, &pr.x, pr.dx, math); break;
    case activation::relu6: g.pointwise(CUDNN_POINTWISE_RELU_BWD, pr.dy, &pr.x, pr.dx, math, clip6); break;
    case activation::sigmoid: g.pointwise(CUDNN_POINTWISE_SIGMOID_BWD, pr.dy, &pr.x, pr.dx, math); break;
    case activation::gelu: g.pointwise(CUDNN_POINTWISE_GELU_BWD, pr.dy, &pr.x, pr.dx, math); break;
    case activation::gelu_tanh: g.pointwise(CUDNN_POINTWISE_GELU_APPROX_TANH_BWD, pr.dy, &pr.x, pr.dx, math); break;
    case activation::tanh: g.pointwise(CUDNN_POINTWISE_TANH_BWD, pr.dy, &pr.x, pr.dx, math); break;
    case activation::silu: {
      pointwise_options o;
      o.swish_beta = 1.0;
      g.pointwise(CUDNN_POINTWISE_SWISH_BWD, pr.dy, &pr.x, pr.dx, math, o);
      break;
    }
    case activation::leaky_relu: {
      pointwise_options o;
      o.relu_lower_clip_slope = f.alpha;
      g.pointwise(CUDNN_POINTWISE_RELU_BWD, pr.dy, &pr.x, pr.dx, math, o);
      break;
    }
    case activation::elu: {
      pointwise_options o;
      o.elu_alpha = f.alpha;
      g.pointwise(CUDNN_POINTWISE_ELU_BWD, pr.dy, &pr.x, pr.dx, math, o);
      break;
    }
    case activation::clip: {
      // dx = dy * [lo < x < hi]: RELU_BWD's window (0, hi - lo) on x - lo, or (0, inf) on x - lo
      // or hi - x where one bound is infinite.
      const auto [lo, hi] = detail::activation_scalar_specs(pr.rank);
      const bool has_lo = std::isfinite(f.alpha), has_hi = std::isfinite(f.beta);
      if (!has_lo && !has_hi) {
        g.pointwise(CUDNN_POINTWISE_IDENTITY, pr.dy, nullptr, pr.dx, math);
        break;
      }
      const tensor_spec shifted = tmp();
      pointwise_options window;
      if (has_lo) {
        g.pointwise(CUDNN_POINTWISE_SUB, pr.x, &lo, shifted, math);
        if (has_hi) window.relu_upper_clip = f.beta - f.alpha;
      } else {
        const tensor_spec negated = tmp();
        g.pointwise(CUDNN_POINTWISE_NEG, pr.x, nullptr, negated, math);
        g.pointwise(CUDNN_POINTWISE_ADD, negated, &hi, shifted, math);
      }
      g.pointwise(CUDNN_POINTWISE_RELU_BWD, pr.dy, &shifted, pr.dx, math, window);
      break;
    }
    case activation::hardsigmoid: {
      // dx = dy * alpha * [0 < alpha x + beta < 1]: relu's backward clipped at 1 is the window.
      const auto [alpha, beta] = detail::activation_scalar_specs(pr.rank);
      pointwise_options clip1;
      clip1.relu_upper_clip = 1.0;
      const tensor_spec scaled = tmp(), shifted = tmp(), windowed = tmp();
      g.pointwise(CUDNN_POINTWISE_MUL, pr.x, &alpha, scaled, math);
      g.pointwise(CUDNN_POINTWISE_ADD, scaled, &beta, shifted, math);
      g.pointwise(CUDNN_POINTWISE_RELU_BWD, pr.dy, &shifted, windowed, math, clip1);
      g.pointwise(CUDNN_POINTWISE_MUL, windowed, &alpha, pr.dx, math);
      break;
    }
    case activation::softplus:
      g.pointwise(CUDNN_POINTWISE_SOFTPLUS_BWD, pr.dy, &pr.x, pr.dx, math, softplus_1());
      break;
    case activation::mish: {
      // dx = dy tanh(sp) + (dy x sigmoid(x)) (1 - tanh(sp)^2), sp = softplus(x): the second term is
      // TANH_BWD of dy x sigmoid(x) at sp.
      const tensor_spec sp = tmp(), t = tmp(), s = tmp(), dyx = tmp(), dyxs = tmp(), through_tanh = tmp(), dyt = tmp();
      g.pointwise(CUDNN_POINTWISE_SOFTPLUS_FWD, pr.x, nullptr, sp, math, softplus_1());
      g.pointwise(CUDNN_POINTWISE_TANH_FWD, sp, nullptr, t, math);
      g.pointwise(CUDNN_POINTWISE_SIGMOID_FWD, pr.x, nullptr, s, math);
      g.pointwise(CUDNN_POINTWISE_MUL, pr.dy, &pr.x, dyx, math);
      g.pointwise(CUDNN_POINTWISE_MUL, dyx, &s, dyxs, math);
      g.pointwise(CUDNN_POINTWISE_TANH_BWD, dyxs, &sp, through_tanh, math);
      g.pointwise(CUDNN_POINTWISE_MUL, pr.dy, &t, dyt, math);
      g.pointwise(CUDNN_POINTWISE_ADD, dyt, &through_tanh, pr.dx, math);
      break;
    }
    case activation::hardswish: {
      // hardswish(x) = x * relu6(x + 3) / 6, so f'(x) = (relu6(x + 3) + x * [-3 < x < 3]) / 6.
      const auto [three, sixth] = detail::activation_scalar_specs(pr.rank);
      const tensor_spec shifted = tmp();
      g.pointwise(CUDNN_POINTWISE_ADD, pr.x, &three, shifted, math);
      const tensor_spec clipped = tmp(), x_windowed = tmp(), sum = tmp(), slope = tmp();
      g.pointwise(CUDNN_POINTWISE_RELU_FWD, shifted, nullptr, clipped, math, clip6);
      g.pointwise(CUDNN_POINTWISE_RELU_BWD, pr.x, &shifted, x_windowed, math, clip6);
      g.pointwise(CUDNN_POINTWISE_ADD, clipped, &x_windowed, sum, math);
      g.pointwise(CUDNN_POINTWISE_MUL, sum, &sixth, slope, math);
      g.pointwise(CUDNN_POINTWISE_MUL, pr.dy, &slope, pr.dx, math);
      break;
    }
  }
  return g;
}

// ---------------------------------------------------------------- binary ops

// The gradient of one operand of a binary op: `full` (dy's extents) from a pointwise graph, then,
// when the operand is broadcast, summed into `grad` by a reduction graph. add's (and sub's first
// operand's) full gradient is dy itself: no pointwise graph.
struct binary_grad_problem {
  binary_op op = binary_op::add;
  bool of_b = false;      // the gradient of b (else of a)
  tensor_spec a, b, dy;   // the operands (uid::x, uid::bias) and dy
  tensor_spec full;       // the gradient at dy's extents: `grad` itself or scratch (uid::grad)
  tensor_spec grad;       // the operand's gradient (uid::dx)
  bool reduce = false;    // the operand is broadcast: full -> sum -> grad
  bool pointwise = true;  // full needs computing (false: full is dy)

  std::string key(const char* step) const {
    return std::string("binary_bwd_") + step + std::to_string(static_cast<int>(op)) + (of_b ? "b|" : "a|") + a.key() +
           "|" + b.key() + "|" + dy.key() + "|" + full.key() + "|" + grad.key();
  }
};

// The problems of da and db (nullopt for a gradient nobody asked for). `scratch_full` describes the
// packed buffer (dy's extents and format) the backend provides for a broadcast operand's gradient.
template <class T, class AF, class BF, class DYF, class DAF, class DBF>
std::vector<binary_grad_problem> make_binary_backward_problems(binary_op kind, tensor_view<const T, AF> a,
                                                               tensor_view<const T, BF> b, tensor_view<const T, DYF> dy,
                                                               tensor_view<T, DAF> da, tensor_view<T, DBF> db) {
  validate_binary_backward(kind, a, b, dy, da, db);
  require_layer_dtype(dtype_of_v<T>, "cuDNN binary_backward");
  binary_grad_problem base;
  base.op = kind;
  base.a = one_position_as_channels_last(spec_of(a, uid::x));
  base.b = one_position_as_channels_last(spec_of(b, uid::bias));
  base.dy = one_position_as_channels_last(spec_of(dy, uid::dy));
  const tensor_spec scratch = one_position_as_channels_last(
      spec_of(tensor_view<const T, DYF>(nullptr, layout<DYF>::packed(dy.extents())), uid::grad));
  std::vector<binary_grad_problem> out;
  const auto add = [&](bool of_b, tensor_spec grad) {
    binary_grad_problem p = base;
    p.of_b = of_b;
    p.grad = one_position_as_channels_last(std::move(grad));
    p.reduce = p.grad.dims != p.dy.dims;
    p.pointwise = !(kind == binary_op::add || (kind == binary_op::sub && !of_b)) || !p.reduce;
    p.full = p.reduce ? (p.pointwise ? scratch : p.dy) : p.grad;
    out.push_back(std::move(p));
  };
  if (da.data()) add(false, spec_of(da, uid::dx));
  if (db.data()) add(true, spec_of(db, uid::dx));
  return out;
}

// full = d(a op b)/d(operand) * dy at dy's extents (the other operand broadcast as cuDNN's second input).
inline graph_builder binary_grad_pointwise_graph(const binary_grad_problem& pr) {
  graph_builder g;
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  virtual_tensors tmp(pr.full);
  switch (pr.op) {
    case binary_op::add: g.pointwise(CUDNN_POINTWISE_IDENTITY, pr.dy, nullptr, pr.full, math); break;
    case binary_op::sub:
      g.pointwise(pr.of_b ? CUDNN_POINTWISE_NEG : CUDNN_POINTWISE_IDENTITY, pr.dy, nullptr, pr.full, math);
      break;
    case binary_op::mul: g.pointwise(CUDNN_POINTWISE_MUL, pr.dy, pr.of_b ? &pr.a : &pr.b, pr.full, math); break;
    case binary_op::div:
      if (!pr.of_b) {
        g.pointwise(CUDNN_POINTWISE_DIV, pr.dy, &pr.b, pr.full, math);  // da = dy / b
      } else {                                                          // db = -(dy * a / b / b)
        const tensor_spec prod = tmp(), once = tmp(), twice = tmp();
        g.pointwise(CUDNN_POINTWISE_MUL, pr.dy, &pr.a, prod, math);
        g.pointwise(CUDNN_POINTWISE_DIV, prod, &pr.b, once, math);
        g.pointwise(CUDNN_POINTWISE_DIV, once, &pr.b, twice, math);
        g.pointwise(CUDNN_POINTWISE_NEG, twice, nullptr, pr.full, math);
      }
      break;
  }
  return g;
}

// grad = the sum of full over the dimensions the operand is broadcast along.
inline graph_builder binary_grad_reduction_graph(const binary_grad_problem& pr) {
  graph_builder g;
  g.reduction_sum(pr.full, pr.grad, CUDNN_DATA_FLOAT);
  return g;
}

// ---------------------------------------------------------------- pooling and up-sampling

// dx from dy through RESAMPLE_BWD; for max pooling also the forward (x -> y into scratch).
struct resample_backward_problem {
  tensor_spec dy, dx;
  resample_spec spec;
  std::optional<resample_problem> forward;  // x (uid::x) -> y (uid::y, scratch) when the backward reads them
  // X and Y described but bound to dx's and dy's memory: cuDNN 9.19 finalizes no nearest resample
  // backward without them (and is reported to want them channels-first), while the gradients of
  // nearest, bilinear and average resampling depend on neither's values.
  bool xy_alias = false;

  std::string key() const {
    return "resample_bwd|" + dy.key() + "|" + dx.key() + "|" + spec.key() + (forward ? "|" + forward->key() : "") +
           (xy_alias ? "|xy" : "");
  }
};

template <class T, class XF, class DYF, class DXF>
resample_backward_problem make_pool_backward_problem(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy,
                                                     tensor_view<T, DXF> dx, const pool_params& p) {
  const auto ye = validate_pool_backward(x, dy, dx, p);
  const std::string op = detail::pool_call_name("pool_backward", p);
  require_layer_dtype(dtype_of_v<T>, op);
  resample_backward_problem pr;
  pr.dy = one_position_as_channels_last(spec_of(dy, uid::dy));
  pr.dx = spec_of(dx, uid::dx);
  pr.spec = detail::pool_spec(dx.extents(), ye, p, op);
  // Max pooling's gradient reads x and y; cuDNN's channels-first resample backward is reported to
  // want them for every mode, so an average pooling given x there passes them as well.
  if (p.kind == pool_kind::max || (!DXF::channels_last && x.data() != nullptr)) {
    resample_problem f;
    f.x = spec_of(x, uid::x);
    f.y = one_position_as_channels_last(spec_of(tensor_view<const T, DYF>(nullptr, layout<DYF>::packed(ye)), uid::y));
    f.spec = pr.spec;
    pr.forward = std::move(f);
  }
  pr.xy_alias = !pr.forward && !DXF::channels_last;
  return pr;
}

template <class T, class DYF, class DXF>
resample_backward_problem make_upsample_backward_problem(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                                                         const upsample_params& p) {
  validate_upsample_backward(dy, dx, p);
  const std::string op = detail::upsample_call_name("upsample_backward", p);
  require_layer_dtype(dtype_of_v<T>, op);
  resample_backward_problem pr;
  pr.dy = spec_of(dy, uid::dy);
  pr.dx = spec_of(dx, uid::dx);
  pr.spec = detail::upsample_spec(dx.extents(), dy.extents(), p, op);
  pr.xy_alias = p.mode == resample_mode::nearest || !DXF::channels_last;
  return pr;
}

// Global average pooling is average pooling with the whole input as its window.
template <class T, class DYF, class DXF>
resample_backward_problem make_global_average_pool_backward_problem(tensor_view<const T, DYF> dy,
                                                                    tensor_view<T, DXF> dx) {
  validate_global_pool_backward(dy, dx);
  require_layer_dtype(dtype_of_v<T>, "cuDNN global_average_pool_backward");
  resample_backward_problem pr;
  pr.dy = one_position_as_channels_last(spec_of(dy, uid::dy));
  pr.dx = spec_of(dx, uid::dx);
  pr.spec.mode = CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING;
  pr.spec.padding_mode = CUDNN_ZERO_PAD;
  for (int d = 2; d < DXF::rank; ++d) {
    pr.spec.window.push_back(detail::whole(dx.extent(d)));
    pr.spec.strides.push_back(detail::whole(1));
    pr.spec.pre_padding.push_back(detail::whole(0));
    pr.spec.post_padding.push_back(detail::whole(0));
  }
  pr.xy_alias = !DXF::channels_last;
  return pr;
}

inline graph_builder resample_backward_graph(const resample_backward_problem& pr) {
  graph_builder g;
  if (pr.forward) {
    g.resample_backward(pr.spec, pr.dy, pr.dx, &pr.forward->x, &pr.forward->y);
  } else if (pr.xy_alias) {
    tensor_spec x = pr.dx, y = pr.dy;
    x.uid = uid::x;
    y.uid = uid::y;
    g.resample_backward(pr.spec, pr.dy, pr.dx, &x, &y);
  } else {
    g.resample_backward(pr.spec, pr.dy, pr.dx);
  }
  return g;
}

// ---------------------------------------------------------------- linear

// dx [1, N, F] (flatten order) = dy [1, N, K] x w [1, K, F] (row-major, as stored).
template <class T, class DYF, class DXF>
linear_problem make_linear_backward_data_problem(tensor_view<const T, DYF> dy, const T* w, tensor_view<T, DXF> dx) {
  const std::int64_t f = validate_linear_backward_data(dy, w, dx);
  require_layer_dtype(dtype_of_v<T>, "cuDNN linear_backward_data");
  const std::int64_t n = dx.batch(), k = dy.channels();
  const std::int64_t dx_row = detail::flatten_row_stride(dx, f, "cuDNN linear_backward_data: input gradient");
  const std::int64_t dy_row = detail::output_row_stride(dy, "cuDNN linear_backward_data: output gradient");
  const dtype t = dtype_of_v<T>;
  linear_problem pr = detail::sized_linear_problem("linear_dgrad", n, f, k);
  pr.a = detail::matrix_spec(t, uid::dy, n, k, dy_row, 1, dy.data());
  pr.b = detail::matrix_spec(t, uid::w, k, f, f, 1, w);
  pr.c = detail::matrix_spec(t, uid::dx, n, f, dx_row, 1, dx.data());
  return pr;
}

// dw [1, K, F] (row-major) = dy^T [1, K, N] x x [1, N, F]; `bias` here is dbias [1, 1, K], the sum
// of dy [1, N, K] over N (linear_dbias_graph).
template <class T, class XF, class DYF>
linear_problem make_linear_backward_weights_problem(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, T* dw,
                                                    T* dbias) {
  const std::int64_t f = validate_linear_backward_weights(x, dy, dw);
  require_layer_dtype(dtype_of_v<T>, "cuDNN linear_backward_weights");
  const std::int64_t n = x.batch(), k = dy.channels();
  const std::int64_t x_row = detail::flatten_row_stride(x, f, "cuDNN linear_backward_weights: input");
  const std::int64_t dy_row = detail::output_row_stride(dy, "cuDNN linear_backward_weights: output gradient");
  const dtype t = dtype_of_v<T>;
  linear_problem pr = detail::sized_linear_problem("linear_wgrad", n, f, k);
  pr.a = detail::matrix_spec(t, uid::dy, k, n, 1, dy_row, dy.data());
  pr.b = detail::matrix_spec(t, uid::x, n, f, x_row, 1, x.data());
  pr.c = detail::matrix_spec(t, uid::w, k, f, f, 1, dw);
  if (dbias) pr.bias = detail::matrix_spec(t, uid::bias, 1, k, k, 1, dbias);
  return pr;
}

// The product alone (a backward problem's bias, dbias, is the reduction graph's).
inline graph_builder matmul_graph(const linear_problem& pr) {
  graph_builder g;
  g.matmul(pr.a, pr.b, pr.c, CUDNN_DATA_FLOAT);
  return g;
}

// dbias [1, 1, K] = the sum over N of dy, read as [1, N, K] (the transpose of the wgrad's a).
inline graph_builder linear_dbias_graph(const linear_problem& pr) {
  graph_builder g;
  tensor_spec dy = pr.a;
  dy.dims = {1, pr.batch, pr.outputs};
  dy.strides = {pr.a.strides[0], pr.a.strides[2], pr.a.strides[1]};
  g.reduction_sum(dy, *pr.bias, CUDNN_DATA_FLOAT);
  return g;
}

}  // namespace memfmt::cudnn
