// memfmt/strided/descriptor.hpp - a runtime, type-erased description of strided data.
//
// This is how tensors that come from elsewhere (PyTorch through DLPack, a raw pointer with
// strides) enter the library: sizes and strides in elements, in PyTorch's logical order, and a
// dtype. It carries no format: the classification functions (strided/classify.hpp) say what
// PyTorch would say of it, and the typed layer decides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../dtype.hpp"
#include "../detail/checked.hpp"
#include "../error.hpp"

namespace memfmt {

struct strided_desc {
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  memfmt::dtype type = dtype::float32;

  std::int64_t dim() const noexcept { return static_cast<std::int64_t>(sizes.size()); }
  // Element count; throws memfmt::error for negative sizes or a count past 64 bits.
  std::int64_t numel() const { return detail::checked_numel(sizes, "strided_desc"); }
  // Throws invalid_argument unless sizes and strides have the same length and sizes are >= 0.
  void validate() const {
    if (sizes.size() != strides.size())
      detail::fail(errc::invalid_argument, "strided_desc: sizes " + detail::dims_to_string(sizes) + " and strides " +
                                               detail::dims_to_string(strides) + " differ in length");
    for (auto s : sizes)
      if (s < 0)
        detail::fail(errc::invalid_argument, "strided_desc: negative size in sizes " + detail::dims_to_string(sizes));
  }
  friend bool operator==(const strided_desc& a, const strided_desc& b) {
    return a.sizes == b.sizes && a.strides == b.strides && a.type == b.type;
  }
  friend bool operator!=(const strided_desc& a, const strided_desc& b) { return !(a == b); }
};

}  // namespace memfmt
