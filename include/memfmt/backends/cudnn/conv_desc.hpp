// memfmt/backends/cudnn/conv_desc.hpp - the cuDNN convolution descriptor from conv_params.
//
// cuDNN's graph API has no "groups" attribute: a grouped convolution is a convolution whose filter
// has C / groups input channels (the filter dims K, C/g, R, S against an input with C channels).
// memfmt's weight views are already K, C/groups, kernel..., so groups reach cuDNN through the dims;
// the shared validation (validate.hpp) checks them before any cuDNN call.
#pragma once

#include <cudnn.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "../../error.hpp"
#include "../../layers/conv_params.hpp"
#include "descriptor.hpp"

namespace memfmt::cudnn {

struct conv_spec {
  int spatial_dims = 2;
  std::vector<std::int64_t> pre_padding, post_padding, stride, dilation;
  cudnnDataType_t compute_type = CUDNN_DATA_FLOAT;

  std::string key() const {
    return "conv" + std::to_string(spatial_dims) + memfmt::detail::dims_to_string(pre_padding) +
           memfmt::detail::dims_to_string(post_padding) + memfmt::detail::dims_to_string(stride) +
           memfmt::detail::dims_to_string(dilation) + "ct" + std::to_string(static_cast<int>(compute_type));
  }
};

// The spec for `p` at a spatial rank: post padding is conv_params' end padding (pre when symmetric).
inline conv_spec conv_spec_of(const conv_params& p, int spatial_dims, cudnnDataType_t compute_type) {
  conv_spec s;
  s.spatial_dims = spatial_dims;
  s.compute_type = compute_type;
  for (int i = 0; i < spatial_dims; ++i) {
    s.pre_padding.push_back(p.padding[static_cast<std::size_t>(i)]);
    s.post_padding.push_back(p.end_padding(i));
    s.stride.push_back(p.stride[static_cast<std::size_t>(i)]);
    s.dilation.push_back(p.dilation[static_cast<std::size_t>(i)]);
  }
  return s;
}

inline descriptor make_convolution(const conv_spec& s) {
  descriptor d(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;  // what deep-learning frameworks call convolution
  d.set_int64(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, s.spatial_dims, "set CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS");
  d.set_data_type(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, s.compute_type, "set CUDNN_ATTR_CONVOLUTION_COMP_TYPE");
  d.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode,
        "set CUDNN_ATTR_CONVOLUTION_CONV_MODE");
  d.set_int64s(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, s.pre_padding, "set CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS");
  d.set_int64s(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, s.post_padding, "set CUDNN_ATTR_CONVOLUTION_POST_PADDINGS");
  d.set_int64s(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, s.stride, "set CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES");
  d.set_int64s(CUDNN_ATTR_CONVOLUTION_DILATIONS, s.dilation, "set CUDNN_ATTR_CONVOLUTION_DILATIONS");
  d.finalize("finalize convolution descriptor");
  return d;
}

}  // namespace memfmt::cudnn
