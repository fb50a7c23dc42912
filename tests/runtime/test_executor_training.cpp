// The trainer (runtime/training.hpp) on the reference backend. Truths: central finite differences
// of L = sum(output * R) in float64 for every parameter gradient; the batch norm running
// statistics by their formula over the batch, brute force; every plan (all channels_first, all
// channels_last, solved) gives the all-channels_first gradients in float32 and float64; bad
// gradients and networks are refused before any work.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/plan.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/runtime/training.hpp"
#include "training_util.hpp"

namespace {

using namespace memfmt::training_test;
using memfmt::format_family;
using memfmt::graph::network;
using memfmt::graph::parameter_store;
using memfmt::runtime::tensor_ref;
namespace models = memfmt::graph::models;

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// Weights uniform in +-sqrt(3 / fan_in), batch norm and affine norm scales near 1, biases small,
// running statistics near the identity; in dtype T.
template <class T>
parameter_store make_params(const network& net, std::uint32_t seed) {
  std::mt19937 rng(seed);
  parameter_store s;
  for (const auto& n : net.nodes())
    for (const auto& p : net.parameters(n.id)) {
      const auto count = static_cast<std::size_t>(memfmt::detail::checked_numel(p.extents, "test"));
      if (p.type == memfmt::dtype::int64) {
        s.insert<std::int64_t>(p.name, p.extents, std::vector<std::int64_t>(count, 3));
        continue;
      }
      double lo = -0.1, hi = 0.1;
      if (ends_with(p.name, "running_var") || ends_with(p.name, ".value")) lo = 0.5, hi = 1.5;  // constants divide
      else if (ends_with(p.name, "weight") && p.extents.size() == 1) lo = 0.5, hi = 1.5;
      else if (ends_with(p.name, "weight")) {
        hi = std::sqrt(3.0 / static_cast<double>(count / static_cast<std::size_t>(p.extents[0])));
        lo = -hi;
      }
      std::uniform_real_distribution<double> d(lo, hi);
      std::vector<T> v(count);
      for (auto& e : v) e = static_cast<T>(d(rng));
      s.insert<T>(p.name, p.extents, v);
    }
  return s;
}

// A small network with every layer kind the trainer runs: conv (bias, groups), batch norm, relu,
// a residual add (fan-out), local response norm (an even window), max pool, nearest and linear upsampling, concat, a
// channel shuffle, space to depth and depth to space (the other block order), transposed conv, reflect pad, group and
// instance norm, a crop and a strided slice, a split, squeeze-and-excitation (global max pool, sigmoid, broadcast mul),
// CBAM's spatial attention and every other reduction over C (spatial_attention_and_reductions), average pool, flatten,
// linear, a split and concat of its features, and softmax; and constants in both operand positions of sub, div and mul:
// buffers per channel, trainable ones whole-map and rank 2.
network every_layer(memfmt::dtype type) {
  using memfmt::graph::conv_spec;
  network net;
  const auto x0 = net.input("input", {2, 3, 6, 6}, type, format_family::channels_first);
  const auto x = net.binary("normalize",
                            net.binary("center", x0, net.constant("mean", {1, 3, 1, 1}, type), memfmt::binary_op::sub),
                            net.constant("std", {1, 3, 1, 1}, type), memfmt::binary_op::div);
  auto h = net.relu("relu1", net.batch_norm("bn1", net.conv("conv1", x, conv_spec(4, 3, 1, 1))));
  // Over sigmoid(relu) >= 1/2: a smooth denominator away from 0.
  h = net.binary("rdiv", net.constant("numerator", {1, 4, 6, 6}, type, true),
                 net.activation("positive", h, memfmt::activation::sigmoid), memfmt::binary_op::div);
  const auto y = net.batch_norm("bn2", net.conv("conv2", h, conv_spec(4, 3, 1, 1, 2, true)));
  h = net.relu("relu2", net.add("add", y, h));  // [2, 4, 6, 6]
  h = net.lrn("lrn", h, memfmt::lrn_params::pytorch(2, 0.5, 0.75, 1.0));
  auto d = net.max_pool("pool", h, 2, 2);  // [2, 4, 3, 3]
  d = net.upsample("up", d, 2);            // [2, 4, 6, 6]
  h = net.concat("cat", {h, d});           // [2, 8, 6, 6]
  h = net.channel_shuffle("shuffle", h, 4);
  h = net.depth_to_space("d2s", net.space_to_depth("s2d", h, 2), 2, memfmt::block_order::dcr);  // [2, 8, 6, 6]
  h = net.activation("gelu", net.layer_norm("ln", h), memfmt::activation::gelu);
  const auto ct = memfmt::graph::conv_transpose_spec(4, 2, 2, 0, 0, 1, true);
  h = net.conv_transpose("convt", net.conv("down", h, conv_spec(6, 2, 2)), ct);  // [2, 4, 6, 6]
  memfmt::pad_params pp;
  pp.mode = memfmt::pad_mode::reflect;
  pp.begin = {1, 0, 0};
  pp.end = {0, 1, 0};
  h = net.group_norm("gn", net.pad("pad", h, pp), 2);            // [2, 4, 7, 7]
  h = net.slice("crop", h, memfmt::slice_params{2, 1, 7, 1});    // [2, 4, 6, 7]
  h = net.slice("stride", h, memfmt::slice_params{3, 0, 7, 2});  // [2, 4, 6, 4]
  const auto parts = net.split("split", h, {1, 3});
  h = net.concat("cat2", {net.instance_norm("in", parts[1], 1e-5, true), parts[0]});
  const auto se =
      net.activation("se.sigmoid", net.global_pool("se.pool", h, memfmt::pool_kind::max), memfmt::activation::sigmoid);
  h = net.mul("se.mul", h, se);
  h = net.activation("reductions.tanh", spatial_attention_and_reductions(net, h), memfmt::activation::tanh);
  h = net.upsample("up2", net.avg_pool("avg", h, 3, 2, 1), 2, memfmt::resample_mode::linear);  // [2, 9, 6, 4]
  h = net.avg_pool("avg2", h, 2, 2);                                                           // [2, 9, 3, 2]
  h = net.linear("fc", net.flatten("flatten", h), 5);
  const auto features = net.split("fsplit", h, {2, 3});  // rank 2: along F
  h = net.concat("fcat", {features[1], net.slice("fslice", features[0], memfmt::slice_params{1, 0, 2, 1})});
  h = net.mul("temperature", net.constant("inverse_temperature", {1, 5}, type, true), h);
  net.output("output", net.softmax("softmax", h), format_family::channels_first);
  return net;
}

// Central differences in float64 for a sample of every trainable parameter's elements (first,
// last and one in between), on each plan.
void check_finite_differences(const network& net, const memfmt::graph::plan& plan, const std::string& what) {
  SCOPED_TRACE(what);
  const parameter_store params = make_params<double>(net, 7);
  const auto& in = net.at(*net.find("input"));
  const auto& out = net.at(*net.find("output"));
  const auto x = random_values(static_cast<std::size_t>(in.numel()), 1);
  const auto r = random_values(static_cast<std::size_t>(out.numel()), 2);
  const step_result base = train<double>(net, plan, params, x, r);
  EXPECT_GT(base.arena, 0);
  EXPECT_LE(base.arena, base.all);
  std::size_t checked = 0;
  for (const auto& n : net.nodes())
    for (const auto& spec : net.parameters(n.id)) {
      if (!spec.trainable) continue;
      ASSERT_TRUE(base.grads.contains(spec.name)) << spec.name;
      const auto& gp = base.grads.at(spec.name);
      EXPECT_EQ(gp.shape, spec.extents) << spec.name;
      EXPECT_EQ(gp.type, memfmt::dtype::float64) << spec.name;
      const auto g = values(gp);
      const std::size_t count = g.size();
      for (std::size_t e : {std::size_t{0}, count / 2 + count / 5, count - 1}) {
        const double h = 1e-5;
        double loss[2];
        for (int side = 0; side < 2; ++side) {
          parameter_store p;
          for (const auto& [name, v] : params) {
            if (name != spec.name) {
              p.insert(name, v);
              continue;
            }
            auto w = v.values<double>();
            w[e] += side ? -h : h;
            p.insert<double>(name, v.shape, w);
          }
          loss[side] = train<double>(net, plan, p, x, r).loss;
        }
        const double fd = (loss[0] - loss[1]) / (2 * h);
        EXPECT_NEAR(g[e], fd, 1e-6 + 1e-5 * std::fabs(fd)) << spec.name << "[" << e << "]";
        ++checked;
      }
    }
  EXPECT_EQ(base.grads.size() * 3, checked);
}

TEST(Training, FiniteDifferencesEveryLayer) {
  const network net = every_layer(memfmt::dtype::float64);
  for (const auto& [name, plan] : plans_of(net)) check_finite_differences(net, plan, name);
}

TEST(Training, FiniteDifferencesResNet) {
  models::options o;
  o.batch = 2;
  o.resolution = 16;
  o.width = 1.0 / 16;
  o.classes = 3;
  o.type = memfmt::dtype::float64;
  const network net = models::resnet18(o);
  check_finite_differences(net, memfmt::graph::solve(net, memfmt::graph::cost_model{}), "resnet18 solved");
}

// Every plan gives the channels_first gradients and running statistics.
template <class T>
void check_plans_agree(const network& net, double tol) {
  const parameter_store params = make_params<T>(net, 3);
  const auto& in = net.at(*net.find("input"));
  const auto& out = net.at(*net.find("output"));
  const auto x = random_values(static_cast<std::size_t>(in.numel()), 4);
  const auto r = random_values(static_cast<std::size_t>(out.numel()), 5);
  const auto all = plans_of(net);
  const step_result truth = train<T>(net, all[0].second, params, x, r);
  for (const auto& [name, plan] : all) {
    SCOPED_TRACE(name);
    const step_result got = train<T>(net, plan, params, x, r);
    EXPECT_NEAR(got.loss, truth.loss, tol * std::max(1.0, std::fabs(truth.loss)));
    ASSERT_EQ(got.grads.names(), truth.grads.names());
    ASSERT_EQ(got.stats.names(), truth.stats.names());
    for (const auto* set : {&got.grads, &got.stats}) {
      const parameter_store& want = set == &got.grads ? truth.grads : truth.stats;
      for (const auto& [pname, p] : *set) {
        if (p.type == memfmt::dtype::int64) {
          EXPECT_EQ(p.template values<std::int64_t>(), want.at(pname).template values<std::int64_t>()) << pname;
          continue;
        }
        const auto a = values(p), b = values(want.at(pname));
        double scale = 0;
        for (double v : b) scale = std::max(scale, std::fabs(v));
        int bad = 0;
        for (std::size_t i = 0; i < a.size(); ++i)
          if (!(std::fabs(a[i] - b[i]) <= tol * std::max(1.0, scale)) && bad++ < 3)
            ADD_FAILURE() << pname << "[" << i << "] is " << a[i] << ", channels_first gives " << b[i];
      }
    }
  }
}

TEST(Training, PlansAgreeEveryLayer) {
  check_plans_agree<double>(every_layer(memfmt::dtype::float64), 1e-10);
  check_plans_agree<float>(every_layer(memfmt::dtype::float32), 2e-4);
}

// A renaming (dropout with p 0, flatten) shares its input's bytes; when its reader takes it in the
// other format, the gradient of that converted copy reaches the layer before the renaming.
TEST(Training, PlansAgreeThroughConvertedRenamings) {
  network net;
  const auto x = net.input("input", {1, 6, 6, 6}, memfmt::dtype::float64, format_family::channels_last);
  const auto c = net.conv("conv", x, memfmt::graph::conv_spec(3, 1, 2, 1));
  net.output("output", net.dropout("drop", c, 0.0), format_family::channels_first);
  check_plans_agree<double>(net, 1e-10);
}

// GCNet's context block with a batch norm: the pooled [N, C, 1, 1] context, conv, batch norm, added
// to the map, relu. The sum has the map's shape, not the batch norm's, so batch norm + add + relu is
// no training fusion (fused, it wrote the sum over the batch norm's 1x1 value); the gradients match
// finite differences and every plan agrees.
TEST(Training, BroadcastAddAfterABatchNormIsNotFused) {
  network net;
  const auto x = net.input("input", {2, 4, 5, 3}, memfmt::dtype::float64, format_family::channels_first);
  const auto c = net.conv("context", net.global_pool("pool", x), memfmt::graph::conv_spec(4, 1));
  const auto sum = net.add("add", net.batch_norm("bn", c), x);
  net.output("output", net.relu("relu", sum), format_family::channels_first);
  for (const auto& [name, plan] : plans_of(net)) check_finite_differences(net, plan, name);
  check_plans_agree<double>(net, 1e-10);
}

TEST(Training, PlansAgreeModels) {
  models::options o;
  o.batch = 2;
  o.resolution = 16;
  o.width = 1.0 / 16;
  o.classes = 3;
  for (auto type : {memfmt::dtype::float32, memfmt::dtype::float64}) {
    o.type = type;
    const double tol = type == memfmt::dtype::float64 ? 1e-10 : 2e-4;
    SCOPED_TRACE(memfmt::to_string(type));
    if (type == memfmt::dtype::float64) {
      check_plans_agree<double>(models::resnet18(o), tol);
      check_plans_agree<double>(models::unet(o), tol);
    } else {
      check_plans_agree<float>(models::resnet18(o), tol);
      check_plans_agree<float>(models::unet(o), tol);
    }
  }
}

// running_mean and running_var follow PyTorch's update over two steps (the unbiased batch
// variance for running_var), num_batches_tracked counts them; the batch statistics normalise.
TEST(Training, BatchNormRunningStatistics) {
  for (format_family f : {format_family::channels_first, format_family::channels_last}) {
    network net;
    memfmt::batch_norm_params bp;
    bp.momentum = 0.25;
    net.output("output", net.batch_norm("bn", net.input("input", {3, 2, 2, 3}, memfmt::dtype::float64, f), bp), f);
    const parameter_store params = make_params<double>(net, 9);
    const auto plan = memfmt::graph::make_plan(net, memfmt::graph::cost_model{}, uniform(net, f));
    memfmt::reference::backend b;
    trainer_t t(net, plan, b, params);
    const auto& in = net.at(0);
    std::vector<double> mean = params.at("bn.running_mean").values<double>();
    std::vector<double> var = params.at("bn.running_var").values<double>();
    const auto gamma = params.at("bn.weight").values<double>(), beta = params.at("bn.bias").values<double>();
    for (int s = 0; s < 2; ++s) {
      const auto x = random_values(36, 20 + static_cast<std::uint32_t>(s));
      auto xs = store<double>(in, f, x);
      auto ys = store<double>(in, f, std::vector<double>(36, 0.0));
      auto rs = store<double>(in, f, std::vector<double>(36, 1.0));
      t.train_step({{"input", xs.ref}}, {{"output", ys.ref}}, {{"output", rs.ref}});
      for (std::int64_t c = 0; c < 2; ++c) {
        double sum = 0, sq = 0;
        std::vector<std::size_t> idx;
        for (std::size_t i = 0; i < 36; ++i)
          if (static_cast<std::int64_t>(i / 6 % 2) == c) idx.push_back(i);
        for (std::size_t i : idx) sum += x[i];
        const double m = sum / 18.0;
        for (std::size_t i : idx) sq += (x[i] - m) * (x[i] - m);
        const auto cc = static_cast<std::size_t>(c);
        mean[cc] = 0.75 * mean[cc] + 0.25 * m;
        var[cc] = 0.75 * var[cc] + 0.25 * sq / 17.0;
        for (std::size_t i : idx)
          EXPECT_NEAR(ys.data[physical(in.extents, i, f)],
                      gamma[cc] * (x[i] - m) / std::sqrt(sq / 18.0 + 1e-5) + beta[cc], 1e-12);
      }
      const parameter_store st = t.running_stats();
      const auto rm = st.at("bn.running_mean").values<double>(), rv = st.at("bn.running_var").values<double>();
      for (std::size_t c = 0; c < 2; ++c) {
        EXPECT_NEAR(rm[c], mean[c], 1e-14);
        EXPECT_NEAR(rv[c], var[c], 1e-14);
      }
      EXPECT_EQ(st.at("bn.num_batches_tracked").values<std::int64_t>(), std::vector<std::int64_t>{4 + s});
    }
  }
}

// Gradients of a value read twice by one layer and by several layers are summed: y = x * x + relu(x)
// has dL/dx = R * (2x + [x > 0]) (checked through a 1x1 conv whose weight gradient is sum(dy * x)).
TEST(Training, FanOutSums) {
  network net;
  const auto x = net.input("input", {1, 1, 2, 2}, memfmt::dtype::float64, format_family::channels_first);
  const auto c = net.conv("conv", x, memfmt::graph::conv_spec(1, 1));
  net.output("output", net.add("add", net.mul("sq", c, c), net.relu("relu", c)), format_family::channels_first);
  parameter_store p;
  p.insert<double>("conv.weight", {1, 1, 1, 1}, {1.0});
  const std::vector<double> xv = {0.5, -1.0, 2.0, -0.25}, r = {1.0, 2.0, -1.0, 0.5};
  const auto plan =
      memfmt::graph::make_plan(net, memfmt::graph::cost_model{}, uniform(net, format_family::channels_first));
  const step_result s = train<double>(net, plan, p, xv, r);
  double expect = 0;
  for (std::size_t i = 0; i < 4; ++i) expect += r[i] * (2 * xv[i] + (xv[i] > 0 ? 1 : 0)) * xv[i];
  EXPECT_NEAR(s.grads.at("conv.weight").values<double>().at(0), expect, 1e-12);
}

// An empty batch trains to zero gradients: nothing is copied in, out of or zeroed in the empty
// values (whose storage is a null pointer; the unread one's gradient is zeros), and every parameter
// still gets its gradient.
TEST(Training, EmptyBatchGivesZeroGradients) {
  network net;
  const auto x = net.input("input", {0, 2, 3, 3}, memfmt::dtype::float64, format_family::channels_first);
  net.relu("unread", x);
  net.output("output", net.group_norm("norm", x, 2), format_family::channels_last);
  parameter_store p;
  p.insert<double>("norm.weight", {2}, {1.5, 0.5});
  p.insert<double>("norm.bias", {2}, {0.5, -0.5});
  for (format_family f : {format_family::channels_first, format_family::channels_last}) {
    const auto plan = memfmt::graph::make_plan(net, memfmt::graph::cost_model{}, uniform(net, f));
    const step_result s = train<double>(net, plan, p, {}, {});
    EXPECT_EQ(s.grads.at("norm.weight").values<double>(), std::vector<double>(2, 0.0));
    EXPECT_EQ(s.grads.at("norm.bias").values<double>(), std::vector<double>(2, 0.0));
  }
}

// A bfloat16 batch norm keeps its parameters, gradients and running statistics in float32, as AMP
// does: a running mean of 16 + 1/128 moves by the momentum's share of the batch mean, which
// bfloat16 (8 bits of mantissa: steps of 1/16 near 12) could not hold.
TEST(Training, Bfloat16BatchNormKeepsFloat32Statistics) {
  network net;
  memfmt::batch_norm_params bp;
  bp.momentum = 0.25;
  const auto in = net.input("input", {2, 1, 2, 2}, memfmt::dtype::bfloat16, format_family::channels_first);
  net.output("output", net.batch_norm("bn", in, bp), format_family::channels_first);
  parameter_store params;
  params.insert<float>("bn.weight", {1}, {1.5f});
  params.insert<float>("bn.bias", {1}, {0.25f});
  params.insert<float>("bn.running_mean", {1}, {16.f + 1.f / 128});
  params.insert<float>("bn.running_var", {1}, {1.f});
  params.insert<std::int64_t>("bn.num_batches_tracked", {}, {0});
  const auto plan =
      memfmt::graph::make_plan(net, memfmt::graph::cost_model{}, uniform(net, format_family::channels_first));
  memfmt::reference::backend b;
  trainer_t t(net, plan, b, params);
  const std::vector<double> x{0.5, -0.25, 1.0, 0.75, -1.0, 0.125, 0.25, -0.5};  // exact in bfloat16, mean 0.109375
  auto xs = store<memfmt::bfloat16>(net.at(in), format_family::channels_first, x);
  auto ys = store<memfmt::bfloat16>(net.at(in), format_family::channels_first, std::vector<double>(8, 0.0));
  auto rs = store<memfmt::bfloat16>(net.at(in), format_family::channels_first, std::vector<double>(8, 1.0));
  const parameter_store grads = t.train_step({{"input", xs.ref}}, {{"output", ys.ref}}, {{"output", rs.ref}});
  for (const char* k : {"bn.weight", "bn.bias"}) EXPECT_EQ(grads.at(k).type, memfmt::dtype::float32) << k;
  EXPECT_NEAR(grads.at("bn.bias").values<float>().at(0), 8.f, 1e-5f);  // sum of the output gradient
  const parameter_store st = t.running_stats();
  EXPECT_EQ(st.at("bn.running_mean").type, memfmt::dtype::float32);
  EXPECT_NEAR(st.at("bn.running_mean").values<float>().at(0), 0.75 * (16 + 1.0 / 128) + 0.25 * 0.109375, 1e-5);
}

TEST(TrainingErrors, BadOutputGradients) {
  const network net = every_layer(memfmt::dtype::float32);
  const parameter_store params = make_params<float>(net, 3);
  memfmt::reference::backend b;
  trainer_t t(net, memfmt::graph::solve(net, memfmt::graph::cost_model{}), b, params);
  std::vector<float> x(2 * 3 * 6 * 6, 0.5f), y(10, 7.f), r(10, 1.f);
  std::vector<double> rd(10, 1.0);
  const tensor_ref in{memfmt::dtype::float32, {2, 3, 6, 6}, format_family::channels_first, x.data()};
  const tensor_ref out{memfmt::dtype::float32, {2, 5}, format_family::channels_first, y.data()};
  const auto before = t.running_stats();
  const auto expect_error = [&](const std::map<std::string, tensor_ref>& grads, memfmt::errc code,
                                const std::string& text) {
    try {
      t.train_step({{"input", in}}, {{"output", out}}, grads);
      ADD_FAILURE() << "no error for " << text;
    } catch (const memfmt::error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
    for (float v : y) ASSERT_EQ(v, 7.f);
    const auto now = t.running_stats();
    for (const auto& [name, p] : before) EXPECT_EQ(p.bytes, now.at(name).bytes) << name;
  };
  expect_error({{"output", tensor_ref{memfmt::dtype::float32, {2, 6}, format_family::channels_first, r.data()}}},
               memfmt::errc::shape_mismatch, "output gradient 'output' expected float32 [2, 5], given float32 [2, 6]");
  expect_error({{"output", tensor_ref{memfmt::dtype::float64, {2, 5}, format_family::channels_first, rd.data()}}},
               memfmt::errc::unsupported_dtype, "expected float32 [2, 5], given float64 [2, 5]");
  expect_error({}, memfmt::errc::invalid_argument, "no output gradient 'output' given (float32 [2, 5])");
  expect_error({{"output", tensor_ref{memfmt::dtype::float32, {2, 5}, format_family::channels_first, nullptr}}},
               memfmt::errc::null_pointer, "output gradient 'output' has no data");
  expect_error({{"output", tensor_ref{memfmt::dtype::float32, {2, 5}, format_family::channels_first, r.data()}},
                {"fc", tensor_ref{memfmt::dtype::float32, {2, 5}, format_family::channels_first, r.data()}}},
               memfmt::errc::invalid_argument, "'fc' float32 [2, 5] is no output gradient of the network");

  // A 4-D output: the gradient's format must be the output's.
  network net4;
  const auto x4 = net4.input("input", {1, 2, 3, 3}, memfmt::dtype::float32, format_family::channels_first);
  net4.output("output", net4.relu("relu", x4), format_family::channels_last);
  trainer_t t4(net4, memfmt::graph::solve(net4, memfmt::graph::cost_model{}), b, parameter_store{});
  std::vector<float> a(18, 1.f), z(18, 0.f), g(18, 1.f);
  try {
    t4.train_step(
        {{"input", tensor_ref{memfmt::dtype::float32, {1, 2, 3, 3}, format_family::channels_first, a.data()}}},
        {{"output", tensor_ref{memfmt::dtype::float32, {1, 2, 3, 3}, format_family::channels_last, z.data()}}},
        {{"output", tensor_ref{memfmt::dtype::float32, {1, 2, 3, 3}, format_family::channels_first, g.data()}}});
    ADD_FAILURE() << "no error";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), memfmt::errc::format_mismatch);
    EXPECT_NE(std::string(e.what()).find(
                  "expected float32 [1, 2, 3, 3] channels_last, given float32 [1, 2, 3, 3] channels_first"),
              std::string::npos)
        << e.what();
  }
  for (float v : z) ASSERT_EQ(v, 0.f);
}

// Layers without a backward here are refused at build time, naming the node.
TEST(TrainingErrors, UntrainableLayers) {
  memfmt::reference::backend b;
  const memfmt::graph::cost_model model{};
  network op_net;
  const auto x = op_net.input("input", {1, 2, 3, 3}, memfmt::dtype::float32, format_family::channels_first);
  const auto u = op_net.opaque("user", {x}, {1, 2, 3, 3}, format_family::channels_first, format_family::channels_first);
  memfmt::runtime::user_op op;
  op.run = [](const std::vector<tensor_ref>&, tensor_ref&) {};
  op_net.set_callback(u, op);
  op_net.output("output", u, format_family::channels_first);
  try {
    trainer_t t(op_net, memfmt::graph::solve(op_net, model), b, parameter_store{});
    ADD_FAILURE() << "no error";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), memfmt::errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("node 'user' (opaque): a user_op has no backward function"), std::string::npos)
        << e.what();
  }
  network drop;
  const auto y = drop.input("input", {1, 2, 3, 3}, memfmt::dtype::float32, format_family::channels_first);
  drop.output("output", drop.dropout("drop", y, 0.5), format_family::channels_first);
  try {
    trainer_t t(drop, memfmt::graph::solve(drop, model), b, parameter_store{});
    ADD_FAILURE() << "no error";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), memfmt::errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("node 'drop' (dropout): p 0.5"), std::string::npos) << e.what();
  }
}

}  // namespace
