// memfmt/backends/cudnn/reduction.hpp - global average pooling as a cuDNN reduction graph.
//
// y = (sum of x over the spatial dimensions) * (1 / positions): a REDUCTION ADD into a float
// intermediate [N, C, 1, 1(, 1)] and a pointwise scale by a by-value constant. (cuDNN 9.19 does
// not finalize a reduction descriptor with CUDNN_REDUCE_TENSOR_AVG.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../validate.hpp"
#include "graph.hpp"
#include "graphs.hpp"
#include "pointwise.hpp"
#include "tensor_desc.hpp"

namespace memfmt::cudnn {

struct global_pool_problem {
  tensor_spec x, y;
  std::int64_t positions = 1;  // spatial positions averaged per (n, c)

  std::vector<graph_constant> constants() const { return {{uid::constant_base, 1.0f / static_cast<float>(positions)}}; }
  std::string key() const { return "global_avg|" + x.key() + "|" + y.key(); }
};

template <class T, class XF, class YF>
global_pool_problem make_global_average_pool_problem(tensor_view<const T, XF> x, tensor_view<T, YF> y) {
  validate_global_pool_forward(x, y);
  require_layer_dtype(dtype_of_v<T>, "cuDNN global_average_pool_forward");
  global_pool_problem pr;
  pr.x = spec_of(x, uid::x);
  pr.y = one_position_as_channels_last(spec_of(y, uid::y));
  for (int d = 2; d < XF::rank; ++d) pr.positions *= x.extent(d);
  return pr;
}

inline graph_builder global_average_pool_graph(const global_pool_problem& pr) {
  graph_builder g;
  const tensor_spec sum = virtual_like(pr.y, dtype::float32, uid::virtual_base);
  const tensor_spec scale = scalar_spec(static_cast<int>(pr.x.dims.size()), dtype::float32, uid::constant_base);
  g.reduction_sum(pr.x, sum, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, sum, &scale, pr.y, CUDNN_DATA_FLOAT);
  return g;
}

}  // namespace memfmt::cudnn
