// Every model of graph/models.hpp, small, on the reference backend: the all-channels-last plan and
// the solved plan (with the inference fusions) give the outputs of the all-channels-first run
// without fusions, within a tolerance derived from the dtype and the longest reduction; every run
// poisons each value when its liveness ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/plan.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/runtime/executor.hpp"
#include "model_test_util.hpp"

namespace {

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

struct run_result {
  std::vector<float> output;
  memfmt::runtime::executor_report report;
};

run_result run(const network& net, const memfmt::graph::plan& plan, const parameter_store& params,
               const std::vector<float>& input, bool fuse) {
  memfmt::reference::backend b;
  memfmt::runtime::executor<memfmt::reference::backend> ex(net, plan, b, params, {true, fuse});
  const auto& in = net.at(*net.find("input"));
  const auto& out = net.at(*net.find("output"));
  run_result r;
  r.output.assign(static_cast<std::size_t>(out.numel()), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> x = input;
  ex.forward(
      {{"input", tensor_ref{memfmt::dtype::float32, in.extents, format_family::channels_first, x.data()}}},
      {{"output", tensor_ref{memfmt::dtype::float32, out.extents, format_family::channels_first, r.output.data()}}});
  r.report = ex.report();
  return r;
}

void check_model(const std::string& name, const network& net, std::size_t expected_fusions_at_least) {
  SCOPED_TRACE(name);
  const parameter_store params = make_params(net, 11);
  const std::vector<float> x = random_input(net, 5);
  const memfmt::graph::cost_model model{};
  const auto truth =
      run(net, memfmt::graph::make_plan(net, model, uniform(net, format_family::channels_first)), params, x, false);
  EXPECT_TRUE(truth.report.fusions.empty());
  double scale = 0;
  for (float v : truth.output) {
    ASSERT_TRUE(std::isfinite(v)) << "the channels_first run gave a non-finite output";
    scale = std::max(scale, static_cast<double>(std::fabs(v)));
  }
  // Plans differ in the rounding of folded weights only (the reference sums in double and rounds
  // each output once): a few float32 ulps per weight, through every layer's longest sum.
  const double tol = 16.0 * std::numeric_limits<float>::epsilon() *
                     std::sqrt(static_cast<double>(longest_reduction(net))) * std::max(1.0, scale);
  for (const auto& [plan_name, plan] : plans_of(net)) {
    const auto got = run(net, plan, params, x, true);  // fused
    // A solved plan may convert between a conv and its batch norm, which then stay apart.
    if (plan_name != "solved") EXPECT_GE(got.report.fusions.size(), expected_fusions_at_least) << plan_name;
    else EXPECT_TRUE(expected_fusions_at_least == 0 || !got.report.fusions.empty());
    EXPECT_LE(got.report.arena_bytes, got.report.allocate_all_bytes) << plan_name;
    int bad = 0;
    for (std::size_t i = 0; i < got.output.size(); ++i)
      if (!(std::fabs(got.output[i] - truth.output[i]) <= tol) && bad++ < 5)
        ADD_FAILURE() << plan_name << ": output element " << i << " is " << got.output[i] << ", expected "
                      << truth.output[i] << " (tolerance " << tol << ")";
  }
}

TEST(ExecutorModels, ResNet18) { check_model("resnet18", models::resnet18(small(0.125, 32)), 17); }
TEST(ExecutorModels, ResNet50) { check_model("resnet50", models::resnet50(small(0.0625, 32)), 49); }
// ResNeXt needs width 1/4: 32 groups of planes / 16 channels.
TEST(ExecutorModels, ResNeXt50) { check_model("resnext50_32x4d", models::resnext50_32x4d(small(0.25, 32)), 49); }
TEST(ExecutorModels, MobileNetV2) { check_model("mobilenet_v2", models::mobilenet_v2(small(0.125, 32)), 35); }
TEST(ExecutorModels, Vgg16Bn) { check_model("vgg16_bn", models::vgg16_bn(small(0.0625, 32)), 13); }
TEST(ExecutorModels, UNet) { check_model("unet", models::unet(small(0.0625, 16)), 18); }
TEST(ExecutorModels, R3d18) { check_model("r3d_18", models::r3d_18(small(0.0625, 16)), 17); }
// Each block's expansion conv + bias + GELU is one fused call.
TEST(ExecutorModels, ConvNeXtTiny) { check_model("convnext_tiny", models::convnext_tiny(small(0.125, 32)), 18); }
TEST(ExecutorModels, ShuffleNetV2) {
  check_model("shufflenet_v2_x1_0", models::shufflenet_v2_x1_0(small(0.125, 32)), 30);
}

// forward_profiled runs the steps forward runs (the same output bits) and charges each to its node:
// a layer with a step of its own takes time, a batch norm, add or activation fused into a conv takes
// none and names the conv, and exactly the values the plan copies (not relabels, not the input
// converted on entry) have conversion time.
TEST(ExecutorModels, ProfiledPassChargesEachStepToItsNode) {
  const network net = models::resnet18(small(0.125, 32));
  const parameter_store params = make_params(net, 11);
  const std::vector<float> input = random_input(net, 5);
  const memfmt::graph::cost_model model{};
  std::vector<std::optional<format_family>> alternating = uniform(net, format_family::channels_first);
  for (const auto& n : net.nodes())
    if (alternating[n.id] && n.kind == memfmt::layer_kind::conv && n.id % 3 == 0)
      alternating[n.id] = format_family::channels_last;
  const std::pair<const char*, memfmt::graph::plan> cases[] = {
      {"channels_last", memfmt::graph::make_plan(net, model, uniform(net, format_family::channels_last))},
      {"mixed", memfmt::graph::make_plan(net, model, alternating)}};
  for (const auto& [name, plan] : cases) {
    SCOPED_TRACE(name);
    ASSERT_GT(plan.copies(), 0u);
    memfmt::reference::backend b;
    memfmt::runtime::executor<memfmt::reference::backend> ex(net, plan, b, params);
    const auto& in = net.at(*net.find("input"));
    const auto& out = net.at(*net.find("output"));
    std::vector<float> x = input, plain(static_cast<std::size_t>(out.numel())), profiled(plain.size());
    const tensor_ref x_ref{memfmt::dtype::float32, in.extents, format_family::channels_first, x.data()};
    ex.forward(
        {{"input", x_ref}},
        {{"output", tensor_ref{memfmt::dtype::float32, out.extents, format_family::channels_first, plain.data()}}});
    const memfmt::runtime::forward_profile p = ex.forward_profiled(
        {{"input", x_ref}},
        {{"output", tensor_ref{memfmt::dtype::float32, out.extents, format_family::channels_first, profiled.data()}}});
    EXPECT_EQ(plain, profiled);
    ASSERT_EQ(p.nodes.size(), net.size());
    std::set<memfmt::graph::node_id> copied;
    for (const auto& c : plan.conversions)
      if (!c.relabel && net.at(c.value).kind != memfmt::layer_kind::input) copied.insert(c.value);
    std::int64_t sum = p.inputs_ns + p.outputs_ns;
    std::size_t fused = 0;
    for (const auto& n : net.nodes()) {
      const memfmt::runtime::node_time& t = p.nodes[n.id];
      EXPECT_EQ(t.node, n.id);
      sum += t.layer_ns + t.conversion_ns;
      // An input's conversion may run on entry, an output's on exit: the inputs' and outputs' time.
      const auto& readers = net.consumers(n.id);
      const bool read_by_output = std::any_of(readers.begin(), readers.end(), [&](memfmt::graph::node_id r) {
        return net.at(r).kind == memfmt::layer_kind::output;
      });
      if (n.kind != memfmt::layer_kind::input && !read_by_output) {
        EXPECT_EQ(t.conversion_ns > 0, copied.count(n.id) == 1) << n.name;
      }
      if (t.fused_into) {
        ++fused;
        EXPECT_EQ(t.layer_ns, 0) << n.name;
        EXPECT_EQ(net.at(*t.fused_into).kind, memfmt::layer_kind::conv) << n.name;
        EXPECT_GT(p.nodes[*t.fused_into].layer_ns, 0) << n.name;
      } else if (n.kind == memfmt::layer_kind::conv || n.kind == memfmt::layer_kind::pool ||
                 n.kind == memfmt::layer_kind::linear) {
        EXPECT_GT(t.layer_ns, 0) << n.name;
      } else if (n.kind == memfmt::layer_kind::input || n.kind == memfmt::layer_kind::output) {
        EXPECT_EQ(t.layer_ns, 0) << n.name;
      }
    }
    // Each fusion group names a conv and at least one layer run in its step.
    EXPECT_GE(fused, ex.report().fusions.size());
    EXPECT_GT(p.inputs_ns, 0);
    EXPECT_GE(p.total_ns, sum);
  }
  static_assert(!memfmt::runtime::detail::queues_work<memfmt::reference::backend>::value,
                "the reference backend's calls return when done: nothing to drain between steps");
}

}  // namespace

namespace {

// Every layer kind the models do not use (pad, upsample, group and instance norm, softmax, slices,
// squeeze-and-excitation broadcasting, global max pool, hardswish, opaque), in every plan.
network every_layer(memfmt::runtime::user_op op) {
  network net;
  const auto x = net.input("input", {2, 4, 6, 6}, memfmt::dtype::float32, format_family::channels_first);
  memfmt::pad_params pp;
  pp.mode = memfmt::pad_mode::reflect;
  pp.begin = {1, 2, 0};
  pp.end = {2, 1, 0};
  auto h = net.pad("pad", x, pp);                                          // [2, 4, 9, 9]
  h = net.conv("conv", h, memfmt::graph::conv_spec(8, 3, 2, 1, 2, true));  // [2, 8, 5, 5]
  h = net.group_norm("gn", h, 2);
  h = net.activation("act", h, memfmt::activation::hardswish);
  const auto se =
      net.activation("se.sigmoid", net.global_pool("se.pool", h, memfmt::pool_kind::max), memfmt::activation::sigmoid);
  h = net.mul("se.mul", h, se);  // [2, 8, 5, 5] * [2, 8, 1, 1]
  memfmt::upsample_params up;
  up.mode = memfmt::resample_mode::linear;
  up.output = {7, 8, 0};
  h = net.upsample("up", h, up);  // [2, 8, 7, 8]
  const auto parts = net.split("split", h, {3, 5});
  h = net.concat("cat", {net.instance_norm("in", parts[1], 1e-5, true), parts[0]});
  h = net.opaque("user", {h}, {2, 8, 7, 8}, op.output_format, op.input_format);
  net.set_callback(h, op);
  h = net.softmax("softmax", h);
  h = net.slice("stride", net.slice("crop", h, memfmt::slice_params{2, 1, 6, 1}), memfmt::slice_params{3, 1, 8, 2});
  h = net.avg_pool("pool", h, 3, 2, 1, true, false);
  net.output("output", net.linear("fc", net.flatten("flatten", h), 5), format_family::channels_first);
  return net;
}

// A user op that reads one format and writes another: out = 2 * in, converted.
memfmt::runtime::user_op doubling(format_family in, format_family out,
                                  std::optional<format_family> reported = std::nullopt) {
  memfmt::runtime::user_op op;
  op.input_format = in;
  op.output_format = out;
  op.run = [in, out, reported](const std::vector<tensor_ref>& inputs, tensor_ref& output) {
    const tensor_ref& x = inputs.at(0);
    ASSERT_EQ(x.format, in);
    const auto& e = x.extents;
    memfmt::host_tensor<float, memfmt::nchw> tmp({e[0], e[1], e[2], e[3]});
    const auto src = static_cast<const float*>(x.data);
    if (in == format_family::channels_first) {
      std::copy(src, src + tmp.numel(), tmp.data());
    } else {
      memfmt::convert(
          memfmt::tensor_view<const float, memfmt::nhwc>(src, memfmt::layout<memfmt::nhwc>::packed(tmp.extents())),
          tmp.view());
    }
    for (std::int64_t i = 0; i < tmp.numel(); ++i) tmp.data()[i] *= 2.f;
    auto* dst = static_cast<float*>(output.data);
    if (out == format_family::channels_first) std::copy(tmp.data(), tmp.data() + tmp.numel(), dst);
    else
      memfmt::convert(tmp.const_view(), memfmt::tensor_view<float, memfmt::nhwc>(
                                            dst, memfmt::layout<memfmt::nhwc>::packed(tmp.extents())));
    if (reported) output.format = *reported;
  };
  return op;
}

TEST(ExecutorModels, EveryLayerKind) {
  for (auto in : {format_family::channels_first, format_family::channels_last})
    for (auto out : {format_family::channels_first, format_family::channels_last}) {
      check_model(std::string("every layer, user op ") + memfmt::to_string(in) + " -> " + memfmt::to_string(out),
                  every_layer(doubling(in, out)), 0);
    }
}

// A user op that writes another format than it declares is an error naming the node; the outputs
// stay untouched. One whose declared formats differ from the node's is refused before any work.
TEST(ExecutorErrors, UserOpReturningTheWrongFormat) {
  using ex_t = memfmt::runtime::executor<memfmt::reference::backend>;
  memfmt::reference::backend b;
  const memfmt::graph::cost_model model{};
  const network liar =
      every_layer(doubling(format_family::channels_last, format_family::channels_last, format_family::channels_first));
  const parameter_store params = make_params(liar, 3);
  ex_t ex(liar, memfmt::graph::solve(liar, model), b, params);
  std::vector<float> x(2 * 4 * 6 * 6, 0.5f), y(10, 7.f);
  try {
    ex.forward({{"input", tensor_ref{memfmt::dtype::float32, {2, 4, 6, 6}, format_family::channels_first, x.data()}}},
               {{"output", tensor_ref{memfmt::dtype::float32, {2, 5}, format_family::channels_first, y.data()}}});
    ADD_FAILURE() << "no error";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), memfmt::errc::format_mismatch);
    const std::string what = e.what();
    EXPECT_NE(what.find("node 'user' (opaque)"), std::string::npos) << what;
    EXPECT_NE(what.find("returned float32 [2, 8, 7, 8] channels_first"), std::string::npos) << what;
    EXPECT_NE(what.find("declared float32 [2, 8, 7, 8] channels_last"), std::string::npos) << what;
  }
  for (float v : y) ASSERT_EQ(v, 7.f);
  network mismatch = every_layer(doubling(format_family::channels_first, format_family::channels_last));
  mismatch.set_callback(*mismatch.find("user"), doubling(format_family::channels_first, format_family::channels_first));
  try {
    ex_t(mismatch, memfmt::graph::solve(mismatch, model), b, make_params(mismatch, 3));
    ADD_FAILURE() << "no error";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), memfmt::errc::format_mismatch);
    EXPECT_NE(std::string(e.what()).find("declared to read channels_first and write channels_last"), std::string::npos)
        << e.what();
  }
  network wrong_type = every_layer(doubling(format_family::channels_first, format_family::channels_first));
  wrong_type.set_callback(*wrong_type.find("user"), 42);
  try {
    ex_t(wrong_type, memfmt::graph::solve(wrong_type, model), b, make_params(wrong_type, 3));
    ADD_FAILURE() << "no error";
  } catch (const memfmt::error& e) {
    EXPECT_NE(std::string(e.what()).find("not a memfmt::runtime::user_op"), std::string::npos) << e.what();
  }
}

}  // namespace
