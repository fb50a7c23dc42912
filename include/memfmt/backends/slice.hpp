// memfmt/backends/slice.hpp - a slice (slice_params) as one permuted copy from an offset, which the
// oneDNN and cuDNN backends run as they run rearrangements; the parts of a concatenation are slices.
//
// Over y's index space, x's strides with the sliced axis's scaled by the step; x is read from the
// element `offset` = begin * its stride there. The backward pass is the same copy reversed, into dx
// from that offset, after dx is zeroed.
#pragma once

#include <cstdint>
#include <vector>

#include "../tensor/tensor_view.hpp"
#include "../layers/layer_params.hpp"
#include "../layers/permuted_copy.hpp"
#include "validate.hpp"

namespace memfmt {

struct slice_copy {
  permuted_copy copy;       // y[i . to] = x[offset + i . from]
  std::int64_t offset = 0;  // in elements of x
};

// The copy part = slice p of whole, validated (the backward pass names them as gradients).
template <class XT, class XF, class YT, class YF>
slice_copy slice_copy_of(const char* op, const slice_params& p, const tensor_view<XT, XF>& whole,
                         const tensor_view<YT, YF>& part, const char* whole_name = "input x",
                         const char* part_name = "output y") {
  validate_slice(op, whole_name, whole, part_name, part, p);
  slice_copy s;
  s.copy.rank = XF::rank;
  const auto axis = static_cast<std::size_t>(p.axis);
  for (std::size_t d = 0; d < static_cast<std::size_t>(XF::rank); ++d) {
    s.copy.extents[d] = part.extent(static_cast<int>(d));
    s.copy.from[d] = whole.stride(static_cast<int>(d));
    s.copy.to[d] = part.stride(static_cast<int>(d));
  }
  // Within x's span (validated: begin + (extent - 1) step < x's extent), so neither overflows.
  if (s.copy.extents[axis] > 1) s.copy.from[axis] *= p.step;
  s.offset = p.begin * whole.stride(p.axis);
  return s;
}

// The copies of a concatenation (concat_params), validated: part i is a slice of whole, so copy
// i reversed writes part i into whole + offset (the forward pass) and copy i reads it back out (the
// backward pass). A part empty along the axis gets a copy of no elements.
template <class PT, class PF, class WT, class WF>
std::vector<slice_copy> concat_copies(const char* op, const std::vector<tensor_view<PT, PF>>& parts,
                                      const char* whole_name, const tensor_view<WT, WF>& whole,
                                      const concat_params& p) {
  const std::vector<slice_params> where = validate_concat(op, parts, whole_name, whole, p);
  std::vector<slice_copy> copies(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].empty()) {
      copies[i] = slice_copy_of(op, where[i], whole, parts[i], whole_name, "part");
      continue;
    }
    copies[i].copy.rank = PF::rank;  // the part's extents, one of them 0: no elements (rank 0 would be one)
    for (int d = 0; d < PF::rank; ++d) copies[i].copy.extents[static_cast<std::size_t>(d)] = parts[i].extent(d);
  }
  return copies;
}

}  // namespace memfmt
