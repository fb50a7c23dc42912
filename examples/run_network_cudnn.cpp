// Runs a planned network on the GPU: ResNet-18 of the models header (small), its formats planned
// by graph::solve with the cuDNN backend's capability query (so pointwise layers stay
// channels-last), random parameters, one forward pass with executor<cudnn::backend> (activations
// and parameters in device memory), checked against the reference backend on the CPU. Without a
// CUDA device it says so and exits 0.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
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

// memfmt's kernels for what cuDNN has no engine for (run_network_cudnn_kernels.cu).
memfmt::cudnn::backend_options gpu_options();

int main() {
  using namespace memfmt;
  if (cudnn::device_count() == 0) {
    std::printf("run_network_cudnn: skipped, no CUDA device (cudaGetDeviceCount reports none)\n");
    return 0;
  }
  graph::models::options o;
  o.batch = 2;
  o.resolution = 64;
  o.width = 0.25;
  o.classes = 10;
  const graph::network net = graph::models::resnet18(o);

  cudnn::backend gpu(gpu_options());  // must outlive the executor
  graph::cost_model costs;
  costs.set_support_query(runtime::support_query_for(gpu));
  const graph::plan plan = graph::solve(net, costs);
  const graph::parameter_store params = runtime::random_parameters(net, 1);

  std::vector<float> x(static_cast<std::size_t>(2 * 3 * 64 * 64)), y(2 * 10), want(2 * 10);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (float& v : x) v = d(rng);
  const auto in = [&] {
    return std::map<std::string, runtime::tensor_ref>{
        {"input", runtime::tensor_ref{dtype::float32, {2, 3, 64, 64}, format_family::channels_first, x.data()}}};
  };
  const auto out = [](std::vector<float>& v) {
    return std::map<std::string, runtime::tensor_ref>{
        {"output", runtime::tensor_ref{dtype::float32, {2, 10}, format_family::channels_first, v.data()}}};
  };
  runtime::executor<cudnn::backend> run(net, plan, gpu, params);
  run.forward(in(), out(y));
  reference::backend cpu;
  runtime::executor<reference::backend>(net, plan, cpu, params).forward(in(), out(want));

  const runtime::executor_report& r = run.report();
  std::printf("resnet18 on cuDNN %s, device arena %lld bytes, %lld conversions, %zu fused groups\n",
              gpu.versions().loaded.to_string().c_str(), static_cast<long long>(r.arena_bytes),
              static_cast<long long>(r.conversions), r.fusions.size());
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(y[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  }
  std::printf("logits of image 0:");
  for (int k = 0; k < 10; ++k) std::printf(" %.4f", y[static_cast<std::size_t>(k)]);
  std::printf("\nlargest difference from the reference backend: %.3g (largest logit %.3g)\n", worst, scale);
  return worst <= 2e-2 * std::max(1.0, scale) ? 0 : 1;  // TF32 convolutions on Ampere and newer
}
