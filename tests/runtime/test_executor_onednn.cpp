// The executor on the oneDNN backend: every model of graph/models.hpp, small, in three plans (all
// channels_first, all channels_last, solve's plan with oneDNN's capability query), float32 and
// bfloat16, against the reference backend's all-channels-first run without fusions. A layer
// oneDNN cannot run is refused when the executor is built, naming the node. The capability query
// of both backends, and its adapter for the planner.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "memfmt/backends/onednn/backend.hpp"
#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/plan.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/runtime/backend_support.hpp"
#include "memfmt/runtime/executor.hpp"
#include "model_test_util.hpp"

namespace {

using memfmt::dtype;
using memfmt::format_family;
using memfmt::graph::network;
using memfmt::graph::parameter_store;
using memfmt::runtime::tensor_ref;
using memfmt_test::longest_reduction;
using memfmt_test::make_params;
using memfmt_test::plans_of;
using memfmt_test::random_input;
using memfmt_test::small;
using memfmt_test::uniform;
namespace models = memfmt::graph::models;

// One forward pass of `net` (element type T) with `plan`; input and output in float, channels_first.
template <class T, class Backend>
std::vector<float> run(Backend& b, const network& net, const memfmt::graph::plan& plan, const parameter_store& params,
                       const std::vector<float>& input, bool fuse, memfmt::runtime::executor_report* report = nullptr) {
  memfmt::runtime::executor<Backend> ex(net, plan, b, params, {true, fuse});
  const auto& in = net.at(*net.find("input"));
  const auto& out = net.at(*net.find("output"));
  std::vector<T> x(input.size()), y(static_cast<std::size_t>(out.numel()), static_cast<T>(std::nanf("")));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(input[i]);
  ex.forward({{"input", tensor_ref{in.type, in.extents, format_family::channels_first, x.data()}}},
             {{"output", tensor_ref{out.type, out.extents, format_family::channels_first, y.data()}}});
  if (report) *report = ex.report();
  return std::vector<float>(y.begin(), y.end());
}

// The model on oneDNN in every plan, in element type T, against the reference float32 run.
template <class T>
void check_model(const std::string& name, models::options o) {
  SCOPED_TRACE(name);
  constexpr bool bf16 = std::is_same_v<T, memfmt::bfloat16>;
  if constexpr (bf16)
    if (!memfmt::onednn::supports(dtype::bfloat16)) GTEST_SKIP() << memfmt::onednn::support_for(dtype::bfloat16).reason;
  const auto build = [&](dtype t) {
    o.type = t;
    return name == "resnet18"             ? models::resnet18(o)
           : name == "resnet50"           ? models::resnet50(o)
           : name == "resnext50_32x4d"    ? models::resnext50_32x4d(o)
           : name == "mobilenet_v2"       ? models::mobilenet_v2(o)
           : name == "vgg16_bn"           ? models::vgg16_bn(o)
           : name == "unet"               ? models::unet(o)
           : name == "shufflenet_v2_x1_0" ? models::shufflenet_v2_x1_0(o)
           : name == "convnext_tiny"      ? models::convnext_tiny(o)
                                          : models::r3d_18(o);
  };
  const network ref_net = build(dtype::float32);
  const network net = build(bf16 ? dtype::bfloat16 : dtype::float32);
  const parameter_store ref_params = make_params(ref_net, 11), params = make_params(net, 11);
  const std::vector<float> x = random_input(net, 5);
  memfmt::reference::backend ref;
  const memfmt::graph::cost_model priors{};
  const auto truth = run<float>(
      ref, ref_net, memfmt::graph::make_plan(ref_net, priors, uniform(ref_net, format_family::channels_first)),
      ref_params, x, false);
  double scale = 1;
  for (float v : truth) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  // oneDNN sums in float in its own order (float32) or rounds every activation and weight to 8
  // bits of mantissa (bfloat16): a few units of the dtype's epsilon per layer, through the
  // longest sum, relative to the output's scale.
  const double eps = bf16 ? 1.0 / 256 : std::numeric_limits<float>::epsilon();
  const double tol = (bf16 ? 4.0 : 8.0) * eps * std::sqrt(static_cast<double>(longest_reduction(net))) * scale;

  memfmt::onednn::backend onednn_backend;
  memfmt::graph::cost_model with_onednn{};
  with_onednn.set_support_query(memfmt::runtime::support_query_for(onednn_backend));
  for (const auto& [plan_name, plan] : plans_of(net, with_onednn)) {
    memfmt::runtime::executor_report report;
    const auto got = run<T>(onednn_backend, net, plan, params, x, true, &report);
    EXPECT_LE(report.arena_bytes, report.allocate_all_bytes) << plan_name;
    // A ResNet's identity blocks end in conv + batch norm + add + relu, one oneDNN call each.
    if (name.rfind("res", 0) == 0 && plan_name != "solved") {
      EXPECT_TRUE(std::any_of(report.fusions.begin(), report.fusions.end(), [](const std::string& g) {
        return g.find(".add + ") != std::string::npos;
      })) << plan_name;
    }
    // MobileNetV2's conv + batch norm + relu6 is one oneDNN call (the clip is a post-op).
    if (name == "mobilenet_v2") {
      EXPECT_TRUE(std::any_of(report.fusions.begin(), report.fusions.end(), [](const std::string& g) {
        return g == "features.0.0 + bias + features.0.1 + features.0.2";
      })) << plan_name;
    }
    double worst = 0;
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double err = std::fabs(static_cast<double>(got[i]) - truth[i]);
      worst = std::max(worst, std::isnan(err) ? std::numeric_limits<double>::infinity() : err);
      if (!(err <= tol) && bad++ < 5)
        ADD_FAILURE() << plan_name << ": output element " << i << " is " << got[i] << ", expected " << truth[i]
                      << " (tolerance " << tol << ")";
    }
    ::testing::Test::RecordProperty(plan_name + "_max_error", std::to_string(worst / tol));
  }
}

TEST(ExecutorOneDnn, ResNet18) { check_model<float>("resnet18", small(0.125, 32)); }
TEST(ExecutorOneDnn, ResNet50) { check_model<float>("resnet50", small(0.0625, 32)); }
TEST(ExecutorOneDnn, ResNeXt50) { check_model<float>("resnext50_32x4d", small(0.25, 32)); }
TEST(ExecutorOneDnn, MobileNetV2) { check_model<float>("mobilenet_v2", small(0.125, 32)); }
TEST(ExecutorOneDnn, Vgg16Bn) { check_model<float>("vgg16_bn", small(0.0625, 32)); }
TEST(ExecutorOneDnn, UNet) { check_model<float>("unet", small(0.0625, 16)); }
TEST(ExecutorOneDnn, R3d18) { check_model<float>("r3d_18", small(0.0625, 16)); }
TEST(ExecutorOneDnn, ShuffleNetV2) { check_model<float>("shufflenet_v2_x1_0", small(0.125, 32)); }
TEST(ExecutorOneDnn, ConvNeXtTiny) { check_model<float>("convnext_tiny", small(0.125, 32)); }

TEST(ExecutorOneDnnBf16, ResNet18) { check_model<memfmt::bfloat16>("resnet18", small(0.125, 32)); }
TEST(ExecutorOneDnnBf16, ResNet50) { check_model<memfmt::bfloat16>("resnet50", small(0.0625, 32)); }
TEST(ExecutorOneDnnBf16, ResNeXt50) { check_model<memfmt::bfloat16>("resnext50_32x4d", small(0.25, 32)); }
TEST(ExecutorOneDnnBf16, MobileNetV2) { check_model<memfmt::bfloat16>("mobilenet_v2", small(0.125, 32)); }
TEST(ExecutorOneDnnBf16, Vgg16Bn) { check_model<memfmt::bfloat16>("vgg16_bn", small(0.0625, 32)); }
TEST(ExecutorOneDnnBf16, UNet) { check_model<memfmt::bfloat16>("unet", small(0.0625, 16)); }
TEST(ExecutorOneDnnBf16, R3d18) { check_model<memfmt::bfloat16>("r3d_18", small(0.0625, 16)); }
TEST(ExecutorOneDnnBf16, ShuffleNetV2) { check_model<memfmt::bfloat16>("shufflenet_v2_x1_0", small(0.125, 32)); }
TEST(ExecutorOneDnnBf16, ConvNeXtTiny) { check_model<memfmt::bfloat16>("convnext_tiny", small(0.125, 32)); }

// The network on oneDNN, fused, all channels-first and all channels-last, against the reference
// backend's channels-first run (parameters and input from the seeds); the two runs' reports.
std::vector<memfmt::runtime::executor_report> expect_onednn_matches_reference(const network& net,
                                                                              std::uint32_t param_seed,
                                                                              std::uint32_t input_seed) {
  const parameter_store params = make_params(net, param_seed);
  const std::vector<float> in = random_input(net, input_seed);
  memfmt::reference::backend ref;
  const memfmt::graph::cost_model priors{};
  const auto truth = run<float>(
      ref, net, memfmt::graph::make_plan(net, priors, uniform(net, format_family::channels_first)), params, in, false);
  memfmt::onednn::backend onednn_backend;
  std::vector<memfmt::runtime::executor_report> reports;
  for (format_family f : {format_family::channels_first, format_family::channels_last}) {
    reports.emplace_back();
    const auto plan = memfmt::graph::make_plan(net, priors, uniform(net, f));
    const auto got = run<float>(onednn_backend, net, plan, params, in, true, &reports.back());
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(got[i] - truth[i]) <= 1e-5)) {
        ADD_FAILURE() << memfmt::to_string(f) << " output element " << i << ": " << got[i] << ", the reference "
                      << truth[i];
        break;
      }
  }
  return reports;
}

// The layers the models do not use, each alone between an input and an output, on oneDNN in both
// formats against the reference: group and instance norm (memfmt's CPU kernel), broadcasting in
// both operand orders, ceil-mode and padded pools, upsampling by integer and other factors, spatial
// padding in each mode, softmax, slices and concat, a linear after a
// channels_last flatten.
TEST(ExecutorOneDnn, OtherLayers) {
  network net;
  const auto x = net.input("input", {2, 6, 8, 8}, dtype::float32, format_family::channels_first);
  auto h = net.conv("conv", x, memfmt::graph::conv_spec(8, 3, 1, 1));
  h = net.instance_norm("in", net.group_norm("gn", h, 4), 1e-5, true);
  const auto pooled = net.global_pool("gap", h, memfmt::pool_kind::average);
  const auto gate = net.activation("sigmoid", pooled, memfmt::activation::sigmoid);
  h = net.binary("sub", gate, h, memfmt::binary_op::sub);  // the broadcast operand first, not commuting
  h = net.mul("mul", gate, h);                             // the broadcast operand first, commuting
  h = net.activation("hardswish", h, memfmt::activation::hardswish);
  h = net.activation("relu6", h, memfmt::activation::relu6);
  h = net.activation("silu", h, memfmt::activation::silu);
  h = net.activation("hardsigmoid", h, memfmt::activation::hardsigmoid);  // clips what silu left past 3
  h = net.activation("tanh", h, memfmt::activation::tanh);
  h = net.avg_pool("avg_ceil", h, 3, 2, 1, true, true);  // 8 -> 5, the last window past the padding
  memfmt::upsample_params up;
  up.output = {10, 10, 0};
  h = net.upsample("up2", h, up);
  up.output = {11, 12, 0};
  up.mode = memfmt::resample_mode::nearest;
  h = net.upsample("up_odd", h, up);
  up.mode = memfmt::resample_mode::linear;
  up.output = {9, 9, 0};
  h = net.upsample("up_linear", h, up);
  h = net.max_pool("max_ceil", h, 2, 2, 0, true);  // 9 -> 5
  memfmt::pad_params pp;
  pp.mode = memfmt::pad_mode::replicate;
  pp.begin = {1, 0, 0};
  pp.end = {2, 1, 0};
  h = net.pad("pad_replicate", h, pp);  // 8 x 6
  pp = {memfmt::pad_mode::constant, {0, 1, 0}, {1, 0, 0}, -0.25};
  h = net.pad("pad_constant", h, pp);  // 9 x 7
  pp = {memfmt::pad_mode::reflect, {2, 1, 0}, {1, 3, 0}, 0.0};
  h = net.pad("pad_reflect", h, pp);  // 12 x 11
  const auto parts = net.split("split", h, {3, 5});
  h = net.concat("cat", {parts[1], parts[0], net.avg_pool("avg_excl", parts[0], 3, 1, 1, false, false)});
  h = net.softmax("softmax", h);
  net.output("output", net.linear("fc", net.flatten("flatten", h), 5), format_family::channels_first);

  expect_onednn_matches_reference(net, 3, 5);
}

// Constants of every broadcast shape in both operand positions, one of them a conv's residual (run
// as its sum post-op), rank 2 after the classifier: oneDNN in both formats against the reference.
TEST(ExecutorOneDnn, Constants) {
  network net;
  const auto x = net.input("input", {2, 4, 6, 6}, dtype::float32, format_family::channels_first);
  auto h = net.binary("center", x, net.constant("mean", {1, 4, 1, 1}, dtype::float32), memfmt::binary_op::sub);
  const auto one = net.constant("one", {1, 1, 1, 1}, dtype::float32);
  h = net.binary("rdiv", one, net.activation("pos", h, memfmt::activation::sigmoid), memfmt::binary_op::div);
  const auto skip = net.constant("skip", {2, 8, 6, 6}, dtype::float32);  // before the conv: fusable
  h = net.conv("conv", h, memfmt::graph::conv_spec(8, 3, 1, 1, 1, true));
  h = net.relu("relu", net.add("residual", h, skip));
  h = net.binary("embed", net.constant("pos_embed", {1, 8, 6, 6}, dtype::float32), h, memfmt::binary_op::sub);
  h = net.linear("fc", net.flatten("flatten", net.global_pool("gap", h)), 5);
  net.output("output", net.mul("temperature", net.constant("tau", {1, 5}, dtype::float32), h),
             format_family::channels_first);
  const auto reports = expect_onednn_matches_reference(net, 4, 6);
  for (const auto& r : reports) {
    ASSERT_EQ(r.fusions.size(), 1u);
    EXPECT_EQ(r.fusions[0], "conv + bias + residual + relu");
  }
}

// Activations with parameters after convs run as the convs' eltwise post-ops (a bias and ONNX's
// hardsigmoid among them), and alone, in both formats, against the reference.
TEST(ExecutorOneDnn, ActivationParametersFusedIntoConvs) {
  network net;
  const auto x = net.input("input", {2, 5, 7, 6}, dtype::float32, format_family::channels_first);
  const double inf = std::numeric_limits<double>::infinity();
  const memfmt::activation_params functions[] = {
      memfmt::activation_params::leaky_relu(0.1), memfmt::activation_params::clip(-0.5, 0.75),
      memfmt::activation_params::elu(0.7), memfmt::activation_params::hardsigmoid(0.2, 0.5),
      memfmt::activation_params::clip(-inf, 0.25)};
  auto h = x;
  int i = 0;
  for (const auto& f : functions) {
    const std::string k = std::to_string(i++);
    h = net.activation("act" + k, net.conv("conv" + k, h, memfmt::graph::conv_spec(6, 3, 1, 1, 1, true)), f);
  }
  h = net.activation("leaky_alone", net.add("add", h, h), memfmt::activation_params::leaky_relu(-0.25));
  net.output("output", h, format_family::channels_first);

  for (const auto& report : expect_onednn_matches_reference(net, 11, 12))
    EXPECT_EQ(report.fusions.size(), std::size(functions));
}

// A layer in an element type oneDNN does not compute in (a float16 activation, a float64 conv) is an
// error naming the node when the executor is built, before any primitive exists.
TEST(ExecutorOneDnn, UnsupportedLayerIsRefusedAtBuild) {
  const memfmt::graph::cost_model priors{};
  const auto expect_refused = [&](const network& net, memfmt::errc code, const std::string& node) {
    memfmt::onednn::backend onednn_backend;
    try {
      memfmt::runtime::executor<memfmt::onednn::backend> ex(net, memfmt::graph::solve(net, priors), onednn_backend,
                                                            make_params(net, 1));
      ADD_FAILURE() << "no error for " << node;
    } catch (const memfmt::error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(node), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("onednn backend"), std::string::npos) << e.what();
    }
    EXPECT_EQ(onednn_backend.cached_primitive_count(), 0u);
  };
  {
    network net;
    const auto x = net.input("input", {1, 4, 6, 6}, dtype::float16, format_family::channels_first);
    net.output("output", net.activation("hsig", x, memfmt::activation::hardsigmoid), format_family::channels_first);
    expect_refused(net, memfmt::errc::unsupported_dtype, "node 'hsig' (activation): onednn activation: float16");
  }
  {
    network net;
    const auto x = net.input("input", {1, 4, 6, 6}, dtype::float64, format_family::channels_first);
    net.output("output", net.conv("conv", x, memfmt::graph::conv_spec(4, 3)), format_family::channels_first);
    expect_refused(net, memfmt::errc::unsupported_dtype, "node 'conv' (conv): onednn conv: float64");
  }
}

TEST(BackendSupport, Reference) {
  const memfmt::reference::backend ref;
  for (const memfmt::kind_info& k : memfmt::kind_infos)
    for (dtype t : {dtype::float32, dtype::float64, dtype::float16, dtype::bfloat16}) {
      if (!k.runs_on_backend) continue;
      memfmt::op_query q;
      q.op = k.kind;
      q.type = t;
      q.format = format_family::channels_last;
      q.rank = 5;
      EXPECT_TRUE(ref.support(q)) << memfmt::to_string(q.op) << " " << memfmt::to_string(t);
    }
  memfmt::op_query q;
  q.type = dtype::int64;
  const memfmt::op_support s = ref.support(q);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.code, memfmt::errc::unsupported_dtype);
  EXPECT_NE(s.reason.find("int64"), std::string::npos) << s.reason;
}

TEST(BackendSupport, OneDnn) {
  const memfmt::onednn::backend onednn_backend;
  memfmt::op_query q;
  for (format_family f : {format_family::channels_first, format_family::channels_last}) {
    q.format = f;
    for (auto op : {memfmt::layer_kind::conv, memfmt::layer_kind::batch_norm, memfmt::layer_kind::binary,
                    memfmt::layer_kind::pool, memfmt::layer_kind::linear, memfmt::layer_kind::concat,
                    memfmt::layer_kind::softmax, memfmt::layer_kind::pad, memfmt::layer_kind::group_norm})
      EXPECT_TRUE(onednn_backend.support({op, dtype::float32, f}));
    q.op = memfmt::layer_kind::activation;
    q.function = memfmt::activation::hardsigmoid;
    EXPECT_TRUE(onednn_backend.support(q));
    q.type = dtype::float16;
    const auto s = onednn_backend.support(q);
    EXPECT_FALSE(s);
    EXPECT_EQ(s.code, memfmt::errc::unsupported_dtype);
    q.type = dtype::float32;
  }
  for (dtype t : {dtype::float64, dtype::float16}) {
    const auto s = onednn_backend.support({memfmt::layer_kind::conv, t});
    EXPECT_FALSE(s);
    EXPECT_EQ(s.code, memfmt::errc::unsupported_dtype);
  }
  const auto bf = onednn_backend.support({memfmt::layer_kind::conv, dtype::bfloat16});
  EXPECT_EQ(static_cast<bool>(bf), memfmt::onednn::supports(dtype::bfloat16));
  if (!bf) {
    EXPECT_EQ(bf.reason, "onednn conv: " + memfmt::onednn::support_for(dtype::bfloat16).reason);
  }
}

// A backend without channels_last convolutions, as the planner's support query: solve keeps every
// conv channels_first although channels_last is cheaper by the priors, and says why.
struct no_channels_last_conv {
  memfmt::op_support support(const memfmt::op_query& q) const {
    if (q.op == memfmt::layer_kind::conv && q.format == format_family::channels_last)
      return memfmt::op_support::no(memfmt::errc::unsupported, "no channels_last conv");
    return memfmt::op_support::yes();
  }
};

TEST(BackendSupport, PlannerAdapter) {
  const network net = models::resnet18(small(0.125, 32));
  const no_channels_last_conv backend;
  memfmt::graph::cost_model cm;
  const memfmt::graph::plan free_plan = memfmt::graph::solve(net, cm);
  cm.set_support_query(memfmt::runtime::support_query_for(backend));
  const memfmt::graph::plan p = memfmt::graph::solve(net, cm);
  std::size_t convs = 0, last_before = 0;
  for (const auto& n : net.nodes()) {
    if (n.kind != memfmt::layer_kind::conv) continue;
    ++convs;
    last_before += free_plan.format(n.id) == format_family::channels_last;
    EXPECT_EQ(p.format(n.id), format_family::channels_first) << n.name;
    const auto costs = cm.node_costs(net, n.id);
    EXPECT_FALSE(costs.supports(format_family::channels_last)) << n.name;
    EXPECT_NE(costs.basis.find("not in channels_last: no channels_last conv"), std::string::npos) << costs.basis;
  }
  EXPECT_GT(convs, 0u);
  EXPECT_GT(last_before, 0u);  // the query changed the plan
}

}  // namespace
