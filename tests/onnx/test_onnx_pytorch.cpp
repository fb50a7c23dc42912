// Outside truth at the network level: PyTorch's own outputs for models it exported to ONNX, through
// import and runtime::executor on the reference backend in every plan.
//  - The committed small ResNet-18 (BN folded by the exporter), MobileNetV2 (BN kept) and a net of
//    constants (normalisation buffers, PReLU per channel and shared, a scaled residual, a
//    temperature), whose .safetensors hold the input and PyTorch's output recorded by
//    tools/export_onnx.py: no torch needed.
//  - torchvision's ResNet-50, MobileNetV2, ShuffleNetV2, ConvNeXt-T, DenseNet-121 (concats),
//    EfficientNet-B0 and RegNetY-400MF (squeeze-and-excitation), GoogLeNet (inception blocks,
//    ceil-mode pooling), MobileNetV3-Large (hardswish, hardsigmoid gates), SqueezeNet 1.1 and two
//    segmentation models (DeepLabV3 and LR-ASPP on MobileNetV3) themselves (random weights, fixed
//    seed, 64x64 input),
//    exported and recorded at test time where /usr/bin/python3 has torch and torchvision; skipped
//    with the reason otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/io/safetensors.hpp"
#include "memfmt/onnx/backend_test.hpp"
#include "plans.hpp"

namespace {

using memfmt::onnx::parameter;

// The recording's output against every plan's, within `rel` of the output's largest magnitude:
// float32 sums in another order than PyTorch's differ by rounding that grows with depth.
void expect_pytorchs_output_in_every_plan(const std::string& model, const std::string& recording, double rel) {
  const memfmt::graph::parameter_store rec = memfmt::io::load_safetensors(recording);
  ASSERT_TRUE(rec.contains("input") && rec.contains("output")) << recording;
  const parameter& expected = rec.at("output");
  double scale = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(expected.numel()); ++i)
    scale = std::max(scale, std::fabs(memfmt::onnx::element_as_double(expected, i)));
  ASSERT_GT(scale, 0.0) << recording << ": an all-zero output would check nothing";
  memfmt::reference::backend backend;
  for (const auto& p : memfmt_test::plans) {
    const auto out = memfmt_test::run_file(model, p, backend, {{"input", rec.at("input")}});
    ASSERT_EQ(out.count("output"), 1u);
    EXPECT_EQ(memfmt::onnx::compare_outputs(expected, out.at("output"), {0.0, rel * scale}), "")
        << model << " in plan " << p.name;
    // The tolerance is tight enough to see a real error: one logit off by 1 % of the scale fails.
    parameter off = out.at("output");
    memfmt::onnx::store_element(off, 0, memfmt::onnx::element_as_double(off, 0) + 0.01 * scale, 0);
    EXPECT_NE(memfmt::onnx::compare_outputs(expected, off, {0.0, rel * scale}), "");
  }
}

TEST(OnnxPyTorch, CommittedModelsGivePyTorchsRecordedOutputsInEveryPlan) {
  for (const char* name : {"small_resnet18", "small_mobilenet_v2", "small_normalized_prelu_net", "small_shufflenet_v2",
                           "small_super_resolution", "small_convnext", "small_convnext_opset13",
                           "small_layernorm2d_net", "small_groupnorm_net", "small_cbam_net", "small_focus_crop_net",
                           "small_simam_net", "small_coord_att_net", "small_same_pad_net"}) {
    const std::string base = std::string(MEMFMT_ONNX_TEST_DATA) + "/" + name;
    expect_pytorchs_output_in_every_plan(base + ".onnx", base + ".safetensors", 1e-5);
  }
}

// TensorFlow's "same" padding computed at run time (Shape, Gather, arithmetic, Concat: PyTorch 2's
// TorchScript exporter at opset 17) folds to constant pads: each Pad is a network pad layer, and
// nothing is left to libonnx's shape inference.
TEST(OnnxPyTorch, RunTimeSamePaddingImportsAsPadLayers) {
  const memfmt::onnx::imported_model m =
      memfmt::onnx::import_file(std::string(MEMFMT_ONNX_TEST_DATA) + "/small_same_pad_net.onnx");
  EXPECT_TRUE(m.runnable()) << (m.unsupported.empty() ? "" : m.unsupported[0].reason);
  int pads = 0;
  for (std::size_t i = 0; i < m.network.size(); ++i)
    pads += m.network.at(static_cast<memfmt::graph::node_id>(i)).kind == memfmt::layer_kind::pad;
  EXPECT_EQ(pads, 4);
}

// /usr/bin/python3 with torch and torchvision, or why not.
std::string torchvision_missing() {
  if (!std::filesystem::exists("/usr/bin/python3")) return "/usr/bin/python3 not found";
  if (std::system("/usr/bin/python3 -c 'import torch, torchvision' >/dev/null 2>&1") != 0)
    return "/usr/bin/python3 lacks torch or torchvision (Debian python3-torch, python3-torchvision)";
  return "";
}

struct torchvision_case {
  const char* model;
  const char* flags;  // ResNet-50 and ShuffleNetV2 with BN folded into the convs (the exporter's default),
                      // MobileNetV2 with BN kept; ConvNeXt at opset 17 (one LayerNormalization per
                      // LayerNorm) with layer scale 0.5, so each block's branch shows in the output
};

// torchvision's segmentation models (dilated backbones, ASPP's pooled branch up-sampled from 1x1,
// LR-ASPP's sigmoid gate and bilinear Resize), with 5 classes and random backbone weights.
constexpr const char* segmentation = "--kwargs '{\"weights_backbone\": null, \"num_classes\": 5}'";

// gtest and CTest name the case by its model.
void PrintTo(const torchvision_case& c, std::ostream* os) { *os << c.model; }

class OnnxTorchvision : public ::testing::TestWithParam<torchvision_case> {};

TEST_P(OnnxTorchvision, ExportedModelGivesPyTorchsOutputsInEveryPlan) {
  if (const std::string why = torchvision_missing(); !why.empty()) GTEST_SKIP() << why;
  const torchvision_case c = GetParam();
  const std::string dir = ::testing::TempDir() + "memfmt_torchvision_" + c.model;
  std::filesystem::create_directories(dir);
  const std::string model = dir + "/model.onnx", recording = dir + "/recorded.safetensors";
  const std::string cmd = std::string("/usr/bin/python3 ") + MEMFMT_EXPORT_ONNX + " " + c.model + " " + model +
                          " --input-shape 1,3,64,64 --seed 0 " + c.flags + " --output-fixture " + recording + " >" +
                          dir + "/export.log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << " (see " << dir << "/export.log)";
  expect_pytorchs_output_in_every_plan(model, recording, 1e-4);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Models, OnnxTorchvision,
    ::testing::Values(torchvision_case{"resnet50", ""}, torchvision_case{"mobilenet_v2", "--keep-batchnorm"},
                      torchvision_case{"shufflenet_v2_x0_5", ""},
                      torchvision_case{"convnext_tiny", "--opset 17 --kwargs '{\"layer_scale\": 0.5}'"},
                      torchvision_case{"densenet121", ""}, torchvision_case{"efficientnet_b0", ""},
                      torchvision_case{"regnet_y_400mf", ""}, torchvision_case{"googlenet", ""},
                      torchvision_case{"mobilenet_v3_large", ""}, torchvision_case{"squeezenet1_1", ""},
                      torchvision_case{"segmentation.lraspp_mobilenet_v3_large", segmentation},
                      torchvision_case{"segmentation.deeplabv3_mobilenet_v3_large", segmentation}),
    [](const auto& info) {
      std::string name = info.param.model;
      std::replace(name.begin(), name.end(), '.', '_');
      return name;
    });

}  // namespace
