// The network description: shape inference of every layer kind against PyTorch's formulas (cases
// worked out by hand from torch.nn's documented output sizes), parameters() in PyTorch's names and
// shapes, broadcasting, constants, opaque layers that read one format and write another, the support query,
// and hostile extents refused with errors naming the node and the values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "memfmt/graph/explain.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/graph/verify.hpp"

#include "../common/expect_error.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::errc;
using memfmt::format_family;
using memfmt::layer_kind;
using memfmt_test::expect_error;
using dims = std::vector<std::int64_t>;

constexpr std::int64_t two62 = std::int64_t{1} << 62;

TEST(GraphNetwork, ConvShapes) {
  network net;
  const node_id x = net.input("x", {2, 8, 17, 17}, memfmt::dtype::float32, format_family::channels_first);
  conv_attrs a = conv_spec(16, 1);
  a.kernel = {1, 7, 1};  // Inception's 1x7: padding (0, 3) keeps the extents
  a.params.padding = {0, 3, 0};
  EXPECT_EQ(net.at(net.conv("c1x7", x, a)).extents, (dims{2, 16, 17, 17}));
  // Conv2d(8, 4, 3, stride=2, padding=1, dilation=2): (17 + 2 - 2 * 2 - 1) / 2 + 1 = 8.
  EXPECT_EQ(net.at(net.conv("dil", x, conv_spec(4, 3, 2, 1, 1, false, 2))).extents, (dims{2, 4, 8, 8}));
  // ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1) on 17: 16 * 2 - 2 + 2 + 1 + 1 = 34.
  conv_transpose_attrs t = conv_transpose_spec(4, 3, 2, 1, 1, 1, true);
  const node_id up = net.conv_transpose("up", x, t);
  EXPECT_EQ(net.at(up).extents, (dims{2, 4, 34, 34}));
  t.output_padding = {2, 2, 2};
  expect_error([&] { net.conv_transpose("bad_op", x, t); }, errc::invalid_argument,
               {"'bad_op'", "output_padding 2", "stride 2"});
  // Parameters in PyTorch's shapes: transposed weights are [C_in, C_out / groups, kh, kw].
  const auto p = net.parameters(up);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].name, "up.weight");
  EXPECT_EQ(p[0].extents, (dims{8, 4, 3, 3}));
  EXPECT_EQ(p[1].name, "up.bias");
  EXPECT_EQ(p[1].extents, (dims{4}));
  const node_id g = net.conv("grouped", x, conv_spec(16, 3, 1, 1, 4, true));
  EXPECT_EQ(net.parameters(g)[0].extents, (dims{16, 2, 3, 3}));
  EXPECT_EQ(net.at(g).get<conv_attrs>().params.groups, 4);
  expect_error([&] { net.at(g).get<memfmt::pool_params>(); }, errc::invalid_argument, {"'grouped'", "conv"});
}

TEST(GraphNetwork, PoolPadUpsampleShapes) {
  network net;
  const node_id x = net.input("x", {1, 4, 6, 6}, memfmt::dtype::float32, format_family::channels_first);
  // MaxPool2d(2, 3, ceil_mode=True) on 6: ceil(4 / 3) + 1 = 3, but the third window would start at
  // 6, outside the input: dropped, 2.
  memfmt::pool_params p;
  p.kernel = {2, 2, 2};
  p.stride = {3, 3, 3};
  p.ceil_mode = true;
  EXPECT_EQ(net.at(net.pool("ceil", x, p)).extents, (dims{1, 4, 2, 2}));
  // MaxPool2d(3, 2, padding=1, ceil_mode=True) on 6: ceil(5 / 2) + 1 = 4, last window starts at 5: kept.
  EXPECT_EQ(net.at(net.max_pool("ceil2", x, 3, 2, 1, true)).extents, (dims{1, 4, 4, 4}));
  EXPECT_EQ(net.at(net.max_pool("floor", x, 3, 2, 1)).extents, (dims{1, 4, 3, 3}));
  expect_error([&] { net.max_pool("half", x, 2, 2, 2); }, errc::invalid_argument,
               {"'half'", "padding 2/2", "padding < kernel"});
  // ONNX pads up to kernel - 1: (6 + 2 + 2 - 3) / 2 + 1 = 4.
  EXPECT_EQ(net.at(net.max_pool("wide", x, 3, 2, 2)).extents, (dims{1, 4, 4, 4}));
  memfmt::pad_params pad;
  pad.mode = memfmt::pad_mode::reflect;
  pad.begin = {1, 2, 0};
  pad.end = {3, 0, 0};
  EXPECT_EQ(net.at(net.pad("reflect", x, pad)).extents, (dims{1, 4, 10, 8}));
  pad.begin = {6, 0, 0};
  expect_error([&] { net.pad("too_far", x, pad); }, errc::invalid_argument,
               {"'too_far'", "reflect pad 6/3", "extent 6"});
  EXPECT_EQ(net.at(net.upsample("x2", x, 2, memfmt::resample_mode::linear)).extents, (dims{1, 4, 12, 12}));
  memfmt::upsample_params size;
  size.output = {5, 9, 1};
  EXPECT_EQ(net.at(net.upsample("to_size", x, size)).extents, (dims{1, 4, 5, 9}));
  EXPECT_EQ(net.at(net.global_pool("gap", x, memfmt::pool_kind::max)).extents, (dims{1, 4, 1, 1}));
}

TEST(GraphNetwork, ElementwiseNormsSlicesAndParameters) {
  network net;
  const node_id x = net.input("x", {2, 6, 5, 5}, memfmt::dtype::bfloat16, format_family::channels_last);
  // Squeeze-and-excitation: [N, C, 1, 1] x [N, C, H, W] broadcasts to [N, C, H, W], either order.
  const node_id s = net.activation("gate", net.global_pool("squeeze", x), memfmt::activation::hardsigmoid);
  EXPECT_EQ(net.at(net.mul("excite", s, x)).extents, (dims{2, 6, 5, 5}));
  EXPECT_EQ(net.at(net.binary("div", x, s, memfmt::binary_op::div)).extents, (dims{2, 6, 5, 5}));
  const node_id other = net.input("y", {2, 3, 5, 5}, memfmt::dtype::bfloat16, format_family::channels_last);
  expect_error([&] { net.add("sum", x, other); }, errc::invalid_argument,
               {"'sum'", "'x' [2, 6, 5, 5]", "'y' [2, 3, 5, 5]"});
  const auto parts = net.split("split", x, {2, 4});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(net.at(parts[1]).name, "split.1");
  EXPECT_EQ(net.at(parts[1]).extents, (dims{2, 4, 5, 5}));
  EXPECT_EQ(net.at(parts[1]).get<memfmt::slice_params>().begin, 2);
  expect_error(
      [&] {
        net.split("bad_split", x, {2, 3});
      },
      errc::invalid_argument, {"'bad_split'", "[2, 3]", "sum to C"});
  EXPECT_EQ(net.at(net.concat("cat", {parts[1], parts[0]})).extents, (dims{2, 6, 5, 5}));
  // Along a spatial axis: the parts agree outside it; a transpose swaps spatial extents.
  const node_id crop = net.slice("crop", x, memfmt::slice_params{3, 0, 2, 1});  // [2, 6, 5, 2]
  const node_id swapped = net.transpose("swap", crop, {0, 1, 3, 2});            // [2, 6, 2, 5]
  EXPECT_EQ(net.at(swapped).extents, (dims{2, 6, 2, 5}));
  EXPECT_EQ(net.at(net.concat("hcat", {x, swapped}, {2})).extents, (dims{2, 6, 7, 5}));
  EXPECT_EQ(net.at(net.concat("wcat", {x, crop}, {3})).extents, (dims{2, 6, 5, 7}));
  expect_error(
      [&] {
        net.concat("bad_hcat", {x, crop}, {2});
      },
      errc::invalid_argument,
      {"'bad_hcat'", "'crop' [2, 6, 5, 2]", "does not match 'x' [2, 6, 5, 5]", "outside axis 2"});
  expect_error([&] { net.concat("ncat", {x, x}, {0}); }, errc::invalid_argument, {"'ncat'", "concat axis 0"});
  expect_error([&] { net.concat("far", {x, x}, {4}); }, errc::invalid_argument, {"'far'", "concat axis 4"});
  expect_error(
      [&] {
        net.transpose("bad_swap", x, {0, 2, 1, 3});
      },
      errc::invalid_argument, {"'bad_swap'", "transpose [0, 2, 1, 3]", "perm must keep N and C first"});
  expect_error([&] { net.transpose("short", x, {0, 1, 2}); }, errc::invalid_argument, {"'short'", "one entry per dim"});
  const node_id gn = net.group_norm("gn", x, 3);
  EXPECT_EQ(net.parameters(gn).size(), 2u);
  EXPECT_EQ(net.parameters(gn)[0].type, memfmt::dtype::float32);     // a bfloat16 norm's parameters, as AMP keeps them
  EXPECT_EQ(net.parameters(net.instance_norm("in", x)).size(), 0u);  // InstanceNorm2d(affine=False)
  expect_error([&] { net.group_norm("gn4", x, 4); }, errc::invalid_argument, {"'gn4'", "groups 4", "channels 6"});
  const node_id bn = net.batch_norm("bn", x, {1e-3, 0.01, false});
  const auto bp = net.parameters(bn);
  ASSERT_EQ(bp.size(), 5u);
  EXPECT_EQ(bp[2].name, "bn.running_mean");
  EXPECT_FALSE(bp[2].trainable);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(bp[i].type, memfmt::dtype::float32) << bp[i].name;
  EXPECT_EQ(bp[4].type, memfmt::dtype::int64);
  EXPECT_EQ(bp[4].extents, dims{});
  EXPECT_EQ(net.at(bn).get<memfmt::batch_norm_params>().epsilon, 1e-3);
  // A classifier: flatten -> linear -> relu -> dropout -> linear -> softmax, on rank-2 values.
  const node_id f = net.flatten("flatten", x);
  EXPECT_EQ(net.at(f).extents, (dims{2, 150}));
  const node_id fc = net.linear("fc", net.dropout("drop", net.relu("act", net.linear("fc0", f, 10)), 0.3), 4, false);
  EXPECT_EQ(net.parameters(fc).size(), 1u);
  EXPECT_EQ(net.parameters(fc)[0].extents, (dims{4, 10}));
  const node_id sm = net.softmax("softmax", fc);
  EXPECT_FALSE(net.has_format(sm));
  // 2 x 6 (gn) + (6 + 6) (bn) + 150 x 10 + 10 + 10 x 4.
  EXPECT_EQ(net.parameter_count(), 12 + 12 + 1510 + 40);
  const cost_model model;
  const plan p = solve(net, model);
  EXPECT_EQ(verify(net, model, p), std::vector<std::string>{});
}

// A constant is a buffer (or, trainable, a parameter) named "<node>.value" of its extents; it costs nothing in either
// format, so the solver lays it out as its readers run and no conversion of it is planned. PyTorch's eager rules keep a
// 4-D buffer channels_last after model.to(channels_last), other ranks contiguous.
TEST(GraphNetwork, ConstantsAreBuffersLaidOutAsTheirReadersRun) {
  network net;
  const node_id x = net.input("x", {2, 3, 6, 6}, memfmt::dtype::float32, format_family::channels_first);
  const node_id mean = net.constant("mean", {1, 3, 1, 1}, memfmt::dtype::float32);
  const node_id pos = net.constant("pos", {1, 8, 6, 6}, memfmt::dtype::float32);
  const node_id h = net.conv("conv", net.binary("norm", x, mean, memfmt::binary_op::sub), conv_spec(8, 3, 1, 1));
  const node_id y = net.add("embed", pos, h);
  const node_id scale = net.constant("scale", {1, 4}, memfmt::dtype::float32);
  const node_id z = net.mul("scaled", net.linear("fc", net.flatten("flat", net.global_pool("gap", y)), 4), scale);
  net.output("y", y, format_family::channels_last);
  net.output("z", z, format_family::channels_first);
  EXPECT_EQ(net.at(net.find("embed").value()).extents, (dims{2, 8, 6, 6}));
  const auto pp = net.parameters(pos);
  ASSERT_EQ(pp.size(), 1u);
  EXPECT_EQ(pp[0].name, "pos.value");
  EXPECT_EQ(pp[0].extents, (dims{1, 8, 6, 6}));
  EXPECT_EQ(pp[0].type, memfmt::dtype::float32);
  EXPECT_FALSE(pp[0].trainable);
  EXPECT_EQ(net.parameters(scale)[0].extents, (dims{1, 4}));
  EXPECT_EQ(net.parameter_count(), 8 * 3 * 9 + 4 * 8 + 4);  // conv and fc weights and fc bias only
  const node_id learned = net.constant("layer_scale", {1, 8, 1, 1}, memfmt::dtype::float32, true);
  EXPECT_TRUE(net.parameters(learned)[0].trainable);
  EXPECT_EQ(net.parameter_count(), 8 * 3 * 9 + 4 * 8 + 4 + 8);

  const cost_model model;
  const format_costs c = model.node_costs(net, pos);
  EXPECT_EQ(c.by_family[0], cost_t{0});
  EXPECT_EQ(c.by_family[1], cost_t{0});
  const plan p = solve(net, model);
  EXPECT_EQ(verify(net, model, p), std::vector<std::string>{});
  EXPECT_EQ(p.format(pos), p.format(y));
  EXPECT_EQ(p.format(pos), format_family::channels_last);  // the pinned output decides the add
  for (const conversion& cv : p.conversions) {
    EXPECT_NE(cv.value, pos);
    EXPECT_TRUE(cv.value != mean || cv.relabel);  // [1, 3, 1, 1]: both formats at once
  }
  EXPECT_FALSE(p.format(scale).has_value());  // rank 2: no layout

  const plan eager = plan_with(net, model, policy::pytorch_eager);
  EXPECT_EQ(eager.format(pos), format_family::channels_last);
  EXPECT_NE(eager.nodes[pos].reason.find("4-D buffers"), std::string::npos) << eager.nodes[pos].reason;

  expect_error(
      [&] {
        net.constant("flat3", {1, 3, 4}, memfmt::dtype::float32);
      },
      errc::invalid_argument, {"'flat3'", "[1, 3, 4]", "rank 2, 4 or 5"});
  expect_error(
      [&] {
        net.constant("empty", {1, 0, 2, 2}, memfmt::dtype::float32);
      },
      errc::invalid_argument, {"'empty'", "[1, 0, 2, 2]", ">= 1"});
  expect_error(
      [&] {
        net.constant("ints", {1, 3, 1, 1}, memfmt::dtype::int64);
      },
      errc::invalid_argument, {"'ints'", "int64", "floating-point"});
  expect_error([&] { net.constant("huge", {two62, 4, 1, 1}, memfmt::dtype::float32); }, errc::overflow, {"'huge'"});
  expect_error([&] { net.add("wrong", x, pos); }, errc::invalid_argument, {"'wrong'", "'pos' [1, 8, 6, 6]"});
}

// Layer norm over C: parameters [C] named as torch.nn.LayerNorm's, memory-bound (inherits),
// pytorch_eager channels_last from any input (F.layer_norm of the permute, permuted back); a bad
// epsilon or a rank-2 input names the node.
TEST(GraphNetwork, LayerNormShapesFormatsAndErrors) {
  network net;
  const node_id x = net.input("x", {2, 6, 4, 5}, memfmt::dtype::float32, format_family::channels_first);
  const node_id in = net.instance_norm("inorm", x);
  const node_id ln = net.layer_norm("ln", in);
  net.output("y", net.conv("conv", ln, conv_spec(4, 1)), format_family::channels_first);
  EXPECT_EQ(net.at(ln).extents, (dims{2, 6, 4, 5}));
  const auto params = net.parameters(ln);
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].name, "ln.weight");
  EXPECT_EQ(params[1].extents, (dims{6}));
  EXPECT_TRUE(net.parameters(net.layer_norm("plain", x, 1e-5, false)).empty());
  EXPECT_EQ(net.inherits_from(ln), std::vector<node_id>{in});
  const cost_model model;
  const plan eager = plan_with(net, model, policy::pytorch_eager);
  EXPECT_EQ(eager.format(in), format_family::channels_first);
  EXPECT_EQ(eager.format(ln), format_family::channels_last);
  EXPECT_NE(eager.nodes[ln].reason.find("layer_norm of a channels-last permute"), std::string::npos);
  expect_error([&] { net.layer_norm("eps", x, 0.0); }, errc::invalid_argument, {"'eps'", "epsilon"});
  const node_id flat = net.flatten("flat", x);
  expect_error([&] { net.layer_norm("flat_ln", flat); }, errc::invalid_argument, {"'flat_ln'"});
}

// Channel shuffle, depth to space and space to depth: shapes as PyTorch's and ONNX's, memory-bound
// (same cost in both formats, inheriting), pytorch_eager as PyTorch 1.13 (torchvision's shuffle
// returns contiguous, pixel shuffles keep channels_last); bad factors name the node and values.
TEST(GraphNetwork, RearrangementsShapesFormatsAndErrors) {
  network net;
  const node_id x = net.input("x", {2, 12, 4, 6}, memfmt::dtype::float32, format_family::channels_first);
  const node_id c = net.conv("conv", x, conv_spec(12, 3, 1, 1));
  const node_id s = net.channel_shuffle("shuffle", c, 3);
  const node_id d = net.depth_to_space("d2s", s, 2);
  const node_id u = net.space_to_depth("s2d", d, 2, memfmt::block_order::dcr);
  const node_id v = net.channel_shuffle(
      "shuffle3d", net.input("v", {1, 4, 2, 3, 2}, memfmt::dtype::float32, format_family::channels_first), 2);
  net.output("y", net.conv("conv2", u, conv_spec(4, 1)), format_family::channels_first);
  net.output("w", v, format_family::channels_first);
  EXPECT_EQ(net.at(s).extents, (dims{2, 12, 4, 6}));
  EXPECT_EQ(net.at(d).extents, (dims{2, 3, 8, 12}));
  EXPECT_EQ(net.at(u).extents, (dims{2, 12, 4, 6}));
  EXPECT_EQ(net.at(v).extents, (dims{1, 4, 2, 3, 2}));
  EXPECT_TRUE(net.parameters(s).empty());
  const cost_model model;
  const format_costs costs = model.node_costs(net, d);
  EXPECT_EQ(costs.by_family[0], costs.by_family[1]);
  EXPECT_GT(costs.by_family[0], 0);
  EXPECT_EQ(net.inherits_from(d), std::vector<node_id>{s});
  const plan eager = plan_with(net, model, policy::pytorch_eager);
  EXPECT_EQ(eager.format(c), format_family::channels_last);
  EXPECT_EQ(eager.format(s), format_family::channels_first);
  EXPECT_NE(eager.nodes[s].reason.find("torchvision's channel_shuffle"), std::string::npos) << eager.nodes[s].reason;
  EXPECT_EQ(eager.format(d), format_family::channels_first);  // keeps its input's
  const plan p = solve(net, model);
  EXPECT_EQ(verify(net, model, p), std::vector<std::string>{});
  EXPECT_EQ(p.format(s), p.format(c));  // a memory-bound layer takes its producer's format

  expect_error([&] { net.channel_shuffle("g5", x, 5); }, errc::invalid_argument,
               {"'g5'", "5 groups must divide channels 12"});
  expect_error([&] { net.channel_shuffle("g0", x, 0); }, errc::invalid_argument, {"'g0'", "factor must be >= 1"});
  expect_error([&] { net.depth_to_space("b3", x, 3); }, errc::invalid_argument,
               {"'b3'", "depth_to_space by 3", "[2, 12, 4, 6]", "multiple of the block size squared"});
  expect_error([&] { net.space_to_depth("b4", x, 4); }, errc::invalid_argument,
               {"'b4'", "space_to_depth by 4", "must divide the spatial sizes"});
  expect_error([&] { net.depth_to_space("big", x, two62); }, errc::invalid_argument, {"'big'", "block size squared"});
  const node_id cube = net.input("cube", {1, 8, 2, 2, 2}, memfmt::dtype::float32, format_family::channels_first);
  expect_error([&] { net.depth_to_space("d3", cube, 2); }, errc::invalid_argument, {"'d3'", "needs rank 4"});
}

// An opaque layer that reads channels_first and writes channels_last (the op that "loses" the format
// on the way in): its input is converted once, its output needs none for channels_last consumers.
TEST(GraphNetwork, OpaqueReadsItsDeclaredFormat) {
  network net;
  const node_id x = net.input("x", {4, 32, 28, 28}, memfmt::dtype::float32, format_family::channels_last);
  const node_id c = net.conv("conv", x, conv_spec(32, 3, 1, 1));
  const node_id op =
      net.opaque("legacy", {c}, {4, 32, 28, 28}, format_family::channels_last, format_family::channels_first);
  net.set_callback(op, std::string("user function"));
  EXPECT_EQ(std::any_cast<std::string>(net.at(op).get<opaque_attrs>().callback), "user function");
  const node_id c2 = net.conv("conv2", op, conv_spec(32, 3, 1, 1));
  net.output("y", c2, format_family::channels_last);
  const cost_model model;
  const plan p = solve(net, model);
  EXPECT_EQ(verify(net, model, p), std::vector<std::string>{});
  EXPECT_EQ(p.format(c), format_family::channels_last);
  EXPECT_EQ(p.format(c2), format_family::channels_last);
  ASSERT_EQ(p.copies(), 1u) << explain(net, model, p);
  EXPECT_EQ(p.conversions[0].value, c);
  EXPECT_EQ(p.conversions[0].to, format_family::channels_first);
  EXPECT_EQ(p.conversions[0].consumers, std::vector<node_id>{op});
  expect_error([&] { net.set_callback(c, 1); }, errc::invalid_argument, {"'conv'", "opaque"});
}

TEST(GraphNetwork, SupportQueryMarksFormatsUnsupported) {
  network net;
  const node_id x = net.input("x", {4, 32, 28, 28}, memfmt::dtype::float32, format_family::channels_last);
  memfmt::pad_params pad;
  pad.mode = memfmt::pad_mode::reflect;
  pad.begin = pad.end = {1, 1, 1};
  const node_id r = net.pad("reflect", net.conv("conv", x, conv_spec(32, 3, 1, 1)), pad);
  net.output("y", net.conv("conv2", r, conv_spec(32, 3)), format_family::channels_last);
  cost_model model;
  model.set_support_query([](const network&, const node& n, format_family f) -> std::optional<std::string> {
    if (n.kind == layer_kind::pad && f == format_family::channels_last)
      return std::string("no channels_last reflect pad");
    return std::nullopt;
  });
  const plan p = solve(net, model);
  EXPECT_EQ(p.format(r), format_family::channels_first);
  EXPECT_EQ(verify(net, model, p), std::vector<std::string>{});
  EXPECT_NE(explain(net, model, p).find("no channels_last reflect pad"), std::string::npos);
  model.set_support_query([](const network&, const node& n, format_family) -> std::optional<std::string> {
    if (n.kind == layer_kind::pad) return std::string("no pad kernel");
    return std::nullopt;
  });
  expect_error([&] { solve(net, model); }, errc::unsupported, {"'reflect'", "either format", "no pad kernel"});
}

// Sizes past 64 bits are refused with the node and the values, never wrapped.
TEST(GraphNetwork, HostileExtentsAreRefused) {
  network net;
  const node_id x = net.input("x", {2, 8, 16, 16}, memfmt::dtype::float32, format_family::channels_first);
  expect_error([&] { net.upsample("up", x, two62); }, errc::overflow, {"'up'", "16 * 4611686018427387904"});
  const node_id wide = net.input("wide", {1, two62, 1, 1}, memfmt::dtype::uint8, format_family::channels_first);
  expect_error(
      [&] {
        net.concat("cat", {wide, wide, wide});
      },
      errc::overflow, {"'cat'", "concat: ", "4611686018427387904 + 4611686018427387904"});
  // No elements, but C x H x W past 64 bits: its dense strides (and a flatten's features) would wrap.
  expect_error(
      [&] {
        net.input("empty", {0, std::int64_t{1} << 40, std::int64_t{1} << 40, 1}, memfmt::dtype::float32,
                  format_family::channels_first);
      },
      errc::overflow, {"'empty'", "dense strides", "[0, 1099511627776, 1099511627776, 1]"});
  expect_error(
      [&] {
        net.input("huge", {std::int64_t{1} << 40, std::int64_t{1} << 40, 1, 1}, memfmt::dtype::float32,
                  format_family::channels_first);
      },
      errc::overflow, {"'huge'", "[1099511627776, 1099511627776, 1, 1]"});
  expect_error(
      [&] {
        net.input("bytes", {1, two62, 1, 1}, memfmt::dtype::float32, format_family::channels_first);
      },
      errc::overflow, {"'bytes'", "4611686018427387904 elements of 4 bytes"});
  expect_error(
      [&] {
        net.opaque("neg", {x}, {-2, -8, 16, 16}, format_family::channels_first);
      },
      errc::invalid_argument, {"'neg'", "negative size", "[-2, -8, 16, 16]"});
  expect_error([&] { net.conv("pad62", x, conv_spec(8, 3, 1, two62)); }, errc::overflow,
               {"'pad62'", "padded extent", "4611686018427387904"});
  conv_attrs big_kernel = conv_spec(8, 3, 1, 1);
  big_kernel.params.dilation = {two62, two62, 1};
  expect_error([&] { net.conv("dilated", x, big_kernel); }, errc::overflow, {"'dilated'", "dilated kernel"});
  // A weight too large for 64 bits is refused although the activation fits.
  const node_id bytes =
      net.flatten("f", net.input("small", {1, 8, 2, 2}, memfmt::dtype::uint8, format_family::channels_first));
  expect_error([&] { net.linear("fc", bytes, two62); }, errc::overflow,
               {"'fc'", "'fc.weight'", "[4611686018427387904, 32]"});
  EXPECT_EQ(net.size(), 4u);  // x, wide, small, f: nothing refused was added
}

TEST(GraphNetwork, CostModelRefusesBadPriorsAndForeignOverrides) {
  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    cost_priors p;
    p.conversion_bytes_per_ns = bad;
    expect_error([&] { cost_model m(p); }, errc::invalid_argument, {"conversion_bytes_per_ns", "positive and finite"});
  }
  cost_priors p;
  p.memory_bytes_per_ns = 0;
  expect_error([&] { cost_model m(p); }, errc::invalid_argument, {"memory_bytes_per_ns = 0"});
  network net;
  net.output("y", net.input("x", {1, 2, 3, 3}, memfmt::dtype::float32, format_family::channels_first),
             format_family::channels_first);
  cost_model model;
  expect_error([&] { model.override_node(net, 999, 1, 1); }, errc::invalid_argument, {"node 999", "2 nodes"});
  expect_error([&] { model.override_conversion(net, 7, 1); }, errc::invalid_argument, {"node 7", "2 nodes"});
  network bigger = net;
  bigger.relu("r", 0);
  model.override_node(bigger, 2, 5, 5);
  expect_error([&] { solve(net, model); }, errc::invalid_argument, {"overrides node 2", "2 nodes"});
}

}  // namespace
