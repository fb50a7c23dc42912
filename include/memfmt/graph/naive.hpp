// memfmt/graph/naive.hpp - the per-layer choice a plan is measured against ("channel thrashing").
//
// What eager execution with mixed layers does (PyTorch eager): every layer with a cost preference
// runs in its cheaper format, memory-bound layers take the format of their first spatial input
// (TensorIterator's operand-order rule), pins hold, and a conversion goes wherever formats differ.
#pragma once

#include <optional>
#include <vector>

#include "cost_model.hpp"
#include "network.hpp"
#include "plan.hpp"

namespace memfmt::graph {

inline plan naive_plan(const network& net, const cost_model& model) {
  std::vector<std::optional<format_family>> formats(net.size());
  for (const node& n : net.nodes()) {
    if (!net.has_format(n.id)) continue;
    std::optional<format_family> pick = model.node_costs(net, n.id).preferred();
    if (const pin* p = n.binding_pin()) pick = p->format;
    for (node_id i : n.inputs)
      if (!pick && net.at(i).spatial()) pick = formats[i];
    format_family f = pick.value_or(format_family::channels_first);
    if (!model.allowed(net, n.id, f)) f = other(f);
    formats[n.id] = f;
  }
  return make_plan(net, model, formats);
}

}  // namespace memfmt::graph
