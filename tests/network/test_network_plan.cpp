// The library executor on the oneDNN backend with bench_network's network, a small ResNet-50 of
// the models header (width 1/8, 64x64): every plan (all channels_first, all channels_last, the
// planner's, a deliberately mixed assignment that splits the fusions and converts often) gives the
// output of the reference backend's all-channels-first run without fusions; each plan's
// conversions, and only those, are made; a second pass gives the same result; a plan of another
// network is refused with both sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <memfmt/backends/onednn/backend.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/graph/cost_model.hpp>
#include <memfmt/graph/models.hpp>
#include <memfmt/graph/plan.hpp>
#include <memfmt/graph/solve.hpp>
#include <memfmt/runtime/executor.hpp>
#include <memfmt/runtime/random_parameters.hpp>

#include "../runtime/model_test_util.hpp"

namespace {

using namespace memfmt;
using memfmt_test::uniform;

graph::network tiny(dtype t) {
  graph::models::options o;
  o.batch = 1;
  o.resolution = 64;  // stem 32x32, max pool 16x16; stages at 16, 8, 4, 2
  o.width = 0.125;    // stem 8 channels, bottleneck widths 8, 16, 32, 64
  o.classes = 10;
  o.type = t;
  return graph::models::resnet50(o);
}

// Formats that keep switching: many conversions, split fusion groups.
std::vector<std::optional<format_family>> mixed_assignment(const graph::network& net) {
  std::vector<std::optional<format_family>> a = uniform(net, format_family::channels_first);
  for (const auto& n : net.nodes())
    if (n.kind != layer_kind::input && a[n.id])
      a[n.id] = (n.id * 7) % 3 == 0 ? format_family::channels_last : format_family::channels_first;
  return a;
}

// The network's output (float) for an input of 0.5 * sin(i).
template <class T, class Backend>
std::vector<float> run(runtime::executor<Backend>& ex, const graph::network& net) {
  const auto& in = net.at(*net.find("input"));
  const auto& out = net.at(*net.find("output"));
  std::vector<T> x(static_cast<std::size_t>(in.numel())), y(static_cast<std::size_t>(out.numel()));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(0.5f * std::sin(static_cast<float>(i)));
  ex.forward({{"input", runtime::tensor_ref{in.type, in.extents, format_family::channels_first, x.data()}}},
             {{"output", runtime::tensor_ref{out.type, out.extents, format_family::channels_first, y.data()}}});
  return std::vector<float>(y.begin(), y.end());
}

double normalized_max_error(const std::vector<float>& got, const std::vector<float>& truth) {
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(truth[i])));
    const double e = std::fabs(static_cast<double>(got[i]) - truth[i]);
    err = std::max(err, std::isnan(e) ? INFINITY : e);
  }
  return err / std::max(scale, 1e-30);
}

template <class T>
class network_plan : public ::testing::Test {};
using element_types = ::testing::Types<float, bfloat16>;
TYPED_TEST_SUITE(network_plan, element_types);

TYPED_TEST(network_plan, every_plan_matches_the_reference_forward) {
  using T = TypeParam;
  const dtype t = std::is_same_v<T, float> ? dtype::float32 : dtype::bfloat16;
  if (!onednn::supports(t)) GTEST_SKIP() << onednn::support_for(t).reason;
  const graph::network ref_net = tiny(dtype::float32), net = tiny(t);
  const graph::cost_model priors;
  reference::backend ref;
  runtime::executor<reference::backend> truth_ex(
      ref_net, graph::make_plan(ref_net, priors, uniform(ref_net, format_family::channels_first)), ref,
      runtime::random_parameters(ref_net, 3), {false, false});
  const std::vector<float> truth = run<float>(truth_ex, ref_net);
  const double tolerance = t == dtype::float32 ? 1e-4 : 3e-2;

  struct variant {
    const char* name;
    graph::plan plan;
  };
  const std::vector<variant> variants{
      {"channels_first", graph::make_plan(net, priors, uniform(net, format_family::channels_first))},
      {"channels_last", graph::make_plan(net, priors, uniform(net, format_family::channels_last))},
      {"planned", graph::solve(net, priors)},
      {"mixed", graph::make_plan(net, priors, mixed_assignment(net))},
  };
  const graph::parameter_store params = runtime::random_parameters(net, 3);
  onednn::backend onednn_backend;
  std::size_t full_fusion = 0;
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name);
    runtime::executor<onednn::backend> ex(net, v.plan, onednn_backend, params);
    std::int64_t copies = 0;
    for (const auto& c : v.plan.conversions) copies += !c.relabel;
    EXPECT_EQ(ex.report().conversions, copies);
    EXPECT_LE(normalized_max_error(run<T>(ex, net), truth), tolerance);
    EXPECT_LE(normalized_max_error(run<T>(ex, net), truth), tolerance);  // buffers reused
    const std::string name = v.name;
    if (name == "channels_first") full_fusion = ex.report().fusions.size();
    if (name == "channels_last") {
      EXPECT_EQ(ex.report().conversions, 1);  // the channels_first image, once
      EXPECT_EQ(ex.report().fusions.size(), full_fusion);
    }
    if (name == "mixed") {
      EXPECT_GT(ex.report().conversions, 10);
      EXPECT_LT(ex.report().fusions.size(), full_fusion);
    }
  }
  EXPECT_EQ(full_fusion, 1u + 3u * 16u + 4u);  // every conv with its batch norm: stem, 3 per block, 4 downsamples
}

TEST(network_plan_errors, a_plan_of_another_network_is_rejected_with_both_sizes) {
  const graph::network net = tiny(dtype::float32);
  graph::models::options o;
  o.batch = 1;
  o.resolution = 64;
  o.width = 0.125;
  const graph::network other = graph::models::resnet18(o);
  const graph::plan p = graph::solve(other, graph::cost_model{});
  onednn::backend onednn_backend;
  try {
    runtime::executor<onednn::backend> ex(net, p, onednn_backend, runtime::random_parameters(net, 1));
    FAIL() << "expected memfmt::error";
  } catch (const memfmt::error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(other.size()) + " nodes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(net.size())), std::string::npos) << e.what();
  }
}

}  // namespace
