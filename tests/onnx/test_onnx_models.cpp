// Whole models exported by tools/export_onnx.py from torchvision's blocks (tests/onnx/fixture_models.py):
// a ResNet-18 with BN folded into the convs by the exporter and a symbolic batch, and a MobileNetV2
// with BN kept. The truth is the ONNX file itself, read here independently of the importer: every
// Conv's output shape from ONNX's own shape inference, every initializer's dims and bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include <onnx/shape_inference/implementation.h>

#include "memfmt/graph/solve.hpp"
#include "memfmt/graph/verify.hpp"
#include "memfmt/onnx/import.hpp"

namespace {

using memfmt::layer_kind;
using dims = std::vector<std::int64_t>;

::onnx::ModelProto load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes)) << path;
  return m;
}

// ONNX's inferred shapes of every value, the graph input's batch set to `batch`.
std::map<std::string, dims> onnx_shapes(::onnx::ModelProto m, std::int64_t batch) {
  m.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_value(batch);
  ::onnx::shape_inference::InferShapes(m);
  std::map<std::string, dims> r;
  for (const auto& vi : m.graph().value_info()) {
    dims s;
    for (const auto& d : vi.type().tensor_type().shape().dim()) s.push_back(d.dim_value());
    r[vi.name()] = s;
  }
  return r;
}

struct model_case {
  const char* file;
  std::int64_t batch;
  std::size_t convs, batch_norms, relu6, adds;
};

class OnnxModels : public ::testing::TestWithParam<model_case> {};

TEST_P(OnnxModels, ShapesAndParametersMatchTheOnnxFile) {
  const model_case c = GetParam();
  const std::string path = std::string(MEMFMT_ONNX_TEST_DATA) + "/" + c.file;
  const ::onnx::ModelProto proto = load(path);
  memfmt::onnx::import_options o;
  o.batch = c.batch;
  const memfmt::onnx::imported_model m = memfmt::onnx::import_file(path, o);
  EXPECT_TRUE(m.runnable());
  EXPECT_EQ(m.opset, 13);
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].shape, (dims{c.batch, 3, 32, 32}));
  ASSERT_EQ(m.outputs.size(), 1u);
  EXPECT_EQ(m.network.at(*m.network.find("output")).extents, (dims{c.batch, 10}));

  std::map<std::string, std::size_t> kinds;
  std::size_t relu6 = 0;
  for (const auto& n : m.network.nodes()) {
    ++kinds[memfmt::graph::to_string(n.kind)];
    if (n.kind == layer_kind::activation && n.get<memfmt::activation_params>().kind == memfmt::activation::relu6)
      ++relu6;
  }
  EXPECT_EQ(kinds["conv"], c.convs);
  EXPECT_EQ(kinds["batch_norm"], c.batch_norms);
  EXPECT_EQ(kinds["binary"], c.adds);
  EXPECT_EQ(kinds["pad"], 0u);  // torchvision pads symmetrically
  EXPECT_EQ(relu6, c.relu6);

  // Every initializer is one parameter, with its dims and bytes.
  std::map<std::string, std::string> param_of;
  for (const auto& [param, tensor] : m.source) param_of[tensor] = param;
  std::int64_t onnx_elements = 0;
  for (const auto& t : proto.graph().initializer()) {
    const memfmt::onnx::parameter expected = memfmt::onnx::to_parameter(t, "test");
    onnx_elements += expected.numel();
    ASSERT_TRUE(param_of.count(t.name())) << t.name() << " became no parameter";
    const auto& p = m.parameters.at(param_of.at(t.name()));
    EXPECT_EQ(p.shape, expected.shape) << t.name();
    EXPECT_EQ(p.bytes, expected.bytes) << t.name();
  }
  std::int64_t imported_elements = 0;
  for (const auto& [name, p] : m.parameters)
    if (p.type != memfmt::dtype::int64) imported_elements += p.numel();  // num_batches_tracked: not in ONNX
  EXPECT_EQ(imported_elements, onnx_elements);

  // Every Conv's output shape is ONNX's.
  const auto shapes = onnx_shapes(proto, c.batch);
  std::size_t checked = 0;
  for (const auto& n : proto.graph().node()) {
    if (n.op_type() != "Conv") continue;
    const std::string& layer = param_of.at(n.input(1));
    const auto& node = m.network.at(*m.network.find(layer.substr(0, layer.size() - 7)));  // less ".weight"
    EXPECT_EQ(node.extents, shapes.at(n.output(0))) << n.name();
    ++checked;
  }
  EXPECT_EQ(checked, c.convs);

  // The planner takes the imported network.
  const memfmt::graph::plan plan = memfmt::graph::solve(m.network, memfmt::graph::cost_model{});
  EXPECT_EQ(plan.nodes.size(), m.network.size());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OnnxModels,
                         ::testing::Values(model_case{"small_resnet18.onnx", 4, 20, 0, 0, 8},
                                           model_case{"small_mobilenet_v2.onnx", 1, 25, 25, 17, 2}),
                         [](const auto& info) { return std::string(info.param.file).substr(6, 8); });

// The exporter kept BatchNormalization, so the MobileNetV2's parameters carry PyTorch's state_dict
// names and the running statistics the export script randomised.
TEST(OnnxModels, MobileNetKeepsStateDictNames) {
  const auto m = memfmt::onnx::import_file(std::string(MEMFMT_ONNX_TEST_DATA) + "/small_mobilenet_v2.onnx");
  for (const char* name : {"features.0.0.weight", "features.0.1.running_var", "features.0.1.num_batches_tracked",
                           "classifier.1.weight", "classifier.1.bias"})
    EXPECT_TRUE(m.parameters.contains(name)) << name;
  const auto var = m.parameters.at("features.0.1.running_var").values<float>();
  EXPECT_NE(var[0], 1.f);
  const auto& depthwise = m.network.at(*m.network.find("features.1.conv.0.0"));
  EXPECT_EQ(depthwise.get<memfmt::graph::conv_attrs>().params.groups, depthwise.extents[1]);
}

// torchvision's VisionTransformer and SwinTransformer (fixture_models.py): their token tensors
// ([N, tokens, dim], the windows' rank-5 and rank-6 reshapes) and the shape arithmetic on them are no
// network values. They import as barriers around the network values (the patch embedding conv and
// whatever else the network expresses), plan, and are refused for running.
TEST(OnnxModels, TransformersPlanAroundTheirTokenOps) {
  for (const char* file : {"small_vit.onnx", "small_swin.onnx"}) {
    SCOPED_TRACE(file);
    const ::onnx::ModelProto proto = load(std::string(MEMFMT_ONNX_TEST_DATA) + "/" + file);
    const memfmt::onnx::imported_model m = memfmt::onnx::import_model(proto);
    EXPECT_FALSE(m.runnable());
    // Every ONNX node is a layer, folded, or listed: an opaque node or part of one's barrier.
    std::size_t convs = 0, opaque = 0;
    for (const auto& n : m.network.nodes()) {
      convs += n.kind == layer_kind::conv;
      opaque += n.kind == layer_kind::opaque;
    }
    EXPECT_EQ(convs, 1u);  // the patch embedding, [1, 3, 16, 16] -> [1, C, 16 / patch, 16 / patch]
    std::size_t named = 0;
    for (const auto& u : m.unsupported) {
      EXPECT_FALSE(u.reason.empty()) << u.onnx_node;
      if (u.node.empty()) continue;
      ++named;
      EXPECT_EQ(m.network.at(*m.network.find(u.node)).kind, layer_kind::opaque) << u.node;
    }
    EXPECT_EQ(named, opaque);
    EXPECT_GT(opaque, 0u);
    // The classifier's output is the network's, behind the barrier, and the planner plans it all.
    ASSERT_EQ(m.outputs.size(), 1u);
    EXPECT_EQ(m.outputs[0].shape, (dims{1, 4}));
    const memfmt::graph::cost_model model;
    const memfmt::graph::plan plan = memfmt::graph::solve(m.network, model);
    EXPECT_EQ(plan.nodes.size(), m.network.size());
    const auto bad = memfmt::graph::verify(m.network, model, plan);
    EXPECT_TRUE(bad.empty()) << bad.front();
  }
}

}  // namespace
