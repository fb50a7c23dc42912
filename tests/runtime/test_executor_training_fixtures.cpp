// The trainer against PyTorch: one training step of a small ResNet-18 and a small UNet recorded in
// float64 by fixtures/record_training.py (PyTorch 1.13): the training-mode output, every parameter
// gradient and the batch norm buffers after the step, on every plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "memfmt/graph/models.hpp"
#include "memfmt/io/safetensors.hpp"
#include "training_util.hpp"

namespace {

using namespace memfmt::training_test;
namespace models = memfmt::graph::models;

// Elements within tol of the expected ones, relative to the largest expected magnitude (at least 1).
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * scale) && bad++ < 3)
      ADD_FAILURE() << what << "[" << i << "] is " << got[i] << ", PyTorch gives " << want[i];
}

void check_fixture(const std::string& file, const network& net) {
  SCOPED_TRACE(file);
  const parameter_store all = memfmt::io::load_safetensors(std::string(MEMFMT_RUNTIME_FIXTURES) + "/" + file);
  parameter_store params;
  for (const auto& [name, p] : all)
    if (name != "input" && name != "output" && name != "output_grad" && !starts_with(name, "grad:") &&
        !starts_with(name, "after:"))
      params.insert(name, p);
  const auto x = values(all.at("input")), r = values(all.at("output_grad"));
  const double tol = 1e-9;
  for (const auto& [plan_name, plan] : plans_of(net)) {
    SCOPED_TRACE(plan_name);
    const step_result got = train<double>(net, plan, params, x, r);
    expect_close(got.output, values(all.at("output")), tol, "output");
    EXPECT_LT(got.arena, got.all) << "forward values, gradients and scratch share no bytes";
    std::size_t grads = 0, buffers = 0;
    for (const auto& [name, p] : all) {
      if (starts_with(name, "grad:")) {
        ++grads;
        const std::string n = name.substr(5);
        ASSERT_TRUE(got.grads.contains(n)) << n;
        EXPECT_EQ(got.grads.at(n).shape, p.shape) << n;
        expect_close(values(got.grads.at(n)), values(p), tol, "gradient of " + n);
      } else if (starts_with(name, "after:")) {
        ++buffers;
        const std::string n = name.substr(6);
        ASSERT_TRUE(got.stats.contains(n)) << n;
        if (p.type == memfmt::dtype::int64)
          EXPECT_EQ(got.stats.at(n).values<std::int64_t>(), p.values<std::int64_t>()) << n;
        else expect_close(values(got.stats.at(n)), values(p), tol, n + " after the step");
      }
    }
    EXPECT_EQ(grads, got.grads.size());
    EXPECT_EQ(buffers, got.stats.size());
    EXPECT_GT(grads, 20u);
  }
}

models::options small(std::int64_t resolution) {
  models::options o;
  o.batch = 2;
  o.resolution = resolution;
  o.width = 1.0 / 32;
  o.type = memfmt::dtype::float64;
  return o;
}

TEST(TrainingFixtures, ResNet18) {
  auto o = small(32);
  o.classes = 3;
  check_fixture("resnet18.safetensors", models::resnet18(o));
}

TEST(TrainingFixtures, UNet) { check_fixture("unet.safetensors", models::unet(small(16))); }

}  // namespace
