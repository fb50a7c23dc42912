// Policies: pytorch_eager against formats PyTorch 1.13 produced (fixtures/eager_formats.txt),
// the uniform policies, greedy = the naive per-layer choice, optimal = solve, and every policy's
// plan passes verify().
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "memfmt/graph/models.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/graph/verify.hpp"
#include "memfmt/tensor/relabel.hpp"
#include "zoo.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::format_family;

// verify()'s findings apart from its thrashing check ("sits between inverse conversions"), which
// the eager policy fails by design: that is the channel thrashing it reproduces.
std::vector<std::string> unsound(const network& net, const cost_model& model, const plan& p) {
  std::vector<std::string> bad;
  for (const std::string& line : verify(net, model, p))
    if (line.find("sits between inverse conversions") == std::string::npos) bad.push_back(line);
  return bad;
}

struct recorded {
  std::string layer, format;
  std::vector<std::int64_t> extents;
};

std::map<std::string, std::vector<recorded>> eager_fixture() {
  std::ifstream in(std::string(MEMFMT_GRAPH_FIXTURES) + "/eager_formats.txt");
  EXPECT_TRUE(in) << "missing fixture eager_formats.txt";
  std::map<std::string, std::vector<recorded>> by_model;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    std::string model;
    recorded r;
    row >> model >> r.layer >> r.format;
    for (std::int64_t e; row >> e;) r.extents.push_back(e);
    by_model[model].push_back(r);
  }
  return by_model;
}

network small_unet() {
  models::options o = zoo::sized(memfmt::dtype::float32, 1, 32);
  o.width = 0.125;  // 8 channels at the first level, as the fixture's UNet(8)
  o.input_format = format_family::channels_last;
  return models::unet(o);
}

TEST(GraphPolicies, PytorchEagerPredictsEveryLayerPyTorchRecorded) {
  const auto fixture = eager_fixture();
  ASSERT_EQ(fixture.size(), 3u);
  const cost_model model;
  int checked = 0, contiguous = 0;
  for (const auto& [name, net] : std::map<std::string, network>{
           {"mixed", zoo::eager_mixed()}, {"unet", small_unet()}, {"convnext", zoo::eager_convnext()}}) {
    const plan p = plan_with(net, model, policy::pytorch_eager);
    EXPECT_EQ(unsound(net, model, p), std::vector<std::string>{}) << name;
    ASSERT_TRUE(fixture.count(name)) << name;
    for (const recorded& r : fixture.at(name)) {
      const auto id = net.find(r.layer);
      ASSERT_TRUE(id.has_value()) << name << ": the network has no layer '" << r.layer << "'";
      EXPECT_EQ(net.at(*id).extents, r.extents) << name << " " << r.layer;
      ASSERT_NE(r.format, "strided") << r.layer;
      if (r.format == "ambiguous") {
        EXPECT_TRUE(memfmt::is_ambiguous_shape(r.extents)) << r.layer;
        continue;
      }
      EXPECT_EQ(to_string(*p.format(*id)), r.format) << name << " " << r.layer << ": " << p.nodes[*id].reason;
      ++checked;
      contiguous += r.format == "channels_first";
    }
  }
  EXPECT_GT(checked, 80);
  EXPECT_GT(contiguous, 15) << "the fixture covers layers that lose channels_last";
}

TEST(GraphPolicies, LostChannelsLastListsTheLayersWithoutSupport) {
  const network net = zoo::eager_mixed();
  const cost_model model;
  const plan p = plan_with(net, model, policy::pytorch_eager);
  std::vector<std::string> lost;
  for (node_id id : lost_channels_last(net, p)) lost.push_back(net.at(id).name);
  // Each reads a channels_last input and returns contiguous in PyTorch (the fixture).
  // The thrashing verify() reports: NCHW-only layers between channels_last convs.
  EXPECT_EQ(verify(net, model, p),
            (std::vector<std::string>{
                "'inorm' sits between inverse conversions channels_last -> channels_first -> channels_last",
                "'rpad' sits between inverse conversions channels_last -> channels_first -> channels_last",
                "'rep' sits between inverse conversions channels_last -> channels_first -> channels_last"}));
  EXPECT_EQ(lost, (std::vector<std::string>{"up", "inorm", "rpad", "rep", "softmax", "add_cf_first", "cat_mixed",
                                            "cat_cf_first", "shuffle", "inorm2", "pool_h"}));
  // All channels_last loses it only at the barrier that writes NCHW (outputs are no operators).
  EXPECT_EQ(lost_channels_last(net, plan_with(net, model, policy::all_channels_last)),
            std::vector<node_id>{*net.find("shuffle")});
}

TEST(GraphPolicies, EveryPolicyGivesAVerifiedPlanAndOptimalIsTheLeast) {
  for (const network& net :
       {zoo::eager_mixed(), small_unet(), models::resnet50(zoo::sized(memfmt::dtype::float32, 2, 64)),
        models::mobilenet_v2(zoo::sized(memfmt::dtype::bfloat16, 2, 64))}) {
    const cost_model model;
    const plan best = plan_with(net, model, policy::optimal);
    EXPECT_EQ(best.total(), solve(net, model).total());
    for (policy which : all_policies) {
      const plan p = plan_with(net, model, which);
      EXPECT_EQ(unsound(net, model, p), std::vector<std::string>{}) << to_string(which);
      if (which != policy::pytorch_eager) {
        EXPECT_EQ(verify(net, model, p), std::vector<std::string>{}) << to_string(which);
      }
      EXPECT_GE(p.total(), best.total()) << to_string(which);
      for (const node& n : net.nodes()) {
        ASSERT_FALSE(p.nodes[n.id].reason.empty()) << to_string(which) << " " << n.name;
        const pin* pinned = n.binding_pin();
        if (pinned && pinned->mandatory) {
          EXPECT_EQ(p.format(n.id), pinned->format) << n.name;
        }
        if (!p.nodes[n.id].format || (pinned && pinned->mandatory)) continue;
        // Uniform policies: their family wherever the layer can run in it.
        const format_family uniform =
            which == policy::all_channels_last ? format_family::channels_last : format_family::channels_first;
        if (which == policy::all_channels_first || which == policy::all_channels_last) {
          EXPECT_EQ(p.format(n.id), model.allowed(net, n.id, uniform) ? uniform : other(uniform)) << n.name;
        }
      }
    }
    const plan greedy = plan_with(net, model, policy::greedy);
    for (const node& n : net.nodes()) EXPECT_EQ(greedy.format(n.id), naive_plan(net, model).format(n.id));
  }
  EXPECT_EQ(parse_policy("pytorch_eager"), policy::pytorch_eager);
  try {
    parse_policy("eager");
    ADD_FAILURE() << "no error";
  } catch (const memfmt::error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown policy 'eager' (one of all_channels_first"), std::string::npos);
  }
}

}  // namespace
