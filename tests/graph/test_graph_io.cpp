// Network and plan files: round trips of every model, plans reloaded with identical formats,
// plans for another network refused, malformed documents named by key (and line).
#include <gtest/gtest.h>

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "../common/expect_error.hpp"
#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/kinds.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/io/network_json.hpp"
#include "memfmt/io/plan_json.hpp"
#include "memfmt/runtime/backend_support.hpp"
#include "zoo.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::format_family;
using memfmt::layer_kind;
using nlohmann::json;

std::vector<network> every_kind_of_network() {
  using memfmt::dtype;
  std::vector<network> nets{zoo::eager_mixed(), models::resnet50(zoo::sized(dtype::float32, 2, 64)),
                            models::mobilenet_v2(zoo::sized(dtype::bfloat16, 2, 64)),
                            models::unet(zoo::sized(dtype::float32, 1, 64)),
                            models::r3d_18(zoo::sized(dtype::float16, 1, 32))};
  // What the models lack: slices, dropout, a sized upsample, sub, log-softmax, ceil-mode pooling,
  // a preferred pin, a barrier reading one format and writing the other, constants, rearrangements,
  // a layer norm without affine parameters, a GELU, reductions over C and over C and H, a transpose
  // of spatial dims, a concatenation along H and a local response norm (ONNX's even window).
  network n;
  const node_id x = n.input("x", {2, 8, 9, 9}, dtype::float32, format_family::channels_last);
  const auto parts = n.split("split", x, {3, 5});
  memfmt::upsample_params up;
  up.mode = memfmt::resample_mode::linear;
  up.output = {18, 17, 1};
  memfmt::pool_params pool;
  pool.kind = memfmt::pool_kind::average;
  pool.kernel = {3, 3, 1};
  pool.stride = {2, 2, 1};
  pool.padding = {1, 1, 0};
  pool.padding_end = {0, 1, 0};
  pool.ceil_mode = true;
  pool.count_include_pad = false;
  memfmt::softmax_params log_softmax;
  log_softmax.log = true;
  const node_id r = n.depth_to_space("d2s", n.channel_shuffle("shuffle", parts[1], 5), 1, memfmt::block_order::dcr);
  const node_id g =
      n.activation("gelu", n.layer_norm("ln", n.space_to_depth("s2d", r, 1), 1e-3, false), memfmt::activation::gelu);
  const node_id d = n.dropout(
      "drop",
      n.mul("gate",
            n.mul("hgate", g, n.reduce("hsum", g, {memfmt::reduce_op::sum, memfmt::axis_bit(2) | memfmt::axis_bit(1)})),
            n.channel_reduce("amax", g, memfmt::reduce_op::max)),
      0.25);
  const node_id s0 = n.binary(
      "sub", d,
      n.opaque("legacy", {parts[1]}, {2, 5, 9, 9}, format_family::channels_last, format_family::channels_first),
      memfmt::binary_op::sub);
  const node_id s =
      n.binary("shift", n.constant("offset", {1, 5, 9, 9}, dtype::float32, true), s0, memfmt::binary_op::div);
  const node_id u = n.upsample("up", n.softmax("logsm", s, log_softmax), up);
  n.pin_format(u, format_family::channels_first, false, 3, "user: prefer NCHW");
  n.output("y", n.pool("pool", u, pool), format_family::channels_first);
  const node_id logits =
      n.linear("fc", n.flatten("flat", n.global_pool("gp", parts[0], memfmt::pool_kind::max)), 4, false);
  n.output("strided",
           n.slice("stride", n.slice("crop", x, memfmt::slice_params{2, 2, 8, 1}), memfmt::slice_params{3, 1, 8, 3}),
           format_family::channels_last);
  n.output("logits", n.mul("temperature", logits, n.constant("inverse_temperature", {1, 1}, dtype::float32)),
           format_family::channels_first);
  n.output("axial", n.concat("hcat", {n.transpose("swap", parts[0], {0, 1, 3, 2}), parts[0]}, {2}),
           format_family::channels_last);
  n.output("normalised", n.lrn("lrn", parts[1], memfmt::lrn_params::onnx(4, 0.5, 0.75, 2.0)),
           format_family::channels_last);
  nets.push_back(std::move(n));
  return nets;
}

// One vocabulary: a backend is asked about a layer with the layer's own kind, exactly for the kinds
// whose kind_infos row says they run on a backend, in the format asked; a global pool's query
// carries its pooling kind. The networks above hold every kind.
TEST(LayerKinds, SupportQueriesUseTheNodesKind) {
  std::vector<bool> seen(memfmt::layer_kind_count);
  int global_pools = 0;
  for (const network& net : every_kind_of_network())
    for (const node& n : net.nodes()) {
      seen[static_cast<std::size_t>(n.kind)] = true;
      for (format_family f : {format_family::channels_first, format_family::channels_last}) {
        const auto q = memfmt::runtime::op_query_of(n, f);
        ASSERT_EQ(q.has_value(), memfmt::runs_on_backend(n.kind)) << n.name << " " << to_string(n.kind);
        if (!q) continue;
        EXPECT_EQ(q->op, n.kind) << n.name;
        EXPECT_EQ(q->type, n.type) << n.name;
        EXPECT_EQ(q->format, f) << n.name;
        if (n.kind == layer_kind::global_pool) {
          EXPECT_EQ(q->pool, n.get<global_pool_attrs>().kind) << n.name;
          ++global_pools;
        }
      }
    }
  for (const memfmt::kind_info& k : memfmt::kind_infos)
    EXPECT_TRUE(seen[static_cast<std::size_t>(k.kind)]) << "no network above has a " << k.name;
  EXPECT_GT(global_pools, 0);
  EXPECT_TRUE(memfmt::runs_on_backend(layer_kind::conv));
  EXPECT_FALSE(memfmt::runs_on_backend(layer_kind::input));
  EXPECT_FALSE(memfmt::runs_on_backend(static_cast<layer_kind>(memfmt::layer_kind_count)));
  EXPECT_STREQ(to_string(static_cast<layer_kind>(memfmt::layer_kind_count)), "?");
}

// Each kind's home (graph/kinds/) agrees with its kind_infos row: a kind timed for the timing cache
// or asked about with attributes is a backend call; a kind with no prior of its own is memory-bound
// (it inherits its producer's format) or a user op. A value outside the enum is an error naming it.
TEST(LayerKinds, HomesAgreeWithTheTable) {
  int timed = 0, priced = 0;
  for (const memfmt::kind_info& k : memfmt::kind_infos)
    visit_kind(k.kind, [&](auto traits) {
      using T = decltype(traits);
      constexpr bool signature = detail::has_signature<T>::value;
      constexpr bool query = detail::has_query<T>::value;
      constexpr bool prior = detail::has_prior<T, cost_model::context>::value;
      if (signature || query) {
        EXPECT_TRUE(k.runs_on_backend) << k.name;
      }
      if (!prior) {
        EXPECT_TRUE(k.inherits_format || k.kind == layer_kind::opaque) << k.name;
      }
      timed += signature;
      priced += prior;
    });
  EXPECT_EQ(timed, 18);  // the 19 that run on a backend but linear (rank 2: no layout to choose)
  EXPECT_EQ(priced, 8);  // input, output, constant, conv, conv_transpose, linear, flatten, batch norm
  memfmt_test::expect_error([] { visit_kind(static_cast<layer_kind>(memfmt::layer_kind_count), [](auto) {}); },
                            memfmt::errc::invalid_argument, {"layer kind 25 is not one of memfmt's 25"});
}

TEST(GraphIo, NetworksRoundTrip) {
  for (const network& net : every_kind_of_network()) {
    const std::string text = memfmt::io::save_network(net);
    const network back = memfmt::io::load_network(text);
    ASSERT_EQ(back.size(), net.size());
    EXPECT_EQ(memfmt::io::save_network(back), text);
    EXPECT_EQ(memfmt::io::network_fingerprint(back), memfmt::io::network_fingerprint(net));
    for (const node& n : net.nodes()) {
      const node& m = back.at(n.id);
      EXPECT_EQ(m.name, n.name);
      EXPECT_EQ(m.kind, n.kind);
      EXPECT_EQ(m.inputs, n.inputs);
      EXPECT_EQ(m.extents, n.extents);
      EXPECT_EQ(m.type, n.type);
      EXPECT_EQ(m.pins.size(), n.pins.size()) << n.name;
      EXPECT_EQ(back.parameters(n.id).size(), net.parameters(n.id).size());
    }
    // The loaded network plans exactly as the original.
    const cost_model model;
    const plan a = solve(net, model), b = solve(back, model);
    EXPECT_EQ(a.total(), b.total());
    for (const node& n : net.nodes()) EXPECT_EQ(a.format(n.id), b.format(n.id)) << n.name;
  }
}

TEST(GraphIo, LoadedPlanReproducesTheFormatsAndAnotherNetworkIsRefused) {
  const network net = models::resnet50(zoo::sized(memfmt::dtype::float32, 2, 64));
  const cost_model model;
  for (policy which : all_policies) {
    const plan p = plan_with(net, model, which);
    const std::string file = memfmt::io::save_plan(net, model, p, to_string(which));
    // Another rank: the same network description, loaded from its file, and its own costs.
    const network other_rank = memfmt::io::load_network(memfmt::io::save_network(net));
    cost_priors noisy;
    noisy.fp32_flops_per_ns *= 1.07;
    const memfmt::io::loaded_plan same = memfmt::io::load_plan(file, other_rank, model);
    const memfmt::io::loaded_plan noise = memfmt::io::load_plan(file, other_rank, cost_model(noisy));
    EXPECT_TRUE(same.same_costs);
    EXPECT_FALSE(noise.same_costs);
    EXPECT_EQ(same.policy, to_string(which));
    EXPECT_EQ(same.plan.total(), p.total());
    ASSERT_EQ(noise.plan.conversions.size(), p.conversions.size());
    for (const node& n : net.nodes()) {
      EXPECT_EQ(same.plan.format(n.id), p.format(n.id));
      EXPECT_EQ(noise.plan.format(n.id), p.format(n.id));
      EXPECT_EQ(same.plan.nodes[n.id].reason, p.nodes[n.id].reason);
    }
  }
  const std::string file = memfmt::io::save_plan(net, model, solve(net, model));
  const network bigger = models::resnet50(zoo::sized(memfmt::dtype::float32, 4, 64));
  const std::string refused = memfmt_test::error_text([&] { memfmt::io::load_plan(file, bigger, model); });
  EXPECT_NE(refused.find("plan file: made for network " + memfmt::io::network_fingerprint(net) + ", this network is " +
                         memfmt::io::network_fingerprint(bigger)),
            std::string::npos)
      << refused;
  network repinned = net;
  repinned.pin_format(*net.find("layer1.0.conv2"), format_family::channels_first, false, 1, "user");
  EXPECT_NE(memfmt_test::error_text([&] { memfmt::io::load_plan(file, repinned, model); }).find("made for network"),
            std::string::npos);
}

TEST(GraphIo, JsonReportCarriesThePlan) {
  const network net = zoo::eager_mixed();
  const cost_model model;
  const plan p = plan_with(net, model, policy::pytorch_eager);
  const json j = memfmt::io::plan_to_json(net, model, p, "pytorch_eager");
  ASSERT_EQ(j.at("layers").size(), net.size());
  ASSERT_EQ(j.at("conversions").size(), p.conversions.size());
  EXPECT_EQ(j.at("totals").at("total_ns").get<cost_t>(), p.total());
  EXPECT_EQ(j.at("totals").at("copies").get<std::size_t>(), p.copies());
  for (const node& n : net.nodes()) {
    const json& l = j.at("layers")[n.id];
    EXPECT_EQ(l.at("name"), n.name);
    if (p.format(n.id)) {
      EXPECT_EQ(l.at("format").get<std::string>(), to_string(*p.format(n.id)));
    } else {
      EXPECT_TRUE(l.at("format").is_null());
    }
  }
  for (std::size_t i = 0; i < p.conversions.size(); ++i) {
    EXPECT_EQ(j.at("conversions")[i].at("value"), net.at(p.conversions[i].value).name);
    EXPECT_EQ(j.at("conversions")[i].at("bytes").get<std::int64_t>(), p.conversions[i].bytes);
    EXPECT_EQ(j.at("conversions")[i].at("consumers").size(), p.conversions[i].consumers.size());
  }
}

// An upsample with ONNX coordinates keeps mode, rounding and scales through JSON; a bad one is
// named by its key or node.
TEST(GraphIo, UpsampleCoordinatesRoundTrip) {
  network n;
  const node_id x = n.input("x", {1, 2, 4, 5}, memfmt::dtype::float32, format_family::channels_first);
  memfmt::upsample_params up;
  up.output = {6, 3, 1};
  up.coordinates = memfmt::resample_coordinates::tf_half_pixel_for_nn;
  up.rounding = memfmt::nearest_rounding::ceil;
  up.scale = {1.5, 0.6, 0.0};
  n.output("y", n.upsample("up", x, up), format_family::channels_first);
  const std::string text = memfmt::io::save_network(n);
  const network back = memfmt::io::load_network(text);
  const auto& u = back.at(*back.find("up")).get<memfmt::upsample_params>();
  EXPECT_EQ(u.coordinates, up.coordinates);
  EXPECT_EQ(u.rounding, up.rounding);
  EXPECT_EQ(u.scale, up.scale);
  EXPECT_EQ(memfmt::io::save_network(back), text);
  json j = memfmt::io::network_to_json(n);
  j["nodes"][1]["attrs"]["scale"] = json::array({1.5, -2.0, 0.0});
  const std::string bad = memfmt_test::error_text([&] { memfmt::io::network_from_json(j); });
  EXPECT_NE(bad.find("node 'up': upsample: scale -2"), std::string::npos) << bad;
  j["nodes"][1]["attrs"]["scale"] = json::array({1.5, 2.0});
  const std::string short_scale = memfmt_test::error_text([&] { memfmt::io::network_from_json(j); });
  EXPECT_NE(short_scale.find("key 'scale' must be an array of 3 numbers"), std::string::npos) << short_scale;
  j["nodes"][1]["attrs"]["coordinates"] = "corners";
  const std::string mode = memfmt_test::error_text([&] { memfmt::io::network_from_json(j); });
  EXPECT_NE(mode.find("key 'coordinates' is 'corners'"), std::string::npos) << mode;
}

// Activations keep their parameters through JSON (an infinite clip bound is left out and reads back
// infinite); parameters a function does not take, or out of range, are named.
TEST(GraphIo, ActivationParametersRoundTrip) {
  network n;
  node_id h = n.input("x", {1, 2, 4, 5}, memfmt::dtype::float32, format_family::channels_first);
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<memfmt::activation_params> functions = {memfmt::activation::relu6,
                                                            memfmt::activation_params::leaky_relu(0.2),
                                                            memfmt::activation_params::elu(0.75),
                                                            memfmt::activation_params::hardsigmoid(0.2, 0.5),
                                                            memfmt::activation_params::clip(-1.5, 2.0),
                                                            memfmt::activation_params::clip(-inf, 2.0),
                                                            memfmt::activation_params::clip(0.5, inf)};
  for (std::size_t i = 0; i < functions.size(); ++i) h = n.activation("f" + std::to_string(i), h, functions[i]);
  n.output("y", h, format_family::channels_first);
  const std::string text = memfmt::io::save_network(n);
  const network back = memfmt::io::load_network(text);
  for (std::size_t i = 0; i < functions.size(); ++i)
    EXPECT_EQ(back.at(*back.find("f" + std::to_string(i))).get<memfmt::activation_params>(), functions[i])
        << memfmt::to_string(functions[i]);
  EXPECT_EQ(memfmt::io::save_network(back), text);

  json j = memfmt::io::network_to_json(n);
  j["nodes"][1]["attrs"]["alpha"] = 0.5;  // relu6 takes none
  std::string e = memfmt_test::error_text([&] { memfmt::io::network_from_json(j); });
  EXPECT_NE(e.find("node 'f0': activation relu6(alpha=0.5, beta=0) (takes no parameters"), std::string::npos) << e;
  j = memfmt::io::network_to_json(n);
  j["nodes"][5]["attrs"]["alpha"] = 3.0;  // above the upper bound 2
  e = memfmt_test::error_text([&] { memfmt::io::network_from_json(j); });
  EXPECT_NE(e.find("node 'f4': activation clip(alpha=3, beta=2) (needs bounds alpha <= beta)"), std::string::npos) << e;
  j = memfmt::io::network_to_json(n);
  j["nodes"][2]["attrs"]["alpha"] = "steep";
  e = memfmt_test::error_text([&] { memfmt::io::network_from_json(j); });
  EXPECT_NE(e.find("key 'alpha' must be a number"), std::string::npos) << e;
}

TEST(GraphIo, MalformedFilesNameTheKeyOrLine) {
  const network net = models::resnet18(zoo::sized(memfmt::dtype::float32, 1, 64));
  const json good = memfmt::io::network_to_json(net);
  const auto load = [](const json& j) { return memfmt_test::error_text([&] { memfmt::io::network_from_json(j); }); };
  const auto has = [](const std::string& message, const std::string& part) {
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  has(memfmt_test::error_text(
          [] { memfmt::io::load_network("{\n \"format\": \"memfmt.network\",\n \"nodes\": [,]\n}"); }),
      "network file: not valid JSON: [json.exception.parse_error.101] parse error at line 3");
  // A number no double holds: nlohmann throws out_of_range, not parse_error.
  has(memfmt_test::error_text([] { memfmt::io::load_network("{\"format\": \"memfmt.network\", \"version\": 1e605}"); }),
      "network file: not valid JSON: [json.exception.out_of_range.406] number overflow parsing '1e605'");
  json j = good;
  j["nodes"][1]["attrs"].erase("kernel");
  has(load(j), "network file: nodes[1] ('conv1') attrs: key 'kernel' is missing");
  j = good;
  j["nodes"][1]["attrs"]["stride"] = json::array({2, "2", 1});
  has(load(j), "nodes[1] ('conv1') attrs: key 'stride' must be an array of integers, got [2,\"2\",1]");
  j = good;
  j["nodes"][2]["kind"] = "batchnorm";
  has(load(j), "nodes[2]: key 'kind' is 'batchnorm', not one of input, output, conv");
  j = good;
  j["version"] = 2;
  has(load(j), "key 'version' is 2; this memfmt reads version 1");
  j = good;
  j["nodes"][1]["extents"][1] = 65;
  has(load(j), "nodes[1]: ('conv1') key 'extents' is [1, 65, 32, 32], the layer computes [1, 64, 32, 32]");
  j = good;
  j["nodes"][1]["inputs"] = json::array({"nowhere"});
  has(load(j), "nodes[1]: input 'nowhere' is not an earlier node");
  j = good;
  j["nodes"][1]["attrs"]["groups"] = 5;
  has(load(j), "node 'conv1': groups 5 must divide input channels 3");
  // A slice's axis and step may be left out (a channel slice); out of range they are named.
  network sliced;
  sliced.output(
      "y",
      sliced.slice("crop", sliced.input("x", {1, 8, 6, 6}, memfmt::dtype::float32, format_family::channels_first),
                   memfmt::slice_params{2, 1, 5, 2}),
      format_family::channels_first);
  j = memfmt::io::network_to_json(sliced);
  ASSERT_EQ(j["nodes"][1]["attrs"], json::parse(R"({"axis": 2, "begin": 1, "end": 5, "step": 2})"));
  j["nodes"][1]["attrs"].erase("axis");
  j["nodes"][1]["attrs"].erase("step");
  j["nodes"][1]["extents"] = j["nodes"][2]["extents"] = json::array({1, 4, 6, 6});
  EXPECT_EQ(memfmt::io::network_from_json(j).at(1).get<memfmt::slice_params>().axis, 1);
  j["nodes"][1]["attrs"]["axis"] = 9;
  has(load(j), "nodes[1] ('crop') attrs: key 'axis' must be 1 (C) or a spatial axis (2 to 4), got 9");
  j["nodes"][1]["attrs"]["axis"] = 3;
  j["nodes"][1]["attrs"]["step"] = 0;
  has(load(j),
      "node 'crop' (of 'x'): slice of axis 3 [1, 5) step 0: input [1, 8, 6, 6]: need 0 <= begin < end <= 6 and step >= "
      "1");
  // A reduction's axes may be left out (over C), and its name before it took spatial axes,
  // "channel_reduce", still reads; other axes are named.
  network reduced;
  reduced.output(
      "y",
      reduced.reduce("norm", reduced.input("x", {1, 8, 6, 6}, memfmt::dtype::float32, format_family::channels_first),
                     {memfmt::reduce_op::l2, memfmt::axis_bit(2) | memfmt::axis_bit(3)}),
      format_family::channels_first);
  j = memfmt::io::network_to_json(reduced);
  ASSERT_EQ(j["nodes"][1]["kind"], "reduce");
  ASSERT_EQ(j["nodes"][1]["attrs"], json::parse(R"({"op": "l2", "axes": [2, 3]})"));
  j["nodes"][1]["kind"] = "channel_reduce";
  j["nodes"][1]["attrs"].erase("axes");
  j["nodes"][1]["extents"] = j["nodes"][2]["extents"] = json::array({1, 1, 6, 6});
  EXPECT_EQ(memfmt::io::network_from_json(j).at(1).get<memfmt::reduce_params>().axes, memfmt::channel_axis_bit);
  j["nodes"][1]["attrs"]["axes"] = json::array({0, 1});
  has(load(j), "nodes[1] ('norm') attrs: key 'axes' must hold C (1) or spatial axes (2 to 4), got 0");
  j["nodes"][1]["attrs"]["axes"] = json::array({4});
  has(load(j),
      "node 'norm' (of 'x'): reduce over axes [4]: input [1, 8, 6, 6]: the axes must be C (1) or spatial axes (2 to "
      "3)");
  // A concatenation's axis may be left out (along C); a transpose names its perm.
  network joined;
  const node_id jx = joined.input("x", {1, 8, 6, 6}, memfmt::dtype::float32, format_family::channels_first);
  const node_id crop = joined.slice("crop", jx, memfmt::slice_params{3, 0, 5, 1});
  joined.output("y", joined.concat("cat", {jx, joined.transpose("swap", crop, {0, 1, 3, 2})}, {2}),
                format_family::channels_first);
  j = memfmt::io::network_to_json(joined);
  ASSERT_EQ(j["nodes"][2]["attrs"], json::parse(R"({"op": "transpose", "perm": [0, 1, 3, 2]})"));
  ASSERT_EQ(j["nodes"][3]["attrs"], json::parse(R"({"axis": 2})"));
  j["nodes"][2]["attrs"]["perm"] = json::array({0, 1, 2, 9});
  has(load(j), "nodes[2] ('swap') attrs: key 'perm' must hold dims 0 to 4, got 9");
  j["nodes"][2]["attrs"]["perm"] = json::array({0, 1, 2});
  has(load(j), "transpose perm [0, 1, 2] of 'crop' [1, 8, 6, 5]: one entry per dim");
  j["nodes"][2]["attrs"]["perm"] = json::array({1, 0, 2, 3});
  has(load(j), "transpose [1, 0, 2, 3]: input [1, 8, 6, 5]: perm must keep N and C first");
  j = memfmt::io::network_to_json(joined);
  j["nodes"][3]["attrs"].erase("axis");
  has(load(j), "concat input 'swap' [1, 8, 5, 6] float32 does not match 'x' [1, 8, 6, 6] float32 outside axis 1");
  j["nodes"][3]["attrs"]["axis"] = 0;
  has(load(j), "nodes[3] ('cat') attrs: key 'axis' must be 1 (C) or a spatial axis (2 to 4), got 0");
  // A local response norm's window is stored as placed (PyTorch's even window: 2 channels before c)
  // and must fit; every key is needed.
  network normed;
  normed.output(
      "y",
      normed.lrn("norm", normed.input("x", {1, 6, 4, 4}, memfmt::dtype::float32, format_family::channels_first),
                 memfmt::lrn_params::pytorch(4, 0.5)),
      format_family::channels_first);
  j = memfmt::io::network_to_json(normed);
  ASSERT_EQ(j["nodes"][1]["attrs"],
            json::parse(R"({"size": 4, "before": 2, "alpha": 0.5, "beta": 0.75, "bias": 1.0})"));
  j["nodes"][1]["attrs"]["before"] = 4;
  has(load(j), "node 'norm': local response norm window of size 4 with 4 channels before c");
  j["nodes"][1]["attrs"]["before"] = 1;
  j["nodes"][1]["attrs"].erase("beta");
  has(load(j), "nodes[1] ('norm') attrs: key 'beta' is missing");
  const cost_model model;
  json plan = memfmt::io::plan_to_json(net, model, solve(net, model));
  plan["layers"][3]["format"] = "nhwc";
  has(memfmt_test::error_text([&] { memfmt::io::plan_from_json(plan, net, model); }),
      "plan file: layers[3]: key 'format' is 'nhwc', not one of channels_first, channels_last");
  plan = memfmt::io::plan_to_json(net, model, solve(net, model));
  plan["layers"][0]["format"] = "channels_last";  // the input is pinned channels_first
  has(memfmt_test::error_text([&] { memfmt::io::plan_from_json(plan, net, model); }),
      "node 'input' is pinned to channels_first");
  has(memfmt_test::error_text([&] { memfmt::io::read_network_file("/nonexistent/net.json"); }),
      "network file '/nonexistent/net.json' cannot be opened");
}

}  // namespace
