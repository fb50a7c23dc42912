// The ONNX forms of opsets 18 to 21 that PyTorch 2's exporters write, against the `onnx` package's
// reference evaluator: the committed data/opset fixtures (record_opset_fixtures.py: model, input
// and the evaluator's output) imported as network layers and run in every plan on the reference
// backend and on oneDNN where it is found. The forms memfmt does not run are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/expect_error.hpp"
#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/io/safetensors.hpp"
#include "memfmt/onnx/backend_test.hpp"
#include "memfmt/onnx/import.hpp"
#include "memfmt/session/onnx.hpp"
#ifdef MEMFMT_TEST_ONEDNN
#include "memfmt/backends/onednn/backend.hpp"
#endif
#include "onnx_builder.hpp"
#include "plans.hpp"

namespace {

using memfmt::layer_kind;
using memfmt::onnx::imported_model;
using memfmt::onnx::parameter;
using memfmt_test::onnx_builder;

std::string fixture(const std::string& name) { return std::string(MEMFMT_ONNX_TEST_DATA) + "/opset/" + name; }

// How many layers of `kind` (and, for activations, of function f) the imported network has.
int count(const imported_model& m, layer_kind kind, memfmt::activation f = memfmt::activation::identity) {
  int n = 0;
  for (std::size_t i = 0; i < m.network.size(); ++i) {
    const auto& v = m.network.at(static_cast<memfmt::graph::node_id>(i));
    if (v.kind == kind && (kind != layer_kind::activation || v.get<memfmt::activation_params>().kind == f)) ++n;
  }
  return n;
}

// The evaluator's output against every plan's on `backend`, within 1e-5 of its largest magnitude.
template <class Backend>
void expect_evaluators_output_in_every_plan(const std::string& name, Backend& backend, const char* backend_name) {
  const memfmt::graph::parameter_store rec = memfmt::io::load_safetensors(fixture(name + ".safetensors"));
  ASSERT_TRUE(rec.contains("input") && rec.contains("output")) << name;
  const parameter& expected = rec.at("output");
  double scale = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(expected.numel()); ++i)
    scale = std::max(scale, std::fabs(memfmt::onnx::element_as_double(expected, i)));
  ASSERT_GT(scale, 0.0) << name;
  for (const auto& p : memfmt_test::plans) {
    const auto out = memfmt_test::run_file(fixture(name + ".onnx"), p, backend, {{"input", rec.at("input")}});
    ASSERT_EQ(out.count("output"), 1u);
    EXPECT_EQ(memfmt::onnx::compare_outputs(expected, out.at("output"), {0.0, 1e-5 * scale}), "")
        << name << " in plan " << p.name << " on " << backend_name;
  }
}

const char* const fixtures[] = {"gelu_exact_opset20",
                                "gelu_tanh_opset20",
                                "group_norm_opset18",
                                "group_norm_opset21",
                                "layer_norm_channels_last_opset18",
                                "reduce_axes_input_opset18",
                                "reduce_max_min_opset20",
                                "pad_axes_input_opset18",
                                "split_num_outputs_opset18",
                                "resize_axes_opset18"};

TEST(OnnxOpsets, EveryFixtureImportsAsLayersOnly) {
  for (const char* name : fixtures) {
    const imported_model m = memfmt::onnx::import_file(fixture(std::string(name) + ".onnx"));
    EXPECT_TRUE(m.runnable()) << name << ": " << (m.unsupported.empty() ? "" : m.unsupported[0].reason);
    EXPECT_EQ(count(m, layer_kind::opaque), 0) << name;
  }
  // The ops themselves, not a decomposition that happens to run.
  const auto imported = [](const char* name) {
    return memfmt::onnx::import_file(fixture(std::string(name) + ".onnx"));
  };
  EXPECT_EQ(count(imported("gelu_exact_opset20"), layer_kind::activation, memfmt::activation::gelu), 1);
  EXPECT_EQ(count(imported("gelu_tanh_opset20"), layer_kind::activation, memfmt::activation::gelu_tanh), 1);
  EXPECT_EQ(count(imported("group_norm_opset18"), layer_kind::group_norm), 1);
  EXPECT_EQ(count(imported("group_norm_opset21"), layer_kind::group_norm), 1);
  EXPECT_EQ(count(imported("pad_axes_input_opset18"), layer_kind::pad), 2);
  EXPECT_EQ(count(imported("resize_axes_opset18"), layer_kind::upsample), 2);
}

TEST(OnnxOpsets, ReferenceEvaluatorsOutputsInEveryPlanOnTheReferenceBackend) {
  memfmt::reference::backend backend;
  for (const char* name : fixtures) expect_evaluators_output_in_every_plan(name, backend, "reference");
}

TEST(OnnxOpsets, ReferenceEvaluatorsOutputsInEveryPlanOnOnednn) {
#ifdef MEMFMT_TEST_ONEDNN
  memfmt::onednn::backend backend;
  for (const char* name : fixtures) expect_evaluators_output_in_every_plan(name, backend, "onednn");
#else
  GTEST_SKIP() << "built without oneDNN";
#endif
}

// The tolerance sees a real error: GroupNormalization-18's per-group scale read as per-channel (the
// first C / G values) would change the output by far more than 1e-5 of its scale.
TEST(OnnxOpsets, PerGroupScaleIsRepeatedOverTheGroupsChannels) {
  onnx_builder b(18);
  b.input("x", {1, 4, 2, 2}).output("y");
  b.float_vector("s", {2.f, 3.f}).float_vector("t", {0.5f, -1.f});
  b.node("GroupNormalization", {"x", "s", "t"}, {"y"}).attr("num_groups", std::int64_t{2});
  const imported_model m = memfmt::onnx::import_model(b.model());
  ASSERT_TRUE(m.runnable());
  const std::string layer = m.network.at(m.network.at(*m.network.find("y")).inputs.at(0)).name;
  const parameter& w = m.parameters.at(layer + ".weight");
  const parameter& bias = m.parameters.at(layer + ".bias");
  const std::vector<double> want_w{2, 2, 3, 3}, want_b{0.5, 0.5, -1, -1};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(memfmt::onnx::element_as_double(w, i), want_w[i]) << i;
    EXPECT_EQ(memfmt::onnx::element_as_double(bias, i), want_b[i]) << i;
  }
}

// What opsets 18 to 21 added that memfmt does not run: the node is refused with a reason that
// names it, never imported as something else.
TEST(OnnxOpsets, FormsMemfmtDoesNotRunAreRefusedByName) {
  onnx_builder b(19);
  b.input("x", {1, 2, 8, 8}).output("a").output("k").output("h").output("w");
  b.float_vector("half", {0.5f, 0.5f}).ints("size", {4, 6});
  b.node("Resize", {"x", "", "half"}, {"a"})
      .attr("mode", std::string("linear"))
      .attr("antialias", std::int64_t{1})
      .attr("axes", std::vector<std::int64_t>{2, 3});
  b.node("Resize", {"x", "", "", "size"}, {"k"})
      .attr("keep_aspect_ratio_policy", std::string("not_larger"))
      .attr("axes", std::vector<std::int64_t>{2, 3});
  b.float_vector("two", {1.f, 1.f, 2.f, 2.f});
  b.node("Resize", {"x", "", "two"}, {"h"})
      .attr("mode", std::string("linear"))
      .attr("coordinate_transformation_mode", std::string("half_pixel_symmetric"));
  b.ints("pads", {0, 0, 1, 1, 0, 0, 1, 1});
  b.node("Pad", {"x", "pads"}, {"w"}).attr("mode", std::string("wrap"));
  const imported_model m = memfmt::onnx::import_model(b.model());
  ASSERT_EQ(m.unsupported.size(), 4u);
  const char* reasons[] = {"antialiased downscaling", "keep_aspect_ratio_policy not_larger", "half_pixel_symmetric",
                           "wrap padding"};
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_NE(m.unsupported[i].reason.find(reasons[i]), std::string::npos) << m.unsupported[i].reason;

  // Antialiasing changes nothing when upscaling: that Resize imports.
  onnx_builder up(18);
  up.input("x", {1, 2, 4, 4}).output("y").float_vector("two", {2.f, 2.f});
  up.node("Resize", {"x", "", "two"}, {"y"})
      .attr("mode", std::string("linear"))
      .attr("antialias", std::int64_t{1})
      .attr("axes", std::vector<std::int64_t>{-2, -1});
  EXPECT_TRUE(memfmt::onnx::import_model(up.model()).runnable());
}

// PyTorch 2's dynamo exporter writes an as_strided view as Reshape to one dim and a Gather of the
// flat offsets: offsets in the order of permute(0, 2, 3, 1) are that transpose (a channels-last view,
// then a layer norm over C); offsets in no transpose's order stay a barrier.
TEST(OnnxOpsets, GatherOfFlatOffsetsInATransposesOrderIsThatTranspose) {
  const auto model_with = [](const std::vector<std::int64_t>& offsets) {
    onnx_builder b(18);
    b.input("x", {1, 3, 2, 2}).output("y");
    b.ints("flat", {12}).floats("w", {3}, 1.f, 0.5f).floats("bias", {3});
    ::onnx::TensorProto t;
    t.set_name("offsets");
    t.set_data_type(::onnx::TensorProto::INT64);
    for (std::int64_t d : {1, 2, 2, 3}) t.add_dims(d);
    for (std::int64_t v : offsets) t.add_int64_data(v);
    b.tensor(t, false);
    b.node("Reshape", {"x", "flat"}, {"f"});
    b.node("Gather", {"f", "offsets"}, {"g"}).attr("axis", std::int64_t{0});
    b.node("LayerNormalization", {"g", "w", "bias"}, {"n"}).attr("axis", std::int64_t{-1});
    b.node("Transpose", {"n"}, {"y"}).attr("perm", std::vector<std::int64_t>{0, 3, 1, 2});
    return memfmt::onnx::import_model(b.model());
  };
  // x[0, c, h, w] is at offset 4c + 2h + w; the transpose's element [0, h, w, c] reads it.
  std::vector<std::int64_t> offsets;
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t w = 0; w < 2; ++w)
      for (std::int64_t c = 0; c < 3; ++c) offsets.push_back(4 * c + 2 * h + w);
  const imported_model m = model_with(offsets);
  EXPECT_TRUE(m.runnable()) << (m.unsupported.empty() ? "" : m.unsupported[0].reason);
  EXPECT_EQ(count(m, layer_kind::layer_norm), 1);
  std::swap(offsets[0], offsets[1]);
  EXPECT_FALSE(model_with(offsets).runnable());
}

// The C++ user's path: one session from the file to the outputs, its plan measured on the backend
// (the default) or fixed, the same answer.
TEST(OnnxOpsets, ASessionFromTheFileGivesTheEvaluatorsOutputs) {
  const memfmt::graph::parameter_store rec = memfmt::io::load_safetensors(fixture("group_norm_opset18.safetensors"));
  const parameter& expected = rec.at("output");
  memfmt::session_options measured;
  measured.calibration.repetitions = 1;
  memfmt::session_options nhwc;
  nhwc.policy = memfmt::graph::policy::all_channels_last;
  for (const auto* o : {&measured, &nhwc}) {
    auto s = memfmt::load_onnx<memfmt::reference::backend>(fixture("group_norm_opset18.onnx"), *o);
    EXPECT_EQ(s.timings().has_value(), o == &measured);
    const auto out = s.run({{"input", rec.at("input")}});
    ASSERT_EQ(out.count("output"), 1u);
    EXPECT_EQ(memfmt::onnx::compare_outputs(expected, out.at("output"), {1e-6, 1e-5}), "");
  }
  // A model with a node memfmt cannot run is refused before any work, naming the node.
  onnx_builder hardmax;
  hardmax.input("x", {1, 2, 3, 3}).output("y");
  hardmax.node("Hardmax", {"x"}, {"y"}, "hardmax");
  const std::string why = memfmt_test::error_message(
      [&] { memfmt::model_of(memfmt::onnx::import_model(hardmax.model())); }, memfmt::errc::unsupported);
  EXPECT_NE(why.find("op Hardmax (ONNX node 'hardmax')"), std::string::npos) << why;
}

TEST(OnnxOpsets, MalformedNewFormsAreErrorsNamingTheValues) {
  const auto model_with = [](const std::string& op, auto&& set) {
    onnx_builder b(op == "Gelu" ? 20 : 18);
    b.input("x", {1, 6, 4, 4}).output("y");
    set(b);
    return b.model();
  };
  using memfmt::errc;
  const auto message = [](const ::onnx::ModelProto& m) {
    return memfmt_test::error_message([&] { memfmt::onnx::import_model(m); }, errc::invalid_argument);
  };
  EXPECT_NE(message(model_with(
                        "Gelu",
                        [](onnx_builder& b) { b.node("Gelu", {"x"}, {"y"}).attr("approximate", std::string("fast")); }))
                .find("approximate = 'fast'"),
            std::string::npos);
  EXPECT_NE(
      message(model_with("GroupNormalization",
                         [](onnx_builder& b) {
                           b.float_vector("s", {1.f, 1.f, 1.f, 1.f}).float_vector("t", {0.f, 0.f, 0.f, 0.f});
                           b.node("GroupNormalization", {"x", "s", "t"}, {"y"}).attr("num_groups", std::int64_t{4});
                         }))
          .find("num_groups 4 does not divide the 6 channels"),
      std::string::npos);
  EXPECT_NE(
      message(
          model_with(
              "Split",
              [](onnx_builder& b) {
                b.node("Split", {"x"}, {"y", "z"}).attr("axis", std::int64_t{1}).attr("num_outputs", std::int64_t{3});
              }))
          .find("num_outputs 3 for 2 outputs"),
      std::string::npos);
  EXPECT_NE(message(model_with("Pad",
                               [](onnx_builder& b) {
                                 b.ints("pads", {1, 1}).ints("axes", {2, -2});
                                 b.node("Pad", {"x", "pads", "", "axes"}, {"y"});
                               }))
                .find("need 4 entries for axes [2, -2]"),
            std::string::npos);
  EXPECT_NE(message(model_with("Pad",
                               [](onnx_builder& b) {
                                 b.ints("pads", {1, 1, 1, 1}).ints("axes", {2, -2});
                                 b.node("Pad", {"x", "pads", "", "axes"}, {"y"});
                               }))
                .find("repeat an axis"),
            std::string::npos);
}

}  // namespace
