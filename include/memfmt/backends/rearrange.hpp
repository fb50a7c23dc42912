// memfmt/backends/rearrange.hpp - a rearrangement of tensor views as one permuted copy
// (layers/rearrange.hpp), validated first, which every backend runs its own way.
#pragma once

#include "../layers/rearrange.hpp"
#include "../tensor/tensor_view.hpp"
#include "validate.hpp"

namespace memfmt {

// The same for views, validated first (the backward pass names them as gradients).
template <class XT, class XF, class YT, class YF>
permuted_copy rearrange_copy(const char* op, const rearrange_params& p, const tensor_view<XT, XF>& x,
                             const tensor_view<YT, YF>& y, const char* x_name = "input x",
                             const char* y_name = "output y") {
  validate_rearrange(op, x_name, x, y_name, y, p);
  return rearrange_copy(p, x.extents(), x.strides(), y.extents(), y.strides());
}

// The backward pass's copy, dx from dy (dx has x's sizes, dy y's), validated with the gradients'
// names.
template <class DYT, class DYF, class DXT, class DXF>
permuted_copy rearrange_backward_copy(const char* op, const rearrange_params& p, const tensor_view<DYT, DYF>& dy,
                                      const tensor_view<DXT, DXF>& dx) {
  return rearrange_copy(op, p, dx, dy, "input gradient dx", "output gradient dy").reversed();
}

}  // namespace memfmt
