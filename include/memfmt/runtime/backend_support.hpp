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
#include "../graph/kinds.hpp"
#include "../graph/network.hpp"

namespace memfmt::runtime {

inline std::optional<op_query> op_query_of(const graph::node& n, format_family f) {
  if (!runs_on_backend(n.kind)) return std::nullopt;
  op_query q;
  q.op = n.kind;
  q.type = n.type;
  q.format = f;
  q.rank = n.extents.size() == 2 ? 4 : static_cast<int>(n.extents.size());
  // What the backend decides on besides the kind, where the kind's home says.
  graph::visit_kind(n.kind, [&](auto k) {
    using traits = decltype(k);
    if constexpr (graph::detail::has_query<traits>::value) traits::query(n, q);
  });
  return q;
}

// The backend's answers as the planner's support query: the reason a layer cannot run in a format,
// or nullopt when it can. With `training`, a layer must run its backward too (a plan for
// runtime::trainer). The backend must outlive the cost model holding the query.
template <class Backend>
graph::support_query support_query_for(const Backend& backend, bool training = false) {
  return
      [&backend, training](const graph::network&, const graph::node& n, format_family f) -> std::optional<std::string> {
        std::optional<op_query> q = op_query_of(n, f);
        if (!q) return std::nullopt;
        q->backward = training;
        op_support s = backend.support(*q);
        if (s) return std::nullopt;
        return std::move(s.reason);
      };
}

}  // namespace memfmt::runtime
