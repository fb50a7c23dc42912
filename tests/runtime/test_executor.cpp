// The executor on the reference backend: every plan (all channels-first, all channels-last, mixed)
// gives the outputs of the layers called one by one on NCHW tensors (networks with constants: their
// arithmetic written out); poisoning every value when its liveness ends changes nothing; bad inputs, outputs,
// parameters and unsupported layers are errors before any work, naming the node or tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../common/expect_error.hpp"
#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/plan.hpp"
#include "memfmt/runtime/executor.hpp"

namespace {

using memfmt::errc;
using memfmt::format_family;
using memfmt::graph::network;
using memfmt::graph::node_id;
using memfmt::graph::parameter_store;
using memfmt::runtime::tensor_ref;
using memfmt_test::expect_error;

// conv 3x3 (bias) -> batch norm -> grouped strided 1x1 conv -> output; and a second output from the
// batch norm, so one value has two readers and the plan may convert it once for both.
struct small_net {
  network net;
  node_id x, c1, bn, c2;
  explicit small_net(memfmt::dtype t, std::vector<std::int64_t> in = {2, 4, 7, 6}) {
    x = net.input("x", in, t, format_family::channels_first);
    memfmt::graph::conv_attrs a = memfmt::graph::conv_spec(6, 3, 1, 1, 1, true);
    if (in.size() == 5) a.kernel = {3, 3, 3};
    c1 = net.conv("c1", x, a);
    bn = net.batch_norm("bn", c1);
    c2 = net.conv("c2", bn, memfmt::graph::conv_spec(4, 1, 2, 0, 2));
    net.output("y", c2, format_family::channels_first);
    net.output("features", bn, format_family::channels_last);
  }
};

template <class T>
std::vector<T> random_values(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<T> v(n);
  for (auto& e : v) e = static_cast<T>(d(rng));
  return v;
}

// Parameters for every tensor the network names, random but valid (positive variances).
template <class T>
parameter_store make_params(const network& net, std::uint32_t seed) {
  parameter_store s;
  for (const auto& n : net.nodes())
    for (const auto& p : net.parameters(n.id)) {
      const auto count = static_cast<std::size_t>(memfmt::detail::checked_numel(p.extents, "test"));
      if (p.type == memfmt::dtype::int64) {
        s.insert<std::int64_t>(p.name, p.extents, std::vector<std::int64_t>(count, 0));
      } else {
        const bool var = p.name.find("running_var") != std::string::npos;
        const float lo = var ? 0.5f : -1.f, hi = var ? 2.f : 1.f;
        if (p.type == memfmt::dtype_of_v<T>) s.insert<T>(p.name, p.extents, random_values<T>(count, seed++, lo, hi));
        else
          s.insert<float>(p.name, p.extents, random_values<float>(count, seed++, lo, hi));  // a norm's in a T network
      }
    }
  return s;
}

std::vector<std::optional<format_family>> assignment(const network& net, std::optional<format_family> f) {
  std::vector<std::optional<format_family>> a(net.size());
  int i = 0;
  for (const auto& n : net.nodes()) {
    if (!net.has_format(n.id)) continue;
    if (const auto* p = n.binding_pin(); p && p->mandatory) a[n.id] = p->format;
    else
      a[n.id] =
          f ? *f : (i++ % 2 ? format_family::channels_last : format_family::channels_first);  // nullopt: alternate
  }
  return a;
}

memfmt::graph::plan plan_for(const network& net, std::optional<format_family> f) {
  return memfmt::graph::make_plan(net, memfmt::graph::cost_model{}, assignment(net, f));
}

// The truth: the reference layers called one by one on NCHW tensors.
template <class T, class F>
struct direct {
  memfmt::host_tensor<T, F> y, features;
};

template <class T, class F>
memfmt::host_tensor<T, F> tensor_from(const std::vector<std::int64_t>& e) {
  typename memfmt::host_tensor<T, F>::extents_type x{};
  for (std::size_t d = 0; d < x.size(); ++d) x[d] = e[d];
  return memfmt::host_tensor<T, F>(x);
}

template <class T, class F>
memfmt::host_tensor<T, F> weight_of(const parameter_store& s, const std::string& name) {
  auto w = tensor_from<T, F>(s.at(name).shape);
  const auto v = s.at(name).values<T>(name);
  std::copy(v.begin(), v.end(), w.data());
  return w;
}

template <class T, class F>
direct<T, F> run_direct(const small_net& m, const parameter_store& s, const memfmt::host_tensor<T, F>& x) {
  using P = memfmt::param_t<T>;
  memfmt::reference::backend b;
  const auto& n = m.net;
  auto c1 = tensor_from<T, F>(n.at(m.c1).extents);
  const auto w1 = weight_of<T, F>(s, "c1.weight");
  const auto bias = s.at("c1.bias").values<T>();
  b.conv_forward(x.const_view(), w1.const_view(), bias.data(), c1.view(),
                 n.at(m.c1).get<memfmt::graph::conv_attrs>().params);
  direct<T, F> r{tensor_from<T, F>(n.at(m.c2).extents), tensor_from<T, F>(n.at(m.bn).extents)};
  std::vector<std::vector<P>> st;
  for (const char* k : {"weight", "bias", "running_mean", "running_var"})
    st.push_back(s.at(std::string("bn.") + k).values<P>());
  b.batch_norm_forward_inference(c1.const_view(), r.features.view(), st[0].data(), st[1].data(), st[2].data(),
                                 st[3].data(), n.at(m.bn).get<memfmt::batch_norm_params>());
  const auto w2 = weight_of<T, F>(s, "c2.weight");
  b.conv_forward(r.features.const_view(), w2.const_view(), static_cast<const T*>(nullptr), r.y.view(),
                 n.at(m.c2).get<memfmt::graph::conv_attrs>().params);
  return r;
}

// y (channels_first) and features (channels_last) from one executor run.
template <class T, class CF, class CL>
std::pair<memfmt::host_tensor<T, CF>, memfmt::host_tensor<T, CL>> run_executor(
    const small_net& m, const memfmt::graph::plan& plan, const parameter_store& s, const memfmt::host_tensor<T, CF>& x,
    bool poison, memfmt::runtime::executor_report* report = nullptr) {
  memfmt::reference::backend b;
  memfmt::runtime::executor<memfmt::reference::backend> ex(m.net, plan, b, s, {poison, false});  // exact: no folding
  auto y = tensor_from<T, CF>(m.net.at(m.c2).extents);
  auto f = tensor_from<T, CL>(m.net.at(m.bn).extents);
  ex.forward({{"x", memfmt::runtime::ref(x.const_view())}},
             {{"y", memfmt::runtime::ref(y.view())}, {"features", memfmt::runtime::ref(f.view())}});
  if (report) *report = ex.report();
  return {std::move(y), std::move(f)};
}

// Element by element in logical order (both converted to the channels-first format).
template <class T, class FA, class FB>
void expect_equal(const memfmt::host_tensor<T, FA>& got, const memfmt::host_tensor<T, FB>& want,
                  const std::string& what) {
  ASSERT_EQ(got.extents(), want.extents()) << what;
  using CF = typename FA::channels_first_t;
  memfmt::host_tensor<T, CF> a(got.extents()), b(want.extents());
  memfmt::convert(got.const_view(), a.view());
  memfmt::convert(want.const_view(), b.view());
  int bad = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const float g = static_cast<float>(a.data()[i]), w = static_cast<float>(b.data()[i]);
    if (!(g == w) && bad++ < 5) ADD_FAILURE() << what << ": element " << i << " is " << g << ", expected " << w;
  }
}

template <class T, class CF, class CL>
void check_every_plan(std::vector<std::int64_t> in) {
  const small_net m(memfmt::dtype_of_v<T>, in);
  const parameter_store s = make_params<T>(m.net, 3);
  auto x = tensor_from<T, CF>(in);
  const auto xv = random_values<T>(static_cast<std::size_t>(x.numel()), 99, -2.f, 2.f);
  std::copy(xv.begin(), xv.end(), x.data());
  const auto truth = run_direct<T, CF>(m, s, x);
  const std::pair<const char*, std::optional<format_family>> plans[] = {
      {"channels_first", format_family::channels_first},
      {"channels_last", format_family::channels_last},
      {"mixed", std::nullopt}};
  for (const auto& [name, f] : plans)
    for (bool poison : {false, true}) {
      const auto plan = plan_for(m.net, f);
      memfmt::runtime::executor_report r;
      const auto [y, features] = run_executor<T, CF, CL>(m, plan, s, x, poison, &r);
      const std::string what = std::string(name) + (poison ? " poisoned" : "");
      expect_equal(y, truth.y, "y " + what);
      expect_equal(features, truth.features, "features " + what);
      EXPECT_EQ(r.conversions, static_cast<std::int64_t>(plan.copies())) << what;
      EXPECT_EQ(r.relabels, static_cast<std::int64_t>(plan.relabels())) << what;
      EXPECT_LE(r.arena_bytes, r.allocate_all_bytes) << what;
    }
}

TEST(Executor, EveryPlanMatchesTheLayersRunOneByOne) {
  check_every_plan<float, memfmt::nchw, memfmt::nhwc>({2, 4, 7, 6});
  check_every_plan<double, memfmt::nchw, memfmt::nhwc>({1, 4, 5, 5});
  check_every_plan<memfmt::bfloat16, memfmt::nchw, memfmt::nhwc>({1, 4, 5, 4});
  check_every_plan<float, memfmt::ncdhw, memfmt::ndhwc>({1, 4, 3, 5, 4});
}

// The all-channels-last plan converts the input once (it arrives channels_first) and the outputs
// y back; features is pinned channels_last.
TEST(Executor, ReportsConversionsAndReuse) {
  const small_net m(memfmt::dtype::float32);
  const auto plan = plan_for(m.net, format_family::channels_last);
  memfmt::reference::backend b;
  memfmt::runtime::executor<memfmt::reference::backend> ex(m.net, plan, b, make_params<float>(m.net, 1));
  EXPECT_EQ(ex.report().conversions, 2);
  EXPECT_GT(ex.report().allocate_all_bytes, 0);
  EXPECT_GE(ex.report().arena_bytes, ex.memory().live_peak_bytes);
  EXPECT_LE(ex.report().arena_bytes, ex.report().allocate_all_bytes);
}

// An input that only its conversion reads is converted from the caller's tensor on entry and
// takes no bytes of the arena (EveryPlanMatchesTheLayersRunOneByOne checks the values); one that a
// layer reads in its own format is copied in.
TEST(Executor, InputReadOnlyThroughItsConversionIsConvertedOnEntry) {
  const small_net m(memfmt::dtype::float32);
  memfmt::reference::backend b;
  const auto bytes_of_x = [&](std::optional<format_family> f) {
    memfmt::runtime::executor<memfmt::reference::backend> ex(m.net, plan_for(m.net, f), b,
                                                             make_params<float>(m.net, 1));
    for (const auto& v : ex.memory().values)
      if (v.name == "x") return v.bytes;
    ADD_FAILURE() << "no value 'x' in the memory plan";
    return std::int64_t{-1};
  };
  EXPECT_EQ(bytes_of_x(format_family::channels_last), 0);
  EXPECT_EQ(bytes_of_x(format_family::channels_first), 2 * 4 * 7 * 6 * 4);
}

// The mirror on exit: a value whose converted copy only a graph output reads is converted into the
// caller's tensor at the end, so the copy takes no bytes of the arena (EveryPlanMatchesTheLayersRunOneByOne
// checks the values, poisoned); features, read by c2 too, keeps its bytes.
TEST(Executor, OutputReadOnlyThroughAConversionIsConvertedOnExit) {
  const small_net m(memfmt::dtype::float32);
  memfmt::reference::backend b;
  memfmt::runtime::executor<memfmt::reference::backend> ex(m.net, plan_for(m.net, format_family::channels_last), b,
                                                           make_params<float>(m.net, 1));
  std::map<std::string, std::int64_t> bytes;
  for (const auto& v : ex.memory().values) bytes[v.name] = v.bytes;
  ASSERT_EQ(bytes.count("c2 (channels_first)"), 1u);
  EXPECT_EQ(bytes["c2 (channels_first)"], 0);
  EXPECT_EQ(bytes["c2"], 2 * 4 * 4 * 3 * 4);
  EXPECT_EQ(ex.report().conversions, 2);
}

// A channels_first flatten is the conv's own buffer read as [N, C * H * W]; a channels_last one
// would order the features (H, W, C), which only a permuted linear may read.
TEST(Executor, FlattenAliasesItsInput) {
  network net;
  const node_id x = net.input("x", {2, 3, 4, 5}, memfmt::dtype::float32, format_family::channels_first);
  const node_id c = net.conv("c", x, memfmt::graph::conv_spec(2, 3, 1, 1));
  net.output("features", net.flatten("flat", c), format_family::channels_first);
  net.output("map", c, format_family::channels_first);
  const parameter_store s = make_params<float>(net, 5);
  memfmt::reference::backend b;
  memfmt::runtime::executor<memfmt::reference::backend> ex(net, plan_for(net, format_family::channels_first), b, s);
  memfmt::host_tensor<float, memfmt::nchw> in({2, 3, 4, 5}), map({2, 2, 4, 5});
  const auto v = random_values<float>(static_cast<std::size_t>(in.numel()), 4, -1.f, 1.f);
  std::copy(v.begin(), v.end(), in.data());
  std::vector<float> flat(2 * 40, -7.f);
  ex.forward(
      {{"x", memfmt::runtime::ref(in.const_view())}},
      {{"features", memfmt::runtime::ref_matrix(flat.data(), 2, 40)}, {"map", memfmt::runtime::ref(map.view())}});
  for (std::int64_t i = 0; i < map.numel(); ++i) ASSERT_EQ(flat[static_cast<std::size_t>(i)], map.data()[i]) << i;
  // A channels_last flatten feeding something other than a linear would order the features
  // (H, W, C): refused.
  using ex_t = memfmt::runtime::executor<memfmt::reference::backend>;
  network cl;
  const node_id cx = cl.input("x", {2, 3, 4, 5}, memfmt::dtype::float32, format_family::channels_first);
  const node_id cc = cl.conv("c", cx, memfmt::graph::conv_spec(2, 3, 1, 1));
  const node_id cf = cl.flatten("flat", cc);
  cl.output("y", cl.relu("r", cf), format_family::channels_first);
  // The planner refuses this too; the plan is edited by hand to reach the executor's own check.
  auto plan = plan_for(cl, format_family::channels_first);
  plan.nodes[cc].format = plan.nodes[cf].format = format_family::channels_last;
  memfmt::graph::conversion conv_in;
  conv_in.value = cx;
  conv_in.consumers = {cc};
  plan.conversions.push_back(conv_in);
  expect_error([&] { ex_t(cl, plan, b, make_params<float>(cl, 1)); }, errc::unsupported,
               {"node 'flat' (flatten)", "channels_last flatten of [2, 2, 4, 5]", "only linears"});
}

// A linear after a channels_last flatten reads the 4-D value by its strides:
// no conversion, and the result of the channels_first run, which is the layers called one by one.
TEST(Executor, LinearAfterChannelsLastFlatten) {
  network net;
  const node_id x = net.input("x", {2, 3, 4, 5}, memfmt::dtype::float32, format_family::channels_first);
  const node_id c = net.conv("c", x, memfmt::graph::conv_spec(2, 3, 1, 1));
  net.output("y", net.linear("fc", net.flatten("flat", c), 3), format_family::channels_first);
  const parameter_store s = make_params<float>(net, 5);
  memfmt::host_tensor<float, memfmt::nchw> in({2, 3, 4, 5}), conv({2, 2, 4, 5});
  const auto v = random_values<float>(static_cast<std::size_t>(in.numel()), 4, -1.f, 1.f);
  std::copy(v.begin(), v.end(), in.data());
  memfmt::reference::backend b;
  b.conv_forward(in.const_view(), weight_of<float, memfmt::nchw>(s, "c.weight").const_view(),
                 static_cast<const float*>(nullptr), conv.view(), net.at(c).get<memfmt::graph::conv_attrs>().params);
  const auto w = s.at("fc.weight").values<float>(), bias = s.at("fc.bias").values<float>();
  for (auto f : {format_family::channels_first, format_family::channels_last}) {
    const auto plan = plan_for(net, f);
    memfmt::runtime::executor<memfmt::reference::backend> ex(net, plan, b, s);
    EXPECT_EQ(ex.report().conversions, f == format_family::channels_last ? 1 : 0);  // the input only
    std::vector<float> y(6, -7.f);
    ex.forward({{"x", memfmt::runtime::ref(in.const_view())}}, {{"y", memfmt::runtime::ref_matrix(y.data(), 2, 3)}});
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 3; ++k) {
        double want = bias[static_cast<std::size_t>(k)];
        for (int i = 0; i < 40; ++i) want += double(conv.data()[n * 40 + i]) * w[static_cast<std::size_t>(k * 40 + i)];
        EXPECT_NEAR(y[static_cast<std::size_t>(n * 3 + k)], want, 1e-5) << n << " " << k;
      }
  }
}

// A transposed conv (stride 2, output_padding 1, bias) is the backward-data pass of the conv it
// transposes plus the bias: the executor's result in both formats against that pass called directly.
TEST(Executor, ConvTransposeIsBackwardDataPlusBias) {
  network net;
  const node_id x = net.input("x", {2, 4, 3, 5}, memfmt::dtype::float32, format_family::channels_first);
  memfmt::graph::conv_transpose_attrs a = memfmt::graph::conv_transpose_spec(6, 3, 2, 1, 0, 2, true);
  a.output_padding = {1, 0, 0};
  const node_id up = net.conv_transpose("up", x, a);
  net.output("y", up, format_family::channels_first);
  const parameter_store s = make_params<float>(net, 8);
  memfmt::host_tensor<float, memfmt::nchw> in({2, 4, 3, 5});
  const auto v = random_values<float>(static_cast<std::size_t>(in.numel()), 9, -1.f, 1.f);
  std::copy(v.begin(), v.end(), in.data());
  auto want = tensor_from<float, memfmt::nchw>(net.at(up).extents);
  ASSERT_EQ(want.extents(), (memfmt::host_tensor<float, memfmt::nchw>::extents_type{2, 6, 6, 9}));
  memfmt::reference::backend b;
  b.conv_backward_data(in.const_view(), weight_of<float, memfmt::nchw>(s, "up.weight").const_view(), want.view(),
                       a.params);
  const auto bias = s.at("up.bias").values<float>();
  for (std::int64_t i = 0; i < want.numel(); ++i) want.data()[i] += bias[static_cast<std::size_t>(i / 54 % 6)];
  for (auto f : {format_family::channels_first, format_family::channels_last}) {
    memfmt::runtime::executor<memfmt::reference::backend> ex(net, plan_for(net, f), b, s);
    auto got = tensor_from<float, memfmt::nchw>(net.at(up).extents);
    ex.forward({{"x", memfmt::runtime::ref(in.const_view())}}, {{"y", memfmt::runtime::ref(got.view())}});
    for (std::int64_t i = 0; i < want.numel(); ++i)
      ASSERT_NEAR(got.data()[i], want.data()[i], 1e-6) << memfmt::to_string(f) << " element " << i;
  }
}

// Constants in every operand position and shape (per channel, one scalar, a whole [1, C, H, W]
// map broadcast over the batch, a rank-2 row), each laid out once at build time in its plan's
// format or converted for a reader that runs in the other. The truth is the arithmetic written out
// in logical order; two passes with poisoning on show that nothing overwrites a constant.
TEST(Executor, ConstantsInEveryPlan) {
  network net;
  const node_id x = net.input("x", {2, 3, 4, 5}, memfmt::dtype::float32, format_family::channels_first);
  const node_id mean = net.constant("mean", {1, 3, 1, 1}, memfmt::dtype::float32);
  const node_id stdev = net.constant("std", {1, 3, 1, 1}, memfmt::dtype::float32);
  const node_id half = net.constant("half", {1, 1, 1, 1}, memfmt::dtype::float32);
  const node_id pos = net.constant("pos", {1, 3, 4, 5}, memfmt::dtype::float32);
  const node_id bias = net.constant("bias", {1, 3}, memfmt::dtype::float32);
  const node_id a =
      net.binary("normalize", net.binary("center", x, mean, memfmt::binary_op::sub), stdev, memfmt::binary_op::div);
  const node_id d = net.binary("embed", pos, net.mul("halve", half, a), memfmt::binary_op::sub);
  net.output("y", d, format_family::channels_first);
  net.output("z", net.add("shift", net.flatten("flat", net.global_pool("gap", d)), bias),
             format_family::channels_first);

  parameter_store s;
  const auto ramp = [](std::size_t n, float start, float step) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
    return v;
  };
  const auto mv = ramp(3, -0.5f, 0.25f), sv = ramp(3, 0.5f, 0.75f), pv = ramp(60, -1.f, 0.0625f),
             bv = ramp(3, 2.f, -1.5f);
  s.insert<float>("mean.value", {1, 3, 1, 1}, mv);
  s.insert<float>("std.value", {1, 3, 1, 1}, sv);
  s.insert<float>("half.value", {1, 1, 1, 1}, {0.5f});
  s.insert<float>("pos.value", {1, 3, 4, 5}, pv);
  s.insert<float>("bias.value", {1, 3}, bv);

  memfmt::host_tensor<float, memfmt::nchw> in({2, 3, 4, 5});
  const auto xv = random_values<float>(static_cast<std::size_t>(in.numel()), 9, -2.f, 2.f);
  std::copy(xv.begin(), xv.end(), in.data());
  std::vector<double> y_truth(120), z_truth(6, 0.0);
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t i = 0; i < 20; ++i) {
        const std::size_t e = (n * 3 + c) * 20 + i;
        const double v = pv[c * 20 + i] - 0.5 * ((xv[e] - static_cast<double>(mv[c])) / sv[c]);
        y_truth[e] = v;
        z_truth[n * 3 + c] += v / 20.0;
      }
  for (std::size_t k = 0; k < 6; ++k) z_truth[k] += bv[k % 3];

  auto constants_first_readers_last = assignment(net, format_family::channels_last);
  for (node_id c : {mean, stdev, half, pos}) constants_first_readers_last[c] = format_family::channels_first;
  const std::vector<std::pair<std::string, memfmt::graph::plan>> plans{
      {"channels_first", plan_for(net, format_family::channels_first)},
      {"channels_last", plan_for(net, format_family::channels_last)},
      {"alternating", plan_for(net, std::nullopt)},
      {"constants channels_first, readers channels_last",
       memfmt::graph::make_plan(net, memfmt::graph::cost_model{}, constants_first_readers_last)}};
  for (const auto& [name, plan] : plans) {
    SCOPED_TRACE(name);
    memfmt::reference::backend b;
    memfmt::runtime::executor_options o;
    o.poison = true;
    memfmt::runtime::executor<memfmt::reference::backend> ex(net, plan, b, s, o);
    for (int pass = 0; pass < 2; ++pass) {
      memfmt::host_tensor<float, memfmt::nchw> y({2, 3, 4, 5});
      std::vector<float> z(6, -7.f);
      ex.forward({{"x", memfmt::runtime::ref(in.const_view())}},
                 {{"y", memfmt::runtime::ref(y.view())}, {"z", memfmt::runtime::ref_matrix(z.data(), 2, 3)}});
      for (std::size_t e = 0; e < y_truth.size(); ++e)
        ASSERT_NEAR(y.data()[e], y_truth[e], 1e-5) << "pass " << pass << " y element " << e;
      for (std::size_t k = 0; k < z_truth.size(); ++k)
        ASSERT_NEAR(z[k], z_truth[k], 1e-5) << "pass " << pass << " z " << k;
    }
  }
  // The constants' bytes live outside the arena.
  memfmt::reference::backend b;
  memfmt::runtime::executor<memfmt::reference::backend> ex(net, plan_for(net, format_family::channels_first), b, s);
  for (const auto& v : ex.memory().values) {
    if (v.name == "mean" || v.name == "std" || v.name == "half" || v.name == "pos" || v.name == "bias") {
      EXPECT_EQ(v.bytes, 0) << v.name;
    }
  }
}

// GCNet's context block: a conv over the pooled [N, C, 1, 1] context, added to the map. The sum has
// the map's shape, not the conv's, so the add is no residual fusion (fused, it wrote the sum over the
// conv's 1x1 value); in every plan the fused build gives the values of the unfused one, buffers
// poisoned when their liveness ends.
TEST(Executor, BroadcastAddAfterAConvIsNotFused) {
  network net;
  const node_id x = net.input("x", {2, 4, 5, 3}, memfmt::dtype::float32, format_family::channels_first);
  const node_id c = net.conv("context", net.global_pool("pool", x), memfmt::graph::conv_spec(4, 1, 1, 0, 1, true));
  net.output("y", net.add("add", c, x), format_family::channels_first);
  const parameter_store params = make_params<float>(net, 3);
  std::vector<float> xs = random_values<float>(2 * 4 * 5 * 3, 4, -1.f, 1.f);
  const auto run = [&](std::optional<format_family> f, bool fuse) {
    memfmt::reference::backend b;
    memfmt::runtime::executor_options o;
    o.poison = true;
    o.fuse = fuse;
    memfmt::runtime::executor<memfmt::reference::backend> ex(net, plan_for(net, f), b, params, o);
    for (const std::string& group : ex.report().fusions) EXPECT_EQ(group.find("add"), std::string::npos) << group;
    std::vector<float> y(xs.size());
    ex.forward({{"x", tensor_ref{memfmt::dtype::float32, {2, 4, 5, 3}, format_family::channels_first, xs.data()}}},
               {{"y", tensor_ref{memfmt::dtype::float32, {2, 4, 5, 3}, format_family::channels_first, y.data()}}});
    return y;
  };
  for (const std::optional<format_family> f : {std::optional<format_family>(format_family::channels_first),
                                               std::optional<format_family>(format_family::channels_last)})
    EXPECT_EQ(run(f, true), run(f, false));
}

// A batch norm, then per-channel constants in every foldable position (k * x, x + k, x - k, x / k),
// fold into the conv before them; a constant that is not one value per channel, and k - x, stay
// layers of their own. Fused and unfused runs agree in both formats, with the buffers poisoned.
TEST(Executor, PerChannelConstantsAfterAConvFoldIntoIt) {
  network net;
  const std::vector<std::int64_t> e{2, 4, 5, 3};
  const node_id x = net.input("x", e, memfmt::dtype::float32, format_family::channels_first);
  const auto per_channel = [&](const std::string& name) {
    return net.constant(name, {1, 4, 1, 1}, memfmt::dtype::float32);
  };
  node_id v = net.batch_norm("bn", net.conv("conv", x, memfmt::graph::conv_spec(4, 3, 1, 1, 1, false)));
  v = net.mul("scale", per_channel("gamma"), v);
  v = net.binary("shift", v, per_channel("beta"), memfmt::binary_op::add);
  v = net.binary("minus", v, per_channel("mu"), memfmt::binary_op::sub);
  v = net.binary("over", v, per_channel("sigma"), memfmt::binary_op::div);
  v = net.binary("from", per_channel("k"), v, memfmt::binary_op::sub);                     // k - x: not folded
  v = net.mul("map", v, net.constant("map_scale", {1, 4, 5, 3}, memfmt::dtype::float32));  // not per channel
  const node_id tail = net.conv("conv2", v, memfmt::graph::conv_spec(4, 1, 1, 0, 1, true));
  net.output("y", net.mul("tail_scale", tail, per_channel("t")), format_family::channels_first);
  parameter_store params = make_params<float>(net, 5);
  // Divisors away from zero, so the unfused division is well conditioned.
  std::vector<float> sigma = params.at("sigma.value").values<float>();
  for (float& s : sigma) s = 0.5f + std::fabs(s);
  memfmt::graph::parameter divisor = params.at("sigma.value");
  std::memcpy(divisor.bytes.data(), sigma.data(), divisor.bytes.size());
  params.assign("sigma.value", divisor);
  std::vector<float> xs = random_values<float>(2 * 4 * 5 * 3, 4, -1.f, 1.f);
  const auto run = [&](std::optional<format_family> f, bool fuse, std::vector<std::string>* fusions) {
    memfmt::reference::backend b;
    memfmt::runtime::executor_options o;
    o.poison = true;
    o.fuse = fuse;
    memfmt::runtime::executor<memfmt::reference::backend> ex(net, plan_for(net, f), b, params, o);
    if (fusions) *fusions = ex.report().fusions;
    std::vector<float> y(xs.size());
    ex.forward({{"x", tensor_ref{memfmt::dtype::float32, e, format_family::channels_first, xs.data()}}},
               {{"y", tensor_ref{memfmt::dtype::float32, e, format_family::channels_first, y.data()}}});
    return y;
  };
  for (const std::optional<format_family> f : {std::optional<format_family>(format_family::channels_first),
                                               std::optional<format_family>(format_family::channels_last)}) {
    std::vector<std::string> fusions;
    const std::vector<float> fused = run(f, true, &fusions), plain = run(f, false, nullptr);
    EXPECT_EQ(fusions, (std::vector<std::string>{"conv + bias + bn + scale + shift + minus + over",
                                                 "conv2 + bias + tail_scale"}));
    ASSERT_EQ(fused.size(), plain.size());
    for (std::size_t i = 0; i < fused.size(); ++i)
      EXPECT_NEAR(fused[i], plain[i], 1e-5f * std::max(1.f, std::fabs(plain[i]))) << "element " << i;
  }
}

TEST(ExecutorErrors, BadInputsAndOutputsBeforeAnyWork) {
  const small_net m(memfmt::dtype::float32);
  memfmt::reference::backend b;
  const auto plan = plan_for(m.net, format_family::channels_last);
  memfmt::runtime::executor<memfmt::reference::backend> ex(m.net, plan, b, make_params<float>(m.net, 1));
  memfmt::host_tensor<float, memfmt::nchw> x({2, 4, 7, 6}), y({2, 4, 4, 3});
  memfmt::host_tensor<float, memfmt::nhwc> f({2, 6, 7, 6}), x_last({2, 4, 7, 6});
  memfmt::host_tensor<float, memfmt::nchw> small({2, 4, 7, 5});
  memfmt::host_tensor<double, memfmt::nchw> xd({2, 4, 7, 6});
  std::fill(y.data(), y.data() + y.numel(), 7.f);
  std::fill(f.data(), f.data() + f.numel(), 7.f);
  using memfmt::runtime::ref;
  const std::map<std::string, tensor_ref> outs{{"y", ref(y.view())}, {"features", ref(f.view())}};
  expect_error(
      [&] {
        ex.forward({{"x", ref(small.const_view())}}, outs);
      },
      errc::shape_mismatch,
      {"input 'x'", "expected float32 [2, 4, 7, 6] channels_first", "given float32 [2, 4, 7, 5]"});
  expect_error(
      [&] {
        ex.forward({{"x", ref(xd.const_view())}}, outs);
      },
      errc::unsupported_dtype, {"input 'x'", "given float64"});
  expect_error(
      [&] {
        ex.forward({{"x", ref(x_last.const_view())}}, outs);
      },
      errc::format_mismatch, {"input 'x'", "given float32 [2, 4, 7, 6] channels_last"});
  expect_error([&] { ex.forward({}, outs); }, errc::invalid_argument, {"no input 'x'"});
  expect_error(
      [&] {
        ex.forward({{"x", ref(x.const_view())}, {"c1", ref(x.const_view())}}, outs);
      },
      errc::invalid_argument, {"'c1'", "is no input"});
  expect_error(
      [&] {
        ex.forward({{"x", ref(x.const_view())}}, {{"y", ref(y.view())}});
      },
      errc::invalid_argument, {"no output 'features'"});
  expect_error(
      [&] {
        ex.forward({{"x", ref(x.const_view())}}, {{"y", ref(y.view())}, {"features", ref(x_last.view())}});
      },
      errc::shape_mismatch, {"output 'features'", "expected float32 [2, 6, 7, 6] channels_last"});
  for (std::int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.data()[i], 7.f) << "output written despite the error";
  for (std::int64_t i = 0; i < f.numel(); ++i) ASSERT_EQ(f.data()[i], 7.f) << "output written despite the error";
}

TEST(ExecutorErrors, ParametersOfAnotherNetworkAndUnsupportedLayers) {
  const small_net m(memfmt::dtype::float32);
  const small_net other(memfmt::dtype::float32, {2, 3, 7, 6});  // c1 takes 3 channels
  memfmt::reference::backend b;
  const auto plan = plan_for(m.net, format_family::channels_first);
  using ex_t = memfmt::runtime::executor<memfmt::reference::backend>;
  expect_error([&] { ex_t(m.net, plan, b, make_params<float>(other.net, 1)); }, errc::shape_mismatch,
               {"'c1.weight' (layer 'c1') expected float32 [6, 4, 3, 3], found float32 [6, 3, 3, 3]"});
  auto missing = make_params<float>(m.net, 1);
  parameter_store partial;
  for (const auto& [name, p] : missing)
    if (name != "bn.running_var") partial.insert(name, p);
  partial.insert<float>("bn.running_varr", {6}, std::vector<float>(6, 1.f));
  expect_error([&] { ex_t(m.net, plan, b, partial); }, errc::invalid_argument,
               {"'bn.running_var' (layer 'bn') expected float32 [6], missing",
                "'bn.running_varr' float32 [6] belongs to no layer"});
  // A plan of another network: sizes differ.
  expect_error(
      [&] {
        ex_t(m.net, plan_for(memfmt::graph::models::resnet18({1, 32, 16, 0.125}), format_family::channels_first), b,
             missing);
      },
      errc::shape_mismatch, {"the plan has", "nodes, the network"});
  network op;
  const node_id in = op.input("x", {1, 2, 4, 4}, memfmt::dtype::float32, format_family::channels_first);
  op.output("y", op.opaque("user", {in}, {1, 2, 4, 4}, format_family::channels_first), format_family::channels_first);
  expect_error([&] { ex_t(op, plan_for(op, format_family::channels_first), b, parameter_store{}); },
               errc::invalid_argument, {"node 'user' (opaque)", "no callback attached"});
  network ints;
  const node_id i8 = ints.input("x", {1, 2, 4, 4}, memfmt::dtype::int8, format_family::channels_first);
  ints.output("y", ints.conv("c", i8, memfmt::graph::conv_spec(2, 1)), format_family::channels_first);
  expect_error([&] { ex_t(ints, plan_for(ints, format_family::channels_first), b, parameter_store{}); },
               errc::unsupported_dtype, {"node 'c' (conv)", "int8"});
}

// The kinds whose backend calls live in runtime/kinds/ run on a backend, and the reference backend
// (the truth the others are tested against) has their forward and backward calls. A backend without
// a method is refused when the executor binds the layer, naming the layer, the backend and the kind.
struct pool_only_backend : memfmt::reference::backend {
  static constexpr const char* name = "pool-only";
  template <class... A>
  void softmax_forward(A&&...) = delete;
};

TEST(LayerRuns, TheReferenceBackendRunsEveryOneInputKind) {
  int unary = 0;
  for (const memfmt::kind_info& k : memfmt::kind_infos)
    memfmt::visit_layer_kind(k.kind, [&](auto kind) {
      using run = memfmt::runtime::layer_run<decltype(kind)::value>;
      if constexpr (run::unary) {
        ++unary;
        EXPECT_TRUE(k.runs_on_backend) << k.name;
        EXPECT_TRUE((memfmt::runtime::runs_forward<run, memfmt::reference::backend>::value)) << k.name;
        EXPECT_TRUE((memfmt::runtime::runs_backward<run, memfmt::reference::backend>::value)) << k.name;
      }
    });
  EXPECT_EQ(unary, 10);
  using softmax_run = memfmt::runtime::layer_run<memfmt::layer_kind::softmax>;
  EXPECT_FALSE((memfmt::runtime::runs_forward<softmax_run, pool_only_backend>::value));
  network net;
  const node_id x = net.input("x", {1, 3, 4, 4}, memfmt::dtype::float32, format_family::channels_first);
  net.output("y", net.softmax("sm", x), format_family::channels_first);
  pool_only_backend b;
  expect_error(
      [&] {
        memfmt::runtime::executor<pool_only_backend>(net, plan_for(net, format_family::channels_first), b,
                                                     parameter_store{});
      },
      errc::unsupported, {"node 'sm' (softmax)", "the pool-only backend has no softmax layer"});
}

}  // namespace
