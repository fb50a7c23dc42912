// Whole networks of the models header against the naive per-layer choice and a greedy pusher;
// grouped vs depthwise priors; flatten -> linear.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "memfmt/graph/explain.hpp"
#include "memfmt/graph/naive.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/graph/verify.hpp"
#include "zoo.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::format_family;

struct named_network {
  const char* name;
  network (*make)(const models::options&);
  std::int64_t batch, resolution;
};

TEST(GraphNetworks, PlanBeatsNaiveAndGreedy) {
  const named_network nets[] = {{"resnet50", models::resnet50, 16, 224},
                                {"mobilenet_v2", models::mobilenet_v2, 16, 224},
                                {"unet", models::unet, 4, 256}};
  for (const auto& entry : nets)
    for (memfmt::dtype type : {memfmt::dtype::float32, memfmt::dtype::bfloat16}) {
      SCOPED_TRACE(std::string(entry.name) + " " + std::string(memfmt::to_string(type)));
      const network net = entry.make(zoo::sized(type, entry.batch, entry.resolution));
      const cost_model model;
      const plan p = solve(net, model);
      const plan naive = naive_plan(net, model);
      const plan greedy = zoo::greedy_plan(net, model, naive);
      EXPECT_EQ(verify(net, model, p), std::vector<std::string>{});
      EXPECT_LE(p.copies(), naive.copies());
      EXPECT_LE(p.copies(), greedy.copies());
      EXPECT_LE(p.total(), greedy.total());
      EXPECT_LE(greedy.total(), naive.total());
      const std::string report = explain(net, model, p);
      for (std::size_t i = 0; i < p.conversions.size(); ++i) {
        const conversion& c = p.conversions[i];
        const std::string line = "#" + std::to_string(i + 1) + " '" + net.at(c.value).name + "' " + to_string(c.from) +
                                 " -> " + to_string(c.to) + " for '" + net.at(c.consumers[0]).name + "'";
        EXPECT_NE(report.find(line), std::string::npos) << line << "\n" << report;
      }
      for (const node& n : net.nodes()) EXPECT_NE(report.find("  " + n.name + " ("), std::string::npos) << n.name;
      std::printf("%s %s: plan %zu conversions + %zu relabels (%s), greedy %zu (%s), naive %zu (%s)\n", entry.name,
                  std::string(memfmt::to_string(type)).c_str(), p.copies(), p.relabels(),
                  cost_string(p.total()).c_str(), greedy.copies(), cost_string(greedy.total()).c_str(), naive.copies(),
                  cost_string(naive.total()).c_str());
    }
}

TEST(GraphNetworks, GroupedAndDepthwiseFollowTheirPriors) {
  // groups = 2 with 112 channels per group between depthwise layers (the Inductor case).
  network net;
  const node_id x = net.input("x", {8, 224, 56, 56}, memfmt::dtype::float32, format_family::channels_first);
  const node_id dw1 = net.conv("dw1", x, conv_spec(224, 3, 1, 1, 224));
  const node_id grouped = net.conv("grouped", net.relu("relu1", dw1), conv_spec(224, 3, 1, 1, 2));
  const node_id dw2 = net.conv("dw2", net.relu("relu2", grouped), conv_spec(224, 3, 1, 1, 224));
  net.output("y", dw2, format_family::channels_first);
  const cost_model model;
  const plan p = solve(net, model);
  for (node_id id : {dw1, grouped, dw2}) {
    const conv_speedup prior =
        default_conv_speedup(224, net.at(id).get<conv_attrs>().params.groups, 9, 4, memfmt::dtype::float32);
    EXPECT_EQ(p.format(id), prior.channels_last > 1 ? format_family::channels_last : format_family::channels_first)
        << net.at(id).name << ": " << prior.basis << "\n"
        << explain(net, model, p);
  }
  EXPECT_EQ(p.format(dw1), format_family::channels_last);
  EXPECT_EQ(p.format(grouped), format_family::channels_first);
  EXPECT_EQ(verify(net, model, p), std::vector<std::string>{});
}

TEST(GraphNetworks, FlattenIntoLinearPermutesWeightsInsteadOfConverting) {
  network net;
  const node_id x = net.input("x", {16, 64, 14, 14}, memfmt::dtype::bfloat16, format_family::channels_last);
  const node_id c = net.conv("conv", x, conv_spec(64, 3, 1, 1));
  const node_id fc = net.linear("fc", net.flatten("flatten", c), 10);
  net.output("y", fc, format_family::channels_first);
  const cost_model model;
  const plan p = solve(net, model);
  EXPECT_EQ(p.copies(), 0u) << explain(net, model, p);
  ASSERT_EQ(p.permuted_linears, std::vector<node_id>{fc});
  EXPECT_NE(explain(net, model, p).find("linear 'fc': weight columns permuted"), std::string::npos);

  // A flatten feeding something other than a linear needs the channels_first element order.
  network net2;
  const node_id x2 = net2.input("x", {16, 64, 14, 14}, memfmt::dtype::bfloat16, format_family::channels_last);
  const node_id f2 = net2.flatten("flatten", net2.conv("conv", x2, conv_spec(64, 3, 1, 1)));
  net2.output("y", f2, format_family::channels_first);
  const plan p2 = solve(net2, model);
  EXPECT_EQ(p2.format(f2), format_family::channels_first);
  EXPECT_EQ(p2.copies(), 1u);
  EXPECT_TRUE(p2.permuted_linears.empty());
}

TEST(GraphNetworks, ExplainNamesReasons) {
  const network net = models::resnet50(zoo::sized(memfmt::dtype::bfloat16, 16));
  const cost_model model;
  const plan p = solve(net, model);
  const std::string report = explain(net, model, p);
  EXPECT_NE(report.find("pinned (mandatory, graph input)"), std::string::npos);
  EXPECT_NE(report.find("own preference"), std::string::npos);
  EXPECT_NE(report.find("inherits from 'bn1'"), std::string::npos) << report;
  EXPECT_NE(report.find("channel thrashing: naive per-layer choice inserts"), std::string::npos);
  EXPECT_EQ(report, explain(net, model, solve(models::resnet50(zoo::sized(memfmt::dtype::bfloat16, 16)), model)));
}

}  // namespace
