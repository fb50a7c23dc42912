// memfmt/strided/format_requests.hpp - what PyTorch 1.13 returns when asked for a memory format.
//
// Three requests look alike and are not:
//   t.to(memory_format=f)         aliases when f is preserve or f == suggest_memory_format(t);
//   t.contiguous(memory_format=f) aliases when t.is_contiguous(memory_format=f);
//   empty_like / clone(t, f)      never alias; preserve keeps non-overlapping-and-dense strides
//                                 verbatim and otherwise infers dense strides in t's order.
// So an NC11 or N1HW tensor can be channels-last contiguous (.contiguous aliases) without being
// suggested channels-last (.to copies), and the other way round for sliced views.
#pragma once

#include <cstdint>
#include <vector>

#include "../error.hpp"
#include "../format/memory_format.hpp"
#include "classify.hpp"
#include "descriptor.hpp"

namespace memfmt {

struct format_result {
  bool alias;  // the request returns t itself (same storage, same strides)
  std::vector<std::int64_t> sizes, strides;
};

// empty_like(t, memory_format=f) and clone(t, memory_format=f): the strides of the new tensor.
inline std::vector<std::int64_t> empty_like_strides(const strided_desc& t, memory_format f) {
  t.validate();
  if (f != memory_format::preserve) return dense_strides(t.sizes, f);
  if (is_non_overlapping_and_dense(t)) return t.strides;
  return infer_dense_strides(t);
}

// t.to(memory_format=f), same dtype and device.
inline format_result to_format(const strided_desc& t, memory_format f) {
  t.validate();
  if (f == memory_format::preserve || suggest_memory_format(t) == f) return {true, t.sizes, t.strides};
  return {false, t.sizes, dense_strides(t.sizes, f)};
}

// t.contiguous(memory_format=f). Preserve is accepted only when t is already contiguous.
inline format_result contiguous_format(const strided_desc& t, memory_format f) {
  t.validate();
  if (is_contiguous(t, f)) return {true, t.sizes, t.strides};
  if (f == memory_format::preserve)
    detail::fail(errc::unsupported, "preserve memory format is unsupported by the contiguous operator");
  return {false, t.sizes, dense_strides(t.sizes, f)};
}

}  // namespace memfmt
