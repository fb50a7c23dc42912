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
#include <random>
#include <string>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/plan.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/runtime/executor.hpp"

namespace {

using memfmt::graph::family;
using memfmt::graph::network;
using memfmt::runtime::parameter_store;
using memfmt::runtime::tensor_ref;
namespace models = memfmt::graph::models;

// Weights uniform in +-sqrt(3 / fan_in) (unit variance through each layer, so deep nets neither
// vanish nor blow up), batch norm statistics near the identity.
parameter_store make_params(const network& net, std::uint32_t seed) {
  std::mt19937 rng(seed);
  parameter_store s;
  for (const auto& n : net.nodes())
    for (const auto& p : net.parameters(n.id)) {
      const auto count = static_cast<std::size_t>(memfmt::detail::checked_numel(p.extents, "test"));
      if (p.type == memfmt::dtype::int64) {
        s.insert<std::int64_t>(p.name, p.extents, std::vector<std::int64_t>(count, 0));
        continue;
      }
      float lo = -0.1f, hi = 0.1f;
      const auto ends = [&](const char* suffix) {
        const std::string t(suffix);
        return p.name.size() >= t.size() && p.name.compare(p.name.size() - t.size(), t.size(), t) == 0;
      };
      if (ends("running_var")) lo = 0.5f, hi = 1.5f;
      else if (ends("weight") && p.extents.size() == 1) lo = 0.5f, hi = 1.5f;
      else if (ends("weight")) {
        const float fan_in = static_cast<float>(count / static_cast<std::size_t>(p.extents[0]));
        hi = std::sqrt(3.f / fan_in);
        lo = -hi;
      }
      std::uniform_real_distribution<float> d(lo, hi);
      std::vector<float> v(count);
      for (auto& e : v) e = d(rng);
      s.insert<float>(p.name, p.extents, v);
    }
  return s;
}

std::vector<std::optional<family>> uniform(const network& net, family f) {
  std::vector<std::optional<family>> a(net.size());
  for (const auto& n : net.nodes()) {
    if (!net.has_format(n.id)) continue;
    const auto* p = n.binding_pin();
    a[n.id] = p && p->mandatory ? p->format : f;
  }
  return a;
}

// The longest sum behind one output element of a layer: C/groups * kernel for convs, features for
// linears, the group's or channel's size for norms.
std::int64_t longest_reduction(const network& net) {
  std::int64_t r = 1;
  for (const auto& n : net.nodes())
    for (const auto& p : net.parameters(n.id))
      if (p.extents.size() >= 2) r = std::max(r, memfmt::detail::checked_numel(p.extents, "test") / p.extents[0]);
  return r;
}

struct run_result {
  std::vector<float> output;
  memfmt::runtime::executor_report report;
};

run_result run(const network& net, const memfmt::graph::plan& plan, const parameter_store& params,
               const std::vector<float>& input, bool fuse) {
  const memfmt::reference::backend b;
  memfmt::runtime::executor<memfmt::reference::backend> ex(net, plan, b, params, {true, fuse});
  const auto& in = net.at(*net.find("input"));
  const auto& out = net.at(*net.find("output"));
  run_result r;
  r.output.assign(static_cast<std::size_t>(out.numel()), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> x = input;
  ex.forward({{"input", tensor_ref{memfmt::dtype::float32, in.extents, family::channels_first, x.data()}}},
             {{"output", tensor_ref{memfmt::dtype::float32, out.extents, family::channels_first, r.output.data()}}});
  r.report = ex.report();
  return r;
}

void check_model(const std::string& name, const network& net, std::size_t expected_fusions_at_least) {
  SCOPED_TRACE(name);
  const parameter_store params = make_params(net, 11);
  const auto& in = net.at(*net.find("input"));
  std::vector<float> x(static_cast<std::size_t>(in.numel()));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (auto& e : x) e = d(rng);
  const memfmt::graph::cost_model model{};
  const auto truth = run(net, memfmt::graph::make_plan(net, model, uniform(net, family::channels_first)), params, x, false);
  EXPECT_TRUE(truth.report.fusions.empty());
  double scale = 0;
  for (float v : truth.output) {
    ASSERT_TRUE(std::isfinite(v)) << "the channels_first run gave a non-finite output";
    scale = std::max(scale, static_cast<double>(std::fabs(v)));
  }
  // Plans differ in the rounding of folded weights only (the reference sums in double and rounds
  // each output once): a few float32 ulps per weight, through every layer's longest sum.
  const double tol = 16.0 * std::numeric_limits<float>::epsilon() * std::sqrt(static_cast<double>(longest_reduction(net))) *
                     std::max(1.0, scale);
  const std::pair<const char*, memfmt::graph::plan> plans[] = {
      {"channels_first fused", memfmt::graph::make_plan(net, model, uniform(net, family::channels_first))},
      {"channels_last", memfmt::graph::make_plan(net, model, uniform(net, family::channels_last))},
      {"solved", memfmt::graph::solve(net, model)}};
  for (const auto& [plan_name, plan] : plans) {
    const auto got = run(net, plan, params, x, true);
    // A solved plan may convert between a conv and its batch norm, which then stay apart.
    if (std::string(plan_name) != "solved") EXPECT_GE(got.report.fusions.size(), expected_fusions_at_least) << plan_name;
    else EXPECT_FALSE(got.report.fusions.empty());
    EXPECT_LE(got.report.arena_bytes, got.report.allocate_all_bytes) << plan_name;
    int bad = 0;
    for (std::size_t i = 0; i < got.output.size(); ++i)
      if (!(std::fabs(got.output[i] - truth.output[i]) <= tol) && bad++ < 5)
        ADD_FAILURE() << plan_name << ": output element " << i << " is " << got.output[i] << ", expected "
                      << truth.output[i] << " (tolerance " << tol << ")";
  }
}

models::options small(double width, std::int64_t resolution) {
  models::options o;
  o.batch = 2;
  o.resolution = resolution;
  o.width = width;
  o.classes = 10;
  o.frames = 4;
  return o;
}

TEST(ExecutorModels, ResNet18) { check_model("resnet18", models::resnet18(small(0.125, 32)), 17); }
TEST(ExecutorModels, ResNet50) { check_model("resnet50", models::resnet50(small(0.0625, 32)), 49); }
// ResNeXt needs width 1/4: 32 groups of planes / 16 channels.
TEST(ExecutorModels, ResNeXt50) { check_model("resnext50_32x4d", models::resnext50_32x4d(small(0.25, 32)), 49); }
TEST(ExecutorModels, MobileNetV2) { check_model("mobilenet_v2", models::mobilenet_v2(small(0.125, 32)), 35); }
TEST(ExecutorModels, Vgg16Bn) { check_model("vgg16_bn", models::vgg16_bn(small(0.0625, 32)), 13); }
TEST(ExecutorModels, UNet) { check_model("unet", models::unet(small(0.0625, 16)), 18); }
TEST(ExecutorModels, R3d18) { check_model("r3d_18", models::r3d_18(small(0.0625, 16)), 17); }

}  // namespace
