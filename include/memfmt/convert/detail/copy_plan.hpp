// memfmt/convert/detail/copy_plan.hpp - a conversion reduced to its essential loop nest.
//
// Every conversion (transpose, same-format copy, strided gather) is "copy element at logical index
// i from src + dot(i, src_strides) to dst + dot(i, dst_strides)". Planning drops size-1 dimensions
// and merges neighbours that are contiguous in both tensors, so NCHW->NHWC of a dense tensor becomes
// N x C x (H*W) and a same-format dense copy becomes one flat run.
#pragma once

#include <cstdint>

namespace memfmt::detail {

struct copy_dim {
  std::int64_t size;
  std::int64_t src_stride;  // elements; any sign, 0 for broadcast sources
  std::int64_t dst_stride;  // elements; > 0
};

struct copy_plan {
  static constexpr int max_rank = 5;
  int rank = 0;  // dims[0] is outermost in destination order
  copy_dim dims[max_rank] = {};
  std::int64_t numel = 0;
};

// sizes/strides in logical order; dst_order lists logical dims from the outermost destination
// stride to the innermost.
inline copy_plan make_copy_plan(int rank, const std::int64_t* sizes, const std::int64_t* src_strides,
                                const std::int64_t* dst_strides, const int* dst_order) noexcept {
  copy_plan p;
  p.numel = 1;
  for (int d = 0; d < rank; ++d) p.numel *= sizes[d];
  if (p.numel == 0) return p;
  for (int i = 0; i < rank; ++i) {
    const int d = dst_order[i];
    if (sizes[d] == 1) continue;
    const copy_dim q{sizes[d], src_strides[d], dst_strides[d]};
    if (p.rank > 0) {
      copy_dim& o = p.dims[p.rank - 1];
      if (o.src_stride == q.src_stride * q.size && o.dst_stride == q.dst_stride * q.size) {
        o = copy_dim{o.size * q.size, q.src_stride, q.dst_stride};
        continue;
      }
    }
    p.dims[p.rank++] = q;
  }
  if (p.rank == 0) p.dims[p.rank++] = copy_dim{1, 1, 1};  // a single element
  return p;
}

}  // namespace memfmt::detail
