// runtime::calibrate on cuDNN: a small network (conv, batch norm, relu, residual add, pooling) timed
// on the GPU, every layer signature measured in both formats or recorded as refused in one, every
// conversion timed both ways; solve() with the result gives a plan that executor<cudnn::backend>
// runs to the reference backend's outputs. Skips without a GPU.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <memfmt/runtime/cudnn/calibrate.hpp>
#include <memfmt/graph/cost_model.hpp>
#include <memfmt/graph/solve.hpp>
#include <memfmt/runtime/backend_support.hpp>

#include "executor_util.hpp"

namespace {

using namespace memfmt;

graph::network residual_block() {
  graph::network net;
  const auto x = net.input("input", {2, 8, 8, 8}, dtype::float32, format_family::channels_first);
  const auto r = net.relu("r", net.batch_norm("bn", net.conv("c1", x, graph::conv_spec(8, 3, 1, 1, 1, true))));
  const auto a = net.add("res", net.conv("c2", r, graph::conv_spec(8, 3, 1, 1)), x);
  net.output("output", net.max_pool("pool", net.relu("r2", a), 2, 2), format_family::channels_first);
  return net;
}

TEST(CudnnCalibrateGpu, MeasuresEverySignatureAndItsPlanRunsLikeTheReference) {
  if (cudnn::device_count() == 0)
    GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports none or fails): cuDNN calibration not run";
  const graph::network net = residual_block();
  cudnn::backend gpu;
  runtime::calibrate_options o;
  o.warmup = 1;
  o.repetitions = 3;
  std::vector<std::string> skipped;
  o.skipped = &skipped;
  const graph::timing_cache cache = runtime::calibrate(net, gpu, o);

  EXPECT_EQ(cache.key(), calibration_key(gpu));
  EXPECT_TRUE(skipped.empty()) << skipped.front();
  std::set<std::string> signatures;
  for (const graph::node& n : net.nodes())
    if (const auto sig = graph::layer_signature(net, n.id)) signatures.insert(*sig);
  EXPECT_EQ(cache.layers().size(), signatures.size());
  for (const std::string& sig : signatures) {
    const graph::family_timings* t = cache.find_layer(sig);
    ASSERT_NE(t, nullptr) << sig << " not measured";
    // A format cuDNN refuses is recorded as unsupported; the other must have been timed.
    EXPECT_TRUE((*t)[0] || (*t)[1]) << sig;
    for (const auto& v : *t) {
      if (v) {
        EXPECT_GT(*v, 0) << sig;
      }
    }
  }
  ASSERT_FALSE(cache.conversions().empty());
  for (const auto& [sig, t] : cache.conversions()) EXPECT_TRUE(t[0] && t[1]) << sig;

  graph::cost_model costs;
  costs.set_support_query(runtime::support_query_for(gpu));
  costs.set_timing_cache(cache);
  memfmt_test::expect_plan_matches_reference(gpu, net, graph::solve(net, costs));
}

}  // namespace
