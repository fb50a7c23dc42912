// Helpers of the cuDNN GPU tests: a network run through executor<Backend> on host input and output
// tensors, and a plan's outputs on cuDNN checked against the reference backend's. Needs a GPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <memfmt/backends/cudnn/backend.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/graph/network.hpp>
#include <memfmt/runtime/executor.hpp>
#include <memfmt/runtime/random_parameters.hpp>

namespace memfmt_test {

// The network's "output" for the host tensor x at its "input", each in the format the network pins
// it to (channels-first where it pins none).
template <class Backend>
std::vector<float> run_executor(Backend& b, const memfmt::graph::network& net, const memfmt::graph::plan& plan,
                                const memfmt::graph::parameter_store& params, std::vector<float> x) {
  using memfmt::format_family;
  memfmt::runtime::executor<Backend> ex(net, plan, b, params);
  const auto& in = net.at(*net.find("input"));
  const auto& out = net.at(*net.find("output"));
  const auto pinned = [](const memfmt::graph::node& n) {
    const memfmt::graph::pin* p = n.binding_pin();
    return p ? p->format : format_family::channels_first;
  };
  std::vector<float> y(static_cast<std::size_t>(out.numel()), std::nanf(""));
  ex.forward({{"input", memfmt::runtime::tensor_ref{memfmt::dtype::float32, in.extents, pinned(in), x.data()}}},
             {{"output", memfmt::runtime::tensor_ref{memfmt::dtype::float32, out.extents, pinned(out), y.data()}}});
  return y;
}

// Runs `plan` on `gpu` and on the reference backend, same random parameters and input; the outputs
// must agree within cuDNN's TF32 tolerance.
inline void expect_plan_matches_reference(memfmt::cudnn::backend& gpu, const memfmt::graph::network& net,
                                          const memfmt::graph::plan& plan) {
  const auto params = memfmt::runtime::random_parameters(net, 7);
  const auto& in = net.at(*net.find("input"));
  std::vector<float> x(static_cast<std::size_t>(in.numel()));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (float& v : x) v = d(rng);
  memfmt::reference::backend host;
  const auto want = run_executor(host, net, plan, params, x);
  const auto got = run_executor(gpu, net, plan, params, x);
  double scale = 0;
  for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  // cuDNN may convolve and multiply in TF32 (10-bit mantissa) on Ampere and newer.
  const double tol = 2e-2 * std::max(1.0, scale);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "output element " << i;
}

}  // namespace memfmt_test
