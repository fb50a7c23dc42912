// memfmt/graph/verify.hpp - checks a plan against its network and cost model (F13).
//
// Returns one line per violation (empty: the plan is sound): formats allowed by pins and support,
// every consumer served in the format it reads, at most one conversion per value and target, each
// consumer listed once, none unused,
// no layer sitting between a pair of inverse conversions it could have avoided, relabels exactly
// on ambiguous values, and totals (and the inherit-break count) equal to what the items add up to.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../tensor/relabel.hpp"
#include "cost_model.hpp"
#include "network.hpp"
#include "plan.hpp"

namespace memfmt::graph {

inline std::vector<std::string> verify(const network& net, const cost_model& model, const plan& p) {
  std::vector<std::string> bad;
  if (p.nodes.size() != net.size()) {
    bad.push_back("plan has " + std::to_string(p.nodes.size()) + " nodes, network " + std::to_string(net.size()));
    return bad;
  }
  const auto name = [&](node_id id) { return "'" + net.at(id).name + "'"; };
  cost_t node_sum = 0, penalty_sum = 0, conversion_sum = 0;
  for (const node& n : net.nodes()) {
    const node_decision& d = p.nodes[n.id];
    node_sum += d.cost;
    penalty_sum += d.pin_penalty;
    if (d.format.has_value() != net.has_format(n.id)) {
      bad.push_back(name(n.id) + (d.format ? " has a format but no layout" : " has a layout but no format"));
      continue;
    }
    if (d.format && !model.allowed(net, n.id, *d.format))
      bad.push_back(name(n.id) + " runs in " + to_string(*d.format) + ", which its pins or support forbid");
    const format_costs costs = model.node_costs(net, n.id);
    const format_family run_as = d.format.value_or(format_family::channels_first);
    if (costs.supports(run_as) && *costs.by_family[index(run_as)] != d.cost)
      bad.push_back(name(n.id) + " costs " + std::to_string(d.cost) + ", the model says " +
                    std::to_string(*costs.by_family[index(run_as)]));
    if (d.format && model.pin_penalty(net, n.id, *d.format) != d.pin_penalty)
      bad.push_back(name(n.id) + " pin penalty " + std::to_string(d.pin_penalty) + " is not the model's");
  }
  if (!bad.empty()) return bad;

  std::set<std::pair<node_id, format_family>> converted;
  std::set<std::pair<node_id, node_id>> served;  // (value, consumer) reading a converted copy
  for (const conversion& c : p.conversions) {
    conversion_sum += c.cost;
    const node& v = net.at(c.value);
    if (!v.spatial() || p.nodes[c.value].format != c.from || c.to == c.from) {
      bad.push_back("conversion of " + name(c.value) + " " + to_string(c.from) + " -> " + to_string(c.to) +
                    " does not start at the producer's format");
      continue;
    }
    if (!converted.insert({c.value, c.to}).second)
      bad.push_back(name(c.value) + " is converted to " + to_string(c.to) + " more than once");
    if (c.consumers.empty()) bad.push_back("conversion of " + name(c.value) + " has no consumer");
    for (node_id u : c.consumers) {
      bool reads = false;
      for (node_id i : net.at(u).inputs) reads = reads || i == c.value;
      if (!reads || !p.nodes[u].format || net.read_format(u, *p.nodes[u].format) != c.to)
        bad.push_back("conversion of " + name(c.value) + " serves " + name(u) + ", which does not read it in " +
                      to_string(c.to));
      // A layer reading the value twice (add(x, x)) is still one consumer of the copy.
      if (!served.insert({c.value, u}).second)
        bad.push_back("conversion of " + name(c.value) + " lists " + name(u) + " as a consumer more than once");
    }
    const bool ambiguous = is_ambiguous_shape(v.extents);
    if (c.relabel != ambiguous || c.bytes != model.conversion_bytes(net, c.value) ||
        c.cost != model.conversion_cost(net, c.value))
      bad.push_back("conversion of " + name(c.value) + ": relabel " + std::to_string(c.relabel) + ", bytes " +
                    std::to_string(c.bytes) + ", cost " + std::to_string(c.cost) + " disagree with the model");
  }
  for (const node& n : net.nodes())
    for (node_id i : n.inputs)
      if (net.at(i).spatial() && p.nodes[i].format != net.read_format(n.id, *p.nodes[n.id].format) &&
          !served.count({i, n.id}))
        bad.push_back(name(n.id) + " reads " + name(i) + " in the wrong format: no conversion serves it");

  // A layer that costs the same in both formats, reads only converted inputs and whose every
  // consumer converts its output back would be cheaper flipped: an adjacent inverse pair.
  for (const node& n : net.nodes()) {
    const std::optional<format_family> f = p.nodes[n.id].format;
    if (!f || !n.spatial() || net.consumers(n.id).empty() || model.node_costs(net, n.id).preferred() ||
        !model.allowed(net, n.id, other(*f)) || model.conversion_cost(net, n.id) == 0)
      continue;
    bool inputs_converted = !n.inputs.empty();
    for (node_id i : n.inputs)
      inputs_converted = inputs_converted && net.at(i).spatial() && p.nodes[i].format == other(*f);
    bool outputs_converted = true;
    for (node_id u : net.consumers(n.id))
      outputs_converted = outputs_converted && net.read_format(u, *p.nodes[u].format) == other(*f);
    if (inputs_converted && outputs_converted)
      bad.push_back(name(n.id) + " sits between inverse conversions " + to_string(other(*f)) + " -> " + to_string(*f) +
                    " -> " + to_string(other(*f)));
  }
  std::size_t breaks = 0;
  for (const node& n : net.nodes())
    for (node_id from : net.inherits_from(n.id)) breaks += p.nodes[from].format != p.nodes[n.id].format;
  if (breaks != p.inherit_breaks)
    bad.push_back(
        "inherit breaks " + std::to_string(p.inherit_breaks) + " differ from the " + std::to_string(breaks) +
        " memory-bound layers (and constant readers) whose format differs from their producer's (constant's)");
  if (node_sum != p.node_cost || conversion_sum != p.conversion_cost || penalty_sum != p.pin_penalty)
    bad.push_back("totals (layers " + std::to_string(p.node_cost) + ", conversions " +
                  std::to_string(p.conversion_cost) + ", penalties " + std::to_string(p.pin_penalty) +
                  ") differ from the listed items (" + std::to_string(node_sum) + ", " +
                  std::to_string(conversion_sum) + ", " + std::to_string(penalty_sum) + ")");
  return bad;
}

}  // namespace memfmt::graph
