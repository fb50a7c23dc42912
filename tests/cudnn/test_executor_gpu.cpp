// executor<cudnn::backend> against executor<reference::backend> on a GPU: one network with every
// layer kind the cuDNN backend runs (conv + bias, batch norm, relu, hardswish, silu, sigmoid, a
// residual add, a broadcast multiply, max and average pooling, nearest and bilinear up-sampling,
// concat, a channel slice, global average pooling, flatten, linear), planned by graph::solve with
// the cuDNN backend's support query, and a ResNet-18 of the models header. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <memfmt/backends/cudnn/backend.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/graph/models.hpp>
#include <memfmt/graph/solve.hpp>
#include <memfmt/runtime/backend_support.hpp>
#include <memfmt/runtime/executor.hpp>
#include <memfmt/runtime/random_parameters.hpp>

#include "executor_util.hpp"

namespace {

using namespace memfmt;
using graph::family;

class CudnnExecutorGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cudnn::device_count() == 0)
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports none or fails): executor<cudnn::backend> not run";
  }
};

graph::network every_layer() {
  graph::network net;
  const auto x = net.input("input", {2, 8, 8, 8}, dtype::float32, family::channels_first);
  const auto r = net.relu("r", net.batch_norm("bn", net.conv("c1", x, graph::conv_spec(16, 3, 1, 1, 1, true))));
  const auto s = net.activation("silu", net.activation("hswish", r, activation::hardswish), activation::silu);
  const auto a = net.add("res", net.conv("c2", s, graph::conv_spec(16, 1)), r);
  const auto m = net.max_pool("max", a, 2, 2);
  const auto av = net.avg_pool("avg", m, 3, 1, 1, false, false);
  const auto u = net.upsample("up", av, 2, resample_mode::nearest);
  const auto ub = net.upsample("up_bilinear", net.avg_pool("avg2", u, 2, 2), 2, resample_mode::linear);
  const auto sl = net.slice("slice", net.concat("cat", {ub, r}), 8, 24);
  const auto gate = net.activation("gate", net.global_pool("squeeze", sl), activation::sigmoid);
  const auto e = net.mul("excite", sl, gate);
  net.output("output", net.linear("fc", net.flatten("flat", net.global_pool("gap", e)), 5), family::channels_first);
  return net;
}

void check_network(const graph::network& net) {
  cudnn::backend gpu;
  graph::cost_model costs;
  costs.set_support_query(runtime::support_query_for(gpu));
  memfmt_test::expect_plan_matches_reference(gpu, net, graph::solve(net, costs));
}

TEST_F(CudnnExecutorGpu, EveryLayerKindAgainstTheReference) { check_network(every_layer()); }

TEST_F(CudnnExecutorGpu, ResNet18AgainstTheReference) {
  graph::models::options o;
  o.batch = 2;
  o.resolution = 32;
  o.width = 0.125;
  o.classes = 10;
  check_network(graph::models::resnet18(o));
}

}  // namespace
