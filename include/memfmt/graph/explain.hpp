// memfmt/graph/explain.hpp - a readable account of a plan (F9).
//
// Lists every conversion (value -> consumers, bytes moved, cost added, cost saved against keeping
// the producer's format), every layer's format and why, and the channel thrashing the plan removes
// compared with the naive per-layer choice. Every layer and conversion says where its cost comes
// from: "measured" (a timing cache) or "prior: <benchmark case>". The text is a function of the plan alone, so the
// same graph gives the same report.
#pragma once

#include <cstddef>
#include <sstream>
#include <string>

#include "../error.hpp"
#include "cost_model.hpp"
#include "naive.hpp"
#include "network.hpp"
#include "plan.hpp"

namespace memfmt::graph {

inline std::string explain(const network& net, const cost_model& model, const plan& p) {
  if (p.nodes.size() != net.size())
    memfmt::detail::fail(errc::shape_mismatch, "explain: plan has " + std::to_string(p.nodes.size()) +
                                                   " nodes, network " + std::to_string(net.size()));
  const plan naive = naive_plan(net, model);
  std::ostringstream os;
  os << "format plan: " << net.size() << " layers, " << p.copies() << " conversions + " << p.relabels()
     << " relabels, total " << cost_string(p.total()) << " (layers " << cost_string(p.node_cost) << ", conversions "
     << cost_string(p.conversion_cost) << ", pin penalties " << cost_string(p.pin_penalty) << ")\n";
  os << "channel thrashing: naive per-layer choice inserts " << naive.copies() << " conversions ("
     << cost_string(naive.total()) << " total), this plan " << p.copies() << " (" << cost_string(p.total()) << ")\n";
  os << "conversions:\n";
  if (p.conversions.empty()) os << "  none\n";
  for (std::size_t i = 0; i < p.conversions.size(); ++i) {
    const conversion& c = p.conversions[i];
    os << "  #" << i + 1 << " '" << net.at(c.value).name << "' " << to_string(c.from) << " -> " << to_string(c.to)
       << " for";
    for (node_id u : c.consumers) os << " '" << net.at(u).name << "'";
    if (c.relabel) {
      os << ": relabel, ambiguous extents " << memfmt::detail::dims_to_string(net.at(c.value).extents) << ", 0 bytes\n";
      continue;
    }
    os << ": " << c.bytes << " bytes, adds " << cost_string(c.cost) << " (" << model.conversion_source(net, c.value)
       << "), saves ";
    if (c.saves_unknown) os << "- (not computed: keeping " << to_string(c.from) << " is too far-reaching a question)";
    else if (c.saves)
      os << cost_string(*c.saves) << " vs keeping " << to_string(c.from)
         << (*c.saves != c.cost  ? ""
             : c.kept_breaks > 0 ? " (a tie in cost: placed so memory-bound layers keep their producer's format)"
                                 : " (a tie: placed by the channels_last rule)");
    else os << "- (keeping " << to_string(c.from) << " breaks a pin or support)";
    os << '\n';
  }
  for (node_id id : p.permuted_linears)
    os << "  linear '" << net.at(id).name << "': weight columns permuted to the channels_last flatten order\n";
  os << "layers:\n";
  for (const node& n : net.nodes()) {
    const node_decision& d = p.nodes[n.id];
    os << "  " << n.name << " (" << to_string(n.kind) << ' ' << memfmt::detail::dims_to_string(n.extents) << ' '
       << memfmt::to_string(n.type) << "): " << (d.format ? to_string(*d.format) : "-") << ", " << cost_string(d.cost)
       << ". " << d.reason << " [costs: " << model.node_costs(net, n.id).source << "]\n";
  }
  return os.str();
}

}  // namespace memfmt::graph
