// memfmt/io/plan_json.hpp - a graph::plan as a JSON document (the JSON report, and the file one rank
// plans and the others load: docs/formats.md, "memfmt.plan" version 1). Part of memfmt::graph_io.
//
// A plan file carries two fingerprints: of its network (every node, attribute and pin, as
// network_to_json writes them) and of the costs it was priced with. Loading refuses a plan for
// another network; costs may differ (independent calibrations differ by noise, and every rank must
// still run the same formats), so the loaded plan keeps the file's formats, is re-priced with the
// loader's model, and says whether the costs matched.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "../graph/cost_model.hpp"
#include "../graph/network.hpp"
#include "../graph/plan.hpp"
#include "network_json.hpp"

namespace memfmt::io {

inline constexpr int plan_format_version = 1;

namespace detail {

// FNV-1a, 64 bits, as 16 hex digits: stable across platforms and runs.
inline std::string fnv1a(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

inline json optional_cost(const std::optional<graph::cost_t>& c) { return c ? json(*c) : json(nullptr); }

}  // namespace detail

inline std::string network_fingerprint(const graph::network& net) {
  return detail::fnv1a(io::dump_json(network_to_json(net), -1, "network"));
}

// Each node's cost in both families (null: unsupported), its pin penalties and its conversion cost.
inline std::string cost_fingerprint(const graph::network& net, const graph::cost_model& model) {
  detail::json costs = detail::json::array();
  for (const graph::node& n : net.nodes()) {
    const graph::format_costs c = model.node_costs(net, n.id);
    costs.push_back({detail::optional_cost(c.by_family[0]), detail::optional_cost(c.by_family[1]),
                     model.pin_penalty(net, n.id, format_family::channels_first),
                     model.pin_penalty(net, n.id, format_family::channels_last), model.conversion_cost(net, n.id)});
  }
  return detail::fnv1a(costs.dump());
}

inline nlohmann::json plan_to_json(const graph::network& net, const graph::cost_model& model, const graph::plan& p,
                                   std::string_view policy = "optimal") {
  using detail::json;
  if (p.nodes.size() != net.size())
    memfmt::detail::fail(errc::shape_mismatch, "plan_to_json: plan has " + std::to_string(p.nodes.size()) +
                                                   " nodes, network " + std::to_string(net.size()));
  json layers = json::array();
  for (const graph::node& n : net.nodes()) {
    const graph::node_decision& d = p.nodes[n.id];
    layers.push_back({{"name", n.name},
                      {"kind", detail::kind_names(n.kind)},
                      {"format", d.format ? json(detail::family_names(*d.format)) : json(nullptr)},
                      {"cost_ns", d.cost},
                      {"pin_penalty_ns", d.pin_penalty},
                      {"flip_delta_ns", detail::optional_cost(d.flip_delta)},
                      {"flip_delta_computed", !d.flip_unknown},
                      {"reason", d.reason}});
  }
  json conversions = json::array();
  std::int64_t bytes = 0;
  for (const graph::conversion& c : p.conversions) {
    json users = json::array();
    for (graph::node_id u : c.consumers) users.push_back(net.at(u).name);
    bytes += c.bytes;
    conversions.push_back({{"value", net.at(c.value).name},
                           {"from", detail::family_names(c.from)},
                           {"to", detail::family_names(c.to)},
                           {"consumers", users},
                           {"relabel", c.relabel},
                           {"bytes", c.bytes},
                           {"cost_ns", c.cost},
                           {"saves_ns", detail::optional_cost(c.saves)},
                           {"saves_computed", !c.saves_unknown}});
  }
  json permuted = json::array();
  for (graph::node_id id : p.permuted_linears) permuted.push_back(net.at(id).name);
  return {{"format", "memfmt.plan"},
          {"version", plan_format_version},
          {"policy", std::string(policy)},
          {"network_fingerprint", network_fingerprint(net)},
          {"cost_fingerprint", cost_fingerprint(net, model)},
          {"totals",
           {{"total_ns", p.total()},
            {"layers_ns", p.node_cost},
            {"conversions_ns", p.conversion_cost},
            {"pin_penalties_ns", p.pin_penalty},
            {"copies", p.copies()},
            {"relabels", p.relabels()},
            {"bytes_moved", bytes},
            {"inherit_breaks", p.inherit_breaks}}},
          {"layers", layers},
          {"conversions", conversions},
          {"permuted_linears", permuted}};
}

struct loaded_plan {
  graph::plan plan;         // the file's formats, priced with the loader's model
  std::string policy;       // as recorded
  bool same_costs = false;  // the file's cost fingerprint is the loader's model's
};

// The plan in `j` for `net`; an error when it was made for another network (the fingerprints
// differ) or is malformed (naming the key).
inline loaded_plan plan_from_json(const nlohmann::json& j, const graph::network& net, const graph::cost_model& model) {
  using detail::json;
  detail::check_header(j, "memfmt.plan", plan_format_version, "plan file");
  const std::string theirs = detail::text(j, "network_fingerprint", "plan file");
  const std::string ours = network_fingerprint(net);
  if (theirs != ours)
    memfmt::detail::fail(errc::invalid_argument, "plan file: made for network " + theirs + ", this network is " + ours +
                                                     " (" + std::to_string(net.size()) +
                                                     " nodes): a plan only applies to the network it was made for");
  const json& layers = detail::member(j, "layers", "plan file");
  if (!layers.is_array() || layers.size() != net.size())
    detail::bad("plan file", "key 'layers' must list the network's " + std::to_string(net.size()) + " nodes");
  std::vector<std::optional<format_family>> formats(net.size());
  std::vector<std::string> reasons(net.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string where = "plan file: layers[" + std::to_string(i) + "]";
    const std::string name = detail::text(layers[i], "name", where);
    if (name != net.at(i).name)
      detail::bad(where, "key 'name' is '" + name + "', the network's node is '" + net.at(i).name + "'");
    if (!detail::member(layers[i], "format", where).is_null())
      formats[i] = detail::named(detail::family_names, layers[i], "format", where);
    reasons[i] = detail::text(layers[i], "reason", where);
  }
  loaded_plan out{graph::make_plan(net, model, formats), detail::text(j, "policy", "plan file"),
                  detail::text(j, "cost_fingerprint", "plan file") == cost_fingerprint(net, model)};
  for (std::size_t i = 0; i < net.size(); ++i) out.plan.nodes[i].reason = std::move(reasons[i]);
  return out;
}

inline std::string save_plan(const graph::network& net, const graph::cost_model& model, const graph::plan& p,
                             std::string_view policy = "optimal") {
  return io::dump_json(plan_to_json(net, model, p, policy), 1, "plan file") + "\n";
}
inline loaded_plan load_plan(std::string_view text, const graph::network& net, const graph::cost_model& model) {
  return plan_from_json(detail::parse(text, "plan file"), net, model);
}
inline void write_plan_file(const std::string& path, const graph::network& net, const graph::cost_model& model,
                            const graph::plan& p, std::string_view policy = "optimal") {
  detail::write_file(path, save_plan(net, model, p, policy), "plan file");
}
inline loaded_plan read_plan_file(const std::string& path, const graph::network& net, const graph::cost_model& model) {
  return plan_from_json(detail::parse(detail::read_file(path, "plan file"), "plan file '" + path + "'"), net, model);
}

}  // namespace memfmt::io
