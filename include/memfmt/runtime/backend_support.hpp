// memfmt/runtime/backend_support.hpp - a network layer as a backend capability query.
//
// op_query_of(node, format) is the operation a layer runs on a backend in a format (nullopt
// for layers that run none: inputs, constants, outputs, renamings, user ops). The executor asks
// the backend about each layer when it is built; support_query_for(backend) hands the same
// question to the planner (graph::cost_model::set_support_query), so a format a backend cannot run
// a layer in is unsupported for that layer and the plan avoids it.
#pragma once

#include <optional>
#include <string>

#include "../layers/op_query.hpp"
#include "../graph/cost_model.hpp"
#include "../graph/network.hpp"

namespace memfmt::runtime {

inline std::optional<op_query> op_query_of(const graph::node& n, graph::family f) {
  op_query q;
  q.type = n.type;
  q.format = f;
  q.rank = n.extents.size() == 2 ? 4 : static_cast<int>(n.extents.size());
  switch (n.kind) {
    case graph::node_kind::conv: q.op = op_kind::conv; break;
    case graph::node_kind::conv_transpose: q.op = op_kind::conv_transpose; break;
    case graph::node_kind::batch_norm: q.op = op_kind::batch_norm; break;
    case graph::node_kind::instance_norm:
    case graph::node_kind::group_norm: q.op = op_kind::group_norm; break;
    case graph::node_kind::layer_norm: q.op = op_kind::layer_norm; break;
    case graph::node_kind::pad:
      q.op = op_kind::pad;
      q.padding = n.get<memfmt::pad_params>().mode;
      break;
    case graph::node_kind::activation:
      q.op = op_kind::activation;
      q.function = n.get<memfmt::activation_params>();
      break;
    case graph::node_kind::binary: q.op = op_kind::binary; break;
    case graph::node_kind::pool:
      q.op = op_kind::pool;
      q.pool = n.get<memfmt::pool_params>().kind;
      break;
    case graph::node_kind::global_pool:
      if (n.get<graph::global_pool_attrs>().kind == memfmt::pool_kind::average) {
        q.op = op_kind::global_average_pool;
      } else {  // a max pool whose window is the whole map
        q.op = op_kind::pool;
        q.pool = memfmt::pool_kind::max;
      }
      break;
    case graph::node_kind::upsample:
      q.op = op_kind::upsample;
      q.resample = n.get<memfmt::upsample_params>().mode;
      q.coordinates = n.get<memfmt::upsample_params>().coordinates;
      break;
    case graph::node_kind::concat: q.op = op_kind::concat; break;
    case graph::node_kind::slice: q.op = op_kind::slice; break;
    case graph::node_kind::rearrange: q.op = op_kind::rearrange; break;
    case graph::node_kind::linear: q.op = op_kind::linear; break;
    case graph::node_kind::softmax: q.op = op_kind::softmax; break;
    case graph::node_kind::reduce: q.op = op_kind::reduce; break;
    case graph::node_kind::dropout:  // renamings in inference
    case graph::node_kind::flatten:
    case graph::node_kind::input:
    case graph::node_kind::constant:
    case graph::node_kind::output:
    case graph::node_kind::opaque: return std::nullopt;
  }
  return q;
}

// The backend's answers as the planner's support query: the reason a layer cannot run in a format,
// or nullopt when it can. With `training`, a layer must run its backward too (a plan for
// runtime::trainer). The backend must outlive the cost model holding the query.
template <class Backend>
graph::support_query support_query_for(const Backend& backend, bool training = false) {
  return
      [&backend, training](const graph::network&, const graph::node& n, graph::family f) -> std::optional<std::string> {
        std::optional<op_query> q = op_query_of(n, f);
        if (!q) return std::nullopt;
        q->backward = training;
        op_support s = backend.support(*q);
        if (s) return std::nullopt;
        return std::move(s.reason);
      };
}

}  // namespace memfmt::runtime
