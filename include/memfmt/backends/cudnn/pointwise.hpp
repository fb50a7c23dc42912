// memfmt/backends/cudnn/pointwise.hpp - activations and binary ops as cuDNN pointwise graphs.
//
// make_activation_problem / make_binary_problem validate the views (the checks every backend
// shares, validate.hpp, then the element type) before any cuDNN call and keep them as tensor specs;
// pointwise_graph builds the operations. Activations cuDNN has no mode for are short chains:
// hardsigmoid is min(relu(alpha x + beta), 1), hardswish x * relu6(x + 3) / 6 and clip
// min(max(x, alpha), beta), with the constants passed by value (pointwise_problem::constants gives
// the variant-pack entries); leaky_relu is RELU with a lower-clip slope, elu ELU with its alpha.
// A broadcast first operand of sub and div is handled by rewriting (a - b = -(b - a),
// a / b = a * (1 / b)), since cuDNN broadcasts the second operand only.
#pragma once

#include <cudnn.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../validate.hpp"
#include "graph.hpp"
#include "graphs.hpp"
#include "tensor_desc.hpp"

namespace memfmt::cudnn {

// A by-value float scalar of a graph: its unique id and value.
struct graph_constant {
  std::int64_t uid = 0;
  float value = 0.0f;
};

struct pointwise_problem {
  bool is_binary = false;
  activation_params function = activation::identity;  // activations
  binary_op op = binary_op::add;                      // binary ops
  tensor_spec a, b, y;                                // a is x for activations; b is unused there
  int rank = 4;

  // The scalars the graph reads by value (hardsigmoid's, hardswish's and clip's).
  std::vector<graph_constant> constants() const;
  std::string key() const {
    const std::string which = is_binary ? "binary" + std::to_string(static_cast<int>(op)) : to_string(function);
    return which + "|" + a.key() + (is_binary ? "|" + b.key() : std::string()) + "|" + y.key();
  }
};

namespace detail {

template <class XF, class YF>
constexpr void static_check_pointwise_ranks() {
  static_assert(XF::rank == YF::rank,
                "cuDNN pointwise: input and output of the same rank (both 2-D or both 3-D formats)");
}

// Whether `t` has the extents `full` (it is not broadcast).
inline bool has_extents(const tensor_spec& t, const tensor_spec& full) { return t.dims == full.dims; }

// The by-value scalars of an activation's graphs (forward and backward), cuDNN having no mode
// for these functions, and a by-value scalar needing no buffer: hardswish reads 3 and 1/6,
// hardsigmoid alpha and beta, clip its bounds (an infinite one is not read). The variant-pack
// entries, then their graph tensors.
inline std::vector<graph_constant> activation_constants(const activation_params& f) {
  const auto two = [](double a, double b) {
    return std::vector<graph_constant>{{uid::constant_base, static_cast<float>(a)},
                                       {uid::constant_base + 1, static_cast<float>(b)}};
  };
  switch (f.kind) {
    case activation::hardswish: return two(3.0, 1.0 / 6.0);
    case activation::hardsigmoid: return two(f.alpha, f.beta);
    case activation::clip: {
      std::vector<graph_constant> c;
      if (std::isfinite(f.alpha)) c.push_back({uid::constant_base, static_cast<float>(f.alpha)});
      if (std::isfinite(f.beta)) c.push_back({uid::constant_base + 1, static_cast<float>(f.beta)});
      return c;
    }
    default: return {};
  }
}
struct activation_scalars {
  tensor_spec first, second;  // uid::constant_base, uid::constant_base + 1
};
inline activation_scalars activation_scalar_specs(int rank) {
  return {scalar_spec(rank, dtype::float32, uid::constant_base),
          scalar_spec(rank, dtype::float32, uid::constant_base + 1)};
}

}  // namespace detail

inline std::vector<graph_constant> pointwise_problem::constants() const {
  return is_binary ? std::vector<graph_constant>{} : detail::activation_constants(function);
}

template <class T, class XF, class YF>
pointwise_problem make_activation_problem(const activation_params& f, tensor_view<const T, XF> x,
                                          tensor_view<T, YF> y) {
  detail::static_check_pointwise_ranks<XF, YF>();
  validate_activation_forward(f, x, y);
  require_layer_dtype(dtype_of_v<T>, "cuDNN activation_forward");
  pointwise_problem pr;
  pr.function = f;
  pr.rank = XF::rank;
  pr.a = one_position_as_channels_last(spec_of(x, uid::x));
  pr.y = one_position_as_channels_last(spec_of(y, uid::y));
  return pr;
}

template <class T, class AF, class BF, class YF>
pointwise_problem make_binary_problem(binary_op kind, tensor_view<const T, AF> a, tensor_view<const T, BF> b,
                                      tensor_view<T, YF> y) {
  validate_binary_forward(a, b, y);
  require_layer_dtype(dtype_of_v<T>, "cuDNN binary_forward");
  pointwise_problem pr;
  pr.is_binary = true;
  pr.op = kind;
  pr.rank = AF::rank;
  pr.a = one_position_as_channels_last(spec_of(a, uid::x));
  pr.b = one_position_as_channels_last(spec_of(b, uid::bias));
  pr.y = one_position_as_channels_last(spec_of(y, uid::y));
  if (!detail::has_extents(pr.a, pr.y) && !detail::has_extents(pr.b, pr.y))
    memfmt::detail::fail(errc::unsupported,
                         "cuDNN binary_forward: operands " + memfmt::detail::dims_to_string(pr.a.dims) + " and " +
                             memfmt::detail::dims_to_string(pr.b.dims) +
                             " are both broadcast (cuDNN broadcasts one operand of a pointwise operation)");
  return pr;
}

// The cuDNN pointwise mode of a binary op.
inline cudnnPointwiseMode_t pointwise_mode_of(binary_op op) {
  switch (op) {
    case binary_op::add: return CUDNN_POINTWISE_ADD;
    case binary_op::sub: return CUDNN_POINTWISE_SUB;
    case binary_op::mul: return CUDNN_POINTWISE_MUL;
    case binary_op::div: return CUDNN_POINTWISE_DIV;
  }
  return CUDNN_POINTWISE_ADD;
}

// ln(1 + e^(beta x)) / beta with beta 1: ONNX's Softplus.
inline pointwise_options softplus_1() {
  pointwise_options o;
  o.softplus_beta = 1.0;
  return o;
}

inline graph_builder pointwise_graph(const pointwise_problem& pr) {
  graph_builder g;
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  virtual_tensors tmp(pr.y);
  if (pr.is_binary) {
    if (detail::has_extents(pr.a, pr.y)) {
      g.pointwise(pointwise_mode_of(pr.op), pr.a, &pr.b, pr.y, math);
    } else if (pr.op == binary_op::add || pr.op == binary_op::mul) {  // commutative: broadcast a second
      g.pointwise(pointwise_mode_of(pr.op), pr.b, &pr.a, pr.y, math);
    } else if (pr.op == binary_op::sub) {  // a - b = -(b - a)
      const tensor_spec d = tmp();
      g.pointwise(CUDNN_POINTWISE_SUB, pr.b, &pr.a, d, math);
      g.pointwise(CUDNN_POINTWISE_NEG, d, nullptr, pr.y, math);
    } else {  // a / b = (1 / b) * a
      const tensor_spec r = tmp();
      g.pointwise(CUDNN_POINTWISE_RECIPROCAL, pr.b, nullptr, r, math);
      g.pointwise(CUDNN_POINTWISE_MUL, r, &pr.a, pr.y, math);
    }
    return g;
  }
  const activation_params& f = pr.function;
  switch (f.kind) {
    case activation::identity: g.pointwise(CUDNN_POINTWISE_IDENTITY, pr.a, nullptr, pr.y, math); break;
    case activation::relu: g.pointwise(CUDNN_POINTWISE_RELU_FWD, pr.a, nullptr, pr.y, math); break;
    case activation::relu6: {
      pointwise_options o;
      o.relu_upper_clip = 6.0;
      g.pointwise(CUDNN_POINTWISE_RELU_FWD, pr.a, nullptr, pr.y, math, o);
      break;
    }
    case activation::sigmoid: g.pointwise(CUDNN_POINTWISE_SIGMOID_FWD, pr.a, nullptr, pr.y, math); break;
    case activation::gelu: g.pointwise(CUDNN_POINTWISE_GELU_FWD, pr.a, nullptr, pr.y, math); break;
    case activation::gelu_tanh: g.pointwise(CUDNN_POINTWISE_GELU_APPROX_TANH_FWD, pr.a, nullptr, pr.y, math); break;
    case activation::tanh: g.pointwise(CUDNN_POINTWISE_TANH_FWD, pr.a, nullptr, pr.y, math); break;
    case activation::silu: {
      pointwise_options o;
      o.swish_beta = 1.0;  // silu is swish with beta 1
      g.pointwise(CUDNN_POINTWISE_SWISH_FWD, pr.a, nullptr, pr.y, math, o);
      break;
    }
    case activation::leaky_relu: {
      pointwise_options o;
      o.relu_lower_clip_slope = f.alpha;
      g.pointwise(CUDNN_POINTWISE_RELU_FWD, pr.a, nullptr, pr.y, math, o);
      break;
    }
    case activation::elu: {
      pointwise_options o;
      o.elu_alpha = f.alpha;
      g.pointwise(CUDNN_POINTWISE_ELU_FWD, pr.a, nullptr, pr.y, math, o);
      break;
    }
    case activation::clip: {
      // max with the lower bound, then min with the upper; an infinite bound is no operation.
      const auto [lo, hi] = detail::activation_scalar_specs(pr.rank);
      const bool has_lo = std::isfinite(f.alpha), has_hi = std::isfinite(f.beta);
      if (!has_lo && !has_hi) {
        g.pointwise(CUDNN_POINTWISE_IDENTITY, pr.a, nullptr, pr.y, math);
      } else if (has_lo && has_hi) {
        const tensor_spec raised = tmp();
        g.pointwise(CUDNN_POINTWISE_MAX, pr.a, &lo, raised, math);
        g.pointwise(CUDNN_POINTWISE_MIN, raised, &hi, pr.y, math);
      } else if (has_lo) {
        g.pointwise(CUDNN_POINTWISE_MAX, pr.a, &lo, pr.y, math);
      } else {
        g.pointwise(CUDNN_POINTWISE_MIN, pr.a, &hi, pr.y, math);
      }
      break;
    }
    case activation::hardsigmoid: {
      // min(relu(alpha x + beta), 1): relu clipped at 1.
      const auto [alpha, beta] = detail::activation_scalar_specs(pr.rank);
      pointwise_options clip1;
      clip1.relu_upper_clip = 1.0;
      const tensor_spec scaled = tmp(), shifted = tmp();
      g.pointwise(CUDNN_POINTWISE_MUL, pr.a, &alpha, scaled, math);
      g.pointwise(CUDNN_POINTWISE_ADD, scaled, &beta, shifted, math);
      g.pointwise(CUDNN_POINTWISE_RELU_FWD, shifted, nullptr, pr.y, math, clip1);
      break;
    }
    case activation::softplus:
      g.pointwise(CUDNN_POINTWISE_SOFTPLUS_FWD, pr.a, nullptr, pr.y, math, softplus_1());
      break;
    case activation::mish: {  // x * tanh(softplus(x)): cuDNN has no mish mode
      const tensor_spec sp = tmp(), t = tmp();
      g.pointwise(CUDNN_POINTWISE_SOFTPLUS_FWD, pr.a, nullptr, sp, math, softplus_1());
      g.pointwise(CUDNN_POINTWISE_TANH_FWD, sp, nullptr, t, math);
      g.pointwise(CUDNN_POINTWISE_MUL, pr.a, &t, pr.y, math);
      break;
    }
    case activation::hardswish: {
      const auto [three, sixth] = detail::activation_scalar_specs(pr.rank);
      pointwise_options clip6;
      clip6.relu_upper_clip = 6.0;
      const tensor_spec shifted = tmp(), clipped = tmp(), gated = tmp();
      g.pointwise(CUDNN_POINTWISE_ADD, pr.a, &three, shifted, math);
      g.pointwise(CUDNN_POINTWISE_RELU_FWD, shifted, nullptr, clipped, math, clip6);
      g.pointwise(CUDNN_POINTWISE_MUL, clipped, &pr.a, gated, math);
      g.pointwise(CUDNN_POINTWISE_MUL, gated, &sixth, pr.y, math);
      break;
    }
  }
  return g;
}

}  // namespace memfmt::cudnn
