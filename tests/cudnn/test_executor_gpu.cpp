// executor<cudnn::backend> against executor<reference::backend> on a GPU: one network with every
// layer kind the cuDNN backend runs (conv + bias, batch norm, relu, hardswish, silu, sigmoid, a
// residual add, a broadcast multiply, max and average pooling, nearest and bilinear up-sampling,
// concat, a channel slice, global average pooling, flatten, linear), planned by graph::solve with
// the cuDNN backend's support query, and a ResNet-18 of the models header; and one training step
// of each (trainer<cudnn::backend> against trainer<reference::backend>: output, every parameter
// gradient, the running statistics), also of conv -> group norm -> relu through memfmt's group norm
// kernels. Skips without a GPU.
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

#include "../runtime/training_util.hpp"
#include "executor_util.hpp"
#include "kernel_converter.hpp"

namespace {

using namespace memfmt;

class CudnnExecutorGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cudnn::device_count() == 0)
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports none or fails): executor<cudnn::backend> not run";
  }
};

// Every layer kind the cuDNN backend runs (up-sampling has no cuDNN engine: a transposed conv
// restores the extents instead; UpsamplingIsRefusedBeforeAnyWork covers it).
graph::network every_layer(bool upsample = false) {
  graph::network net;
  const auto x = net.input("input", {2, 8, 8, 8}, dtype::float32, format_family::channels_first);
  const auto r = net.relu("r", net.batch_norm("bn", net.conv("c1", x, graph::conv_spec(16, 3, 1, 1, 1, true))));
  const auto s = net.activation("silu", net.activation("hswish", r, activation::hardswish), activation::silu);
  const auto a0 = net.add("res", net.conv("c2", s, graph::conv_spec(16, 1)), r);
  const auto a = net.binary("embed", net.constant("pos_embed", {1, 16, 8, 8}, dtype::float32), a0, binary_op::sub);
  const auto m = net.max_pool("max", a, 2, 2);
  const auto av = net.avg_pool("avg", m, 3, 1, 1, false, false);
  const auto u = upsample ? net.upsample("up", av, 2, resample_mode::nearest)
                          : net.conv_transpose("up", av, graph::conv_transpose_spec(16, 2, 2));
  const auto ub = upsample
                      ? net.upsample("up_bilinear", net.avg_pool("avg2", u, 2, 2), 2, resample_mode::linear)
                      : net.conv_transpose("up_2", net.avg_pool("avg2", u, 2, 2), graph::conv_transpose_spec(16, 2, 2));
  const auto sl = net.slice("slice", net.concat("cat", {ub, r}), 8, 24);
  const auto gate = net.activation("gate", net.global_pool("squeeze", sl), activation::sigmoid);
  const auto e = net.slice("stride", net.mul("excite", sl, gate), memfmt::slice_params{3, 1, 8, 2});
  net.output("output", net.linear("fc", net.flatten("flat", net.global_pool("gap", e)), 5),
             format_family::channels_first);
  return net;
}

void check_network(const graph::network& net) {
  cudnn::backend gpu(memfmt_test::with_layer_kernels());
  graph::cost_model costs;
  costs.set_support_query(runtime::support_query_for(gpu));
  memfmt_test::expect_plan_matches_reference(gpu, net, graph::solve(net, costs));
}

// One training step on cuDNN (with options `o`) and on the reference backend, same plan (solved
// with the cuDNN backend's answers for training), parameters, input and output gradient.
void check_training(const graph::network& net, const cudnn::backend_options& o = memfmt_test::with_layer_kernels()) {
  cudnn::backend gpu(o);
  graph::cost_model costs;
  costs.set_support_query(runtime::support_query_for(gpu, /*training=*/true));
  const graph::plan plan = graph::solve(net, costs);
  const auto params = runtime::random_parameters(net, 7);
  const auto& in = net.at(*net.find("input"));
  const auto& out = net.at(*net.find("output"));
  const auto x = training_test::random_values(static_cast<std::size_t>(in.numel()), 3);
  const auto r = training_test::random_values(static_cast<std::size_t>(out.numel()), 5);
  reference::backend host;
  const auto want = training_test::train_on<float>(host, net, plan, params, x, r);
  const auto got = training_test::train_on<float>(gpu, net, plan, params, x, r);
  // cuDNN may convolve and multiply in TF32 (10-bit mantissa) on Ampere and newer.
  const double tol = 5e-2;
  double out_scale = 0;
  for (double v : want.output) out_scale = std::max(out_scale, std::fabs(v));
  ASSERT_EQ(got.output.size(), want.output.size());
  for (std::size_t i = 0; i < got.output.size(); ++i)
    EXPECT_NEAR(got.output[i], want.output[i], 2e-2 * std::max(1.0, out_scale)) << "output element " << i;
  double sum_sq = 0;
  std::size_t count = 0;
  for (const std::string& name : want.grads.names())
    for (double v : training_test::values(want.grads.at(name))) sum_sq += v * v, ++count;
  const double rms = count ? std::sqrt(sum_sq / static_cast<double>(count)) : 0.0;
  EXPECT_EQ(got.grads.names(), want.grads.names());
  for (const std::string& name : want.grads.names()) {
    if (!got.grads.contains(name)) continue;
    training_test::expect_close_in_norm(training_test::values(got.grads.at(name)),
                                        training_test::values(want.grads.at(name)), tol, "gradient of " + name, rms);
  }
  for (const std::string& name : want.stats.names()) {
    ASSERT_TRUE(got.stats.contains(name)) << name;
    if (want.stats.at(name).type == dtype::int64) {  // num_batches_tracked
      EXPECT_EQ(got.stats.at(name).values<std::int64_t>(name), want.stats.at(name).values<std::int64_t>(name)) << name;
      continue;
    }
    training_test::expect_close_in_norm(training_test::values(got.stats.at(name)),
                                        training_test::values(want.stats.at(name)), 1e-2, "running statistic " + name);
  }
}

graph::network small_resnet18() {
  graph::models::options o;
  o.batch = 2;
  o.resolution = 32;
  o.width = 0.125;
  o.classes = 10;
  return graph::models::resnet18(o);
}

TEST_F(CudnnExecutorGpu, EveryLayerKindAgainstTheReference) { check_network(every_layer()); }

// The backend's capability query refuses up-sampling, so building the executor fails naming the
// layer, before any work.
TEST_F(CudnnExecutorGpu, UpsamplingIsRefusedBeforeAnyWork) {
  cudnn::backend gpu(memfmt_test::with_layer_kernels());
  const graph::network net = every_layer(true);
  graph::plan plan;
  try {
    graph::cost_model costs;
    costs.set_support_query(runtime::support_query_for(gpu));
    plan = graph::solve(net, costs);
  } catch (const memfmt::error& e) {  // the planner may already find no family for it
    EXPECT_NE(std::string(e.what()).find("up"), std::string::npos) << e.what();
    return;
  }
  try {
    runtime::executor<cudnn::backend> ex(net, plan, gpu, runtime::random_parameters(net, 7));
    ADD_FAILURE() << "the executor was built with an up-sampling layer on cuDNN";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), errc::unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("up-sampling"), std::string::npos) << e.what();
  }
}

TEST_F(CudnnExecutorGpu, ResNet18AgainstTheReference) { check_network(small_resnet18()); }

// A channels-last UNet block (conv, group norm, SiLU, conv, instance norm, residual) with
// memfmt's group norm kernels (backend_options::group_norm): the planner may keep it channels-last.
TEST_F(CudnnExecutorGpu, GroupNormThroughTheKernelsAgainstTheReference) {
  cudnn::backend_options o = memfmt_test::with_layer_kernels();
  o.converter = memfmt_test::kernel_converter();
  o.group_norm = memfmt_test::kernel_group_norm();
  cudnn::backend gpu(o);
  graph::network net;
  const auto x = net.input("input", {2, 16, 8, 8}, dtype::float32, format_family::channels_last);
  const auto h = net.activation("silu", net.group_norm("gn", net.conv("c1", x, graph::conv_spec(32, 3, 1, 1)), 8),
                                activation::silu);
  const auto i = net.instance_norm("in", net.conv("c2", h, graph::conv_spec(32, 3, 1, 1)), 1e-5, true);
  net.output("output", net.add("res", i, h), format_family::channels_last);
  graph::cost_model costs;
  costs.set_support_query(runtime::support_query_for(gpu));
  memfmt_test::expect_plan_matches_reference(gpu, net, graph::solve(net, costs));
}

// The plan's conversions through memfmt::cuda::convert's kernels (backend_options::converter)
// instead of the backend's 2-D copies: same outputs.
TEST_F(CudnnExecutorGpu, ConversionsThroughTheKernelConverterAgainstTheReference) {
  cudnn::backend_options o = memfmt_test::with_layer_kernels();
  o.converter = memfmt_test::kernel_converter();
  cudnn::backend gpu(o);
  const graph::network net = every_layer();
  graph::cost_model costs;
  costs.set_support_query(runtime::support_query_for(gpu));
  const graph::plan plan = graph::solve(net, costs);
  ASSERT_GT(plan.copies(), 0u) << "the plan converts nothing, so the converter would not run";
  memfmt_test::expect_plan_matches_reference(gpu, net, plan);
}

TEST_F(CudnnExecutorGpu, TrainingStepOfEveryLayerKindAgainstTheReference) { check_training(every_layer()); }

TEST_F(CudnnExecutorGpu, TrainingStepOfResNet18AgainstTheReference) { check_training(small_resnet18()); }

// conv -> group norm -> relu trained with memfmt's group norm kernels: the kernels' dx reaches the
// conv's gradients, their dgamma and dbeta the group norm's.
TEST_F(CudnnExecutorGpu, TrainingStepThroughTheGroupNormKernelsAgainstTheReference) {
  cudnn::backend_options o = memfmt_test::with_layer_kernels();
  o.group_norm = memfmt_test::kernel_group_norm();
  for (format_family f : {format_family::channels_first, format_family::channels_last}) {
    SCOPED_TRACE(to_string(f));
    graph::network net;
    const auto x = net.input("input", {2, 4, 6, 6}, dtype::float32, f);
    const auto h = net.group_norm("gn", net.conv("conv", x, graph::conv_spec(8, 3, 1, 1, 1, true)), 4);
    net.output("output", net.relu("relu", h), f);
    check_training(net, o);
  }
}

}  // namespace
