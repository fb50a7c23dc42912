// Training imported models against PyTorch: one runtime::trainer step of ONNX files PyTorch exported
// (MobileNetV2 with its batch norms kept, a diffusion UNet's GroupNorm block, the LayerNorm2d of
// ConvNeXt and SAM: layers whose import folds several ONNX nodes into one), in every plan, on the
// reference backend and on oneDNN where it is built, against PyTorch's own step of the same module
// recorded in float64 by record_training.py: the training-mode output, the gradient of every
// trainable parameter (found through imported_model::source, the ONNX initializer each parameter
// came from) and the batch norm running statistics after the step.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "../runtime/training_util.hpp"
#include "memfmt/io/safetensors.hpp"
#include "plans.hpp"
#ifdef MEMFMT_TEST_ONEDNN
#include "memfmt/backends/onednn/backend.hpp"
#endif

namespace {

using memfmt::graph::parameter_store;
using memfmt::training_test::expect_close_in_norm;
using memfmt::training_test::starts_with;
using memfmt::training_test::values;

// The recording's entries under `prefix` ("grad:", "after:") against the trainer's store `got`,
// whose names map to ONNX initializers through `source`. Every recorded entry must be matched by
// exactly one of the trainer's (a parameter the importer made without an initializer, such as the
// unit weights of a GroupNorm without affine ones, has nothing to match).
void expect_recorded(const parameter_store& rec, const std::string& prefix, const parameter_store& got,
                     const std::map<std::string, std::string>& source, double tol, double floor_rms) {
  std::set<std::string> matched;
  for (const auto& [name, p] : got) {
    const auto s = source.find(name);
    if (s == source.end() || !rec.contains(prefix + s->second)) continue;
    EXPECT_TRUE(matched.insert(s->second).second) << "two parameters come from initializer " << s->second;
    const memfmt::graph::parameter& want = rec.at(prefix + s->second);
    ASSERT_EQ(p.numel(), want.numel()) << name << " from " << s->second;
    expect_close_in_norm(values(p), values(want), tol, prefix + name, floor_rms);
  }
  for (const auto& [name, p] : rec) {
    if (!starts_with(name, prefix)) continue;
    EXPECT_TRUE(matched.count(name.substr(prefix.size()))) << name << " was not computed";
  }
}

template <class Backend>
void expect_pytorchs_training_step(Backend& backend, const std::string& model) {
  SCOPED_TRACE(model);
  const std::string base = std::string(MEMFMT_ONNX_TEST_DATA) + "/" + model;
  const parameter_store rec = memfmt::io::load_safetensors(base + ".training.safetensors");
  const std::vector<double> x = values(rec.at("input")), r = values(rec.at("output_grad"));
  const std::vector<double> y = values(rec.at("output"));
  double mean_square = 0;  // of every recorded gradient: the floor of expect_close_in_norm
  std::size_t count = 0;
  for (const auto& [name, p] : rec)
    if (starts_with(name, "grad:"))
      for (double v : values(p)) mean_square += v * v, ++count;
  const double floor_rms = std::sqrt(mean_square / static_cast<double>(count));
  for (const auto& p : memfmt_test::plans) {
    SCOPED_TRACE(p.name);
    memfmt::onnx::import_options o = memfmt_test::options_for(p);
    o.batch = rec.at("input").shape.at(0);
    const memfmt::onnx::imported_model m = memfmt::onnx::import_file(base + ".onnx", o);
    ASSERT_TRUE(m.runnable()) << m.unsupported.front().reason;
    // float32 against PyTorch's float64 step: the rounding of float32 sums over a few thousand terms.
    const double tol = 1e-4;
    const auto got =
        memfmt::training_test::train_on<float>(backend, m.network, memfmt_test::plan_of(m, p), m.parameters, x, r);
    expect_close_in_norm(got.output, y, tol, "output");
    expect_recorded(rec, "grad:", got.grads, m.source, tol, floor_rms);
    expect_recorded(rec, "after:", got.stats, m.source, tol, 0.0);
  }
}

const char* const models[] = {"small_mobilenet_v2", "small_groupnorm_net", "small_layernorm2d_net"};

TEST(OnnxTraining, ImportedModelsTrainAsPyTorchOnTheReferenceBackend) {
  memfmt::reference::backend backend;
  for (const char* m : models) expect_pytorchs_training_step(backend, m);
}

#ifdef MEMFMT_TEST_ONEDNN
TEST(OnnxTraining, ImportedModelsTrainAsPyTorchOnOneDnn) {
  memfmt::onednn::backend backend;
  for (const char* m : models) expect_pytorchs_training_step(backend, m);
}
#endif

}  // namespace
