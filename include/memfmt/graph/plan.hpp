// memfmt/graph/plan.hpp - a format per layer and the conversions that assignment implies.
//
// make_plan() turns any assignment into a plan: a value is converted where a consumer reads it in
// the other format (network::read_format), once per value and target format, shared by all such
// consumers. Ambiguous values (C == 1, all spatial extents 1, or empty) are relabelled: zero bytes,
// zero cost.
// solve() picks the assignment; this header only prices one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../error.hpp"
#include "../tensor/relabel.hpp"
#include "cost_model.hpp"
#include "network.hpp"

namespace memfmt::graph {

struct conversion {
  node_id value = 0;  // the producer of the converted value
  format_family from = format_family::channels_first;
  format_family to = format_family::channels_last;
  std::vector<node_id> consumers;  // they read the converted copy
  bool relabel = false;            // ambiguous shape: same bytes, no copy
  std::int64_t bytes = 0;          // read + written
  cost_t cost = 0;
  // The best total when these consumers run in `from` instead, minus the plan's total plus `cost`:
  // what the conversion buys. nullopt: a mandatory pin or missing support leaves no alternative.
  std::optional<cost_t> saves;
  bool saves_unknown = false;  // saves not computed: the question was too far-reaching (solve.hpp)
  // On a cost tie (saves == cost): how many more memory-bound layers leave their producer's format
  // in that alternative (solve.hpp's second criterion); 0 when it is no tie or the tie is the
  // channels_last rule's.
  std::size_t kept_breaks = 0;
};

struct node_decision {
  std::optional<format_family> format;  // nullopt: no spatial input or output, so no layout
  cost_t cost = 0;                      // the layer in its format
  cost_t pin_penalty = 0;               // a violated preferred pin
  // The best total with this node in the other format minus the plan's total; nullopt: not allowed.
  std::optional<cost_t> flip_delta;
  bool flip_unknown = false;  // flip_delta not computed: the question was too far-reaching (solve.hpp)
  // On a cost tie (flip_delta == 0): how many more memory-bound layers leave their producer's
  // format in the best plan with this node flipped; 0 when it is no tie or the tie is the
  // channels_last rule's.
  std::size_t flip_breaks = 0;
  std::string reason;
};

struct plan {
  std::vector<node_decision> nodes;
  std::vector<conversion> conversions;
  std::vector<node_id> permuted_linears;  // linears reading a channels_last flatten
  cost_t node_cost = 0;
  cost_t conversion_cost = 0;
  cost_t pin_penalty = 0;
  // Memory-bound layers whose format differs from their producer's, and (constant, reader) pairs in
  // different formats (network::inherits_from): solve()'s second criterion, among plans of equal
  // total().
  std::size_t inherit_breaks = 0;

  cost_t total() const noexcept { return node_cost + conversion_cost + pin_penalty; }
  std::optional<format_family> format(node_id id) const { return nodes.at(id).format; }
  std::size_t copies() const noexcept { return conversions.size() - relabels(); }
  std::size_t relabels() const noexcept {
    std::size_t n = 0;
    for (const auto& c : conversions) n += c.relabel;
    return n;
  }
};

// Prices an assignment (one entry per node, set exactly where net.has_format()); throws when it
// breaks a mandatory pin or asks a layer for a format it cannot run in.
inline plan make_plan(const network& net, const cost_model& model,
                      const std::vector<std::optional<format_family>>& formats) {
  if (formats.size() != net.size())
    memfmt::detail::fail(errc::shape_mismatch, "assignment has " + std::to_string(formats.size()) + " formats for " +
                                                   std::to_string(net.size()) + " nodes");
  model.check_overrides(net);
  plan p;
  p.nodes.resize(net.size());
  for (const node& n : net.nodes()) {
    node_decision& d = p.nodes[n.id];
    const std::optional<format_family> f = formats[n.id];
    if (f.has_value() != net.has_format(n.id))
      memfmt::detail::fail(errc::invalid_argument,
                           "node '" + n.name + "': assignment " +
                               (f ? std::string(to_string(*f)) : std::string("none")) +
                               (f ? " given to a node without layout" : " for a node with a layout"));
    const format_costs costs = model.node_costs(net, n.id);
    const format_family run_as = f.value_or(format_family::channels_first);  // layout-free nodes cost the same in both
    if (!costs.supports(run_as))
      memfmt::detail::fail(errc::unsupported,
                           "node '" + n.name + "' cannot run in " + to_string(run_as) + " (" + costs.basis + ")");
    if (f && !model.allowed(net, n.id, *f))
      memfmt::detail::fail(errc::invalid_argument,
                           "node '" + n.name + "' is pinned to " + to_string(n.binding_pin()->format) + " ('" +
                               n.binding_pin()->origin + "'), assignment says " + to_string(*f));
    d.format = f;
    d.cost = *costs.by_family[index(run_as)];
    d.pin_penalty = f ? model.pin_penalty(net, n.id, *f) : 0;
    p.node_cost += d.cost;
    p.pin_penalty += d.pin_penalty;
  }
  for (const node& n : net.nodes())
    for (node_id from : net.inherits_from(n.id)) p.inherit_breaks += formats[from] != formats[n.id];
  for (const node& n : net.nodes()) {
    if (!n.spatial()) continue;
    conversion c;
    c.value = n.id;
    c.from = *formats[n.id];
    c.to = other(c.from);
    for (node_id user : net.consumers(n.id))
      if (net.read_format(user, *formats[user]) == c.to && (c.consumers.empty() || c.consumers.back() != user))
        c.consumers.push_back(user);
    if (c.consumers.empty()) continue;
    c.relabel = is_ambiguous_shape(n.extents);
    c.bytes = model.conversion_bytes(net, n.id);
    c.cost = model.conversion_cost(net, n.id);
    p.conversion_cost += c.cost;
    p.conversions.push_back(std::move(c));
  }
  for (const node& n : net.nodes())
    if (n.kind == layer_kind::flatten && formats[n.id] == format_family::channels_last &&
        !is_ambiguous_shape(net.at(n.inputs[0]).extents))
      for (node_id user : net.consumers(n.id)) p.permuted_linears.push_back(user);
  return p;
}

}  // namespace memfmt::graph
