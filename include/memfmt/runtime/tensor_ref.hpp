// memfmt/runtime/tensor_ref.hpp - a dense tensor of a runtime dtype and format, by reference.
//
// The executor's inputs and outputs: what a typed host_tensor or tensor_view is, with the element
// type and format as values, so one call can take a network's inputs whatever their types. The
// data is dense in `format` over `extents` (rank 2 values have no format; it is ignored).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "../detail/checked.hpp"
#include "../dtype.hpp"
#include "../format/dispatch.hpp"
#include "../tensor/tensor_view.hpp"

namespace memfmt::runtime {

struct tensor_ref {
  memfmt::dtype type = memfmt::dtype::float32;
  std::vector<std::int64_t> extents;
  memfmt::format_family format = memfmt::format_family::channels_first;
  void* data = nullptr;

  std::int64_t numel() const { return memfmt::detail::checked_numel(extents, "tensor_ref"); }
  std::size_t bytes() const { return memfmt::detail::checked_bytes(numel(), size_of(type), "tensor_ref"); }
};

// A typed dense view as a tensor_ref (the view must be packed in its format, as views made from
// host_tensor are). Const views give refs that the executor only reads.
template <class T, class F>
tensor_ref ref(tensor_view<T, F> v) {
  tensor_ref r;
  r.type = dtype_of_v<T>;
  const auto e = v.extents();
  r.extents.assign(e.begin(), e.end());
  r.format = family_v<F>;
  r.data = const_cast<std::remove_const_t<T>*>(v.data());
  return r;
}

// A rank-2 value ([N, features]: a classifier's output) as a tensor_ref.
template <class T>
tensor_ref ref_matrix(T* data, std::int64_t rows, std::int64_t cols) {
  tensor_ref r;
  r.type = dtype_of_v<T>;
  r.extents = {rows, cols};
  r.data = const_cast<std::remove_const_t<T>*>(data);
  return r;
}

}  // namespace memfmt::runtime
