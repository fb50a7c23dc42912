// memfmt/graph/report.hpp - a plan as a Graphviz picture, and the policies side by side.
//
// to_dot(): one box per layer, filled by format (channels_first blue, channels_last orange, no
// layout grey); an edge per input; the edges a conversion serves are red, bold and labelled with the
// conversion's bytes and cost (dashed with "relabel" for an ambiguous value). Render with
// `dot -Tpng plan.dot -o plan.png`.
// compare_policies(): per policy the conversions, bytes moved, estimated time, and the layers that
// lose channels_last (lost_channels_last), as rows or as a text table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "cost_model.hpp"
#include "network.hpp"
#include "plan.hpp"
#include "policy.hpp"

namespace memfmt::graph {

namespace detail {

// A DOT double-quoted string: backslashes and quotes escaped, a newline as DOT's line break.
inline std::string dot_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace detail

inline std::string to_dot(const network& net, const plan& p, const std::string& title = "format plan") {
  if (p.nodes.size() != net.size())
    memfmt::detail::fail(errc::shape_mismatch, "to_dot: plan has " + std::to_string(p.nodes.size()) +
                                                   " nodes, network " + std::to_string(net.size()));
  std::map<std::pair<node_id, node_id>, const conversion*> converted;  // (value, consumer)
  for (const conversion& c : p.conversions)
    for (node_id u : c.consumers) converted[{c.value, u}] = &c;
  std::ostringstream os;
  os << "digraph plan {\n  label="
     << detail::dot_quote(title + ": " + std::to_string(p.copies()) + " conversions, " + std::to_string(p.relabels()) +
                          " relabels, total " + cost_string(p.total()))
     << ";\n  labelloc=t;\n  node [shape=box, style=filled, fontname=Helvetica];\n";
  for (const node& n : net.nodes()) {
    const auto& f = p.nodes[n.id].format;
    const char* fill = !f ? "#dddddd" : *f == format_family::channels_first ? "#9ecae1" : "#fdae6b";
    os << "  n" << n.id
       << " [label=" << detail::dot_quote(n.name + "\n" + to_string(n.kind) + " " + (f ? to_string(*f) : "-"))
       << ", fillcolor=\"" << fill << "\"];\n";
  }
  for (const node& n : net.nodes())
    for (node_id i : n.inputs) {
      os << "  n" << i << " -> n" << n.id;
      const auto it = converted.find({i, n.id});
      if (it != converted.end()) {
        const conversion& c = *it->second;
        const std::string what =
            std::string(to_string(c.from)) + " -> " + to_string(c.to) + "\n" +
            (c.relabel ? std::string("relabel") : std::to_string(c.bytes) + " B, " + cost_string(c.cost));
        os << " [color=red, penwidth=2.5, fontcolor=red, class=conversion" << (c.relabel ? ", style=dashed" : "")
           << ", label=" << detail::dot_quote(what) << "]";
      }
      os << ";\n";
    }
  os << "}\n";
  return os.str();
}

struct policy_summary {
  policy which = policy::optimal;
  plan result;
  std::int64_t bytes_moved = 0;
  std::vector<node_id> lost;  // lost_channels_last(result)
};

inline std::vector<policy_summary> compare_policies(const network& net, const cost_model& model) {
  std::vector<policy_summary> rows;
  for (policy which : all_policies) {
    policy_summary s{which, plan_with(net, model, which), 0, {}};
    for (const conversion& c : s.result.conversions) s.bytes_moved += c.bytes;
    s.lost = lost_channels_last(net, s.result);
    rows.push_back(std::move(s));
  }
  return rows;
}

// One row per policy, then the layers that lose channels_last under pytorch_eager.
inline std::string compare_text(const network& net, const std::vector<policy_summary>& rows) {
  std::ostringstream os;
  char line[160];
  std::snprintf(line, sizeof line, "%-20s %11s %9s %14s %14s %12s\n", "policy", "conversions", "relabels",
                "bytes moved", "estimated", "lose CL");
  os << line;
  for (const policy_summary& s : rows) {
    std::snprintf(line, sizeof line, "%-20s %11zu %9zu %14lld %14s %12zu\n", to_string(s.which), s.result.copies(),
                  s.result.relabels(), static_cast<long long>(s.bytes_moved), cost_string(s.result.total()).c_str(),
                  s.lost.size());
    os << line;
  }
  for (const policy_summary& s : rows) {
    if (s.which != policy::pytorch_eager) continue;
    os << "layers that lose channels_last under pytorch_eager:";
    if (s.lost.empty()) os << " none";
    for (node_id id : s.lost)
      os << "\n  " << net.at(id).name << " (" << to_string(net.at(id).kind) << "): " << s.result.nodes[id].reason;
    os << '\n';
  }
  return os.str();
}

}  // namespace memfmt::graph
