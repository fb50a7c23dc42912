// memfmt/backends/cudnn/resample.hpp - pooling and up-sampling as cuDNN resample graphs.
//
// One RESAMPLE_FWD operation each. Pooling: the window, strides and per-side paddings of
// pool_params; padded positions are -inf for max (they never win) and zero for average, which
// counts them or not (count_include_pad). ceil_mode is extra end padding up to the last window,
// which changes nothing for max and for averages that exclude padding; an average that counts
// padding would count it too, so that case is refused. Up-sampling: nearest or bilinear by a whole
// factor s >= 2 per dimension, as a window of 2 and a stride of 1/s (cuDNN 9.19 finalizes no
// resample descriptor with a window of 1, so other sizes are refused). The padding mode cannot be
// read back (cuDNN 9.19 answers NEG_INF for every mode); it is in resample_problem::spec.
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../validate.hpp"
#include "graph.hpp"
#include "graphs.hpp"
#include "tensor_desc.hpp"

namespace memfmt::cudnn {

struct resample_problem {
  tensor_spec x, y;
  resample_spec spec;
  std::string key() const { return "resample|" + x.key() + "|" + y.key() + "|" + spec.key(); }
};

namespace detail {

inline cudnnFraction_t whole(std::int64_t v) { return cudnnFraction_t{v, 1}; }

inline cudnnFraction_t reduced(std::int64_t num, std::int64_t den) {
  const std::int64_t g = std::gcd(num, den);
  return g > 1 ? cudnnFraction_t{num / g, den / g} : cudnnFraction_t{num, den};
}

}  // namespace detail

namespace detail {

// How errors name a pooling or up-sampling call `step` (pool_forward, upsample_backward, ...): the
// mode is part of the name, since the refusals differ by mode.
inline std::string pool_call_name(const char* step, const pool_params& p) {
  return std::string("cuDNN ") + step + " (" + (p.kind == pool_kind::max ? "max" : "average") + ")";
}
inline std::string upsample_call_name(const char* step, const upsample_params& p) {
  return std::string("cuDNN ") + step + " (" + (p.mode == resample_mode::nearest ? "nearest" : "linear") + ")";
}

// The resample spec of pooling x (extents xe) into y (extents ye); `op` names the call in errors.
template <class E>
resample_spec pool_spec(const E& xe, const E& ye, const pool_params& p, const std::string& op) {
  resample_spec r;
  r.mode = p.kind == pool_kind::max ? CUDNN_RESAMPLE_MAXPOOL
           : p.count_include_pad    ? CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING
                                    : CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING;
  r.padding_mode = p.kind == pool_kind::max ? CUDNN_NEG_INF_PAD : CUDNN_ZERO_PAD;
  for (std::size_t i = 0; i + 2 < xe.size(); ++i) {
    const std::int64_t in = xe[2 + i], k = p.kernel[i], s = p.stride[i], pb = p.padding[i];
    // End padding that makes floor((in + pb + pe - k) / s) + 1 the output size (ceil_mode adds some).
    const std::int64_t pe = std::max(p.padding_end[i], (ye[2 + i] - 1) * s + k - in - pb);
    if (pe != p.padding_end[i] && r.mode == CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING)
      memfmt::detail::fail(errc::unsupported,
                           op + ": input " + memfmt::detail::dims_to_string(xe) +
                               " with ceil_mode and count_include_pad: the last window in spatial dim " +
                               std::to_string(i) + " reaches " + std::to_string(pe - p.padding_end[i]) +
                               " past the end padding, which cuDNN would count as padding");
    r.window.push_back(whole(k));
    r.strides.push_back(whole(s));
    r.pre_padding.push_back(whole(pb));
    r.post_padding.push_back(whole(pe));
  }
  return r;
}

// The resample spec of up-sampling x (extents xe) into y (extents ye).
template <class E>
resample_spec upsample_spec(const E& xe, const E& ye, const upsample_params& p, const std::string& op) {
  if (p.coordinates != resample_coordinates::pytorch)
    memfmt::detail::fail(errc::unsupported, op + ": ONNX coordinate modes (cuDNN resamples with PyTorch's only)");
  if (p.mode == resample_mode::linear && xe.size() != 4)
    memfmt::detail::fail(errc::unsupported, op + ": input " + memfmt::detail::dims_to_string(xe) +
                                                ": cuDNN resamples bilinearly in 2-D only (no trilinear mode)");
  resample_spec r;
  r.mode = p.mode == resample_mode::nearest ? CUDNN_RESAMPLE_NEAREST : CUDNN_RESAMPLE_BILINEAR;
  r.padding_mode = CUDNN_EDGE_VAL_PAD;  // half-pixel centres clamp at the edges
  for (std::size_t i = 0; i + 2 < xe.size(); ++i) {
    const std::int64_t in = xe[2 + i], out = ye[2 + i];
    if (out % in != 0 || out / in < 2)
      memfmt::detail::fail(errc::unsupported, op + ": input " + memfmt::detail::dims_to_string(xe) + " to output " +
                                                  memfmt::detail::dims_to_string(ye) + ": spatial dim " +
                                                  std::to_string(i) + " scales " + std::to_string(in) + " -> " +
                                                  std::to_string(out) +
                                                  "; the cuDNN resample takes whole scale factors >= 2");
    // cuDNN sizes the output as (in + pre + post - window) / stride + 1 (read off what it
    // finalizes); window 2, stride 1/s and pre + post = 2 - 1/s give in * s. The split (1/2 before)
    // is the half-pixel placement; its values are unverified without a GPU run.
    const std::int64_t f = out / in;
    r.window.push_back(whole(2));
    r.strides.push_back(reduced(1, f));
    r.pre_padding.push_back(reduced(1, 2));
    r.post_padding.push_back(reduced(3 * f - 2, 2 * f));
  }
  return r;
}

}  // namespace detail

template <class T, class XF, class YF>
resample_problem make_pool_problem(tensor_view<const T, XF> x, tensor_view<T, YF> y, const pool_params& p) {
  const auto ye = validate_pool_forward(x, y, p);
  const std::string op = detail::pool_call_name("pool_forward", p);
  require_layer_dtype(dtype_of_v<T>, op);
  resample_problem pr;
  pr.x = spec_of(x, uid::x);
  pr.y = one_position_as_channels_last(spec_of(y, uid::y));
  pr.spec = detail::pool_spec(x.extents(), ye, p, op);
  return pr;
}

template <class T, class XF, class YF>
resample_problem make_upsample_problem(tensor_view<const T, XF> x, tensor_view<T, YF> y, const upsample_params& p) {
  validate_upsample_forward(x, y, p);
  const std::string op = detail::upsample_call_name("upsample_forward", p);
  require_layer_dtype(dtype_of_v<T>, op);
  resample_problem pr;
  pr.x = spec_of(x, uid::x);
  pr.y = spec_of(y, uid::y);
  pr.spec = detail::upsample_spec(x.extents(), y.extents(), p, op);
  return pr;
}

inline graph_builder resample_graph(const resample_problem& pr) {
  graph_builder g;
  g.resample(pr.spec, pr.x, pr.y);
  return g;
}

}  // namespace memfmt::cudnn
