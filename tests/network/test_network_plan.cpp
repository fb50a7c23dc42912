// The network executor of bench_network (benchmarks/network/resnet_executor.hpp) on a small
// ResNet-50 of the models header (width 1/8, 64x64): every variant (all NCHW, all NHWC, the
// planner's plan, a deliberately mixed assignment that splits the BN fusions and converts often)
// runs through oneDNN and must give the output of a plain NCHW forward written out here with the
// reference backend (double accumulation, no fusion, its own copy of ResNet's strides, paddings and
// max pool): the independent truth.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <memfmt/backends/dnnl/backend.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/graph/cost_model.hpp>
#include <memfmt/graph/plan.hpp>
#include <memfmt/graph/solve.hpp>

#include "resnet_executor.hpp"

namespace {

using namespace memfmt;
using namespace memfmt_network;

resnet_config tiny() {
  resnet_config c;
  c.batch = 1;
  c.resolution = 64;  // stem 32x32, max pool 16x16; stages at 16, 8, 4, 2
  c.width = 0.125;    // stem 8 channels, bottleneck widths 8, 16, 32, 64
  return c;
}

// The trunk's values the executor computes; conversions of later values (the classifier's) are not run.
std::int64_t trunk_conversions(const graph::plan& p, node_id output) {
  std::int64_t n = 0;
  for (const auto& c : p.conversions) n += c.value <= output;
  return n;
}

template <class T>
T of_float(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return T(v);
}

// ResNet's bottleneck trunk, unfused, NCHW, reference backend. Only the parameter values come from
// the model (looked up by layer name); the structure is written out again here.
template <class T>
class oracle {
 public:
  explicit oracle(const resnet_model<T>& m) : m_(m) {}

  host_tensor<T, nchw> run() {
    host_tensor<T, nchw> h = max_pool_3x3s2(relu(bn("bn1", conv("conv1", m_.image, 2, 3))));
    const int blocks[] = {3, 4, 6, 3};
    for (int stage = 0; stage < 4; ++stage)
      for (int b = 0; b < blocks[stage]; ++b) {
        const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b) + ".";
        const std::int64_t stride = (b == 0 && stage > 0) ? 2 : 1;
        host_tensor<T, nchw> y = relu(bn(name + "bn1", conv(name + "conv1", h, 1, 0)));
        y = relu(bn(name + "bn2", conv(name + "conv2", y, stride, 1)));
        y = bn(name + "bn3", conv(name + "conv3", y, 1, 0));
        host_tensor<T, nchw> shortcut =
            b == 0 ? bn(name + "downsample.1", conv(name + "downsample.0", h, stride, 0)) : h.clone();
        h = relu(add(y, shortcut));
      }
    return h;
  }

 private:
  node_id id(const std::string& name) const {
    const auto found = m_.net.find(name);
    EXPECT_TRUE(found.has_value()) << name;
    return found.value_or(0);
  }

  host_tensor<T, nchw> conv(const std::string& layer, const host_tensor<T, nchw>& x, std::int64_t stride,
                            std::int64_t padding) {
    const auto& w = m_.convs[id(layer)].weight;
    conv_params p;
    p.stride = {stride, stride, 1};
    p.padding = {padding, padding, 0};
    host_tensor<T, nchw> y(conv_output_extents(x.extents(), w.extents(), p));
    ref_.conv_forward(x.const_view(), w.const_view(), static_cast<const T*>(nullptr), y.view(), p);
    return y;
  }

  host_tensor<T, nchw> bn(const std::string& layer, const host_tensor<T, nchw>& x) {
    const auto& l = m_.bns[id(layer)];
    host_tensor<T, nchw> y(x.extents());
    ref_.batch_norm_forward_inference(x.const_view(), y.view(), l.gamma.data(), l.beta.data(), l.mean.data(),
                                      l.var.data(), batch_norm_params{});
    return y;
  }

  // torch.nn.MaxPool2d(3, 2, 1): padded positions never win.
  static host_tensor<T, nchw> max_pool_3x3s2(const host_tensor<T, nchw>& x) {
    const auto e = x.extents();
    host_tensor<T, nchw> y({e[0], e[1], (e[2] - 1) / 2 + 1, (e[3] - 1) / 2 + 1});
    const auto ye = y.extents();
    for (std::int64_t n = 0; n < ye[0]; ++n)
      for (std::int64_t c = 0; c < ye[1]; ++c)
        for (std::int64_t i = 0; i < ye[2]; ++i)
          for (std::int64_t j = 0; j < ye[3]; ++j) {
            float m = -1e30f;
            for (std::int64_t h = 2 * i - 1; h <= 2 * i + 1; ++h)
              for (std::int64_t w = 2 * j - 1; w <= 2 * j + 1; ++w)
                if (h >= 0 && h < e[2] && w >= 0 && w < e[3])
                  m = std::max(m, static_cast<float>(x.data()[((n * e[1] + c) * e[2] + h) * e[3] + w]));
            y.data()[((n * ye[1] + c) * ye[2] + i) * ye[3] + j] = of_float<T>(m);
          }
    return y;
  }

  static host_tensor<T, nchw> relu(host_tensor<T, nchw> x) {
    for (std::int64_t i = 0; i < x.numel(); ++i)
      if (!(static_cast<float>(x.data()[i]) > 0.f)) x.data()[i] = of_float<T>(0.f);
    return x;
  }

  static host_tensor<T, nchw> add(const host_tensor<T, nchw>& a, const host_tensor<T, nchw>& b) {
    host_tensor<T, nchw> y(a.extents());
    for (std::int64_t i = 0; i < a.numel(); ++i)
      y.data()[i] = of_float<T>(static_cast<float>(a.data()[i]) + static_cast<float>(b.data()[i]));
    return y;
  }

  const resnet_model<T>& m_;
  reference::backend ref_;
};

// Conv and memory-bound layers on a pattern that keeps switching format: many conversions and
// split fusion groups (unfused ReLU / add).
std::vector<std::optional<family>> mixed_assignment(const graph::network& net) {
  std::vector<std::optional<family>> a = uniform_assignment(net, family::channels_first);
  for (const auto& n : net.nodes())
    if (n.kind != node_kind::input && a[n.id]) a[n.id] = (n.id * 7) % 3 == 0 ? family::channels_last : family::channels_first;
  return a;
}

template <class T>
class network_plan : public ::testing::Test {};
using element_types = ::testing::Types<float, bfloat16>;
TYPED_TEST_SUITE(network_plan, element_types);

TYPED_TEST(network_plan, every_variant_matches_the_reference_forward) {
  using T = TypeParam;
  const resnet_model<T> model(tiny());
  const host_tensor<T, nchw> truth = oracle<T>(model).run();
  ASSERT_EQ(truth.extents(), (layout<nchw>::extents_type{1, 256, 2, 2}));

  const graph::cost_model priors;
  struct variant {
    const char* name;
    graph::plan plan;
  };
  const std::vector<variant> variants{
      {"nchw", graph::make_plan(model.net, priors, uniform_assignment(model.net, family::channels_first))},
      {"nhwc", graph::make_plan(model.net, priors, uniform_assignment(model.net, family::channels_last))},
      {"planned", graph::solve(model.net, priors)},
      {"mixed", graph::make_plan(model.net, priors, mixed_assignment(model.net))},
  };
  onednn::backend dnnl;
  std::int64_t full_fusion = 0;
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name);
    executor<T, onednn::backend> ex(dnnl, model, v.plan);
    const pass_stats s = ex.run();
    // Every conversion of the plan's trunk runs once per pass, no other.
    EXPECT_EQ(s.conversions, trunk_conversions(v.plan, model.output));
    EXPECT_EQ(ex.conversions_per_pass(), s.conversions);
    const double err = normalized_max_error(ex.output_nchw(), truth);
    EXPECT_LE(err, network_tolerance<T>());
    // A second pass reuses the buffers and gives the same result.
    ex.run();
    EXPECT_LE(normalized_max_error(ex.output_nchw(), truth), network_tolerance<T>());
    if (std::string(v.name) == "nchw") full_fusion = ex.fused_groups();
    if (std::string(v.name) == "nhwc") {
      EXPECT_EQ(s.conversions, 1);  // the NCHW image, once
      EXPECT_EQ(ex.fused_groups(), full_fusion);
    }
    if (std::string(v.name) == "mixed") {
      EXPECT_GT(s.conversions, 10);
      EXPECT_LT(ex.fused_groups(), full_fusion);  // the unfused ReLU / add paths ran
    }
  }
  // Every BN is fused with its ReLU or its add: 1 (stem) + 2 per block + 1 per block's add.
  EXPECT_EQ(full_fusion, 1 + 3 * 16);
}

TEST(network_plan_errors, a_plan_of_another_network_is_rejected_with_both_sizes) {
  resnet_config small = tiny();
  const resnet_model<float> model(small);
  small.resnet50 = false;
  const resnet_model<float> other(small);
  const graph::plan p = graph::solve(other.net, graph::cost_model{});
  onednn::backend dnnl;
  try {
    executor<float, onednn::backend> ex(dnnl, model, p);
    FAIL() << "expected memfmt::error";
  } catch (const memfmt::error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(other.net.size()) + " nodes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(model.net.size())), std::string::npos) << e.what();
  }
}

}  // namespace
