// memfmt/layers/op_query.hpp - asking a backend whether it runs an operation, before any work.
//
// Every backend answers `op_support support(const op_query&) const`: the layer kind (one whose
// kind_infos row has `runs_on_backend`), the element type, the format family and rank of its
// activations, and the attributes that decide whether a backend has a kernel (the activation
// function, the pooling kind, the resampling mode). The executor asks at build time, so a layer a
// backend cannot run is an error naming the node before any work; the planner asks through
// runtime/backend_support.hpp, so a format a backend cannot run a layer in is unsupported for that
// layer.
#pragma once

#include <string>
#include <utility>

#include "../dtype.hpp"
#include "../error.hpp"
#include "../format/dispatch.hpp"
#include "layer_kind.hpp"
#include "layer_params.hpp"

namespace memfmt {

struct op_query {
  layer_kind op = layer_kind::conv;
  dtype type = dtype::float32;
  format_family format = format_family::channels_first;
  int rank = 4;                                                      // of the activations: 4 (2-D) or 5 (3-D)
  activation_params function = activation::identity;                 // layer_kind::activation
  pool_kind pool = pool_kind::max;                                   // layer_kind::pool, global_pool
  resample_mode resample = resample_mode::nearest;                   // layer_kind::upsample
  resample_coordinates coordinates = resample_coordinates::pytorch;  // layer_kind::upsample
  pad_mode padding = pad_mode::constant;                             // layer_kind::pad
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
