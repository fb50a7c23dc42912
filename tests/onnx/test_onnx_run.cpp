// onnx::run_model: ONNX-shaped tensors in and out of the executor in any plan. The truth is a
// convolution computed here by its definition, in logical order; a layout the runner got wrong
// (a channels_last feed not laid out, an output not read back, a 1-D value not lifted) moves
// elements and fails. Bad feeds are errors naming the values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/session/onnx.hpp"
#include "onnx_builder.hpp"
#include "plans.hpp"

namespace {

using memfmt::onnx::parameter;
using memfmt_test::onnx_builder;

// How many nodes of each kind a network holds, by the kind's name.
std::map<std::string, int> kinds_of(const memfmt::graph::network& net) {
  std::map<std::string, int> kinds;
  for (const auto& n : net.nodes()) ++kinds[memfmt::graph::to_string(n.kind)];
  return kinds;
}

parameter ramp(const std::vector<std::int64_t>& shape, float start, float step) {
  parameter p = memfmt::onnx::make_parameter(memfmt::dtype::float32, shape, "test");
  for (std::size_t i = 0; i < static_cast<std::size_t>(p.numel()); ++i)
    memfmt::onnx::store_element(p, i, start + step * static_cast<double>(i), 0);
  return p;
}

// y = conv(x, W) + B, stride 1, `pad` on every side, over the trailing dims of x ([N, C, L] or
// [N, C, H, W]); W and B are the builder's ramps: W[i] = 0.01 i - 0.2, B[k] = 0.5 k.
std::vector<double> conv_by_definition(const parameter& x, std::int64_t k_out, std::int64_t kernel, std::int64_t pad) {
  const auto& s = x.shape;
  const std::int64_t n = s[0], c = s[1], h = s.size() == 4 ? s[2] : 1, w = s.back();
  const std::int64_t kh = s.size() == 4 ? kernel : 1, ph = s.size() == 4 ? pad : 0;
  const std::int64_t oh = h + 2 * ph - kh + 1, ow = w + 2 * pad - kernel + 1;
  std::vector<double> y;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t k = 0; k < k_out; ++k)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          double sum = 0.5 * static_cast<double>(k);
          for (std::int64_t ch = 0; ch < c; ++ch)
            for (std::int64_t r = 0; r < kh; ++r)
              for (std::int64_t q = 0; q < kernel; ++q) {
                const std::int64_t yi = i + r - ph, xj = j + q - pad;
                if (yi < 0 || yi >= h || xj < 0 || xj >= w) continue;
                const double wv = 0.01 * static_cast<double>(((k * c + ch) * kh + r) * kernel + q) - 0.2;
                sum +=
                    wv * memfmt::onnx::element_as_double(x, static_cast<std::size_t>(((b * c + ch) * h + yi) * w + xj));
              }
          y.push_back(sum);
        }
  return y;
}

onnx_builder conv_model(const std::vector<std::int64_t>& x, std::int64_t k_out, std::int64_t kernel, std::int64_t pad) {
  std::vector<std::int64_t> wshape{k_out, x[1]};
  for (std::size_t d = 2; d < x.size(); ++d) wshape.push_back(kernel);
  onnx_builder b;
  b.input("x", x).floats("W", wshape, -0.2f, 0.01f).floats("B", {k_out}, 0.f, 0.5f);
  b.node("Conv", {"x", "W", "B"}, {"y"}, "conv").attr("pads", std::vector<std::int64_t>(2 * (x.size() - 2), pad));
  b.output("y");
  return b;
}

TEST(OnnxRun, ConvOutputsInLogicalOrderInEveryPlan) {
  memfmt::reference::backend backend;
  for (const std::vector<std::int64_t>& shape :
       {std::vector<std::int64_t>{2, 3, 7}, std::vector<std::int64_t>{2, 3, 4, 5}}) {
    const onnx_builder b = conv_model(shape, 4, 3, 1);
    const parameter x = ramp(shape, -1.f, 0.037f);
    const std::vector<double> truth = conv_by_definition(x, 4, 3, 1);
    for (const auto& p : memfmt_test::plans) {
      const auto m = memfmt::onnx::import_model(b.model(), memfmt_test::options_for(p));
      const auto plan = memfmt_test::plan_of(m, p);
      const auto out = memfmt::onnx::run_model(m, plan, backend, {{"x", x}});
      ASSERT_EQ(out.size(), 1u);
      const parameter& y = out.at("y");
      std::vector<std::int64_t> expected_shape = shape;
      expected_shape[1] = 4;
      ASSERT_EQ(y.shape, expected_shape) << p.name;  // a 1-D net's output is [N, C, L] again
      ASSERT_EQ(static_cast<std::size_t>(y.numel()), truth.size());
      for (std::size_t i = 0; i < truth.size(); ++i)
        ASSERT_NEAR(memfmt::onnx::element_as_double(y, i), truth[i], 1e-4)
            << p.name << " rank " << shape.size() << " element " << i;
    }
  }
}

// LRN with an even window against its formula, in every plan: ONNX sums the squares of channels
// c - (size - 1) / 2 ... c + size / 2, one more after c than before (PyTorch's window leans the other
// way, and reading it so changes every channel but the last).
TEST(OnnxRun, LrnEvenWindowLeansAfterC) {
  memfmt::reference::backend backend;
  const std::vector<std::int64_t> shape{1, 4, 1, 2};
  onnx_builder b;
  b.input("x", shape).output("y");
  b.node("LRN", {"x"}, {"y"}, "lrn").attr("size", std::int64_t{2}).attr_f("alpha", 0.5f).attr_f("beta", 0.75f);
  b.attr_f("bias", 2.f);
  const parameter x = ramp(shape, -1.f, 0.37f);
  const auto at = [&](std::int64_t c, std::int64_t w) { return -1.0 + 0.37 * static_cast<double>(2 * c + w); };
  for (const auto& p : memfmt_test::plans) {
    const auto m = memfmt::onnx::import_model(b.model(), memfmt_test::options_for(p));
    ASSERT_EQ(kinds_of(m.network)["lrn"], 1) << p.name;
    const auto out = memfmt::onnx::run_model(m, memfmt_test::plan_of(m, p), backend, {{"x", x}});
    const parameter& y = out.at("y");
    for (std::int64_t c = 0; c < 4; ++c)
      for (std::int64_t w = 0; w < 2; ++w) {
        const double next = c + 1 < 4 ? at(c + 1, w) * at(c + 1, w) : 0.0;
        const double want = at(c, w) / std::pow(2.0 + 0.5 / 2 * (at(c, w) * at(c, w) + next), 0.75);
        EXPECT_NEAR(memfmt::onnx::element_as_double(y, static_cast<std::size_t>(2 * c + w)), want, 1e-6)
            << p.name << " channel " << c << " position " << w;
      }
  }
}

// Exported preprocessing and scaling: (x - mean) / std per channel, a scalar Constant on the left of
// a Mul, a whole-map initializer on the left of a Sub, then a conv and a per-channel scale after it.
// The constants broadcast as ONNX's numpy rules align them (right-aligned, [C, 1, 1] and [C, 1]
// for a 1-D net); the truth is that arithmetic and the convolution written out in logical order.
TEST(OnnxRun, ConstantOperandsInEveryPlan) {
  memfmt::reference::backend backend;
  for (const std::vector<std::int64_t>& shape :
       {std::vector<std::int64_t>{2, 3, 7}, std::vector<std::int64_t>{2, 3, 4, 5}}) {
    const bool two_d = shape.size() == 4;
    const std::vector<std::int64_t> per_channel =
        two_d ? std::vector<std::int64_t>{3, 1, 1} : std::vector<std::int64_t>{3, 1};
    const std::vector<std::int64_t> per_output =
        two_d ? std::vector<std::int64_t>{4, 1, 1} : std::vector<std::int64_t>{4, 1};
    const std::vector<std::int64_t> map(shape.begin() + 1, shape.end());
    const std::size_t spatial = static_cast<std::size_t>(two_d ? shape[2] * shape[3] : shape[2]);
    std::vector<std::int64_t> wshape{4, 3, 3};
    if (two_d) wshape.push_back(3);
    onnx_builder b;
    b.input("x", shape).floats("W", wshape, -0.2f, 0.01f).floats("B", {4}, 0.f, 0.5f);
    b.floats("mean", per_channel, -0.5f, 0.25f).floats("std", per_channel, 0.5f, 0.75f);
    b.floats("pos", map, -1.f, 0.0625f).floats("k_scale", per_output, 1.f, 0.5f).scalar("half", 0.5f);
    b.node("Sub", {"x", "mean"}, {"a"});
    b.node("Div", {"a", "std"}, {"b"});
    b.node("Mul", {"half", "b"}, {"c"});
    b.node("Sub", {"pos", "c"}, {"d"});
    b.node("Conv", {"d", "W", "B"}, {"e"}, "conv").attr("pads", std::vector<std::int64_t>(2 * (shape.size() - 2), 1));
    b.node("Mul", {"e", "k_scale"}, {"y"});
    b.output("y");

    const parameter x = ramp(shape, -1.f, 0.037f);
    parameter d = memfmt::onnx::make_parameter(memfmt::dtype::float32, shape, "d");
    for (std::size_t i = 0; i < static_cast<std::size_t>(d.numel()); ++i) {
      const std::size_t c = (i / spatial) % 3, at = i % spatial;
      const double mean = -0.5 + 0.25 * static_cast<double>(c), stdev = 0.5 + 0.75 * static_cast<double>(c);
      const double pos = -1.0 + 0.0625 * static_cast<double>(c * spatial + at);
      memfmt::onnx::store_element(d, i, pos - 0.5 * (memfmt::onnx::element_as_double(x, i) - mean) / stdev, 0);
    }
    std::vector<double> truth = conv_by_definition(d, 4, 3, 1);
    for (std::size_t i = 0; i < truth.size(); ++i) truth[i] *= 1.0 + 0.5 * static_cast<double>((i / spatial) % 4);

    for (const auto& p : memfmt_test::plans) {
      SCOPED_TRACE(std::string(p.name) + " rank " + std::to_string(shape.size()));
      const auto m = memfmt::onnx::import_model(b.model(), memfmt_test::options_for(p));
      ASSERT_TRUE(m.runnable()) << m.unsupported.front().op << ": " << m.unsupported.front().reason;
      const auto out = memfmt::onnx::run_model(m, memfmt_test::plan_of(m, p), backend, {{"x", x}});
      const parameter& y = out.at("y");
      std::vector<std::int64_t> expected_shape = shape;
      expected_shape[1] = 4;
      ASSERT_EQ(y.shape, expected_shape);
      ASSERT_EQ(static_cast<std::size_t>(y.numel()), truth.size());
      for (std::size_t i = 0; i < truth.size(); ++i)
        ASSERT_NEAR(memfmt::onnx::element_as_double(y, i), truth[i], 1e-4) << "element " << i;
    }
  }
}

// PRelu with a per-channel slope, and with one slope for all, gives slope * x below 0 and x above,
// exactly, infinities included (the composition adds an exact 0), in every plan; before opset 7 a
// slope of C values is per channel.
TEST(OnnxRun, PReluPerChannelAndSharedSlope) {
  memfmt::reference::backend backend;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> specials{inf, -inf, 0.f, -0.f, 1e-30f, -1e-30f};
  for (const std::vector<std::int64_t>& slope_shape :
       {std::vector<std::int64_t>{3, 1, 1}, std::vector<std::int64_t>{1}, std::vector<std::int64_t>{3}}) {
    onnx_builder b(slope_shape == std::vector<std::int64_t>{3} ? 6 : 13);
    b.input("x", {2, 3, 4, 5}).floats("slope", slope_shape, 0.25f, -0.5f);
    b.node("PRelu", {"x", "slope"}, {"y"}, "prelu");
    b.output("y");
    parameter x = ramp({2, 3, 4, 5}, -3.f, 0.05f);
    for (std::size_t i = 0; i < specials.size(); ++i) memfmt::onnx::store_element(x, 7 * i + 3, specials[i], 0);
    for (const auto& p : memfmt_test::plans) {
      SCOPED_TRACE(std::string(p.name) + " slope of " + std::to_string(slope_shape[0]) + ", rank " +
                   std::to_string(slope_shape.size()));
      const auto m = memfmt::onnx::import_model(b.model(), memfmt_test::options_for(p));
      ASSERT_TRUE(m.runnable());
      const parameter y = memfmt::onnx::run_model(m, memfmt_test::plan_of(m, p), backend, {{"x", x}}).at("y");
      for (std::size_t i = 0; i < 120; ++i) {
        const float v = static_cast<float>(memfmt::onnx::element_as_double(x, i));
        const float slope = slope_shape[0] == 1 ? 0.25f : 0.25f - 0.5f * static_cast<float>((i / 20) % 3);
        const float want = v < 0 ? slope * v : v;
        const float got = static_cast<float>(memfmt::onnx::element_as_double(y, i));
        ASSERT_EQ(got, want) << "element " << i << " x " << v;
      }
    }
  }
}

// A conv, then the nodes `append` adds (reading the conv's output "y", writing "z"): imported as the
// conv and one activation of kind `f`, z in every plan is ONNX's arithmetic `want` of the conv
// computed here by its definition, in double.
void expect_conv_then_one_activation(memfmt::activation f, const std::function<void(onnx_builder&)>& append,
                                     const std::function<double(double)>& want) {
  memfmt::reference::backend backend;
  onnx_builder b = conv_model({2, 3, 5, 5}, 4, 3, 1);
  append(b);
  b.output("z");
  const parameter x = ramp({2, 3, 5, 5}, -2.f, 0.03f);
  const std::vector<double> conv = conv_by_definition(x, 4, 3, 1);
  for (const auto& p : memfmt_test::plans) {
    SCOPED_TRACE(p.name);
    const auto m = memfmt::onnx::import_model(b.model(), memfmt_test::options_for(p));
    ASSERT_TRUE(m.runnable());
    ASSERT_EQ(m.network.nodes().size(), 5u);  // x, conv, the activation, y, z
    const auto& act = m.network.at(m.network.at(*m.network.find("z")).inputs.at(0));
    ASSERT_EQ(act.kind, memfmt::layer_kind::activation);
    EXPECT_EQ(act.get<memfmt::activation_params>().kind, f);
    const parameter z = memfmt::onnx::run_model(m, memfmt_test::plan_of(m, p), backend, {{"x", x}}).at("z");
    ASSERT_EQ(static_cast<std::size_t>(z.numel()), conv.size());
    for (std::size_t i = 0; i < conv.size(); ++i) {
      const double w = want(conv[i]);
      ASSERT_NEAR(memfmt::onnx::element_as_double(z, i), w, 1e-5 * std::max(1.0, std::fabs(w))) << "z[" << i << "]";
    }
  }
}

// HardSigmoid(1/6, 1/2) times its input, as PyTorch exports Hardswish before opset 14.
TEST(OnnxRun, HardswishPatternGivesHardSigmoidTimesX) {
  expect_conv_then_one_activation(
      memfmt::activation::hardswish,
      [](onnx_builder& b) {
        b.node("HardSigmoid", {"y"}, {"h"}, "hs").attr_f("alpha", 1.f / 6.f).attr_f("beta", 0.5f);
        b.node("Mul", {"h", "y"}, {"z"}, "mul");
      },
      [](double v) { return v * std::max(0.0, std::min(1.0, v / 6.0 + 0.5)); });
}

// SiLU and Mish as PyTorch 1.13 exports them (Sigmoid, Mul; Softplus, Tanh, Mul), and ONNX's own
// Softplus and Mish ops.
TEST(OnnxRun, SiluSoftplusAndMishByTheirDefinitions) {
  const auto softplus = [](double v) { return std::log1p(std::exp(v)); };
  const auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  expect_conv_then_one_activation(
      memfmt::activation::silu,
      [](onnx_builder& b) {
        b.node("Sigmoid", {"y"}, {"s"}).node("Mul", {"y", "s"}, {"z"});
      },
      [&](double v) { return v * sigmoid(v); });
  expect_conv_then_one_activation(
      memfmt::activation::mish,
      [](onnx_builder& b) {
        b.node("Softplus", {"y"}, {"sp"}).node("Tanh", {"sp"}, {"t"}).node("Mul", {"t", "y"}, {"z"});
      },
      [&](double v) { return v * std::tanh(softplus(v)); });
  expect_conv_then_one_activation(
      memfmt::activation::softplus, [](onnx_builder& b) { b.node("Softplus", {"y"}, {"z"}); }, softplus);
  expect_conv_then_one_activation(
      memfmt::activation::mish, [](onnx_builder& b) { b.node("Mish", {"y"}, {"z"}); },
      [&](double v) { return v * std::tanh(softplus(v)); });
}

// The tanh GELU as PyTorch 1.13 exports F.gelu(x, approximate="tanh").
TEST(OnnxRun, TanhGeluPatternGivesItsOps) {
  expect_conv_then_one_activation(
      memfmt::activation::gelu_tanh,
      [](onnx_builder& b) {
        b.node("Mul", {"y", "y"}, {"sq"}, "square").node("Mul", {"sq", "y"}, {"cube"}, "cube");
        b.scalar("kappa", 0.044715f).node("Mul", {"cube", "kappa"}, {"kc"}, "kappa_mul");
        b.node("Add", {"kc", "y"}, {"s"}, "add_x");
        b.scalar("beta", 0.7978845608f).node("Mul", {"s", "beta"}, {"inner"}, "beta_mul");
        b.node("Tanh", {"inner"}, {"t"}, "tanh");
        b.scalar("one", 1.f).node("Add", {"t", "one"}, {"u"}, "add_one");
        b.node("Mul", {"u", "y"}, {"v"}, "times_x");
        b.scalar("half", 0.5f).node("Mul", {"v", "half"}, {"z"}, "half");
      },
      [](double v) { return 0.5 * v * (1.0 + std::tanh(0.7978845608 * (v + 0.044715 * v * v * v))); });
}

// Clip, PRelu (a slope per channel, on the transposed last axis) and HardSigmoid read a
// channels-last transpose as the same ops over the network value: no barrier, and each ONNX op's
// definition over the [N, H, W, C] tensor, computed here, in every plan.
TEST(OnnxRun, ElementwiseOpsReadChannelsLastTransposes) {
  using dims = std::vector<std::int64_t>;
  const std::int64_t n = 2, c = 3, h = 4, w = 5;
  onnx_builder b;
  b.input("x", {n, c, h, w}).floats("slope", {c}, 0.25f, 0.5f);
  b.node("Transpose", {"x"}, {"t"}, "permute").attr("perm", dims{0, 2, 3, 1});
  b.scalar("lo", -1.f).scalar("hi", 2.f).node("Clip", {"t", "lo", "hi"}, {"clipped"}, "clip");
  b.node("PRelu", {"clipped", "slope"}, {"p"}, "prelu");
  b.node("HardSigmoid", {"p"}, {"hs"}, "hs").attr_f("alpha", 0.25f).attr_f("beta", 0.5f);
  b.node("Transpose", {"hs"}, {"y"}, "permute_back").attr("perm", dims{0, 3, 1, 2});
  b.output("y");
  const parameter x = ramp({n, c, h, w}, -3.f, 0.05f);
  memfmt::reference::backend backend;
  for (const auto& p : memfmt_test::plans) {
    SCOPED_TRACE(p.name);
    const auto m = memfmt::onnx::import_model(b.model(), memfmt_test::options_for(p));
    ASSERT_TRUE(m.runnable()) << m.unsupported.front().reason;
    const parameter y = memfmt::onnx::run_model(m, memfmt_test::plan_of(m, p), backend, {{"x", x}}).at("y");
    ASSERT_EQ(y.shape, (dims{n, c, h, w}));
    for (std::size_t i = 0; i < static_cast<std::size_t>(n * c * h * w); ++i) {
      const double slope = 0.25 + 0.5 * static_cast<double>((i / static_cast<std::size_t>(h * w)) % c);
      const double v = std::min(2.0, std::max(-1.0, memfmt::onnx::element_as_double(x, i)));
      const double pr = v < 0 ? slope * v : v;
      const double want = std::max(0.0, std::min(1.0, 0.25 * pr + 0.5));
      ASSERT_NEAR(memfmt::onnx::element_as_double(y, i), want, 1e-6) << "element " << i;
    }
  }
}

// A ConvNeXt block as PyTorch exports it: permute to channels-last, layer norm over C (one
// LayerNormalization at opset 17, written out as ReduceMean ... Add before), a linear (MatMul +
// Add), the exact GELU written out (Div, Erf, Add, Mul, Mul), a linear back, the permute back and
// the residual. The truth is each ONNX op's definition over the [N, H, W, C] tensor, in double.
TEST(OnnxRun, ChannelsLastBlocksRunAsLayersOverC) {
  using dims = std::vector<std::int64_t>;
  const std::int64_t n = 2, c = 4, h = 3, w = 2, k = 6;
  const auto build = [&](bool written_out) {
    onnx_builder b(written_out ? 13 : 17);
    b.input("x", {n, c, h, w}).floats("gamma", {c}, 0.5f, 0.25f).floats("beta", {c}, -0.3f, 0.2f);
    b.floats("W1", {c, k}, -0.3f, 0.025f).floats("b1", {k}, 0.1f, -0.05f);
    b.floats("W2", {k, c}, 0.2f, -0.02f).floats("b2", {c}, -0.1f, 0.07f);
    b.node("Transpose", {"x"}, {"t"}, "permute").attr("perm", dims{0, 2, 3, 1});
    if (written_out) {
      b.node("ReduceMean", {"t"}, {"mean"}, "mean").attr("axes", dims{-1});
      b.node("Sub", {"t", "mean"}, {"d"}, "sub");
      b.scalar("two", 2.f).node("Pow", {"d", "two"}, {"sq"}, "pow");
      b.node("ReduceMean", {"sq"}, {"var"}, "var").attr("axes", dims{3});
      b.scalar("eps", 1e-6f).node("Add", {"var", "eps"}, {"ve"}, "add_eps");
      b.node("Sqrt", {"ve"}, {"sd"}, "sqrt").node("Div", {"d", "sd"}, {"xhat"}, "div");
      b.node("Mul", {"gamma", "xhat"}, {"scaled"}, "scale").node("Add", {"scaled", "beta"}, {"ln"}, "shift");
    } else {
      b.node("LayerNormalization", {"t", "gamma", "beta"}, {"ln"}, "norm").attr_f("epsilon", 1e-6f);
    }
    b.node("MatMul", {"ln", "W1"}, {"m1"}, "fc1").node("Add", {"b1", "m1"}, {"a1"}, "fc1_bias");
    b.scalar("sqrt2", 1.4142135f).node("Div", {"a1", "sqrt2"}, {"g1"}, "gelu_div");
    b.node("Erf", {"g1"}, {"g2"}, "gelu_erf");
    b.scalar("one", 1.f).node("Add", {"g2", "one"}, {"g3"}, "gelu_add");
    b.node("Mul", {"a1", "g3"}, {"g4"}, "gelu_mul");
    b.scalar("half", 0.5f).node("Mul", {"g4", "half"}, {"g5"}, "gelu_half");
    b.node("MatMul", {"g5", "W2"}, {"m2"}, "fc2").node("Add", {"m2", "b2"}, {"a2"}, "fc2_bias");
    b.node("Transpose", {"a2"}, {"back"}, "permute_back").attr("perm", dims{0, 3, 1, 2});
    b.node("Add", {"back", "x"}, {"y"}, "residual");
    b.output("y");
    return b;
  };
  const parameter x = ramp({n, c, h, w}, -1.5f, 0.0625f);
  const auto ramp_at = [](float start, float step, std::int64_t i) {
    return static_cast<double>(start + static_cast<float>(i) * step);
  };
  std::vector<double> truth(static_cast<std::size_t>(n * c * h * w));
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < h; ++i)
      for (std::int64_t j = 0; j < w; ++j) {
        const auto at = [&](std::int64_t ch) { return static_cast<std::size_t>(((b * c + ch) * h + i) * w + j); };
        double mean = 0, var = 0;
        for (std::int64_t ch = 0; ch < c; ++ch) mean += memfmt::onnx::element_as_double(x, at(ch)) / c;
        for (std::int64_t ch = 0; ch < c; ++ch) {
          const double d = memfmt::onnx::element_as_double(x, at(ch)) - mean;
          var += d * d / c;
        }
        std::vector<double> ln(static_cast<std::size_t>(c)), hidden(static_cast<std::size_t>(k));
        for (std::int64_t ch = 0; ch < c; ++ch)
          ln[static_cast<std::size_t>(ch)] = (memfmt::onnx::element_as_double(x, at(ch)) - mean) /
                                                 std::sqrt(var + static_cast<double>(1e-6f)) *
                                                 ramp_at(0.5f, 0.25f, ch) +
                                             ramp_at(-0.3f, 0.2f, ch);
        for (std::int64_t o = 0; o < k; ++o) {
          double v = ramp_at(0.1f, -0.05f, o);
          for (std::int64_t ch = 0; ch < c; ++ch)
            v += ln[static_cast<std::size_t>(ch)] * ramp_at(-0.3f, 0.025f, ch * k + o);
          hidden[static_cast<std::size_t>(o)] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
        }
        for (std::int64_t ch = 0; ch < c; ++ch) {
          double v = ramp_at(-0.1f, 0.07f, ch);
          for (std::int64_t o = 0; o < k; ++o)
            v += hidden[static_cast<std::size_t>(o)] * ramp_at(0.2f, -0.02f, o * c + ch);
          truth[at(ch)] = v + memfmt::onnx::element_as_double(x, at(ch));
        }
      }
  memfmt::reference::backend backend;
  for (const bool written_out : {false, true})
    for (const auto& p : memfmt_test::plans) {
      SCOPED_TRACE(std::string(written_out ? "opset 13" : "opset 17") + " in plan " + p.name);
      const onnx_builder b = build(written_out);
      const auto m = memfmt::onnx::import_model(b.model(), memfmt_test::options_for(p));
      ASSERT_TRUE(m.runnable()) << m.unsupported.front().reason;
      // Layer norm, two 1x1 convs with their biases, one GELU, the residual add: nothing else.
      const std::map<std::string, int> kinds = kinds_of(m.network);
      EXPECT_EQ(kinds,
                (std::map<std::string, int>{
                    {"input", 1}, {"output", 1}, {"layer_norm", 1}, {"conv", 2}, {"activation", 1}, {"binary", 1}}));
      const parameter y = memfmt::onnx::run_model(m, memfmt_test::plan_of(m, p), backend, {{"x", x}}).at("y");
      ASSERT_EQ(y.shape, (dims{n, c, h, w}));
      for (std::size_t e = 0; e < truth.size(); ++e)
        EXPECT_NEAR(memfmt::onnx::element_as_double(y, e), truth[e], 1e-5 * std::max(1.0, std::fabs(truth[e])))
            << "element " << e;
    }
}

// LayerNorm2d as detectron2, SAM and the original ConvNeXt write it, over axis 1 of a network
// value: u = x.mean(1), s = (x - u)^2 .mean(1), (x - u) / sqrt(s + eps), then weight[:, None, None] *
// and + bias[:, None, None]. It is one layer norm over C in every plan. A [1, 1, C] weight broadcasts
// along W instead (here W == C, so the shapes fit): that Mul stays an op of its own and the result is
// the normalisation scaled along W.
TEST(OnnxRun, LayerNorm2dOverAxisOneIsOneLayerNorm) {
  using dims = std::vector<std::int64_t>;
  const std::int64_t n = 2, c_in = 3, c = 4, h = 3, w = 4;
  const float eps = 1e-6f;
  const auto build = [&](bool channel_weight) {
    onnx_builder b = conv_model({n, c_in, h, w}, c, 3, 1);
    b.floats("gamma", channel_weight ? dims{c, 1, 1} : dims{1, 1, c}, 0.5f, 0.25f)
        .floats("beta", {c, 1, 1}, -0.3f, 0.2f);
    b.node("ReduceMean", {"y"}, {"mean"}, "mean").attr("axes", dims{1});
    b.node("Sub", {"y", "mean"}, {"d"}, "sub");
    b.scalar("two", 2.f).node("Pow", {"d", "two"}, {"sq"}, "pow");
    b.node("ReduceMean", {"sq"}, {"var"}, "var").attr("axes", dims{-3});
    b.scalar("eps", eps).node("Add", {"var", "eps"}, {"ve"}, "add_eps");
    b.node("Sqrt", {"ve"}, {"sd"}, "sqrt").node("Div", {"d", "sd"}, {"xhat"}, "div");
    b.node("Mul", {"gamma", "xhat"}, {"scaled"}, "scale").node("Add", {"scaled", "beta"}, {"ln"}, "shift");
    b.output("ln");
    return b;
  };
  const parameter x = ramp({n, c_in, h, w}, -1.5f, 0.0625f);
  const std::vector<double> y = conv_by_definition(x, c, 3, 1);
  const auto ramp_at = [](float start, float step, std::int64_t i) {
    return static_cast<double>(start + static_cast<float>(i) * step);
  };
  const auto truth = [&](bool channel_weight) {
    std::vector<double> t(y.size());
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t i = 0; i < h; ++i)
        for (std::int64_t j = 0; j < w; ++j) {
          const auto at = [&](std::int64_t ch) { return static_cast<std::size_t>(((b * c + ch) * h + i) * w + j); };
          double mean = 0, var = 0;
          for (std::int64_t ch = 0; ch < c; ++ch) mean += y[at(ch)] / c;
          for (std::int64_t ch = 0; ch < c; ++ch) var += (y[at(ch)] - mean) * (y[at(ch)] - mean) / c;
          for (std::int64_t ch = 0; ch < c; ++ch)
            t[at(ch)] = (y[at(ch)] - mean) / std::sqrt(var + static_cast<double>(eps)) *
                            ramp_at(0.5f, 0.25f, channel_weight ? ch : j) +
                        ramp_at(-0.3f, 0.2f, ch);
        }
    return t;
  };
  memfmt::reference::backend backend;
  for (const bool channel_weight : {true, false})
    for (const auto& p : memfmt_test::plans) {
      SCOPED_TRACE(std::string(channel_weight ? "weight [C, 1, 1]" : "weight [1, 1, C] along W") + " in plan " +
                   p.name);
      const auto m = memfmt::onnx::import_model(build(channel_weight).model(), memfmt_test::options_for(p));
      ASSERT_TRUE(m.runnable()) << m.unsupported.front().reason;
      const std::map<std::string, int> kinds = kinds_of(m.network);
      // The conv's output is a graph output too (conv_model's "y").
      std::map<std::string, int> want{{"input", 1}, {"output", 2}, {"conv", 1}, {"layer_norm", 1}};
      if (!channel_weight) want["binary"] = want["constant"] = 2;  // the Mul along W and the bias Add, as written
      EXPECT_EQ(kinds, want);
      const parameter out = memfmt::onnx::run_model(m, memfmt_test::plan_of(m, p), backend, {{"x", x}}).at("ln");
      ASSERT_EQ(out.shape, (dims{n, c, h, w}));
      const std::vector<double> t = truth(channel_weight);
      for (std::size_t e = 0; e < t.size(); ++e)
        EXPECT_NEAR(memfmt::onnx::element_as_double(out, e), t[e], 1e-5 * std::max(1.0, std::fabs(t[e])))
            << "element " << e;
    }
}

// SSD's L2Norm as its authors wrote it, x / (x.pow(2).sum(1, keepdim=True).sqrt() + eps): Pow,
// ReduceSum (axes as an input, opset 13), Sqrt, Add, Div. The Pow, sum and root are one l2
// reduction over C, and without the root one sum_square; computed here by definition in double.
TEST(OnnxRun, SquaresSummedOverChannelsAreOneReduction) {
  using dims = std::vector<std::int64_t>;
  const std::int64_t n = 2, c_in = 3, c = 5, h = 3, w = 4;
  onnx_builder b = conv_model({n, c_in, h, w}, c, 3, 1);
  b.scalar("two", 2.f).node("Pow", {"y", "two"}, {"sq"}, "pow");
  b.ints("axes", {1}).node("ReduceSum", {"sq", "axes"}, {"ss"}, "sum");
  b.node("Sqrt", {"ss"}, {"norm"}, "sqrt");
  b.scalar("eps", 1e-10f).node("Add", {"norm", "eps"}, {"ne"}, "add_eps");
  b.node("Div", {"y", "ne"}, {"l2norm"}, "div").output("l2norm");
  b.node("Pow", {"y", "two"}, {"sq2"}, "pow2").node("ReduceSum", {"sq2", "axes"}, {"energy"}, "sum2").output("energy");
  const parameter x = ramp({n, c_in, h, w}, -1.5f, 0.0625f);
  const std::vector<double> y = conv_by_definition(x, c, 3, 1);
  std::vector<double> energy(static_cast<std::size_t>(n * h * w)), normed(y.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t p = 0; p < h * w; ++p) {
      const auto at = [&](std::int64_t ch) { return static_cast<std::size_t>((i * c + ch) * h * w + p); };
      double s = 0;
      for (std::int64_t ch = 0; ch < c; ++ch) s += y[at(ch)] * y[at(ch)];
      energy[static_cast<std::size_t>(i * h * w + p)] = s;
      for (std::int64_t ch = 0; ch < c; ++ch) normed[at(ch)] = y[at(ch)] / (std::sqrt(s) + 1e-10);
    }
  memfmt::reference::backend backend;
  for (const auto& p : memfmt_test::plans) {
    SCOPED_TRACE(p.name);
    const auto m = memfmt::onnx::import_model(b.model(), memfmt_test::options_for(p));
    ASSERT_TRUE(m.runnable()) << m.unsupported.front().reason;
    EXPECT_EQ(kinds_of(m.network),
              (std::map<std::string, int>{
                  {"input", 1}, {"output", 3}, {"conv", 1}, {"reduce", 2}, {"binary", 2}, {"constant", 1}}));
    const auto out = memfmt::onnx::run_model(m, memfmt_test::plan_of(m, p), backend, {{"x", x}});
    ASSERT_EQ(out.at("energy").shape, (dims{n, 1, h, w}));
    for (std::size_t e = 0; e < energy.size(); ++e)
      EXPECT_NEAR(memfmt::onnx::element_as_double(out.at("energy"), e), energy[e], 1e-5 * std::max(1.0, energy[e]));
    for (std::size_t e = 0; e < normed.size(); ++e)
      EXPECT_NEAR(memfmt::onnx::element_as_double(out.at("l2norm"), e), normed[e], 1e-5) << "element " << e;
  }
  // Another exponent stays a barrier.
  onnx_builder cube = conv_model({n, c_in, h, w}, c, 3, 1);
  cube.scalar("three", 3.f).node("Pow", {"y", "three"}, {"sq"}, "pow");
  cube.ints("axes", {1}).node("ReduceSum", {"sq", "axes"}, {"ss"}, "sum").output("ss");
  EXPECT_FALSE(memfmt::onnx::import_model(cube.model()).runnable());
}

// GroupNorm as PyTorch exports it: Reshape to [N, G, -1], InstanceNormalization, Reshape back by
// Shape(x) (or by a constant shape), * weight[C, 1, 1], + bias[C, 1, 1]. It is one group norm in
// every plan, the instance norm's own scale and bias (1 and 0 from PyTorch, other values here)
// folded into the affine weights; computed here by definition in double.
TEST(OnnxRun, GroupNormPatternIsOneGroupNorm) {
  using dims = std::vector<std::int64_t>;
  const std::int64_t n = 2, c_in = 3, c = 6, g = 3, h = 3, w = 4;
  const float eps = 1e-5f;
  const auto build = [&](bool back_by_shape) {
    onnx_builder b = conv_model({n, c_in, h, w}, c, 3, 1);
    b.ints("grouped_shape", {0, g, -1}).floats("gamma", {g}, 0.75f, 0.5f).floats("beta", {g}, -0.2f, 0.3f);
    b.floats("weight", {c, 1, 1}, 1.5f, -0.25f).floats("bias", {c, 1, 1}, 0.1f, 0.05f);
    b.node("Reshape", {"y", "grouped_shape"}, {"grouped"}, "to_groups");
    b.node("InstanceNormalization", {"grouped", "gamma", "beta"}, {"normed"}, "norm").attr_f("epsilon", eps);
    if (back_by_shape) b.node("Shape", {"y"}, {"y_shape"}, "shape");
    else b.ints("y_shape", {n, c, h, w});
    b.node("Reshape", {"normed", "y_shape"}, {"back"}, "from_groups");
    b.node("Mul", {"back", "weight"}, {"scaled"}, "scale").node("Add", {"scaled", "bias"}, {"gn"}, "shift");
    b.output("gn");
    return b;
  };
  const parameter x = ramp({n, c_in, h, w}, -1.5f, 0.0625f);
  const std::vector<double> y = conv_by_definition(x, c, 3, 1);
  const auto ramp_at = [](float start, float step, std::int64_t i) {
    return static_cast<double>(start + static_cast<float>(i) * step);
  };
  std::vector<double> truth(y.size());
  const std::int64_t per_group = c / g * h * w;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t grp = 0; grp < g; ++grp) {
      const std::size_t first = static_cast<std::size_t>((b * g + grp) * per_group);
      double mean = 0, var = 0;
      for (std::int64_t i = 0; i < per_group; ++i) mean += y[first + static_cast<std::size_t>(i)] / per_group;
      for (std::int64_t i = 0; i < per_group; ++i) {
        const double d = y[first + static_cast<std::size_t>(i)] - mean;
        var += d * d / per_group;
      }
      for (std::int64_t i = 0; i < per_group; ++i) {
        const std::int64_t ch = grp * (c / g) + i / (h * w);
        const double normed = (y[first + static_cast<std::size_t>(i)] - mean) /
                                  std::sqrt(var + static_cast<double>(eps)) * ramp_at(0.75f, 0.5f, grp) +
                              ramp_at(-0.2f, 0.3f, grp);
        truth[first + static_cast<std::size_t>(i)] = normed * ramp_at(1.5f, -0.25f, ch) + ramp_at(0.1f, 0.05f, ch);
      }
    }
  memfmt::reference::backend backend;
  for (const bool back_by_shape : {true, false})
    for (const auto& p : memfmt_test::plans) {
      SCOPED_TRACE(std::string(back_by_shape ? "back by Shape(x)" : "back by a constant") + " in plan " + p.name);
      const auto m = memfmt::onnx::import_model(build(back_by_shape).model(), memfmt_test::options_for(p));
      ASSERT_TRUE(m.runnable()) << m.unsupported.front().reason;
      const std::map<std::string, int> kinds = kinds_of(m.network);
      // The conv's output is a graph output too (conv_model's "y").
      EXPECT_EQ(kinds, (std::map<std::string, int>{{"input", 1}, {"output", 2}, {"conv", 1}, {"group_norm", 1}}));
      const parameter out = memfmt::onnx::run_model(m, memfmt_test::plan_of(m, p), backend, {{"x", x}}).at("gn");
      ASSERT_EQ(out.shape, (dims{n, c, h, w}));
      for (std::size_t e = 0; e < truth.size(); ++e)
        EXPECT_NEAR(memfmt::onnx::element_as_double(out, e), truth[e], 1e-5 * std::max(1.0, std::fabs(truth[e])))
            << "element " << e;
    }
}

TEST(OnnxRun, BadFeedsAndUnrunnableModelsAreErrorsNamingTheValues) {
  memfmt::reference::backend backend;
  const onnx_builder b = conv_model({1, 3, 4, 5}, 2, 3, 1);
  const auto m = memfmt::onnx::import_model(b.model());
  const auto plan = memfmt_test::plan_of(m, memfmt_test::plans[0]);
  const auto expect_error = [&](const std::map<std::string, parameter>& feeds, memfmt::errc code,
                                const std::string& text) {
    try {
      memfmt::onnx::run_model(m, plan, backend, feeds);
      ADD_FAILURE() << "no error; expected one saying " << text;
    } catch (const memfmt::error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_error({}, memfmt::errc::invalid_argument, "no value for graph input 'x' (float32 [1, 3, 4, 5])");
  expect_error({{"x", ramp({1, 3, 5, 4}, 0.f, 1.f)}}, memfmt::errc::shape_mismatch,
               "graph input 'x' is float32 [1, 3, 4, 5], given float32 [1, 3, 5, 4]");
  expect_error({{"x", ramp({1, 3, 4, 5}, 0.f, 1.f)}, {"z", ramp({2, 2}, 0.f, 1.f)}}, memfmt::errc::invalid_argument,
               "'z' float32 [2, 2] is no graph input");

  onnx_builder hardmax;
  hardmax.input("x", {1, 2, 3, 3});
  hardmax.node("Hardmax", {"x"}, {"y"}, "hardmax");
  hardmax.output("y");
  const auto opaque = memfmt::onnx::import_model(hardmax.model());
  try {
    memfmt::onnx::run_model(opaque, memfmt_test::plan_of(opaque, memfmt_test::plans[0]), backend,
                            {{"x", ramp({1, 2, 3, 3}, 0.f, 1.f)}});
    ADD_FAILURE() << "an opaque Hardmax ran";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), memfmt::errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("op Hardmax (ONNX node 'hardmax')"), std::string::npos) << e.what();
  }
}

}  // namespace
