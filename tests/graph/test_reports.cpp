// Reports: the DOT picture parsed back (layers by colour, conversion edges), a PNG where Graphviz
// is installed, and the side-by-side summary of the policies.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "memfmt/graph/models.hpp"
#include "memfmt/graph/report.hpp"
#include "zoo.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::format_family;

struct parsed_dot {
  std::set<std::pair<node_id, node_id>> edges, marked;  // marked: conversion edges
  std::size_t first = 0, last = 0, none = 0;            // boxes by fill colour
};

// Reads the DOT text line by line (plain string parsing: GCC 12 warns inside <regex> under the
// sanitizers). Edge lines are "  nA -> nB;" or "  nA -> nB [... class=conversion ...];", layer
// lines "  nA [label=... fillcolor=\"#rrggbb\"];".
parsed_dot parse_dot(const std::string& dot) {
  parsed_dot d;
  std::istringstream in(dot);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  n", 0) != 0 || line.empty() || line.back() != ';') continue;
    unsigned long from = 0, to = 0;
    int used = 0;
    if (std::sscanf(line.c_str(), "  n%lu -> n%lu%n", &from, &to, &used) == 2) {
      const std::string rest = line.substr(static_cast<std::size_t>(used));
      if (rest != ";" && rest.rfind(" [", 0) != 0) continue;
      const std::pair<node_id, node_id> e{from, to};
      d.edges.insert(e);
      if (rest.find("class=conversion") != std::string::npos) d.marked.insert(e);
      continue;
    }
    const auto fill = line.find("fillcolor=\"");
    if (line.find(" [label=") == std::string::npos || fill == std::string::npos) continue;
    const std::string colour = line.substr(fill + 11, 7);
    d.first += colour == "#9ecae1";
    d.last += colour == "#fdae6b";
    d.none += colour == "#dddddd";
  }
  return d;
}

TEST(GraphReports, DotShowsEveryLayerAndMarksExactlyTheConvertedEdges) {
  const cost_model model;
  for (const network& net : {zoo::eager_mixed(), models::unet(zoo::sized(memfmt::dtype::float32, 1, 64))}) {
    for (policy which : {policy::pytorch_eager, policy::optimal, policy::all_channels_last}) {
      const plan p = plan_with(net, model, which);
      const std::string dot = to_dot(net, p, to_string(which));
      const parsed_dot d = parse_dot(dot);
      // Independent of the plan's conversion list: an edge needs a conversion where the consumer
      // reads the value in another format than the producer wrote it.
      std::set<std::pair<node_id, node_id>> crossing, all;
      std::size_t first = 0, last = 0, none = 0;
      for (const node& n : net.nodes()) {
        const auto f = p.format(n.id);
        (f ? (*f == format_family::channels_first ? first : last) : none) += 1;
        for (node_id i : n.inputs) {
          all.insert({i, n.id});
          if (net.at(i).spatial() && p.format(i) != net.read_format(n.id, *p.format(n.id))) crossing.insert({i, n.id});
        }
      }
      EXPECT_EQ(d.edges, all) << to_string(which);
      EXPECT_EQ(d.marked, crossing) << to_string(which);
      std::size_t served = 0;
      for (const conversion& c : p.conversions) served += c.consumers.size();
      EXPECT_EQ(d.marked.size(), served);
      EXPECT_EQ(d.first, first);
      EXPECT_EQ(d.last, last);
      EXPECT_EQ(d.none, none);
      if (which == policy::pytorch_eager) {
        EXPECT_GT(d.marked.size(), 0u);
      }
    }
  }
}

TEST(GraphReports, DotRendersToPngWhereGraphvizIsInstalled) {
  if (std::system("dot -V > /dev/null 2>&1") != 0) GTEST_SKIP() << "Graphviz 'dot' is not installed";
  const network net = zoo::eager_mixed();
  const cost_model model;
  const std::string base = ::testing::TempDir() + "memfmt_plan";
  std::ofstream(base + ".dot") << to_dot(net, plan_with(net, model, policy::pytorch_eager));
  ASSERT_EQ(std::system(("dot -Tpng '" + base + ".dot' -o '" + base + ".png'").c_str()), 0);
  std::ifstream png(base + ".png", std::ios::binary);
  char magic[8] = {};
  png.read(magic, 8);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
}

TEST(GraphReports, CompareListsEveryPolicyAndTheEagerBreaks) {
  const network net = zoo::eager_mixed();
  const cost_model model;
  const auto rows = compare_policies(net, model);
  ASSERT_EQ(rows.size(), all_policies.size());
  const std::string text = compare_text(net, rows);
  for (const policy_summary& s : rows) {
    const plan p = plan_with(net, model, s.which);
    EXPECT_EQ(s.result.total(), p.total());
    EXPECT_EQ(s.lost, lost_channels_last(net, p));
    std::int64_t bytes = 0;
    for (const conversion& c : p.conversions) bytes += c.bytes;
    EXPECT_EQ(s.bytes_moved, bytes);
    EXPECT_GE(s.result.total(), rows.back().result.total()) << "optimal is last and least";
    EXPECT_NE(text.find(std::string(to_string(s.which)) + " "), std::string::npos);
  }
  for (node_id id : rows[2].lost) EXPECT_NE(text.find("\n  " + net.at(id).name + " ("), std::string::npos);
  EXPECT_EQ(rows[2].which, policy::pytorch_eager);
  EXPECT_EQ(rows[2].lost.size(), 11u);  // eager_mixed's, as GraphPolicies.LostChannelsLastListsTheLayersWithoutSupport
}

}  // namespace
