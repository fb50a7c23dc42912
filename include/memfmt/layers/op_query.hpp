// memfmt/layers/op_query.hpp - asking a backend whether it runs an operation, before any work.
//
// Every backend answers `op_support support(const op_query&) const`: the operation, the element
// type, the format family and rank of its activations, and the attributes that decide whether a
// backend has a kernel (the activation function, the pooling kind, the resampling mode). The
// executor asks at build time, so a layer a backend cannot run is an error naming the node before
// any work; the planner asks through runtime/backend_support.hpp, so a format a backend cannot run
// a layer in is unsupported for that layer.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "../dtype.hpp"
#include "../error.hpp"
#include "../format/dispatch.hpp"
#include "layer_params.hpp"

namespace memfmt {

// The forward operations of a backend (the methods of reference::backend of the same names).
enum class op_kind : std::uint8_t {
  conv,
  conv_transpose,
  batch_norm,
  group_norm,
  activation,
  binary,
  pool,
  global_average_pool,
  upsample,
  pad,
  softmax,
  linear,
  concat,
  slice,
  rearrange,
  layer_norm,
  reduce,
};

constexpr const char* to_string(op_kind k) noexcept {
  switch (k) {
    case op_kind::conv: return "conv";
    case op_kind::conv_transpose: return "conv_transpose";
    case op_kind::batch_norm: return "batch_norm";
    case op_kind::group_norm: return "group_norm";
    case op_kind::activation: return "activation";
    case op_kind::binary: return "binary";
    case op_kind::pool: return "pool";
    case op_kind::global_average_pool: return "global_average_pool";
    case op_kind::upsample: return "upsample";
    case op_kind::pad: return "pad";
    case op_kind::softmax: return "softmax";
    case op_kind::linear: return "linear";
    case op_kind::concat: return "concat";
    case op_kind::slice: return "slice";
    case op_kind::rearrange: return "rearrange";
    case op_kind::layer_norm: return "layer_norm";
    case op_kind::reduce: return "reduce";
  }
  return "?";
}

struct op_query {
  op_kind op = op_kind::conv;
  dtype type = dtype::float32;
  format_family format = format_family::channels_first;
  int rank = 4;                                                      // of the activations: 4 (2-D) or 5 (3-D)
  activation_params function = activation::identity;                 // op_kind::activation
  pool_kind pool = pool_kind::max;                                   // op_kind::pool
  resample_mode resample = resample_mode::nearest;                   // op_kind::upsample
  resample_coordinates coordinates = resample_coordinates::pytorch;  // op_kind::upsample
  pad_mode padding = pad_mode::constant;                             // op_kind::pad
  bool backward = false;  // the training step's backward pass as well (runtime::trainer asks so)
};

// The answer: supported, or the error code a call would fail with and why.
struct op_support {
  bool supported = true;
  errc code = errc::unsupported;  // unsupported_dtype when the element type is the reason
  std::string reason;             // empty when supported

  explicit operator bool() const noexcept { return supported; }
  static op_support yes() { return {}; }
  static op_support no(errc code, std::string reason) { return {false, code, std::move(reason)}; }
};

}  // namespace memfmt
