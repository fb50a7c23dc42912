// The timing cache in the cost model: layer signatures (identical layers share one, any attribute
// that changes the work splits them), measured costs replacing priors in solve and in explain's
// words, conversions priced by the mean of their measured directions, and keys refused by name.
#include <gtest/gtest.h>

#include <string>

#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/explain.hpp"
#include "memfmt/graph/network.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/graph/timing_cache.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::format_family;

// input -> conv 3x3 -> relu -> output, boundaries channels_first: the kxk prior (NHWC 1.67x faster)
// makes converting around the conv worth it.
struct chain {
  network net;
  node_id in, conv, relu, out;
  chain() {
    in = net.input("x", {1, 64, 56, 56}, memfmt::dtype::float32, format_family::channels_first);
    conv = net.conv("conv", in, conv_spec(64, 3, 1, 1));
    relu = net.activation("relu", conv, memfmt::activation::relu);
    out = net.output("y", relu, format_family::channels_first);
  }
};

cache_key here() { return {"test CPU (isa avx2)", "reference", "0.1.0"}; }

TEST(TimingCache, IdenticalLayersShareASignatureAndAttributesSplitThem) {
  network net;
  const node_id x = net.input("x", {2, 8, 16, 16}, memfmt::dtype::float32, format_family::channels_first);
  const node_id a = net.conv("a", x, conv_spec(8, 3, 1, 1));
  const node_id b = net.conv("b", a, conv_spec(8, 3, 1, 1));
  const node_id c = net.conv("c", b, conv_spec(8, 3, 2, 1));
  const node_id d = net.conv("d", b, conv_spec(8, 3, 1, 1, 2));
  const node_id e = net.conv("e", b, conv_spec(8, 3, 1, 1, 1, true));
  const node_id y = net.output("y", e, format_family::channels_first);
  ASSERT_TRUE(layer_signature(net, a));
  EXPECT_EQ(*layer_signature(net, a), *layer_signature(net, b));
  for (node_id other : {c, d, e}) EXPECT_NE(*layer_signature(net, a), *layer_signature(net, other)) << other;
  EXPECT_FALSE(layer_signature(net, x));
  EXPECT_FALSE(layer_signature(net, y));

  network half;
  const node_id hx = half.input("x", {2, 8, 16, 16}, memfmt::dtype::bfloat16, format_family::channels_first);
  const node_id ha = half.conv("a", hx, conv_spec(8, 3, 1, 1));
  EXPECT_NE(*layer_signature(net, a), *layer_signature(half, ha));
  EXPECT_NE(conversion_signature({2, 8, 16, 16}, memfmt::dtype::float32),
            conversion_signature({2, 8, 16, 16}, memfmt::dtype::bfloat16));
}

// Layers whose extents agree but whose work differs: pads splitting the same total padding between
// other sides (a reflect copy reads other rows), a log-softmax and a softmax, a batch norm with its
// relu fused and one without. Each attribute the time depends on is in the key.
TEST(TimingCache, AttributesTheExtentsDoNotShowSplitSignatures) {
  network net;
  const node_id x = net.input("x", {2, 8, 16, 16}, memfmt::dtype::float32, format_family::channels_first);
  const auto pad = [&](const char* name, memfmt::spatial3 begin, memfmt::spatial3 end) {
    memfmt::pad_params p;
    p.mode = memfmt::pad_mode::reflect;
    p.begin = begin;
    p.end = end;
    return net.pad(name, x, p);
  };
  const node_id even = pad("even", {1, 1, 0}, {1, 1, 0});
  const node_id top = pad("top", {2, 1, 0}, {0, 1, 0});
  const node_id left = pad("left", {1, 2, 0}, {1, 0, 0});
  const node_id even_again = pad("even_again", {1, 1, 0}, {1, 1, 0});
  ASSERT_EQ(net.at(even).extents, net.at(top).extents);
  ASSERT_EQ(net.at(even).extents, net.at(left).extents);
  EXPECT_EQ(*layer_signature(net, even), *layer_signature(net, even_again));
  EXPECT_NE(*layer_signature(net, even), *layer_signature(net, top));
  EXPECT_NE(*layer_signature(net, even), *layer_signature(net, left));
  EXPECT_NE(*layer_signature(net, top), *layer_signature(net, left));

  const node_id softmax = net.softmax("softmax", x);
  memfmt::softmax_params log;
  log.log = true;
  EXPECT_NE(*layer_signature(net, softmax), *layer_signature(net, net.softmax("log_softmax", x, log)));

  const node_id bn = net.batch_norm("bn", x);
  memfmt::batch_norm_params relu;
  relu.fuse_relu = true;
  EXPECT_NE(*layer_signature(net, bn), *layer_signature(net, net.batch_norm("bn_relu", x, relu)));

  // An activation's parameters are in its key; a function without any keeps the key it always had.
  const auto act = [&](const char* name, const memfmt::activation_params& f) {
    return *layer_signature(net, net.activation(name, x, f));
  };
  EXPECT_NE(act("leaky_a", memfmt::activation_params::leaky_relu(0.1)),
            act("leaky_b", memfmt::activation_params::leaky_relu(0.2)));
  EXPECT_EQ(act("leaky_c", memfmt::activation_params::leaky_relu(0.1)),
            act("leaky_d", memfmt::activation_params::leaky_relu(0.1)));
  EXPECT_NE(act("clip_a", memfmt::activation_params::clip(0.0, 6.0)), act("relu6", memfmt::activation::relu6));
  const std::string relu_key = act("relu", memfmt::activation::relu);
  EXPECT_NE(relu_key.find("activation 1 in "), std::string::npos) << relu_key;  // the function's number, as before
}

TEST(TimingCache, MeasuredCostsReplacePriorsAndFlipThePlan) {
  chain c;
  const cost_model prior;
  const plan p0 = solve(c.net, prior);
  ASSERT_EQ(p0.format(c.conv), format_family::channels_last) << explain(c.net, prior, p0);
  EXPECT_NE(explain(c.net, prior, p0).find("[costs: prior: bench_conv --benchmark_filter='BM_conv/rn50_(stem|.*_3x3)'"),
            std::string::npos);

  timing_cache cache(here());
  cache.record_layer(*layer_signature(c.net, c.conv), {1'000'000, 10'000'000});  // channels_first 10x cheaper
  cost_model measured;
  measured.set_timing_cache(cache);
  const format_costs costs = measured.node_costs(c.net, c.conv);
  EXPECT_EQ(costs.by_family[0], 1'000'000);
  EXPECT_EQ(costs.by_family[1], 10'000'000);
  EXPECT_EQ(costs.source, "measured");
  EXPECT_EQ(measured.node_costs(c.net, c.relu).source.rfind("prior: ", 0), 0u);  // not in the cache

  const plan p1 = solve(c.net, measured);
  EXPECT_EQ(p1.format(c.conv), format_family::channels_first);
  EXPECT_EQ(p1.copies(), 0u);
  const std::string report = explain(c.net, measured, p1);
  EXPECT_NE(report.find("conv (conv [1, 64, 56, 56] float32): channels_first"), std::string::npos) << report;
  EXPECT_NE(report.find("[costs: measured]"), std::string::npos) << report;
  EXPECT_NE(report.find("measured on test CPU (isa avx2) (reference 0.1.0)"), std::string::npos) << report;
}

TEST(TimingCache, ConversionsCostTheMeanOfTheirMeasuredDirections) {
  chain c;
  cost_model model;
  const cost_t prior = model.conversion_cost(c.net, c.in);
  timing_cache cache(here());
  const std::string sig = conversion_signature({1, 64, 56, 56}, memfmt::dtype::float32);
  cache.record_conversion(sig, format_family::channels_first, 100);
  model.set_timing_cache(cache);
  EXPECT_EQ(model.conversion_cost(c.net, c.in), 100);  // one direction measured
  cache.record_conversion(sig, format_family::channels_last, 301);
  model.set_timing_cache(cache);
  EXPECT_EQ(model.conversion_cost(c.net, c.in), 201);
  EXPECT_NE(prior, 201);
  EXPECT_EQ(model.conversion_source(c.net, c.in), "measured");
  const plan p = solve(c.net, model);
  ASSERT_EQ(p.format(c.conv), format_family::channels_last);
  EXPECT_NE(explain(c.net, model, p).find("adds 201 ns (measured)"), std::string::npos) << explain(c.net, model, p);
}

TEST(TimingCache, AnotherDevicesCacheIsRefusedNamingWhoseItIs) {
  timing_cache cache({"AMD Ryzen 9 5950X (isa avx2)", "onednn", "2.6.0"});
  try {
    cache.require_key({"Intel Xeon (isa avx512_core)", "onednn", "2.6.0"});
    FAIL() << "accepted another device's cache";
  } catch (const memfmt::error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("AMD Ryzen 9 5950X"), std::string::npos) << what;
    EXPECT_NE(what.find("Intel Xeon"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(cache.require_key({"AMD Ryzen 9 5950X (isa avx2)", "onednn", "2.6.0"}));
  EXPECT_THROW(cache.require_key({"AMD Ryzen 9 5950X (isa avx2)", "onednn", "3.0.0"}), memfmt::error);
  EXPECT_THROW(cache.record_layer("x", {std::nullopt, std::nullopt}), memfmt::error);
  EXPECT_THROW(cache.record_conversion("x", format_family::channels_last, -1), memfmt::error);

  timing_cache other({"elsewhere", "onednn", "2.6.0"});
  EXPECT_THROW(cache.merge(other), memfmt::error);
  timing_cache same(cache.key());
  same.record_layer("l", {5, 7});
  cache.merge(same);
  ASSERT_NE(cache.find_layer("l"), nullptr);
  EXPECT_EQ((*cache.find_layer("l"))[1], 7);
}

}  // namespace
