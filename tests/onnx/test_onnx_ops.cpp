// Per-op import: models built in memory with the ONNX protobuf API. The truths are ONNX's operator
// definitions (output shapes also checked by the importer against ONNX's own shape inference) and
// the values of the initializers the models carry.
#include <gtest/gtest.h>

#include <array>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "../common/expect_error.hpp"
#include "memfmt/onnx/import.hpp"
#include "memfmt/runtime/check_parameters.hpp"
#include "onnx_builder.hpp"

namespace {

using memfmt::layer_kind;
using memfmt::graph::node;
using memfmt::onnx::import_model;
using memfmt::onnx::imported_model;
using memfmt_test::onnx_builder;
using dims = std::vector<std::int64_t>;

const node& only(const imported_model& m, layer_kind kind) {
  const node* found = nullptr;
  for (const node& n : m.network.nodes())
    if (n.kind == kind) {
      EXPECT_EQ(found, nullptr) << "more than one " << memfmt::graph::to_string(kind);
      found = &n;
    }
  if (!found) throw std::runtime_error(std::string("no node of kind ") + memfmt::graph::to_string(kind));
  return *found;
}

// The constant the builder's last node computes from `in` (opset 13).
memfmt::onnx::parameter fold_last_node(onnx_builder& b, std::vector<const memfmt::onnx::parameter*> in) {
  const ::onnx::NodeProto& n = b.model().graph().node(b.model().graph().node_size() - 1);
  const memfmt::onnx::detail::node_reader r(n, "test");
  return memfmt::onnx::detail::fold(r, in, 13).value().at(0);
}

const node& output_of(const imported_model& m, const std::string& name) {
  return m.network.at(m.network.at(*m.network.find(name)).inputs.at(0));
}

TEST(OnnxImport, ConvNonSquareDilatedGroupedWithAsymmetricPadsInsertsAPad) {
  onnx_builder b;
  b.input("x", {2, 4, 9, 11}).floats("w", {6, 2, 1, 3}).floats("bias", {6}).output("y");
  b.node("Conv", {"x", "w", "bias"}, {"y"}, "conv")
      .attr("group", std::int64_t{2})
      .attr("strides", dims{2, 1})
      .attr("dilations", dims{1, 2})
      .attr("pads", dims{0, 1, 1, 3});
  const imported_model m = import_model(b.model());
  const node& c = only(m, layer_kind::conv);
  const auto& a = c.get<memfmt::graph::conv_attrs>();
  EXPECT_EQ(a.out_channels, 6);
  EXPECT_EQ(a.params.groups, 2);
  EXPECT_EQ((std::vector<std::int64_t>{a.kernel[0], a.kernel[1]}), (dims{1, 3}));
  EXPECT_EQ(a.params.stride[0], 2);
  EXPECT_EQ(a.params.dilation[1], 2);
  // ONNX: H = (9 + 0 + 1 - 1) / 2 + 1 = 5, W = (11 + 1 + 3 - 5) / 1 + 1 = 11.
  EXPECT_EQ(output_of(m, "y").extents, (dims{2, 6, 5, 11}));
  if (!memfmt::onnx::detail::conv_pads_per_side) {
    const node& p = only(m, layer_kind::pad);
    const auto& pp = p.get<memfmt::pad_params>();
    EXPECT_EQ(pp.begin[0] + pp.end[0] + 2 * a.params.padding[0], 1);
    EXPECT_EQ(pp.begin[1] + pp.end[1] + 2 * a.params.padding[1], 4);
  }
  EXPECT_TRUE(m.runnable());
  const auto& w = m.parameters.at("conv.weight");
  EXPECT_EQ(w.shape, (dims{6, 2, 1, 3}));
  EXPECT_EQ(w.values<float>().at(5), 5.f);
  EXPECT_EQ(m.source.at("conv.weight"), "w");
  EXPECT_EQ(m.parameters.at("conv.bias").shape, (dims{6}));
}

TEST(OnnxImport, ConvSameUpperStride2) {
  onnx_builder b;
  b.input("x", {1, 3, 7, 8}).floats("w", {4, 3, 3, 3}).output("y");
  b.node("Conv", {"x", "w"}, {"y"}).attr("strides", dims{2, 2}).attr("auto_pad", std::string("SAME_UPPER"));
  const imported_model m = import_model(b.model());
  EXPECT_EQ(output_of(m, "y").extents, (dims{1, 4, 4, 4}));  // ceil(7 / 2), ceil(8 / 2)
}

TEST(OnnxImport, Conv1dLiftsToHeightOne) {
  onnx_builder b;
  b.input("x", {2, 3, 10}).floats("w", {5, 3, 3}).output("y");
  b.node("Conv", {"x", "w"}, {"y"}, "c1").attr("pads", dims{1, 1}).attr("strides", dims{2});
  const imported_model m = import_model(b.model());
  EXPECT_EQ(m.network.at(*m.network.find("x")).extents, (dims{2, 3, 1, 10}));
  EXPECT_EQ(output_of(m, "y").extents, (dims{2, 5, 1, 5}));
  EXPECT_EQ(m.parameters.at("c1.weight").shape, (dims{5, 3, 1, 3}));
  EXPECT_EQ(m.inputs.at(0).shape, (dims{2, 3, 10}));
  EXPECT_EQ(m.outputs.at(0).shape, (dims{2, 5, 5}));
}

TEST(OnnxImport, Conv3d) {
  onnx_builder b;
  b.input("x", {1, 2, 4, 5, 6}).floats("w", {3, 2, 3, 1, 3}).output("y");
  b.node("Conv", {"x", "w"}, {"y"}).attr("pads", dims{1, 0, 1, 1, 0, 1});
  EXPECT_EQ(output_of(import_model(b.model()), "y").extents, (dims{1, 3, 4, 5, 6}));
}

TEST(OnnxImport, ConvTransposeOutputPaddingAndOutputShape) {
  onnx_builder b;
  b.input("x", {1, 4, 5, 5}).floats("w", {4, 3, 3, 3}).output("y").output("z");
  b.node("ConvTranspose", {"x", "w"}, {"y"}, "up")
      .attr("strides", dims{2, 2})
      .attr("pads", dims{1, 1, 1, 1})
      .attr("output_padding", dims{1, 0});
  b.node("ConvTranspose", {"x", "w"}, {"z"}, "up2").attr("strides", dims{2, 2}).attr("output_shape", dims{10, 10});
  const imported_model m = import_model(b.model());
  // (5 - 1) * 2 - 2 + 3 + output_padding + 0 ... = 9 + 1 = 10 and 9.
  EXPECT_EQ(output_of(m, "y").extents, (dims{1, 3, 10, 9}));
  EXPECT_EQ(output_of(m, "z").extents, (dims{1, 3, 10, 10}));
  EXPECT_EQ(m.parameters.at("up.weight").shape, (dims{4, 3, 3, 3}));
}

// output_shape past the full output (4 * 2 + 3 = 11) adds output_padding at the end; one that would
// need rows before the start (ONNX splits -2 as -1 / -1) has no conv_transpose.
TEST(OnnxImport, ConvTransposeOutputShapePastTheFullOutput) {
  onnx_builder b;
  b.input("x", {1, 4, 5, 5}).floats("w", {4, 3, 3, 3}).output("y").output("z");
  b.node("ConvTranspose", {"x", "w"}, {"y"}, "up").attr("strides", dims{2, 2}).attr("output_shape", dims{12, 11});
  b.node("ConvTranspose", {"x", "w"}, {"z"}, "up2").attr("strides", dims{2, 2}).attr("output_shape", dims{13, 11});
  const imported_model m = import_model(b.model());
  const node& y = output_of(m, "y");
  EXPECT_EQ(y.extents, (dims{1, 3, 12, 11}));
  const auto& a = y.get<memfmt::graph::conv_transpose_attrs>();
  EXPECT_EQ(a.output_padding[0], 1);
  EXPECT_EQ(a.output_padding[1], 0);
  EXPECT_EQ(a.params.padding[0], 0);
  EXPECT_EQ(output_of(m, "z").kind, layer_kind::opaque);
  ASSERT_EQ(m.unsupported.size(), 1u);
  EXPECT_NE(m.unsupported[0].reason.find("before its start"), std::string::npos) << m.unsupported[0].reason;
}

TEST(OnnxImport, BatchNormKeptSeparateWithPyTorchMomentumAndNames) {
  onnx_builder b;
  b.input("x", {1, 3, 4, 4}).output("y");
  b.floats("bn.weight", {3}, 1.f)
      .floats("bn.bias", {3}, 0.5f)
      .floats("bn.running_mean", {3})
      .floats("bn.running_var", {3}, 1.f);
  b.node("BatchNormalization", {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"y"}, "BN_0")
      .attr_f("epsilon", 1e-3f)
      .attr_f("momentum", 0.75f);
  const imported_model m = import_model(b.model());
  const node& n = only(m, layer_kind::batch_norm);
  EXPECT_EQ(n.name, "bn");  // the module path of the state_dict names
  EXPECT_NEAR(n.get<memfmt::batch_norm_params>().momentum, 0.25, 1e-7);
  EXPECT_NEAR(n.get<memfmt::batch_norm_params>().epsilon, 1e-3, 1e-9);
  EXPECT_EQ(m.parameters.at("bn.running_var").values<float>(), (std::vector<float>{1.f, 2.f, 3.f}));
  EXPECT_EQ(m.parameters.at("bn.num_batches_tracked").type, memfmt::dtype::int64);
}

// A float16 model's BatchNormalization computes in float16, and its float16 initializers become
// the float32 parameters a low-precision batch norm keeps (network::parameters), values unchanged.
TEST(OnnxImport, Float16BatchNormParametersBecomeFloat32) {
  onnx_builder b;
  b.input("x", {1, 3, 4, 4}, ::onnx::TensorProto::FLOAT16).output("y");
  b.model().mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      ::onnx::TensorProto::FLOAT16);
  const std::vector<float> values{0.5f, 1.25f, 1000.5f};  // exact in float16
  memfmt::graph::parameter_store given;
  for (const char* k : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}) {
    given.insert<memfmt::half>(k, {3}, std::vector<memfmt::half>(values.begin(), values.end()));
    *b.model().mutable_graph()->add_initializer() = memfmt::onnx::to_tensor_proto(given.at(k), k);
  }
  b.node("BatchNormalization", {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"y"}, "BN_0");
  const imported_model m = import_model(b.model());
  EXPECT_EQ(only(m, layer_kind::batch_norm).type, memfmt::dtype::float16);
  for (const char* k : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"})
    EXPECT_EQ(m.parameters.at(k).values<float>(k), values) << k;
  memfmt::runtime::check_parameters(m.network, m.parameters);
}

TEST(OnnxImport, ClipFromConstantInputsAndAttributes) {
  onnx_builder b;
  b.input("x", {1, 2, 3, 3}).output("y").output("z").output("u");
  b.scalar("lo", 0.f).scalar("hi", 6.f).scalar("neg", -1.f);
  b.node("Clip", {"x", "lo", "hi"}, {"y"});
  b.node("Clip", {"x", "lo"}, {"z"});
  b.node("Clip", {"x", "neg", "hi"}, {"u"}, "clip_other");
  const imported_model m = import_model(b.model());
  EXPECT_EQ(output_of(m, "y").get<memfmt::activation_params>().kind, memfmt::activation::relu6);
  EXPECT_EQ(output_of(m, "z").get<memfmt::activation_params>().kind, memfmt::activation::relu);
  EXPECT_EQ(output_of(m, "u").get<memfmt::activation_params>(), memfmt::activation_params::clip(-1.0, 6.0));
  EXPECT_TRUE(m.unsupported.empty());

  onnx_builder old(10);
  old.input("x", {1, 2, 3, 3}).output("y");
  old.node("Clip", {"x"}, {"y"}).attr_f("min", 0.f).attr_f("max", 6.f);
  EXPECT_EQ(output_of(import_model(old.model()), "y").get<memfmt::activation_params>().kind, memfmt::activation::relu6);
}

// Activations with parameters keep them, with ONNX's defaults where an attribute is absent
// (HardSigmoid's 0.2 and 0.5 are not PyTorch's 1/6 and 1/2).
TEST(OnnxImport, ActivationParametersAndDefaults) {
  onnx_builder b;
  b.input("x", {1, 2, 3, 3}).output("a").output("b").output("c").output("d").output("e").output("f");
  b.node("LeakyRelu", {"x"}, {"a"});
  b.node("LeakyRelu", {"x"}, {"b"}).attr_f("alpha", 0.25f);
  b.node("Elu", {"x"}, {"c"});
  b.node("Elu", {"x"}, {"d"}).attr_f("alpha", 0.5f);
  b.node("HardSigmoid", {"x"}, {"e"});
  b.node("HardSigmoid", {"x"}, {"f"}).attr_f("alpha", 0.125f).attr_f("beta", 0.25f);
  const imported_model m = import_model(b.model());
  EXPECT_TRUE(m.unsupported.empty());
  const auto f = [&](const char* out) { return output_of(m, out).get<memfmt::activation_params>(); };
  EXPECT_EQ(f("a"), memfmt::activation_params::leaky_relu(static_cast<double>(0.01f)));
  EXPECT_EQ(f("b"), memfmt::activation_params::leaky_relu(0.25));
  EXPECT_EQ(f("c"), memfmt::activation_params::elu(1.0));
  EXPECT_EQ(f("d"), memfmt::activation_params::elu(0.5));
  EXPECT_EQ(f("e"), memfmt::activation_params::hardsigmoid(static_cast<double>(0.2f), 0.5));
  EXPECT_EQ(f("f"), memfmt::activation_params::hardsigmoid(0.125, 0.25));

  // A Clip whose bounds cross is planned around as a barrier, with the reason.
  onnx_builder crossed;
  crossed.input("x", {1, 2, 3, 3}).output("y");
  crossed.scalar("lo", 2.f).scalar("hi", 1.f);
  crossed.node("Clip", {"x", "lo", "hi"}, {"y"}, "crossed");
  const imported_model mc = import_model(crossed.model());
  ASSERT_EQ(mc.unsupported.size(), 1u);
  EXPECT_EQ(mc.unsupported[0].node, "crossed");
  EXPECT_NE(mc.unsupported[0].reason.find("min <= max"), std::string::npos) << mc.unsupported[0].reason;

  // An infinite LeakyRelu slope is a malformed model: an error naming the node and the value.
  onnx_builder steep;
  steep.input("x", {1, 2, 3, 3}).output("y");
  steep.node("LeakyRelu", {"x"}, {"y"}, "steep").attr_f("alpha", std::numeric_limits<float>::infinity());
  try {
    (void)import_model(steep.model());
    ADD_FAILURE() << "an infinite LeakyRelu slope imported";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), memfmt::errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("steep"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("alpha=inf"), std::string::npos) << e.what();
  }
}

// torch.onnx's F.pad and F.interpolate compute pads and scales at run time from Shape, Gather,
// Concat, Cast ...; every shape is known at import, so the chain is folded and the Pad reads a constant.
TEST(OnnxImport, PadFromAConstantSubgraphIsFolded) {
  onnx_builder c;
  c.input("x", {1, 2, 5, 6}).output("y");
  c.node("Shape", {"x"}, {"s"});
  c.ints("i2", {2}, true).ints("four", {4}, true).ints("z2", {0, 0}, true).ints("z3", {0, 0, 0}, true);
  c.node("Gather", {"s", "i2"}, {"h"}).attr("axis", std::int64_t{0});  // [5]
  c.node("Sub", {"h", "four"}, {"one"});                               // [1]
  c.node("Add", {"one", "one"}, {"two"});                              // [2]
  c.node("Concat", {"z2", "one", "one", "z3", "two"}, {"raw"}).attr("axis", std::int64_t{0});
  c.node("Cast", {"raw"}, {"pads"}).attr("to", std::int64_t{::onnx::TensorProto::INT64});
  c.node("Pad", {"x", "pads"}, {"y"}).attr("mode", std::string("reflect"));
  const imported_model m = import_model(c.model());
  const auto& p = only(m, layer_kind::pad).get<memfmt::pad_params>();
  EXPECT_EQ(p.mode, memfmt::pad_mode::reflect);
  EXPECT_EQ(p.begin[0], 1);
  EXPECT_EQ(p.begin[1], 1);
  EXPECT_EQ(p.end[0], 0);
  EXPECT_EQ(p.end[1], 2);
  EXPECT_EQ(output_of(m, "y").extents, (dims{1, 2, 6, 9}));
  EXPECT_TRUE(m.runnable());
  EXPECT_EQ(m.network.size(), 3u);  // input, pad, output: the shape arithmetic left no node
}

// The movement ops of shape arithmetic, evaluated on small constants (numpy's results by hand).
TEST(OnnxFold, TransposeSliceGatherUnsqueezeConstantOfShape) {
  using memfmt::onnx::parameter;
  const auto run = fold_last_node;
  parameter x = memfmt::onnx::int64_vector({0, 1, 2, 3, 4, 5});
  x.shape = {2, 3};
  onnx_builder b;
  b.node("Transpose", {"x"}, {"t"});
  parameter t = run(b, {&x});
  EXPECT_EQ(t.shape, (dims{3, 2}));
  EXPECT_EQ(memfmt::onnx::int64_values(t), (dims{0, 3, 1, 4, 2, 5}));
  const parameter starts = memfmt::onnx::int64_vector({-1}), ends = memfmt::onnx::int64_vector({-100}),
                  axes = memfmt::onnx::int64_vector({1}), steps = memfmt::onnx::int64_vector({-2});
  b.node("Slice", {"x", "s", "e", "a", "st"}, {"y"});
  const parameter sl = run(b, {&x, &starts, &ends, &axes, &steps});
  EXPECT_EQ(sl.shape, (dims{2, 2}));
  EXPECT_EQ(memfmt::onnx::int64_values(sl), (dims{2, 0, 5, 3}));
  const parameter idx = memfmt::onnx::int64_vector({-1, 0});
  b.node("Gather", {"x", "i"}, {"g"}).attr("axis", std::int64_t{1});
  const parameter g = run(b, {&x, &idx});
  EXPECT_EQ(g.shape, (dims{2, 2}));
  EXPECT_EQ(memfmt::onnx::int64_values(g), (dims{2, 0, 5, 3}));
  const parameter uaxes = memfmt::onnx::int64_vector({0, 3});
  b.node("Unsqueeze", {"x", "a"}, {"u"});
  EXPECT_EQ(run(b, {&x, &uaxes}).shape, (dims{1, 2, 3, 1}));
  const parameter shape = memfmt::onnx::int64_vector({2, 2});
  b.node("ConstantOfShape", {"s"}, {"c"});
  const parameter c = run(b, {&shape});
  EXPECT_EQ(c.type, memfmt::dtype::float32);
  EXPECT_EQ(c.values<float>(), (std::vector<float>{0.f, 0.f, 0.f, 0.f}));
}

// The elements of all folded constants are bounded by import_options::max_folded_elements: two
// ConstantOfShape of 1000 elements each fold within 2000 and are refused, naming the bound, within 1500.
TEST(OnnxFold, FoldingBudgetBoundsAModelsWork) {
  onnx_builder b(13);
  b.input("x", {1, 2, 3, 3}).output("y");
  b.ints("shape", {1000});
  b.node("ConstantOfShape", {"shape"}, {"c1"}).node("ConstantOfShape", {"shape"}, {"c2"});
  b.node("Add", {"c1", "c2"}, {"c3"});
  b.node("Relu", {"x"}, {"y"});
  memfmt::onnx::import_options o;
  o.max_folded_elements = 3000;
  EXPECT_TRUE(import_model(b.model(), o).runnable());
  o.max_folded_elements = 1500;
  memfmt_test::expect_error([&] { import_model(b.model(), o); }, memfmt::errc::unsupported,
                            {"constant folding reaches 2000 elements", "max_folded_elements (1500)"});
}

// Elementwise shape arithmetic (numpy's and ONNX's definitions, by hand), and integer results past
// int64 refused rather than wrapped.
TEST(OnnxFold, ArithmeticLogicAndRounding) {
  using memfmt::onnx::int64_values;
  using memfmt::onnx::int64_vector;
  using memfmt::onnx::parameter;
  const auto run = fold_last_node;
  const auto floats = [](std::vector<float> v) {
    parameter p = memfmt::onnx::make_parameter(memfmt::dtype::float32, {static_cast<std::int64_t>(v.size())}, "test");
    for (std::size_t i = 0; i < v.size(); ++i) memfmt::onnx::store_element(p, i, v[i], 0);
    return p;
  };
  const parameter a = int64_vector({7, -7, 7, -7, 6}), d = int64_vector({3, 3, -3, -3, 3});
  onnx_builder b;
  b.node("Mod", {"a", "d"}, {"m"});  // the divisor's sign, as Python's %
  EXPECT_EQ(int64_values(run(b, {&a, &d})), (dims{1, 2, -2, -1, 0}));
  b.node("Mod", {"a", "d"}, {"m"}).attr("fmod", std::int64_t{1});  // the dividend's, as C's fmod
  EXPECT_EQ(int64_values(run(b, {&a, &d})), (dims{1, -1, 1, -1, 0}));
  const parameter fa = floats({7.5f, -7.5f}), fd = floats({2.f, 2.f});
  EXPECT_EQ(run(b, {&fa, &fd}).values<float>(), (std::vector<float>{1.5f, -1.5f}));
  b.node("Pow", {"a", "d"}, {"p"});
  const parameter base = int64_vector({2, -3}), exponent = int64_vector({10, 3});
  EXPECT_EQ(int64_values(run(b, {&base, &exponent})), (dims{1024, -27}));
  const parameter halves = floats({0.5f, 1.5f, 2.5f, -0.5f, -1.5f});
  b.node("Round", {"a"}, {"r"});
  EXPECT_EQ(run(b, {&halves}).values<float>(), (std::vector<float>{0.f, 2.f, 2.f, -0.f, -2.f}));
  b.node("Sign", {"a"}, {"s"});
  EXPECT_EQ(int64_values(run(b, {&d})), (dims{1, 1, -1, -1, 1}));
  b.node("Reciprocal", {"a"}, {"r"});
  EXPECT_EQ(run(b, {&fd}).values<float>(), (std::vector<float>{0.5f, 0.5f}));
  const parameter zero_one = floats({0.f, 1.f});
  b.node("Exp", {"a"}, {"e"});
  const std::vector<float> exps = run(b, {&zero_one}).values<float>();
  EXPECT_EQ(exps[0], 1.f);
  EXPECT_FLOAT_EQ(exps[1], 2.7182818f);  // e
  b.node("Log", {"a"}, {"l"});
  EXPECT_EQ(run(b, {&zero_one}).values<float>().at(1), 0.f);
  b.node("Erf", {"a"}, {"e"});
  const std::vector<float> erfs = run(b, {&zero_one}).values<float>();
  EXPECT_EQ(erfs[0], 0.f);
  EXPECT_FLOAT_EQ(erfs[1], 0.8427008f);  // erf(1)
  const parameter p = int64_vector({0, 0, 1, 1}), q = int64_vector({0, 1, 0, 1});
  const auto bools = [](const parameter& t) {
    EXPECT_EQ(t.type, memfmt::dtype::bool8);
    return int64_values(t);
  };
  b.node("And", {"p", "q"}, {"o"});
  EXPECT_EQ(bools(run(b, {&p, &q})), (dims{0, 0, 0, 1}));
  b.node("Or", {"p", "q"}, {"o"});
  EXPECT_EQ(bools(run(b, {&p, &q})), (dims{0, 1, 1, 1}));
  b.node("Xor", {"p", "q"}, {"o"});
  EXPECT_EQ(bools(run(b, {&p, &q})), (dims{0, 1, 1, 0}));
  b.node("LessOrEqual", {"p", "q"}, {"o"});
  EXPECT_EQ(bools(run(b, {&p, &q})), (dims{1, 1, 0, 1}));
  b.node("GreaterOrEqual", {"p", "q"}, {"o"});
  EXPECT_EQ(bools(run(b, {&p, &q})), (dims{1, 0, 1, 1}));

  // Reductions (ReduceSum's axes an input from opset 13, the others' an attribute before 18).
  parameter x = int64_vector({1, 5, 3, 4, 2, 6});
  x.shape = {2, 3};
  b.node("ReduceMax", {"x"}, {"o"}).attr("axes", dims{1}).attr("keepdims", std::int64_t{0});
  EXPECT_EQ(int64_values(run(b, {&x})), (dims{5, 6}));
  b.node("ReduceMin", {"x"}, {"o"}).attr("keepdims", std::int64_t{0});  // every axis
  const parameter least_of_all = run(b, {&x});
  EXPECT_EQ(least_of_all.shape, dims{});
  EXPECT_EQ(int64_values(least_of_all), (dims{1}));
  b.node("ReduceProd", {"x"}, {"o"}).attr("axes", dims{-1});
  const parameter prod = run(b, {&x});
  EXPECT_EQ(prod.shape, (dims{2, 1}));
  EXPECT_EQ(int64_values(prod), (dims{15, 48}));
  const parameter axis0 = int64_vector({0});
  b.node("ReduceSum", {"x", "axes"}, {"o"});
  const parameter sum = run(b, {&x, &axis0});
  EXPECT_EQ(sum.shape, (dims{1, 3}));
  EXPECT_EQ(int64_values(sum), (dims{5, 7, 9}));
  const parameter halves_mean = floats({1.f, 2.f, 3.f, 8.f});
  b.node("ReduceMean", {"x"}, {"o"});
  EXPECT_EQ(run(b, {&halves_mean}).values<float>(), (std::vector<float>{3.5f}));

  constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max(),
                         least = std::numeric_limits<std::int64_t>::min();
  const parameter bigs = int64_vector({big}), ones = int64_vector({1}), twos = int64_vector({2}),
                  leasts = int64_vector({least}), minus_ones = int64_vector({-1}), zeros = int64_vector({0});
  for (const char* op : {"Add", "Mul"}) {
    b.node(op, {"a", "b"}, {"o"});
    memfmt_test::expect_error(
        [&] {
          run(b, {&bigs, op == std::string("Add") ? &ones : &twos});
        },
        memfmt::errc::overflow, {"overflows 64 bits"});
  }
  b.node("Sub", {"a", "b"}, {"o"});
  memfmt_test::expect_error([&] { run(b, {&leasts, &ones}); }, memfmt::errc::overflow, {"overflows 64 bits"});
  b.node("Div", {"a", "b"}, {"o"});
  memfmt_test::expect_error([&] { run(b, {&leasts, &minus_ones}); }, memfmt::errc::overflow, {"overflows 64 bits"});
  EXPECT_EQ(int64_values(run(b, {&bigs, &minus_ones})), (dims{-big}));
  memfmt_test::expect_error([&] { run(b, {&ones, &zeros}); }, memfmt::errc::invalid_argument, {"division by zero"});
  b.node("Mod", {"a", "b"}, {"o"});
  EXPECT_EQ(int64_values(run(b, {&leasts, &minus_ones})), (dims{0}));
  memfmt_test::expect_error([&] { run(b, {&ones, &zeros}); }, memfmt::errc::invalid_argument, {"division by zero"});
  // Floats without an int64 value (an attention mask's -inf) saturate when cast, not undefined.
  const parameter odd =
      floats({1e30f, -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -2.7f});
  b.node("Cast", {"a"}, {"c"}).attr("to", std::int64_t{::onnx::TensorProto::INT64});
  EXPECT_EQ(int64_values(run(b, {&odd})), (dims{big, least, 0, -2}));
  b.node("Where", {"c", "a", "b"}, {"w"});
  const parameter cond = int64_vector({1, 0, 1, 0});
  EXPECT_EQ(run(b, {&cond, &odd, &odd}).values<float>().at(1), -std::numeric_limits<float>::infinity());
}

TEST(OnnxImport, ResizeNearestAndLinear) {
  onnx_builder b;
  b.input("x", {1, 2, 4, 5}).output("y").output("z").output("u").output("v");
  b.node("Constant", {}, {"roi"});
  {
    ::onnx::TensorProto t;
    t.set_data_type(::onnx::TensorProto::FLOAT);
    t.add_dims(0);
    b.attr_tensor("value", t);
  }
  b.float_vector("scales", {1.f, 1.f, 2.f, 2.f}, true);
  b.node("Resize", {"x", "roi", "scales"}, {"y"})
      .attr("mode", std::string("nearest"))
      .attr("coordinate_transformation_mode", std::string("asymmetric"))
      .attr("nearest_mode", std::string("floor"));
  b.node("Resize", {"x", "roi", "scales"}, {"z"}).attr("mode", std::string("linear"));
  b.node("Resize", {"x", "roi", "scales"}, {"u"}).attr("mode", std::string("cubic"));
  // asymmetric + round_prefer_floor picks pixel 1 for output 1 at scale 2 (0.5 rounds down: 0);
  // output 3 reads 1.5 -> 1 as floor does; but at scale 3 output 2 reads 0.67 -> 1, not floor's 0.
  b.float_vector("s3", {1.f, 1.f, 3.f, 3.f}, true);
  b.node("Resize", {"x", "roi", "s3"}, {"v"})
      .attr("mode", std::string("nearest"))
      .attr("coordinate_transformation_mode", std::string("asymmetric"));
  const imported_model m = import_model(b.model());
  EXPECT_EQ(output_of(m, "y").kind, layer_kind::upsample);
  EXPECT_EQ(output_of(m, "y").extents, (dims{1, 2, 8, 10}));
  EXPECT_EQ(output_of(m, "z").get<memfmt::upsample_params>().mode, memfmt::resample_mode::linear);
  EXPECT_EQ(output_of(m, "y").get<memfmt::upsample_params>().coordinates, memfmt::resample_coordinates::pytorch);
  EXPECT_EQ(output_of(m, "z").get<memfmt::upsample_params>().coordinates, memfmt::resample_coordinates::pytorch);
  EXPECT_EQ(output_of(m, "u").kind, layer_kind::opaque);
  // v keeps ONNX's coordinates, rounding and scales (H, W).
  const node& v = output_of(m, "v");
  EXPECT_EQ(v.kind, layer_kind::upsample);
  EXPECT_EQ(v.extents, (dims{1, 2, 12, 15}));
  const auto& vp = v.get<memfmt::upsample_params>();
  EXPECT_EQ(vp.coordinates, memfmt::resample_coordinates::asymmetric);
  EXPECT_EQ(vp.rounding, memfmt::nearest_rounding::round_prefer_floor);
  EXPECT_EQ(vp.scale, (std::array<double, 3>{3.0, 3.0, 0.0}));
  EXPECT_EQ(m.unsupported.size(), 1u);
}

// An output side past a million positions keeps ONNX's rule without comparing it with PyTorch's
// position by position (a mutated scale made that comparison run for hours).
TEST(OnnxImport, ResizeToAHugeSideKeepsOnnxsRule) {
  onnx_builder b;
  b.input("x", {1, 2, 4, 5}).output("y");
  b.float_vector("scales", {1.f, 1.f, 1.f, 2147483648.f}, true);
  b.node("Resize", {"x", "", "scales"}, {"y"})
      .attr("mode", std::string("nearest"))
      .attr("coordinate_transformation_mode", std::string("asymmetric"))
      .attr("nearest_mode", std::string("floor"));
  const imported_model m = import_model(b.model());
  const node& y = output_of(m, "y");
  EXPECT_EQ(y.extents, (dims{1, 2, 4, std::int64_t{5} << 31}));
  const auto& p = y.get<memfmt::upsample_params>();
  EXPECT_EQ(p.coordinates, memfmt::resample_coordinates::asymmetric);
  EXPECT_EQ(p.scale, (std::array<double, 3>{1.0, 2147483648.0, 0.0}));
}

TEST(OnnxImport, PoolingCeilModeAndCountIncludePad) {
  onnx_builder b;
  b.input("x", {1, 2, 6, 7}).output("y").output("z");
  b.node("MaxPool", {"x"}, {"y"})
      .attr("kernel_shape", dims{3, 3})
      .attr("strides", dims{2, 2})
      .attr("ceil_mode", std::int64_t{1});
  b.node("AveragePool", {"x"}, {"z"})
      .attr("kernel_shape", dims{3, 2})
      .attr("pads", dims{1, 0, 1, 1})
      .attr("count_include_pad", std::int64_t{1});
  const imported_model m = import_model(b.model());
  const node& y = output_of(m, "y");
  EXPECT_EQ(y.extents, (dims{1, 2, 3, 3}));
  EXPECT_TRUE(y.get<memfmt::pool_params>().ceil_mode);
  const auto& z = output_of(m, "z").get<memfmt::pool_params>();
  EXPECT_EQ(z.kind, memfmt::pool_kind::average);
  EXPECT_TRUE(z.count_include_pad);
  EXPECT_EQ(z.padding_end[1], 1);
  EXPECT_EQ(output_of(m, "z").extents, (dims{1, 2, 6, 7}));
}

// ONNX pads a window up to kernel - 1 (PyTorch only to kernel / 2); a whole window of padding has
// no pool.
TEST(OnnxImport, PoolingPadsUpToKernelLessOne) {
  onnx_builder b;
  b.input("x", {1, 2, 5, 5}).output("y").output("z");
  b.node("MaxPool", {"x"}, {"y"}).attr("kernel_shape", dims{3, 3}).attr("pads", dims{2, 2, 2, 2});
  b.node("AveragePool", {"x"}, {"z"}).attr("kernel_shape", dims{2, 2}).attr("pads", dims{0, 2, 0, 0});
  const imported_model m = import_model(b.model());
  const node& y = output_of(m, "y");
  EXPECT_EQ(y.extents, (dims{1, 2, 7, 7}));
  EXPECT_EQ(y.get<memfmt::pool_params>().padding[0], 2);
  EXPECT_EQ(output_of(m, "z").kind, layer_kind::opaque);
  ASSERT_EQ(m.unsupported.size(), 1u);
  EXPECT_NE(m.unsupported[0].reason.find("whole window"), std::string::npos) << m.unsupported[0].reason;
}

TEST(OnnxImport, ReduceMeanOverSpatialAxesIsGlobalPooling) {
  onnx_builder b(13);
  b.input("x", {2, 3, 4, 5}).output("y").output("z").output("u");
  b.node("ReduceMean", {"x"}, {"y"}).attr("axes", dims{-1, -2});
  b.node("ReduceMean", {"x"}, {"z"}).attr("axes", dims{2, 3}).attr("keepdims", std::int64_t{0});
  b.node("ReduceMean", {"x"}, {"u"}).attr("axes", dims{1});
  const imported_model m = import_model(b.model());
  EXPECT_EQ(output_of(m, "y").kind, layer_kind::global_pool);
  EXPECT_EQ(output_of(m, "y").extents, (dims{2, 3, 1, 1}));
  EXPECT_EQ(output_of(m, "z").kind, layer_kind::flatten);
  EXPECT_EQ(output_of(m, "z").extents, (dims{2, 3}));
  EXPECT_EQ(output_of(m, "u").kind, layer_kind::reduce);
}

// Every ONNX reduction memfmt has over C, with axes as the attribute (opset 13) or ReduceSum's input;
// over the last axis of a channels-last view (the Transpose back restores the layout); and what
// stays a barrier: keepdims 0, all axes, a reduction over C and a spatial axis, ReduceProd.
TEST(OnnxImport, ReductionsOverChannels) {
  const std::pair<const char*, memfmt::reduce_op> ops[] = {
      {"ReduceMean", memfmt::reduce_op::mean}, {"ReduceMax", memfmt::reduce_op::max},
      {"ReduceMin", memfmt::reduce_op::min},   {"ReduceL1", memfmt::reduce_op::l1},
      {"ReduceL2", memfmt::reduce_op::l2},     {"ReduceSumSquare", memfmt::reduce_op::sum_square}};
  for (const auto& [op, want] : ops) {
    onnx_builder b(13);
    b.input("x", {2, 3, 4, 5}).output("y");
    b.node(op, {"x"}, {"y"}).attr("axes", dims{-3});
    const imported_model m = import_model(b.model());
    ASSERT_TRUE(m.runnable()) << op;
    EXPECT_EQ(output_of(m, "y").kind, layer_kind::reduce) << op;
    EXPECT_EQ(output_of(m, "y").get<memfmt::reduce_params>().op, want) << op;
    EXPECT_EQ(output_of(m, "y").extents, (dims{2, 1, 4, 5})) << op;
  }
  {
    onnx_builder b(13);
    b.input("x", {2, 3, 4}).output("y").output("t");
    b.ints("axes", {1});
    b.node("ReduceSum", {"x", "axes"}, {"y"});
    b.input("v", {2, 3, 4, 5});
    b.node("Transpose", {"v"}, {"vt"}).attr("perm", dims{0, 2, 3, 1});
    b.node("ReduceMax", {"vt"}, {"r"}).attr("axes", dims{3});
    b.node("Transpose", {"r"}, {"t"}).attr("perm", dims{0, 3, 1, 2});
    const imported_model m = import_model(b.model());
    ASSERT_TRUE(m.runnable());
    EXPECT_EQ(output_of(m, "y").get<memfmt::reduce_params>().op, memfmt::reduce_op::sum);
    EXPECT_EQ(output_of(m, "y").extents, (dims{2, 1, 1, 4}));  // rank 3 lifted: H = 1
    EXPECT_EQ(output_of(m, "t").get<memfmt::reduce_params>().op, memfmt::reduce_op::max);
    EXPECT_EQ(output_of(m, "t").extents, (dims{2, 1, 4, 5}));
  }
  onnx_builder b(13);
  b.input("x", {2, 3, 4, 5}).output("k").output("a").output("n").output("p");
  b.node("ReduceMean", {"x"}, {"k"}).attr("axes", dims{1}).attr("keepdims", std::int64_t{0});
  b.node("ReduceMax", {"x"}, {"a"});
  b.node("ReduceL2", {"x"}, {"n"}).attr("axes", dims{0, 1});
  b.node("ReduceProd", {"x"}, {"p"}).attr("axes", dims{1});
  const imported_model m = import_model(b.model());
  ASSERT_EQ(m.unsupported.size(), 4u);
  const std::string reasons[] = {"would keep axes where ONNX drops them", "all axes", "N among them",
                                 "no memfmt layer"};
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_NE(m.unsupported[i].reason.find(reasons[i]), std::string::npos) << m.unsupported[i].reason;
}

// Reductions over spatial axes and over C with them (SimAM's sum over H and W, a norm over C and H),
// on channels-first values and channels-last views; keepdims 0 where the network can read the
// ONNX shape: a flatten to [N, F], or a rank-4 value reduced over H as a rank-3 [N, C, W]; with
// noop_with_empty_axes and no axes, the identity.
TEST(OnnxImport, ReductionsOverSpatialAxes) {
  using memfmt::axis_bit;
  onnx_builder b(13);
  b.input("x", {2, 3, 4, 5}).input("l", {2, 3, 4});
  b.output("s").output("n").output("h").output("f").output("c").output("w").output("t").output("i");
  b.node("ReduceSum", {"x"}, {"i"}).attr("noop_with_empty_axes", std::int64_t{1});  // no axes: the identity
  b.ints("sum_hw", {2, 3}).ints("sum_12", {1, 2});  // ReduceSum's axes are an input from opset 13
  b.node("ReduceSum", {"x", "sum_hw"}, {"s"});
  b.node("ReduceL2", {"x"}, {"n"}).attr("axes", dims{1, 2});
  b.node("ReduceMean", {"x"}, {"h"}).attr("axes", dims{2}).attr("keepdims", std::int64_t{0});
  b.node("ReduceMin", {"l"}, {"f"}).attr("axes", dims{2}).attr("keepdims", std::int64_t{0});
  b.node("ReduceSumSquare", {"l"}, {"c"}).attr("axes", dims{1}).attr("keepdims", std::int64_t{0});
  b.node("ReduceMax", {"x"}, {"w"}).attr("axes", dims{3}).attr("keepdims", std::int64_t{0});
  b.node("Transpose", {"x"}, {"xt"}).attr("perm", dims{0, 2, 3, 1});
  b.node("ReduceSum", {"xt", "sum_12"}, {"r"});
  b.node("Transpose", {"r"}, {"t"}).attr("perm", dims{0, 3, 1, 2});
  const imported_model m = import_model(b.model());
  const auto expect_reduce = [&](const char* out, memfmt::reduce_op op, std::uint32_t axes, dims extents) {
    const node& n = output_of(m, out);
    EXPECT_EQ(n.kind, layer_kind::reduce) << out;
    EXPECT_EQ(n.get<memfmt::reduce_params>().op, op) << out;
    EXPECT_EQ(n.get<memfmt::reduce_params>().axes, axes) << out;
    EXPECT_EQ(n.extents, extents) << out;
  };
  expect_reduce("s", memfmt::reduce_op::sum, axis_bit(2) | axis_bit(3), {2, 3, 1, 1});
  expect_reduce("n", memfmt::reduce_op::l2, axis_bit(1) | axis_bit(2), {2, 1, 1, 5});
  expect_reduce("h", memfmt::reduce_op::mean, axis_bit(2), {2, 3, 1, 5});  // read as [2, 3, 5]
  expect_reduce("t", memfmt::reduce_op::sum, axis_bit(2) | axis_bit(3), {2, 3, 1, 1});
  EXPECT_EQ(output_of(m, "f").kind, layer_kind::flatten);  // [2, 3, 1, 1] -> [2, 3]
  EXPECT_EQ(output_of(m, "f").extents, (dims{2, 3}));
  EXPECT_EQ(output_of(m, "c").kind, layer_kind::flatten);  // [2, 1, 1, 4] -> [2, 4]
  EXPECT_EQ(output_of(m, "c").extents, (dims{2, 4}));
  EXPECT_EQ(output_of(m, "i").name, "x");
  ASSERT_EQ(m.unsupported.size(), 1u);  // [2, 3, 4, 1] is no [2, 3, 4] the network can read
  EXPECT_NE(m.unsupported[0].reason.find("reduction over axes [3] of [2, 3, 4, 5] with keepdims 0"), std::string::npos)
      << m.unsupported[0].reason;
}

// Pow by the constant 2 is x * x (SimAM's square); other exponents stay barriers.
TEST(OnnxImport, PowByTwoIsAProduct) {
  onnx_builder b(13);
  b.input("x", {2, 3, 4, 5}).output("y").output("z");
  b.scalar("two", 2.f).scalar("three", 3.f);
  b.node("Pow", {"x", "two"}, {"y"});
  b.node("Pow", {"x", "three"}, {"z"});
  const imported_model m = import_model(b.model());
  const node& y = output_of(m, "y");
  EXPECT_EQ(y.kind, layer_kind::binary);
  EXPECT_EQ(y.get<memfmt::binary_op>(), memfmt::binary_op::mul);
  ASSERT_EQ(y.inputs.size(), 2u);
  EXPECT_EQ(y.inputs[0], y.inputs[1]);
  EXPECT_EQ(m.network.at(y.inputs[0]).name, "x");
  ASSERT_EQ(m.unsupported.size(), 1u);
  EXPECT_NE(m.unsupported[0].reason.find("another exponent than the constant 2"), std::string::npos)
      << m.unsupported[0].reason;
}

TEST(OnnxImport, SplitAndSliceOnChannels) {
  onnx_builder b;
  b.input("x", {1, 6, 2, 2}).output("a").output("b").output("c");
  b.ints("sizes", {2, 4});
  b.node("Split", {"x", "sizes"}, {"a", "b"}, "sp").attr("axis", std::int64_t{1});
  b.ints("st", {1}).ints("en", {5}).ints("ax", {1});
  b.node("Slice", {"x", "st", "en", "ax"}, {"c"});
  const imported_model m = import_model(b.model());
  EXPECT_EQ(output_of(m, "a").get<memfmt::slice_params>().end, 2);
  EXPECT_EQ(output_of(m, "b").get<memfmt::slice_params>().begin, 2);
  EXPECT_EQ(output_of(m, "c").extents, (dims{1, 4, 2, 2}));
  EXPECT_TRUE(m.runnable());
}

// Spatial slices with steps (YOLOv5's Focus, a UNet's centre crop): one network slice per sliced
// axis, chained, the last carrying the node's name; a rank-3 value's L is the network's W, and a
// channels-last view's axes map to the network's.
TEST(OnnxImport, SlicesOfSpatialAxes) {
  constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max();
  onnx_builder b(13);
  b.input("x", {1, 4, 6, 7}).input("l", {2, 3, 8});
  b.output("crop").output("a").output("b").output("w").output("t");
  b.ints("st", {1, 0}).ints("en", {-1, big}).ints("ax", {2, 3}).ints("sp", {1, 2});
  b.node("Slice", {"x", "st", "en", "ax", "sp"}, {"crop"}, "focus");
  b.ints("sizes", {3, 4});
  b.node("Split", {"x", "sizes"}, {"a", "b"}, "halves").attr("axis", std::int64_t{-1});
  b.ints("st1", {1}).ints("en1", {8}).ints("ax1", {2}).ints("sp1", {3});
  b.node("Slice", {"l", "st1", "en1", "ax1", "sp1"}, {"w"});
  b.node("Transpose", {"x"}, {"xt"}).attr("perm", dims{0, 2, 3, 1});
  b.ints("st2", {0}).ints("en2", {6}).ints("ax2", {1}).ints("sp2", {2});
  b.node("Slice", {"xt", "st2", "en2", "ax2", "sp2"}, {"s"});
  b.node("Transpose", {"s"}, {"t"}).attr("perm", dims{0, 3, 1, 2});
  const imported_model m = import_model(b.model());
  ASSERT_TRUE(m.runnable());
  const node& crop = m.network.at(*m.network.find("focus"));
  EXPECT_EQ(crop.extents, (dims{1, 4, 4, 4}));
  const auto& w = crop.get<memfmt::slice_params>();
  EXPECT_EQ((std::array<std::int64_t, 4>{w.axis, w.begin, w.end, w.step}), (std::array<std::int64_t, 4>{3, 0, 7, 2}));
  const auto& h = m.network.at(crop.inputs.at(0)).get<memfmt::slice_params>();
  EXPECT_EQ((std::array<std::int64_t, 4>{h.axis, h.begin, h.end, h.step}), (std::array<std::int64_t, 4>{2, 1, 5, 1}));
  EXPECT_EQ(m.network.at(crop.inputs.at(0)).inputs.at(0), *m.network.find("x"));
  EXPECT_EQ(output_of(m, "a").extents, (dims{1, 4, 6, 3}));
  EXPECT_EQ(output_of(m, "b").get<memfmt::slice_params>().begin, 3);
  EXPECT_EQ(output_of(m, "w").extents, (dims{2, 3, 1, 3}));  // rank 3 lifted: L is W
  EXPECT_EQ(output_of(m, "w").get<memfmt::slice_params>().axis, 3);
  EXPECT_EQ(output_of(m, "t").extents, (dims{1, 4, 3, 7}));  // H of the channels-last view
  EXPECT_EQ(output_of(m, "t").get<memfmt::slice_params>().axis, 2);

  onnx_builder c(13);
  c.input("x", {2, 4, 6, 6}).output("n").output("r").output("e");
  c.ints("st", {1}).ints("en", {2}).ints("ax", {0});
  c.node("Slice", {"x", "st", "en", "ax"}, {"n"});
  c.ints("st1", {-1}).ints("en1", {-big}).ints("ax1", {3}).ints("sp1", {-1});
  c.node("Slice", {"x", "st1", "en1", "ax1", "sp1"}, {"r"});
  c.ints("st2", {9}).ints("en2", {12}).ints("ax2", {2});
  c.node("Slice", {"x", "st2", "en2", "ax2"}, {"e"});
  const imported_model u = import_model(c.model());
  ASSERT_EQ(u.unsupported.size(), 3u);
  const std::string reasons[] = {"slicing axis 0 of [2, 4, 6, 6] (C, F or a spatial axis only)",
                                 "a negative step on axis 3 (a reversal)", "an empty slice of axis 2"};
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_NE(u.unsupported[i].reason.find(reasons[i]), std::string::npos) << u.unsupported[i].reason;
}

// Rank-2 [N, F] values split, slice and concatenate along F; channels-last views concatenate along
// their last axis (C) and their spatial axes, network values along spatial axes too; along N Concat
// stays a barrier.
TEST(OnnxImport, ConcatSplitAndSliceOfFeaturesAndViews) {
  onnx_builder b(13);
  b.input("f", {2, 6}).input("x", {2, 4, 3, 5}).output("g").output("t").output("s").output("h").output("v");
  b.output("n");
  b.node("Split", {"f"}, {"a", "c"}).attr("axis", std::int64_t{1});
  b.node("Concat", {"c", "a"}, {"g"}, "swap").attr("axis", std::int64_t{-1});
  b.ints("st", {1}).ints("en", {5}).ints("ax", {1}).ints("sp", {2});
  b.node("Slice", {"f", "st", "en", "ax", "sp"}, {"s"});
  b.node("Transpose", {"x"}, {"xt"}).attr("perm", dims{0, 2, 3, 1});
  b.node("Concat", {"xt", "xt"}, {"ct"}).attr("axis", std::int64_t{3});
  b.node("Transpose", {"ct"}, {"t"}).attr("perm", dims{0, 3, 1, 2});
  b.node("Concat", {"x", "x"}, {"h"}).attr("axis", std::int64_t{2});
  b.node("Concat", {"xt", "xt"}, {"vt"}).attr("axis", std::int64_t{2});  // the view's W
  b.node("Transpose", {"vt"}, {"v"}).attr("perm", dims{0, 3, 1, 2});
  b.node("Concat", {"x", "x"}, {"n"}).attr("axis", std::int64_t{0});
  const imported_model m = import_model(b.model());
  EXPECT_EQ(output_of(m, "g").kind, layer_kind::concat);
  EXPECT_EQ(output_of(m, "g").extents, (dims{2, 6}));
  EXPECT_EQ(output_of(m, "s").extents, (dims{2, 2}));
  EXPECT_EQ(output_of(m, "s").get<memfmt::slice_params>().step, 2);
  EXPECT_EQ(output_of(m, "t").kind, layer_kind::concat);  // the view's C: no transposes
  EXPECT_EQ(output_of(m, "t").extents, (dims{2, 8, 3, 5}));
  EXPECT_EQ(output_of(m, "h").extents, (dims{2, 4, 6, 5}));
  EXPECT_EQ(output_of(m, "h").get<memfmt::concat_params>().axis, 2);
  EXPECT_EQ(output_of(m, "v").extents, (dims{2, 4, 3, 10}));
  EXPECT_EQ(output_of(m, "v").get<memfmt::concat_params>().axis, 3);
  ASSERT_EQ(m.unsupported.size(), 1u);
  EXPECT_NE(m.unsupported[0].reason.find("concatenation along axis 0 of [2, 4, 3, 5] (C, F or a spatial axis only)"),
            std::string::npos)
      << m.unsupported[0].reason;
}

// A Transpose that keeps N first and C second or last permutes the spatial dims of the network
// value: a transpose layer where they change order (of the value or a channels-last view, in 2-D and
// 3-D), no layer where they keep it; the layer's output is the value or a view as the Transpose said.
TEST(OnnxImport, TransposesOfSpatialDims) {
  onnx_builder b(13);
  b.input("x", {2, 4, 3, 5}).input("v", {1, 2, 3, 4, 5}).output("hw").output("cl").output("back").output("d3");
  b.output("same");
  b.node("Transpose", {"x"}, {"hw"}, "hw").attr("perm", dims{0, 1, 3, 2});
  b.node("Transpose", {"x"}, {"xt"}).attr("perm", dims{0, 2, 3, 1});                // [N, H, W, C] view
  b.node("Transpose", {"xt"}, {"cl"}, "from_view").attr("perm", dims{0, 3, 2, 1});  // [N, C, W, H]
  b.node("Transpose", {"xt"}, {"vt"}, "view_swap").attr("perm", dims{0, 2, 1, 3});  // [N, W, H, C] view
  b.node("Transpose", {"vt"}, {"back"}).attr("perm", dims{0, 3, 1, 2});             // [N, C, W, H]
  b.node("Transpose", {"v"}, {"d3"}, "d3").attr("perm", dims{0, 1, 4, 2, 3});
  b.node("Transpose", {"vt"}, {"vtt"}).attr("perm", dims{0, 2, 1, 3});  // xt again, a second layer
  b.node("Transpose", {"vtt"}, {"same"}).attr("perm", dims{0, 3, 1, 2});
  const imported_model m = import_model(b.model());
  ASSERT_TRUE(m.unsupported.empty()) << m.unsupported[0].reason;
  const auto perm_of = [](const node& n) {
    const auto& p = n.get<memfmt::rearrange_params>();
    EXPECT_EQ(p.kind, memfmt::rearrange_kind::transpose);
    return std::vector<int>(p.perm.begin(), p.perm.begin() + static_cast<std::ptrdiff_t>(n.extents.size()));
  };
  EXPECT_EQ(perm_of(output_of(m, "hw")), (std::vector<int>{0, 1, 3, 2}));
  EXPECT_EQ(output_of(m, "hw").extents, (dims{2, 4, 5, 3}));
  EXPECT_EQ(perm_of(output_of(m, "cl")), (std::vector<int>{0, 1, 3, 2}));
  EXPECT_EQ(output_of(m, "cl").extents, (dims{2, 4, 5, 3}));
  EXPECT_EQ(perm_of(output_of(m, "back")), (std::vector<int>{0, 1, 3, 2}));
  EXPECT_EQ(output_of(m, "back").name, "view_swap");
  EXPECT_EQ(perm_of(output_of(m, "d3")), (std::vector<int>{0, 1, 4, 2, 3}));
  EXPECT_EQ(output_of(m, "d3").extents, (dims{1, 2, 5, 3, 4}));
  EXPECT_EQ(output_of(m, "same").kind, layer_kind::rearrange);
  EXPECT_EQ(m.network.at(output_of(m, "same").inputs[0]).name, "view_swap");
}

TEST(OnnxImport, GemmAndMatMulWeightsAreOutByIn) {
  onnx_builder b;
  b.input("x", {2, 3}).floats("B", {3, 4}).floats("C", {4}, 10.f).output("y").output("z");
  b.node("Gemm", {"x", "B", "C"}, {"y"}, "fc").attr_f("alpha", 2.f);
  b.node("MatMul", {"x", "B"}, {"z"}, "mm");
  const imported_model m = import_model(b.model());
  // B[j][i] = 4 j + i; the linear weight W[i][j] = alpha * B[j][i].
  const auto w = m.parameters.at("fc.weight").values<float>();
  EXPECT_EQ(m.parameters.at("fc.weight").shape, (dims{4, 3}));
  EXPECT_EQ(w[1 * 3 + 2], 2.f * (4 * 2 + 1));
  EXPECT_EQ(m.parameters.at("fc.bias").values<float>()[3], 13.f);
  EXPECT_EQ(m.parameters.at("mm.weight").values<float>()[1 * 3 + 2], 9.f);
  EXPECT_EQ(output_of(m, "z").extents, (dims{2, 4}));
}

TEST(OnnxImport, FlattenReshapeSoftmaxDropoutIdentity) {
  onnx_builder b;
  b.input("x", {2, 3, 2, 2}).output("y").output("s");
  b.node("Identity", {"x"}, {"i"});
  b.node("Dropout", {"i"}, {"d"});
  b.ints("shape", {0, -1});
  b.node("Reshape", {"d", "shape"}, {"y"}, "flat");
  b.node("Softmax", {"x"}, {"s"}).attr("axis", std::int64_t{1});
  const imported_model m = import_model(b.model());
  EXPECT_EQ(output_of(m, "y").kind, layer_kind::flatten);
  EXPECT_EQ(output_of(m, "y").extents, (dims{2, 12}));
  EXPECT_EQ(output_of(m, "s").kind, layer_kind::softmax);
  EXPECT_TRUE(m.runnable());
}

// Flatten at axis 3 of [2, 1, 1, 3, 2] is [2, 6], the [N, features] flatten; at -2 of [2, 3, 2, 2] it
// would be [12, 2], not a view the network has: no layer.
TEST(OnnxImport, FlattenAtALaterAxisAfterUnitDims) {
  onnx_builder b;
  b.input("x", {2, 1, 1, 3, 2}).input("w", {2, 3, 2, 2}).output("y").output("z");
  b.node("Flatten", {"x"}, {"y"}).attr("axis", std::int64_t{3});
  b.node("Flatten", {"w"}, {"z"}, "fz").attr("axis", std::int64_t{-2});
  const imported_model m = import_model(b.model());
  EXPECT_EQ(output_of(m, "y").kind, layer_kind::flatten);
  EXPECT_EQ(output_of(m, "y").extents, (dims{2, 6}));
  EXPECT_EQ(output_of(m, "z").kind, layer_kind::opaque);
  ASSERT_EQ(m.unsupported.size(), 1u);
  EXPECT_NE(m.unsupported[0].reason.find("axis 2 of [2, 3, 2, 2]"), std::string::npos) << m.unsupported[0].reason;
}

TEST(OnnxImport, SqueezeExcitationBroadcastMul) {
  onnx_builder b;
  b.input("x", {2, 4, 5, 5}).output("y");
  b.node("GlobalAveragePool", {"x"}, {"g"});
  b.node("Sigmoid", {"g"}, {"s"});
  b.node("Mul", {"x", "s"}, {"y"});
  const imported_model m = import_model(b.model());
  EXPECT_EQ(output_of(m, "y").get<memfmt::binary_op>(), memfmt::binary_op::mul);
  EXPECT_EQ(output_of(m, "y").extents, (dims{2, 4, 5, 5}));
}

// A constant operand of Add/Sub/Mul/Div becomes a constant node, its shape aligned to the other
// operand's rank as numpy broadcasting aligns it (and lifted for a 1-D net), its values the
// initializer's; one node per constant and shape however many ops read it. A constant of higher
// rank than its operand, empty, or of another dtype, stays a barrier with the reason.
TEST(OnnxImport, ConstantOperandsBecomeConstantNodes) {
  onnx_builder b;
  b.input("x", {2, 3, 4, 5}).input("t", {2, 3, 7}).input("v", {2, 3}).input("u", {2, 1});
  b.output("y").output("z").output("w").output("e");
  b.floats("mean", {3, 1, 1}, -1.f, 0.5f).floats("row", {3, 1}, 2.f, 1.f).floats("big", {1, 1, 2, 3}, 0.f, 1.f);
  b.scalar("two", 2.f);
  b.node("Sub", {"x", "mean"}, {"a"}, "center");
  b.node("Div", {"two", "a"}, {"r"}, "reciprocal");
  b.node("Add", {"r", "mean"}, {"y"});
  b.node("Mul", {"t", "row"}, {"z"});
  b.node("Add", {"v", "big"}, {"w"}, "too_high");
  b.floats("nothing", {0});
  b.node("Mul", {"u", "nothing"}, {"e"}, "empty");
  const imported_model m = import_model(b.model());
  std::vector<const node*> constants;
  for (const node& n : m.network.nodes())
    if (n.kind == layer_kind::constant) constants.push_back(&n);
  ASSERT_EQ(constants.size(), 3u);  // mean (read twice), two, row
  EXPECT_EQ(constants[0]->name, "mean");
  EXPECT_EQ(constants[0]->extents, (dims{1, 3, 1, 1}));
  EXPECT_EQ(constants[1]->extents, (dims{1, 1, 1, 1}));
  EXPECT_EQ(constants[2]->name, "row");
  EXPECT_EQ(constants[2]->extents, (dims{1, 3, 1, 1}));  // [3, 1] aligned to [1, 3, 1] and lifted
  const node& recip = m.network.at(*m.network.find("reciprocal"));
  EXPECT_EQ(recip.get<memfmt::binary_op>(), memfmt::binary_op::div);
  EXPECT_EQ(recip.inputs[0], constants[1]->id);  // the constant stays the dividend
  EXPECT_EQ(output_of(m, "y").inputs[1], constants[0]->id);
  EXPECT_EQ(output_of(m, "z").extents, (dims{2, 3, 1, 7}));
  const auto& mean = m.parameters.at("mean.value");
  EXPECT_EQ(mean.shape, (dims{1, 3, 1, 1}));
  EXPECT_EQ(mean.values<float>(), (std::vector<float>{-1.f, -0.5f, 0.f}));
  EXPECT_EQ(m.source.at("mean.value"), "mean");
  EXPECT_EQ(m.parameters.at("two.value").values<float>(), std::vector<float>{2.f});
  ASSERT_EQ(m.unsupported.size(), 2u);
  EXPECT_EQ(m.unsupported[0].onnx_node, "too_high");
  EXPECT_NE(m.unsupported[0].reason.find("constant 'big' [1, 1, 2, 3] has a higher rank than [2, 3]"),
            std::string::npos)
      << m.unsupported[0].reason;
  EXPECT_EQ(m.unsupported[1].onnx_node, "empty");
  EXPECT_NE(m.unsupported[1].reason.find("constant 'nothing' [0] is empty"), std::string::npos)
      << m.unsupported[1].reason;
  memfmt::runtime::check_parameters(m.network, m.parameters);
}

TEST(OnnxImport, DepthToSpaceAndSpaceToDepthWithTheirModes) {
  onnx_builder b;
  b.input("x", {1, 8, 2, 3}).output("dcr").output("crd").output("s2d");
  b.node("DepthToSpace", {"x"}, {"dcr"}, "d2s_dcr").attr("blocksize", std::int64_t{2});
  b.node("DepthToSpace", {"x"}, {"crd"}, "d2s_crd").attr("blocksize", std::int64_t{2}).attr("mode", std::string("CRD"));
  b.node("SpaceToDepth", {"dcr"}, {"s2d"}, "s2d").attr("blocksize", std::int64_t{2});
  const imported_model m = import_model(b.model());
  const auto params = [&](const char* name) { return output_of(m, name).get<memfmt::rearrange_params>(); };
  EXPECT_EQ(params("dcr").kind, memfmt::rearrange_kind::depth_to_space);
  EXPECT_EQ(params("dcr").order, memfmt::block_order::dcr);
  EXPECT_EQ(params("crd").order, memfmt::block_order::crd);
  EXPECT_EQ(params("s2d").kind, memfmt::rearrange_kind::space_to_depth);
  EXPECT_EQ(params("s2d").factor, 2);
  EXPECT_EQ(output_of(m, "crd").extents, (dims{1, 2, 4, 6}));
  EXPECT_EQ(output_of(m, "s2d").extents, (dims{1, 8, 2, 3}));
  EXPECT_TRUE(m.runnable());
  onnx_builder bad;
  bad.input("x", {1, 8, 2, 3}).output("y");
  bad.node("DepthToSpace", {"x"}, {"y"}, "d2s").attr("blocksize", std::int64_t{2}).attr("mode", std::string("RCD"));
  memfmt_test::expect_error([&] { import_model(bad.model()); }, memfmt::errc::invalid_argument,
                            {"'d2s'", "mode 'RCD'"});
}

// A Transpose that moves C last is a view of the same network value (no node), the one back ends
// it; the ops over the last axis become layers over C, and everything else that reads the view is
// a barrier reading the logical value, with the reason.
TEST(OnnxImport, ChannelsLastTransposesAreViews) {
  const auto reason_of = [](const imported_model& m, const std::string& onnx_node) {
    for (const auto& u : m.unsupported)
      if (u.onnx_node == onnx_node) return u.reason;
    return std::string("(not a barrier)");
  };
  {  // LayerNormalization + MatMul (bias fused) + Relu on the view, then back: no transposes left.
    onnx_builder b(17);
    b.input("x", {1, 4, 3, 2}).floats("gamma", {4}).floats("w", {4, 6}).floats("bias", {6}).output("y");
    b.node("Transpose", {"x"}, {"t"}, "to_last").attr("perm", dims{0, 2, 3, 1});
    b.node("LayerNormalization", {"t", "gamma"}, {"ln"}, "ln").attr_f("epsilon", 1e-3f);
    b.node("MatMul", {"ln", "w"}, {"m"}, "fc").node("Add", {"m", "bias"}, {"a"}, "fc_add");
    b.node("Relu", {"a"}, {"r"}, "relu");
    b.node("Transpose", {"r"}, {"y"}, "to_first").attr("perm", dims{0, 3, 1, 2});
    const imported_model m = import_model(b.model());
    ASSERT_TRUE(m.runnable()) << m.unsupported.front().reason;
    const node& ln = only(m, layer_kind::layer_norm);
    EXPECT_EQ(ln.extents, (dims{1, 4, 3, 2}));
    EXPECT_EQ(ln.get<memfmt::graph::layer_norm_attrs>().params.epsilon, static_cast<double>(1e-3f));
    const node& fc = only(m, layer_kind::conv);
    EXPECT_EQ(fc.extents, (dims{1, 6, 3, 2}));
    EXPECT_EQ(fc.name, "fc");
    EXPECT_TRUE(fc.get<memfmt::graph::conv_attrs>().bias);
    EXPECT_EQ(output_of(m, "y").kind, layer_kind::activation);
    // The MatMul's [C, K] weight is the 1x1 conv's [K, C]: weight[o][i] = w[i][o] = i * 6 + o.
    const auto weight = m.parameters.at("fc.weight");
    EXPECT_EQ(weight.shape, (dims{6, 4, 1, 1}));
    EXPECT_EQ(memfmt::onnx::element_as_double(weight, 1 * 4 + 2), 2 * 6 + 1);
    // No bias input: the layer norm's bias is zeros.
    EXPECT_EQ(memfmt::onnx::element_as_double(m.parameters.at("ln.bias"), 3), 0.0);
    memfmt::runtime::check_parameters(m.network, m.parameters);
  }
  {  // What cannot read the view, what is not a layer over C, and a view as a graph output.
    onnx_builder b(17);
    b.input("x", {1, 4, 3, 2}).floats("gamma", {2}).floats("hw", {3, 1, 4}).output("p").output("n").output("c");
    b.output("o");
    b.node("Transpose", {"x"}, {"t"}, "to_last").attr("perm", dims{0, 2, 3, 1});
    b.node("MaxPool", {"t"}, {"pool"}, "pool").attr("kernel_shape", dims{1, 1});
    b.node("Relu", {"pool"}, {"p"});
    b.node("LayerNormalization", {"x", "gamma"}, {"n"}, "ln_over_w");  // axis -1 of NCHW: W
    b.node("Mul", {"t", "hw"}, {"ct"}, "per_position");                // [H, 1, C]: needs a reorder
    b.node("Transpose", {"ct"}, {"c"}, "back").attr("perm", dims{0, 3, 1, 2});
    b.node("Transpose", {"x"}, {"o"}, "other_perm").attr("perm", dims{1, 0, 2, 3});
    const imported_model m = import_model(b.model());
    EXPECT_NE(reason_of(m, "pool").find("transposed to channels-last"), std::string::npos) << reason_of(m, "pool");
    EXPECT_NE(reason_of(m, "ln_over_w").find("only over C"), std::string::npos) << reason_of(m, "ln_over_w");
    EXPECT_NE(reason_of(m, "per_position").find("would need its elements reordered"), std::string::npos)
        << reason_of(m, "per_position");
    EXPECT_NE(reason_of(m, "other_perm").find("N must stay first, C second or last"), std::string::npos)
        << reason_of(m, "other_perm");
    // The barrier reads the logical value: the graph input itself.
    EXPECT_EQ(m.network.at(*m.network.find("pool")).inputs, std::vector<memfmt::graph::node_id>{*m.network.find("x")});
  }
  {
    onnx_builder b(17);
    b.input("x", {1, 4, 3, 2}).output("t");
    b.node("Transpose", {"x"}, {"t"}, "to_last").attr("perm", dims{0, 2, 3, 1});
    memfmt_test::expect_error([&] { import_model(b.model()); }, memfmt::errc::unsupported,
                              {"graph output 't'", "[1, 3, 2, 4]", "transposed to channels-last"});
  }
}

// x * (1 + erf(x / sqrt 2)) / 2 is one gelu; the same nodes with an intermediate read elsewhere
// stay apart (Erf itself a barrier).
TEST(OnnxImport, ErfGeluPatternIsOneActivation) {
  const auto build = [](bool leak) {
    onnx_builder b;
    b.input("x", {1, 3, 2, 2}).output("y");
    if (leak) b.output("e");
    b.scalar("sqrt2", 1.4142135f).node("Div", {"x", "sqrt2"}, {"d"}, "div");
    b.node("Erf", {"d"}, {"e"}, "erf");
    b.scalar("one", 1.f).node("Add", {"one", "e"}, {"a"}, "add");
    b.node("Mul", {"a", "x"}, {"m"}, "mul");
    b.scalar("half", 0.5f).node("Mul", {"m", "half"}, {"y"}, "half");
    return b;
  };
  const imported_model m = import_model(build(false).model());
  ASSERT_TRUE(m.runnable());
  EXPECT_EQ(only(m, layer_kind::activation).get<memfmt::activation_params>().kind, memfmt::activation::gelu);
  EXPECT_EQ(m.network.nodes().size(), 3u);  // input, gelu, output
  const imported_model apart = import_model(build(true).model());
  ASSERT_EQ(apart.unsupported.size(), 1u);
  EXPECT_EQ(apart.unsupported[0].op, "Erf");
}

// The tanh GELU as PyTorch 1.13 exports F.gelu(x, approximate="tanh") is one gelu_tanh; with an
// intermediate value read elsewhere too, the ops import one by one.
TEST(OnnxImport, TanhGeluPatternIsOneActivation) {
  const auto build = [](bool leak) {
    onnx_builder b;
    b.input("x", {1, 3, 2, 2}).output("y");
    if (leak) b.output("t");
    b.node("Mul", {"x", "x"}, {"sq"}, "square").node("Mul", {"x", "sq"}, {"cube"}, "cube");
    b.scalar("kappa", 0.044715f).node("Mul", {"kappa", "cube"}, {"kc"}, "kappa_mul");
    b.node("Add", {"x", "kc"}, {"s"}, "add_x");
    b.scalar("beta", 0.7978845608f).node("Mul", {"beta", "s"}, {"inner"}, "beta_mul");
    b.node("Tanh", {"inner"}, {"t"}, "tanh");
    b.scalar("one", 1.f).node("Add", {"one", "t"}, {"u"}, "add_one");
    b.node("Mul", {"x", "u"}, {"v"}, "times_x");
    b.scalar("half", 0.5f).node("Mul", {"half", "v"}, {"y"}, "half");
    return b;
  };
  const imported_model m = import_model(build(false).model());
  ASSERT_TRUE(m.runnable());
  EXPECT_EQ(only(m, layer_kind::activation).get<memfmt::activation_params>().kind, memfmt::activation::gelu_tanh);
  EXPECT_EQ(m.network.nodes().size(), 3u);  // input, gelu_tanh, output
  const imported_model apart = import_model(build(true).model());
  ASSERT_TRUE(apart.runnable());
  EXPECT_GT(apart.network.nodes().size(), 10u);
  EXPECT_EQ(only(apart, layer_kind::activation).get<memfmt::activation_params>().kind, memfmt::activation::tanh);
}

// f(x) * x as exporters write silu (Sigmoid, Mul: nn.SiLU), hardswish (HardSigmoid with PyTorch's
// 1/6 and 1/2, Mul: nn.Hardswish before opset 14) and mish (Softplus, Tanh, Mul: nn.Mish before
// opset 18), in either operand order, is one activation; with an intermediate value read elsewhere
// too, or with another HardSigmoid slope, the ops import as they are.
TEST(OnnxImport, FunctionTimesItsInputIsOneActivation) {
  struct pattern {
    std::vector<std::string> ops;
    memfmt::activation fused;
  };
  const std::vector<pattern> patterns{{{"Sigmoid"}, memfmt::activation::silu},
                                      {{"HardSigmoid"}, memfmt::activation::hardswish},
                                      {{"Softplus", "Tanh"}, memfmt::activation::mish}};
  const auto build = [](const pattern& p, bool swapped, bool leak, float alpha) {
    onnx_builder b;
    b.input("x", {1, 3, 2, 2}).output("y");
    std::string at = "x";
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const std::string out = "t" + std::to_string(i);
      b.node(p.ops[i], {at}, {out}, p.ops[i]);
      if (p.ops[i] == "HardSigmoid") b.attr_f("alpha", alpha).attr_f("beta", 0.5f);
      at = out;
    }
    if (leak) b.output("t0");
    b.node("Mul", swapped ? std::vector<std::string>{at, "x"} : std::vector<std::string>{"x", at}, {"y"}, "mul");
    return b;
  };
  for (const pattern& p : patterns) {
    SCOPED_TRACE(p.ops.front());
    for (bool swapped : {false, true}) {
      const imported_model m = import_model(build(p, swapped, false, 1.f / 6.f).model());
      ASSERT_TRUE(m.runnable());
      EXPECT_EQ(only(m, layer_kind::activation).get<memfmt::activation_params>().kind, p.fused);
      EXPECT_EQ(m.network.nodes().size(), 3u);  // input, the activation, output
    }
    const imported_model apart = import_model(build(p, false, true, 1.f / 6.f).model());
    ASSERT_TRUE(apart.runnable());
    EXPECT_EQ(only(apart, layer_kind::binary).get<memfmt::binary_op>(), memfmt::binary_op::mul);
    std::size_t activations = 0;
    for (const node& n : apart.network.nodes()) activations += n.kind == layer_kind::activation;
    EXPECT_EQ(activations, p.ops.size());
  }
  const imported_model other_slope = import_model(build(patterns[1], false, false, 0.2f).model());
  ASSERT_TRUE(other_slope.runnable());
  EXPECT_EQ(only(other_slope, layer_kind::activation).get<memfmt::activation_params>(),
            memfmt::activation_params::hardsigmoid(static_cast<double>(0.2f), 0.5));
  EXPECT_EQ(only(other_slope, layer_kind::binary).get<memfmt::binary_op>(), memfmt::binary_op::mul);
}

// Graph inputs read only in weight slots (a Conv's W, a PRelu's slope: ONNX's backend tests feed
// them as inputs) are the ones import_options::input_values takes; data inputs, and an input also
// read as data, are not.
TEST(OnnxImport, ParameterInputsAreThoseReadOnlyAsWeights) {
  onnx_builder b;
  b.input("x", {1, 2, 3, 3}).input("w", {2, 2, 1, 1}).input("slope", {2, 1, 1}).input("both", {1, 2, 3, 3});
  b.output("y").output("z");
  b.node("Conv", {"x", "w"}, {"c"}, "conv");
  b.node("PRelu", {"c", "slope"}, {"y"}, "prelu");
  b.node("PRelu", {"x", "both"}, {"p"}, "prelu_both").node("Add", {"p", "both"}, {"z"}, "add");
  EXPECT_EQ(memfmt::onnx::parameter_inputs(b.model()), (std::set<std::string>{"w", "slope"}));
}

TEST(OnnxImport, UnknownOpIsAnOpaqueBarrierWithInferredShape) {
  onnx_builder b;
  b.input("x", {1, 2, 3, 3}).output("y");
  b.node("Hardmax", {"x"}, {"l"}, "hardmax");
  b.node("Relu", {"l"}, {"y"});
  const imported_model m = import_model(b.model());
  ASSERT_EQ(m.unsupported.size(), 1u);
  EXPECT_EQ(m.unsupported[0].op, "Hardmax");
  EXPECT_EQ(m.unsupported[0].node, "hardmax");
  const node& o = m.network.at(*m.network.find("hardmax"));
  EXPECT_EQ(o.kind, layer_kind::opaque);
  EXPECT_EQ(o.extents, (dims{1, 2, 3, 3}));
  EXPECT_FALSE(m.runnable());
}

// A transformer's token tensors and the shape arithmetic on them are no network values: the ops on
// them form one barrier, whose opaque node reads the network values they came from.
TEST(OnnxImport, OpsOnValuesOfOtherRanksFormOneBarrier) {
  onnx_builder b(13);
  b.input("x", {1, 2, 4, 4}).floats("w", {3, 2, 1, 1}).ints("axes", {1, 2, 3}).ints("u", {1}).output("y").output("z");
  b.node("Conv", {"x", "w"}, {"c"}, "conv");
  b.node("ReduceSum", {"c", "axes"}, {"r"}, "sum").attr("keepdims", std::int64_t{0});  // [1]: rank 1
  b.node("Mul", {"r", "r"}, {"sq"}, "square");                                         // [1]
  b.node("Unsqueeze", {"sq", "u"}, {"y"}, "unsqueeze");                                // [1, 1]
  b.node("Relu", {"c"}, {"z"}, "relu");
  const imported_model m = import_model(b.model());
  ASSERT_EQ(m.unsupported.size(), 3u);
  EXPECT_EQ(m.unsupported[0].op, "ReduceSum");
  EXPECT_EQ(m.unsupported[0].node, "");  // its output [1] is no network value
  EXPECT_EQ(m.unsupported[1].op, "Mul");
  EXPECT_NE(m.unsupported[1].reason.find("'r' is computed by an op the network cannot express"), std::string::npos)
      << m.unsupported[1].reason;
  EXPECT_EQ(m.unsupported[2].node, "unsqueeze");
  const node& barrier = m.network.at(*m.network.find("unsqueeze"));
  EXPECT_EQ(barrier.kind, layer_kind::opaque);
  EXPECT_EQ(barrier.extents, (dims{1, 1}));
  ASSERT_EQ(barrier.inputs.size(), 1u);  // through the two ops without a node, on the conv
  EXPECT_EQ(m.network.at(barrier.inputs[0]).name, "conv");
  EXPECT_EQ(only(m, layer_kind::activation).inputs, barrier.inputs);
  EXPECT_FALSE(m.runnable());
  // A graph output that is no network value (here [1]) is no output of the network: its barrier
  // ends in an opaque node of extents [1, elements] on the values it was computed from.
  onnx_builder scalar_out = b;
  scalar_out.model().mutable_graph()->mutable_output(0)->set_name("sq");
  const imported_model s = import_model(scalar_out.model());
  ASSERT_EQ(s.outputs.size(), 1u);
  EXPECT_EQ(s.outputs[0].name, "z");
  ASSERT_EQ(s.unsupported.size(), 3u);
  EXPECT_EQ(s.unsupported[1].op, "Mul");
  EXPECT_EQ(s.unsupported[1].node, "sq");
  const node& sink = s.network.at(*s.network.find("sq"));
  EXPECT_EQ(sink.kind, layer_kind::opaque);
  EXPECT_EQ(sink.extents, (dims{1, 1}));
  EXPECT_EQ(sink.inputs, barrier.inputs);
}

// An op ONNX's inference knows nothing of gives no static shape: the Shape of its output is no
// constant (exporters' shape arithmetic on it is part of the barrier), and the graph output's
// declared shape, its symbolic batch resolved, is the opaque node's.
TEST(OnnxImport, ValuesOfUnknownShapeTakeTheGraphOutputsDeclaredShape) {
  onnx_builder b(13);
  b.input_symbolic_batch("x", {2, 4, 4}).ints("one", {1}).output("y");
  b.node("Frobnicate", {"x"}, {"f"}, "custom").model().mutable_graph()->mutable_node(0)->set_domain("com.example");
  b.node("Shape", {"f"}, {"s"}, "shape");
  b.node("Gather", {"s", "one"}, {"c"}, "gather").attr("axis", std::int64_t{0});  // dead: no graph output reads it
  b.node("Reshape", {"f", "s"}, {"y"}, "reshape");
  auto* declared = b.model().mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  declared->add_dim()->set_dim_param("batch");
  for (std::int64_t d : {2, 4, 4}) declared->add_dim()->set_dim_value(d);
  memfmt::onnx::import_options o;
  o.batch = 3;
  const imported_model m = import_model(b.model(), o);
  ASSERT_EQ(m.unsupported.size(), 4u);
  EXPECT_EQ(m.unsupported[0].op, "com.example.Frobnicate");
  EXPECT_EQ(m.unsupported[0].node, "");
  EXPECT_NE(m.unsupported[1].reason.find("shape is unknown"), std::string::npos) << m.unsupported[1].reason;
  const node& y = m.network.at(*m.network.find("reshape"));
  EXPECT_EQ(y.kind, layer_kind::opaque);
  EXPECT_EQ(y.extents, (dims{3, 2, 4, 4}));
  ASSERT_EQ(y.inputs.size(), 1u);
  EXPECT_EQ(m.network.at(y.inputs[0]).name, "x");
}

TEST(OnnxImport, SymbolicBatchTakesTheOption) {
  onnx_builder b;
  b.input_symbolic_batch("x", {3, 4, 4}).floats("w", {2, 3, 1, 1}).output("y");
  b.node("Conv", {"x", "w"}, {"y"});
  memfmt::onnx::import_options o;
  o.batch = 5;
  EXPECT_EQ(output_of(import_model(b.model(), o), "y").extents, (dims{5, 2, 4, 4}));
}

// libonnx 1.12's shape inference reads out of bounds on a Conv whose W has another rank than its X
// (it sizes the dilations by X and indexes them by W). An opaque node before such a Conv makes the
// importer infer shapes with it in the model: it must come out as a memfmt::error or a barrier,
// never a crash (the fuzz target found it; the CI's ASan build would see the read).
TEST(OnnxImportErrors, ShapeInferenceNeverSeesAConvItWouldReadOutOfBounds) {
  for (const char* op : {"Conv", "ConvTranspose"}) {
    SCOPED_TRACE(op);
    onnx_builder b;
    b.input("x", {1, 2}).floats("w", {2, 2, 3, 3}).output("y").output("e");
    b.node("Erf", {"x"}, {"e"});  // no memfmt layer: shape inference runs before the Conv is translated
    b.node(op, {"x", "w"}, {"y"}).attr("pads", dims{1, 1, 1, 1});
    const auto code = memfmt_test::error_code([&] { import_model(b.model()); });
    if (code) {
      EXPECT_TRUE(*code == memfmt::errc::unsupported || *code == memfmt::errc::invalid_argument ||
                  *code == memfmt::errc::shape_mismatch)
          << memfmt_test::error_text([&] { import_model(b.model()); });
    }
  }
}

TEST(OnnxImportErrors, MalformedModelsNameTheNodeAndValues) {
  using memfmt::errc;
  using memfmt_test::expect_error;
  expect_error([] { memfmt::onnx::import_bytes("this is not protobuf \x01\x02\xff"); }, errc::invalid_argument,
               {"not a serialized ONNX ModelProto"});
  const auto conv = [](std::vector<std::int64_t> w_dims) {
    onnx_builder b;
    b.input("x", {1, 3, 4, 4}).floats("w", w_dims).output("y");
    b.node("Conv", {"x", "w"}, {"y"}, "c");
    return b;
  };
  {
    onnx_builder b;
    b.input("x", {1, 3, 4, 4}).output("y");
    b.node("Conv", {"x", "missing_w"}, {"y"}, "c");
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument, {"'c' (Conv)", "'missing_w'"});
  }
  expect_error([&] { import_model(conv({2, 3, 3}).model()); }, errc::invalid_argument, {"'c' (Conv)", "[2, 3, 3]"});
  {
    onnx_builder b = conv({2, 3, 3, 3});
    b.model().mutable_graph()->mutable_node(0)->add_attribute()->set_name("auto_pad");
    b.model().mutable_graph()->mutable_node(0)->mutable_attribute(0)->set_type(::onnx::AttributeProto::STRING);
    b.model().mutable_graph()->mutable_node(0)->mutable_attribute(0)->set_s("SOMETIMES");
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument, {"'c' (Conv)", "auto_pad = 'SOMETIMES'"});
  }
  {
    onnx_builder b = conv({2, 3, 3, 3});
    b.select_last_node().attr("strides", std::string("2"));
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument, {"'strides' has type STRING"});
  }
  {
    onnx_builder b = conv({2, 3, 3, 3});
    b.select_last_node().attr("kernel_shape", dims{2, 2});
    expect_error([&] { import_model(b.model()); }, errc::shape_mismatch, {"kernel_shape [2, 2]", "[3, 3]"});
  }
  {
    onnx_builder b = conv({2, 3, 1, 1});  // float_data shorter than the dims say
    b.model().mutable_graph()->mutable_initializer(0)->add_dims(2);
    expect_error([&] { import_model(b.model()); }, errc::shape_mismatch,
                 {"'w'", "needs 12 elements, float_data holds 6"});
  }
  {
    onnx_builder b = conv({2, 3, 1, 1});  // dims claiming 2^60 elements over 6 stored: refused, not allocated
    b.model().mutable_graph()->mutable_initializer(0)->set_dims(0, std::int64_t{1} << 60);
    expect_error([&] { import_model(b.model()); }, errc::overflow, {"'w'"});
  }
  for (float scale : {1e22f, std::numeric_limits<float>::infinity()}) {  // an extent past int64, not a wrapped one
    onnx_builder b;
    b.input("x", {1, 2, 4, 5}).output("y");
    ::onnx::TensorProto scales;
    scales.set_data_type(::onnx::TensorProto::FLOAT);
    scales.add_dims(4);
    for (float s : {1.f, 1.f, scale, 2.f}) scales.add_float_data(s);
    b.node("Constant", {}, {"scales"}).attr_tensor("value", scales);
    b.node("Upsample", {"x", "scales"}, {"y"}, "u");
    expect_error([&] { import_model(b.model()); }, errc::overflow, {"'u' (Upsample)", "dim 2 (extent 4)", "past 2^62"});
  }
  {
    onnx_builder b;  // Shape of an omitted input: named as missing (it was a map lookup's out_of_range)
    b.input("x", {1, 3, 4, 4}).output("y");
    b.node("Shape", {""}, {"s"}, "shape");
    b.node("Relu", {"x"}, {"y"}, "r");
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument, {"'shape' (Shape)", "input 0 is missing"});
  }
  {
    onnx_builder b;  // a layer without the output its schema requires
    b.input("x", {1, 3, 4, 4}).output("y");
    b.node("Softmax", {"x"}, {}, "s");
    b.node("Relu", {"x"}, {"y"}, "r");
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument, {"'s' (Softmax)", "0 outputs", "takes 1"});
  }
  {
    onnx_builder b;  // a Constant without its output
    b.input("x", {1, 3, 4, 4}).output("x");
    ::onnx::TensorProto one;
    one.set_data_type(::onnx::TensorProto::FLOAT);
    one.add_float_data(1.f);
    b.node("Constant", {}, {}, "k").attr_tensor("value", one);
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument, {"'k' (Constant)", "0 outputs"});
  }
  {
    onnx_builder b;  // a rank-1 input cannot be a network value
    b.input("x", {7}).output("y");
    b.node("Relu", {"x"}, {"y"});
    expect_error([&] { import_model(b.model()); }, errc::unsupported, {"'x' [7] has rank 1"});
  }
}

// Graphs that broke ONNX's rules reached libonnx 1.12's shape inference, which crashed on some
// (Gemm at opset 6 with B of rank 1 or 0), or were imported with the last writer winning. memfmt's
// own rules (detail/validate.hpp) refuse them first, naming the node and value; libonnx sees one
// node at a time, only with input ranks its op's rule accepts (detail/infer.hpp).
TEST(OnnxImportErrors, GraphsThatBreakOnnxRulesAreRefusedBeforeLibonnxSeesThem) {
  using memfmt::errc;
  using memfmt_test::expect_error;
  for (const dims& b_shape : {dims{4}, dims{}}) {
    onnx_builder b(6);
    b.input("x", {1, 4}).floats("B", b_shape).floats("C", {4}).output("y");
    b.node("Gemm", {"x", "B", "C"}, {"y"}, "gemm");
    const std::string e = memfmt_test::error_text([&] { import_model(b.model()); });
    EXPECT_NE(e.find("'gemm' (Gemm)"), std::string::npos) << e;
  }
  {
    onnx_builder b;  // an opaque op (TopK) reading a Gemm's rank-1 B: never inferred
    b.input("x", {1, 4}).floats("B", {4}).ints("k", {1}).output("y");
    b.node("Gemm", {"x", "B"}, {"g"}, "gemm").node("TopK", {"g", "k"}, {"y", "i"}, "topk");
    const std::string e = memfmt_test::error_text([&] { import_model(b.model()); });
    EXPECT_NE(e.find("gemm"), std::string::npos) << e;
  }
  {
    onnx_builder b;  // single assignment: two writers of 'y'
    b.input("x", {1, 3, 4, 4}).output("y");
    b.node("Relu", {"x"}, {"y"}, "a").node("Sigmoid", {"x"}, {"y"}, "b");
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument,
                 {"'b' (Sigmoid)", "'y'", "written by an earlier node", "assigned once"});
  }
  {
    onnx_builder b;  // a node writing a graph input
    b.input("x", {1, 3, 4, 4}).output("y");
    b.node("Relu", {"x"}, {"x"}, "a").node("Relu", {"x"}, {"y"}, "b");
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument,
                 {"'a' (Relu)", "'x'", "is already a graph input"});
  }
  {
    onnx_builder b;
    b.input("x", {1, 3, 4, 4}).input("x", {1, 3, 4, 4}).output("y");
    b.node("Relu", {"x"}, {"y"}, "r");
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument, {"graph input 'x' is listed twice"});
  }
  {
    onnx_builder b;  // a node reading a value written after it: not topologically sorted
    b.input("x", {1, 3, 4, 4}).output("y");
    b.node("Relu", {"t"}, {"y"}, "second").node("Relu", {"x"}, {"t"}, "first");
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument,
                 {"'second' (Relu)", "'t'", "no earlier node"});
  }
  for (const std::int64_t opset : {std::int64_t{99}, std::int64_t{-5}, std::int64_t{0}}) {
    onnx_builder b(opset);
    b.input("x", {1, 3, 4, 4}).output("y");
    b.node("Relu", {"x"}, {"y"}, "r");
    expect_error([&] { import_model(b.model()); }, opset > 0 ? errc::unsupported : errc::invalid_argument,
                 {"opset " + std::to_string(opset), "1 to 21"});
  }
  {
    onnx_builder b;
    b.input("x", {1, 3, 4, 4});
    b.node("Relu", {"x"}, {"y"}, "r");
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument, {"the graph has no outputs"});
  }
  {
    onnx_builder b;  // names that are not UTF-8: a value, a node, a graph output
    b.input("x", {1, 3, 4, 4}).output("y\xFF");
    b.node("Relu", {"x"}, {"y\xFF"}, "r");
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument, {"'y\\xFF'", "is not UTF-8 (byte 1 of 2)"});
    onnx_builder c;
    c.input("x", {1, 3, 4, 4}).output("y");
    c.node("Relu", {"x"}, {"y"}, "r\xFE\xFE");
    expect_error([&] { import_model(c.model()); }, errc::invalid_argument, {"name 'r\\xFE\\xFE' is not UTF-8"});
  }
  {
    onnx_builder b;  // attributes against the op's schema: unknown, twice, of the wrong type, missing
    b.input("x", {1, 3, 4, 4}).output("y");
    b.node("LeakyRelu", {"x"}, {"y"}, "l").attr_f("alpha", 0.1f).attr_f("beta", 0.2f);
    expect_error([&] { import_model(b.model()); }, errc::invalid_argument,
                 {"'l' (LeakyRelu)", "attribute 'beta' is not one of"});
    onnx_builder c;
    c.input("x", {1, 3, 4, 4}).output("y");
    c.node("LeakyRelu", {"x"}, {"y"}, "l").attr_f("alpha", 0.1f).attr_f("alpha", 0.2f);
    expect_error([&] { import_model(c.model()); }, errc::invalid_argument, {"attribute 'alpha' is given twice"});
    onnx_builder d;
    d.input("x", {1, 3, 4, 4}).output("y");
    d.node("LeakyRelu", {"x"}, {"y"}, "l").attr("alpha", std::int64_t{1});
    expect_error([&] { import_model(d.model()); }, errc::invalid_argument,
                 {"attribute 'alpha' has type INT, expected FLOAT"});
    onnx_builder e;  // Cast's `to` is required
    e.input("x", {1, 3, 4, 4}).output("y");
    e.node("Cast", {"x"}, {"y"}, "cast");
    expect_error([&] { import_model(e.model()); }, errc::invalid_argument,
                 {"'cast' (Cast)", "required attribute 'to'"});
    onnx_builder f;  // Relu of two inputs
    f.input("x", {1, 3, 4, 4}).output("y");
    f.node("Relu", {"x", "x"}, {"y"}, "r");
    expect_error([&] { import_model(f.model()); }, errc::invalid_argument, {"'r' (Relu)", "2 inputs", "takes 1"});
  }
}

// Which nodes libonnx may infer: an op of the table, every input's shape known and passing its rule.
TEST(OnnxInference, OnlyNodesWhoseRanksTheRuleAcceptsAreInferred) {
  using memfmt::onnx::detail::known_input;
  const auto node = [](const char* op, int inputs) {
    ::onnx::NodeProto n;
    n.set_op_type(op);
    for (int i = 0; i < inputs; ++i) n.add_input("in" + std::to_string(i));
    n.add_output("out");
    return n;
  };
  const auto shapes = [](std::vector<dims> s) {
    std::vector<known_input> in;
    for (auto& d : s) in.push_back(known_input{true, d, memfmt::dtype::float32, nullptr});
    return in;
  };
  const auto ok = [](const ::onnx::NodeProto& n, const std::vector<known_input>& in) {
    return memfmt::onnx::detail::inferable(n, "test", in, 13, 17);
  };
  EXPECT_TRUE(ok(node("Gemm", 2), shapes({{1, 4}, {4, 3}})));
  EXPECT_FALSE(ok(node("Gemm", 2), shapes({{1, 4}, {4}})));
  EXPECT_FALSE(ok(node("Gemm", 2), shapes({{1, 4}, {}})));
  EXPECT_FALSE(ok(node("Gemm", 3), shapes({{1, 4}, {4, 3}, {1, 1, 3}})));
  EXPECT_TRUE(ok(node("MatMul", 2), shapes({{2, 3}, {3}})));
  EXPECT_FALSE(ok(node("MatMul", 2), shapes({{2, 3}, {}})));
  EXPECT_TRUE(ok(node("Conv", 2), shapes({{1, 3, 8, 8}, {4, 3, 3, 3}})));
  EXPECT_FALSE(ok(node("Conv", 2), shapes({{1, 3, 8, 8}, {4}})));
  ::onnx::NodeProto strided = node("MaxPool", 1);
  auto* k = strided.add_attribute();
  k->set_name("kernel_shape");
  k->set_type(::onnx::AttributeProto::INTS);
  k->add_ints(2);
  k->add_ints(2);
  EXPECT_TRUE(ok(strided, shapes({{1, 3, 8, 8}})));
  EXPECT_FALSE(ok(strided, shapes({{1, 8, 8}})));  // kernel_shape of 2 for 1 spatial dim
  auto* st = strided.add_attribute();
  st->set_name("strides");
  st->set_type(::onnx::AttributeProto::INTS);
  st->add_ints(0);
  st->add_ints(1);
  EXPECT_FALSE(ok(strided, shapes({{1, 3, 8, 8}})));  // a stride of 0 divides by zero
  // An unknown input shape, an op outside the table, a newer opset than libonnx's schemas: none.
  std::vector<known_input> unknown = shapes({{1, 4}, {4, 3}});
  unknown[1].shape.reset();
  EXPECT_FALSE(ok(node("Gemm", 2), unknown));
  EXPECT_FALSE(ok(node("NonMaxSuppression", 2), shapes({{1, 4, 4}, {1, 1, 4}})));
  EXPECT_FALSE(memfmt::onnx::detail::inferable(node("Relu", 1), "test", shapes({{1, 3}}), 18, 17));
  // What it infers for an accepted node: ONNX's Gemm output shape.
  const auto out = memfmt::onnx::detail::infer_node(node("Gemm", 2), shapes({{2, 4}, {4, 3}}), 13);
  ASSERT_EQ(out.count("out"), 1u);
  EXPECT_EQ(out.at("out"), (dims{2, 3}));
}

// TensorFlow-style "same" padding computed at run time, as PyTorch 2's TorchScript exporter writes
// it for TF-ported models: pad = max((ceil(i / s) - 1) * s + (k - 1) * d + 1 - i, 0), the max a
// Clip. With Clip folded, every node of the arithmetic folds and the Pad is a layer: 10 x 9 with
// k = 3, s = 2 pads H by (0, 1) and W by (1, 1), so the conv writes 5 x 5. Before, the Clip stayed
// opaque, the Pad and the conv after it became barriers, and libonnx's inference of the Pad crashed.
TEST(OnnxImport, SamePaddingComputedAtRunTimeFoldsIntoAPadLayer) {
  onnx_builder b;
  b.input("x", {1, 3, 10, 9}).floats("w", {4, 3, 3, 3}).output("y");
  b.ints("hw", {2, 3})
      .ints("s", {2, 2})
      .ints("s_minus", {1, 1})
      .ints("kd", {3, 3})
      .ints("zero", {0})
      .ints("two", {2, 2});
  b.ints("zeros2", {0, 0});
  b.node("Shape", {"x"}, {"shape"}).node("Gather", {"shape", "hw"}, {"i"}).attr("axis", std::int64_t{0});
  b.node("Add", {"i", "s_minus"}, {"i_up"}).node("Div", {"i_up", "s"}, {"blocks"});
  b.node("Sub", {"blocks", "s_minus"}, {"b1"}).node("Mul", {"b1", "s"}, {"span"});
  b.node("Add", {"span", "kd"}, {"need"}).node("Sub", {"need", "i"}, {"raw"});
  b.node("Clip", {"raw", "zero"}, {"total"});
  b.node("Div", {"total", "two"}, {"before"}).node("Sub", {"total", "before"}, {"after"});
  b.node("Concat", {"zeros2", "before", "zeros2", "after"}, {"pads"}).attr("axis", std::int64_t{0});
  b.node("Pad", {"x", "pads"}, {"padded"}, "same_pad");
  b.node("Conv", {"padded", "w"}, {"y"}, "conv").attr("strides", dims{2, 2});
  const imported_model m = import_model(b.model());
  EXPECT_TRUE(m.runnable()) << (m.unsupported.empty() ? ""
                                                      : m.unsupported.front().op + ": " + m.unsupported.front().reason);
  EXPECT_EQ(only(m, layer_kind::conv).extents, (dims{1, 4, 5, 5}));
}

TEST(OnnxFold, ClipOfConstantsBothFormsAndIntegers) {
  {
    onnx_builder b;  // opset 13: bounds as inputs; int64 values keep every bit
    b.ints("v", {-5, 3, std::int64_t{1} << 62}).ints("lo", {0}).ints("hi", {std::int64_t{1} << 61});
    b.node("Clip", {"v", "lo", "hi"}, {"c"});
    const auto& g = b.model().graph();
    std::vector<memfmt::onnx::parameter> p;
    for (int i = 0; i < 3; ++i) p.push_back(memfmt::onnx::to_parameter(g.initializer(i), "test"));
    const memfmt::onnx::parameter out = fold_last_node(b, {&p[0], &p[1], &p[2]});
    EXPECT_EQ(out.values<std::int64_t>("c"), (std::vector<std::int64_t>{0, 3, std::int64_t{1} << 61}));
  }
  {
    onnx_builder b;  // an absent min: no lower bound
    b.float_vector("v", {-2.5f, 0.5f, 7.f}).float_vector("hi", {1.f});
    b.node("Clip", {"v", "", "hi"}, {"c"});
    const auto& g = b.model().graph();
    const memfmt::onnx::parameter v = memfmt::onnx::to_parameter(g.initializer(0), "test");
    const memfmt::onnx::parameter hi = memfmt::onnx::to_parameter(g.initializer(1), "test");
    const memfmt::onnx::parameter out = fold_last_node(b, {&v, nullptr, &hi});
    EXPECT_EQ(out.values<float>("c"), (std::vector<float>{-2.5f, 0.5f, 1.f}));
  }
}

// Found by fuzz_onnx_import's structure-aware mutator: Unsqueeze of a constant with an axis given
// twice inserted past the end of the shape (a heap overflow under ASan). ONNX requires distinct axes.
TEST(OnnxImportErrors, UnsqueezeAxesTwiceIsAnError) {
  using memfmt::errc;
  onnx_builder b;
  b.input("x", {1, 3, 4, 4}).ints("v", {7}).ints("axes", {1, 1}).output("y");
  b.node("Squeeze", {"v"}, {"s"});
  b.node("Unsqueeze", {"s", "axes"}, {"u"}, "unsqueeze");
  b.node("Relu", {"x"}, {"y"});
  memfmt_test::expect_error([&] { import_model(b.model()); }, errc::invalid_argument,
                            {"'unsqueeze' (Unsqueeze)", "axes [1, 1]", "twice"});
}

}  // namespace
