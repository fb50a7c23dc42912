// Bad input gets memfmt::error naming the values; the verifier catches broken plans.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "memfmt/graph/solve.hpp"
#include "memfmt/graph/verify.hpp"

#include "../common/expect_error.hpp"
#include "zoo.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::errc;
using memfmt::format_family;

using memfmt_test::expect_error;

network small() {
  network net;
  const node_id x = net.input("x", {2, 8, 16, 16}, memfmt::dtype::float32, format_family::channels_first);
  net.conv("conv", x, conv_spec(16, 3, 1, 1));
  return net;
}

TEST(GraphErrors, BuilderNamesNodeAndValues) {
  network net = small();
  expect_error([&] { net.relu("relu", 7); }, errc::invalid_argument, {"'relu'", "input id 7", "cycle"});
  expect_error([&] { net.relu("relu", 2); }, errc::invalid_argument, {"'relu'", "input id 2"});
  expect_error(
      [&] {
        net.input("bad", {2, 3, 4}, memfmt::dtype::float32, format_family::channels_first);
      },
      errc::invalid_argument, {"'bad'", "[2, 3, 4]", "rank 2, 4 or 5"});
  expect_error(
      [&] {
        net.input("neg", {2, -3, 4, 4}, memfmt::dtype::float32, format_family::channels_first);
      },
      errc::invalid_argument, {"'neg'", "[2, -3, 4, 4]"});
  expect_error([&] { net.conv("conv", 0, conv_spec(4, 1)); }, errc::invalid_argument,
               {"'conv'", "already used by node 1"});
  expect_error([&] { net.conv("g", 0, conv_spec(16, 3, 1, 1, 3)); }, errc::invalid_argument,
               {"'g'", "groups 3", "channels 8", "16"});
  expect_error([&] { net.conv("big", 0, conv_spec(16, 32)); }, errc::invalid_argument,
               {"'big'", "kernel 32", "padded extent 16", "spatial dim 0"});
  expect_error([&] { net.conv("zero", 0, conv_spec(0, 1)); }, errc::invalid_argument, {"'zero'", "out_channels 0"});
  // Layers with weights over an input of no channels (their weight would be empty).
  const node_id none = net.input("none", {2, 0, 4, 4}, memfmt::dtype::float32, format_family::channels_first);
  expect_error([&] { net.conv("c0", none, conv_spec(4, 1)); }, errc::invalid_argument,
               {"'c0'", "conv input 'none' [2, 0, 4, 4] has no channels"});
  expect_error([&] { net.conv_transpose("t0", none, memfmt::graph::conv_transpose_spec(4, 2, 2)); },
               errc::invalid_argument, {"'t0'", "conv_transpose input 'none' [2, 0, 4, 4] has no channels"});
  expect_error([&] { net.linear("l0", net.flatten("none_flat", none), 3); }, errc::invalid_argument,
               {"'l0'", "'none_flat' [2, 0] has no features"});
  const node_id flat = net.flatten("flat", 1);
  expect_error([&] { net.batch_norm("bn", flat); }, errc::invalid_argument,
               {"'bn'", "'flat'", "[2, 4096]", "rank 4 or 5"});
  expect_error([&] { net.linear("fc", 1, 10); }, errc::invalid_argument,
               {"'fc'", "'conv'", "[2, 16, 16, 16]", "rank 2"});
  expect_error([&] { net.add("sum", 0, 1); }, errc::invalid_argument,
               {"'sum'", "'x' [2, 8, 16, 16]", "'conv' [2, 16, 16, 16]"});
  const node_id small_map = net.max_pool("pool", 1, 2, 2);
  expect_error(
      [&] {
        net.concat("cat", {1, small_map});
      },
      errc::invalid_argument, {"'cat'", "'pool' [2, 16, 8, 8]", "'conv' [2, 16, 16, 16]"});
  expect_error([&] { net.concat("cat", {}); }, errc::invalid_argument, {"'cat'", "at least one"});
  expect_error([&] { net.upsample("up", 1, 0); }, errc::invalid_argument, {"'up'", "scale 0"});
  const node_id x3 = net.input("x3", {2, 8, 4, 4, 4}, memfmt::dtype::float32, format_family::channels_first);
  expect_error([&] { net.add("mixed", 0, x3); }, errc::invalid_argument, {"[2, 8, 16, 16]", "[2, 8, 4, 4, 4]"});
}

TEST(GraphErrors, PinConflictsNameBothPins) {
  network net = small();
  net.pin_format(1, format_family::channels_last, true, 0, "user A");
  expect_error([&] { net.pin_format(1, format_family::channels_first, true, 0, "user B"); }, errc::invalid_argument,
               {"'conv'", "mandatory", "'user A' wants channels_last", "'user B' wants channels_first"});
  expect_error([&] { net.pin_format(0, format_family::channels_last, true, 0, "late"); }, errc::invalid_argument,
               {"'x'", "'graph input' wants channels_first", "'late' wants channels_last"});
  net.pin_format(1, format_family::channels_first, false, 2, "hint 2");
  expect_error([&] { net.pin_format(1, format_family::channels_last, false, 2, "hint 2b"); }, errc::invalid_argument,
               {"preferred", "'hint 2' wants channels_first", "'hint 2b' wants channels_last", "priority 2"});
  expect_error([&] { net.pin_format(1, format_family::channels_last, false, 0, "zero"); }, errc::invalid_argument,
               {"'zero'", "priority 0"});
  expect_error([&] { net.pin_format(9, format_family::channels_last, true, 0, "nowhere"); }, errc::invalid_argument,
               {"'nowhere'", "node id 9"});
  const node_id fc = net.linear("fc", net.flatten("flat", 1), 4);
  expect_error([&] { net.pin_format(fc, format_family::channels_last, true, 0, "odd"); }, errc::invalid_argument,
               {"'fc'", "'odd'", "no layout", "[2, 4]"});
}

TEST(GraphErrors, PinsResolveByPriorityAndMandatoryWins) {
  network net = small();
  net.pin_format(1, format_family::channels_first, false, 1, "low");
  net.pin_format(1, format_family::channels_last, false, 3, "high");
  EXPECT_EQ(net.at(1).binding_pin()->origin, "high");
  net.pin_format(1, format_family::channels_first, true, 0, "must");
  EXPECT_EQ(net.at(1).binding_pin()->origin, "must");
  net.output("y", 1, format_family::channels_last);
  const cost_model model;
  EXPECT_EQ(solve(net, model).format(1), format_family::channels_first);
}

TEST(GraphErrors, UnsatisfiablePinIsReported) {
  network net = small();
  const node_id flat = net.flatten("flat", 1);
  net.output("y", flat, format_family::channels_first);
  net.pin_format(flat, format_family::channels_last, true, 0, "user wants NHWC flatten");
  const cost_model model;
  expect_error([&] { solve(net, model); }, errc::unsupported,
               {"'flat'", "channels_last", "'user wants NHWC flatten'", "non-linear"});
  cost_model bad;
  expect_error([&] { bad.override_node(net, 1, std::nullopt, std::nullopt); }, errc::invalid_argument,
               {"node 1", "unsupported / unsupported"});
  expect_error([&] { bad.override_conversion(net, 1, -5); }, errc::invalid_argument, {"node 1", "-5"});
}

TEST(GraphErrors, CostsTooLargeToScaleForTheTieRule) {
  // The tie rule scales every cost by (inherit terms + 1) = 2 here; a cost of 2^61 ns then leaves
  // no room in int64 for the flow's residual capacities.
  network net = small();
  const node_id bn = net.batch_norm("bn", 1);
  net.output("y", bn, format_family::channels_last);
  cost_model model;
  const cost_t huge = cost_t{1} << 61;
  model.override_node(net, 1, huge, 0, "absurd measurement");
  // The bound: 1 + the larger cost of each free layer (conv, bn) + twice every conversion.
  cost_t bound = 1 + huge + *model.node_costs(net, bn).by_family[0];
  for (node_id v = 0; v < net.size(); ++v) bound += 2 * model.conversion_cost(net, v);
  expect_error([&] { solve(net, model); }, errc::overflow,
               {"cut bound " + std::to_string(bound) + " ns", "tie scale 2", "1 inherit terms", "overflows int64"});
  // Each alone fits: the same cost without a memory-bound layer (scale 1) solves exactly.
  network plain = small();
  plain.output("y", 1, format_family::channels_last);
  cost_model model2;
  model2.override_node(plain, 1, huge, 0, "absurd measurement");
  const plan p = solve(plain, model2);
  EXPECT_EQ(p.format(1), format_family::channels_last);
  EXPECT_EQ(p.total(), model2.conversion_cost(plain, 0));
  // Sums past int64 are reported, not wrapped.
  network two;
  const node_id a = two.conv("a", two.input("x", {2, 8, 16, 16}, memfmt::dtype::float32, format_family::channels_first),
                             conv_spec(8, 3, 1, 1));
  two.output("y", two.conv("b", a, conv_spec(8, 3, 1, 1)), format_family::channels_first);
  cost_model model3;
  model3.override_node(two, a, std::numeric_limits<cost_t>::max(), 0, "absurd");
  model3.override_node(two, a + 1, std::numeric_limits<cost_t>::max(), 0, "absurd");
  expect_error([&] { solve(two, model3); }, errc::overflow,
               {"cut bound", std::to_string(std::numeric_limits<cost_t>::max()), "overflows int64"});
}

TEST(GraphErrors, MakePlanRejectsBadAssignments) {
  network net = small();
  const cost_model model;
  expect_error([&] { make_plan(net, model, {format_family::channels_first}); }, errc::shape_mismatch,
               {"1 formats", "2 nodes"});
  expect_error(
      [&] {
        make_plan(net, model, {format_family::channels_last, format_family::channels_last});
      },
      errc::invalid_argument, {"'x'", "pinned to channels_first", "'graph input'", "channels_last"});
  expect_error(
      [&] {
        make_plan(net, model, {format_family::channels_first, std::nullopt});
      },
      errc::invalid_argument, {"'conv'", "none"});
}

TEST(GraphErrors, VerifierCatchesBrokenPlans) {
  network net;
  const node_id x = net.input("x", {4, 32, 28, 28}, memfmt::dtype::bfloat16, format_family::channels_first);
  const node_id c1 = net.conv("c1", x, conv_spec(32, 3, 1, 1));
  const node_id bn = net.batch_norm("bn", c1);
  const node_id c2 = net.conv("c2", bn, conv_spec(32, 3, 1, 1));
  net.output("y", c2, format_family::channels_first);
  const cost_model model(zoo::indifferent_batch_norm());
  const plan good = solve(net, model);
  ASSERT_EQ(verify(net, model, good), std::vector<std::string>{});
  ASSERT_EQ(good.format(bn), format_family::channels_last);

  const auto mentions = [&](const plan& p, const std::string& what) {
    const auto issues = verify(net, model, p);
    for (const auto& i : issues)
      if (i.find(what) != std::string::npos) return true;
    ADD_FAILURE() << "no issue mentions " << what << " (" << issues.size() << " issues)";
    return false;
  };
  plan dropped = good;
  dropped.conversion_cost -= dropped.conversions.front().cost;
  dropped.conversions.erase(dropped.conversions.begin());
  mentions(dropped, "no conversion serves it");
  plan twice = good;
  twice.conversions.push_back(twice.conversions.front());
  twice.conversion_cost += twice.conversions.front().cost;
  mentions(twice, "more than once");
  plan total = good;
  total.node_cost += 1;
  mentions(total, "differ from the listed items");
  plan breaks = good;
  breaks.inherit_breaks += 1;
  mentions(breaks, "inherit breaks 1 differ from the 0 memory-bound layers");
  plan free_copy = good;
  free_copy.conversions.front().cost = 0;
  mentions(free_copy, "disagree with the model");
  // bn in channels_first between two channels_last convs: converted in and straight back out.
  std::vector<std::optional<format_family>> formats;
  for (const auto& d : good.nodes) formats.push_back(d.format);
  formats[bn] = format_family::channels_first;
  mentions(make_plan(net, model, formats), "'bn' sits between inverse conversions");
  formats[bn] = format_family::channels_last;
  formats[x] = format_family::channels_last;
  plan pinned = good;
  pinned.nodes[x].format = format_family::channels_last;
  mentions(pinned, "'x' runs in channels_last");
}

// add(c1, c1) reads one converted value twice: the plan lists it once, and a plan listing it twice
// is rejected.
TEST(GraphErrors, VerifierRejectsAConsumerListedTwice) {
  network net;
  const node_id x = net.input("x", {2, 16, 8, 8}, memfmt::dtype::float32, format_family::channels_first);
  const node_id c1 = net.conv("c1", x, conv_spec(16, 3, 1, 1));
  const node_id twice = net.add("twice", c1, c1);
  const node_id c2 = net.conv("c2", twice, conv_spec(16, 3, 1, 1));
  const node_id y = net.output("y", c2, format_family::channels_first);
  std::vector<std::optional<format_family>> formats(net.size(), format_family::channels_first);
  formats[twice] = formats[c2] = format_family::channels_last;
  const cost_model model;
  const plan good = make_plan(net, model, formats);
  ASSERT_EQ(verify(net, model, good), std::vector<std::string>{});
  ASSERT_EQ(good.conversions.size(), 2u);  // c1 -> twice and c2 -> y
  const auto into_twice = std::find_if(good.conversions.begin(), good.conversions.end(),
                                       [&](const conversion& c) { return c.value == c1; });
  ASSERT_NE(into_twice, good.conversions.end());
  EXPECT_EQ(into_twice->consumers, std::vector<node_id>{twice});
  EXPECT_EQ(good.format(y), format_family::channels_first);

  plan listed_twice = good;
  listed_twice.conversions[static_cast<std::size_t>(into_twice - good.conversions.begin())].consumers.push_back(twice);
  EXPECT_EQ(verify(net, model, listed_twice),
            std::vector<std::string>{"conversion of 'c1' lists 'twice' as a consumer more than once"});
}

}  // namespace
