// channels_last(net, backend, params, options): the pins hold, the timing cache file is written and
// read back (another device's is refused), the executor it returns computes what an executor of the
// all-channels_first plan computes on the reference backend, and a pin on an unknown layer is an error.
// A precision runs the float32 network and its float32 parameters in bfloat16 or float16 within that
// dtype's rounding of the float32 run, timed in that dtype, its batch norms' parameters kept in
// float32; one the backend cannot run is an error. select_plan keeps the plan that runs fastest as a
// whole network (a backend made slow in one format), times plans with the same formats once,
// reports and skips a plan it cannot build, and channels_last returns the plan it chose.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/io/timing_cache_json.hpp"
#include "memfmt/runtime/channels_last.hpp"
#include "memfmt/runtime/check_parameters.hpp"
#include "memfmt/runtime/precision.hpp"
#include "memfmt/runtime/random_parameters.hpp"
#include "memfmt/runtime/select_plan.hpp"
#include "../common/expect_error.hpp"
#include "model_test_util.hpp"

#ifdef MEMFMT_TEST_HAVE_ONEDNN
#include "memfmt/backends/onednn/backend.hpp"
#include "memfmt/runtime/onednn/calibrate.hpp"
#endif

namespace {

using namespace memfmt::graph;
using memfmt::format_family;
using memfmt::graph::parameter_store;
using memfmt::runtime::tensor_ref;

network small() {
  network net;
  const node_id x = net.input("x", {2, 4, 8, 8}, memfmt::dtype::float32, format_family::channels_first);
  const node_id a = net.conv("a", x, conv_spec(8, 3, 1, 1, 1, true));
  const node_id r = net.activation("r", net.batch_norm("bn", a), memfmt::activation::relu);
  const node_id b = net.conv("b", r, conv_spec(8, 1));
  net.output("y", net.binary("sum", r, b, memfmt::binary_op::add), format_family::channels_first);
  return net;
}

// One forward pass with input and output in T, the network's dtype, converted from and to float.
template <class T, class Ex>
std::vector<float> run(Ex& ex, const std::vector<float>& x) {
  constexpr memfmt::dtype type = memfmt::dtype_of_v<T>;
  std::vector<T> in(x.size()), out(static_cast<std::size_t>(2 * 8 * 8 * 8));
  for (std::size_t i = 0; i < x.size(); ++i) in[i] = static_cast<T>(x[i]);
  ex.forward({{"x", tensor_ref{type, {2, 4, 8, 8}, format_family::channels_first, in.data()}}},
             {{"y", tensor_ref{type, {2, 8, 8, 8}, format_family::channels_first, out.data()}}});
  std::vector<float> r(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) r[i] = static_cast<float>(out[i]);
  return r;
}

std::vector<float> random_input() {
  std::vector<float> x(2 * 4 * 8 * 8);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (float& e : x) e = d(rng);
  return x;
}

// The float32 network on the reference backend in the all-channels_first plan.
std::vector<float> float32_truth(const network& net, const parameter_store& params, const std::vector<float>& x) {
  memfmt::reference::backend backend;
  const plan all_first = plan_with(net, cost_model(), policy::all_channels_first);
  memfmt::runtime::executor<memfmt::reference::backend> truth(net, all_first, backend, params);
  return run<float>(truth, x);
}

// channels_last in `precision` (bfloat16 or float16) from float32 parameters: every value and the
// timing cache's signatures are in that dtype, and the output is the float32 run's within the
// dtype's rounding, a few units of its epsilon through the longest sum, relative to the output's
// scale. It differs from the float32 run by more than float32 rounding, so it did not run in float32.
template <class Backend>
void check_precision(Backend& backend, memfmt::dtype precision) {
  SCOPED_TRACE(memfmt::to_string(precision));
  const network net = small();
  const parameter_store params = memfmt::runtime::random_parameters(net, 7);
  const std::vector<float> x = random_input();
  const std::vector<float> want = float32_truth(net, params, x);
  memfmt::runtime::channels_last_options o;
  o.precision = precision;
  o.calibration.repetitions = 2;
  auto planned = memfmt::runtime::channels_last(net, backend, params, o);
  for (const auto& n : planned.network.nodes()) EXPECT_EQ(n.type, precision) << n.name;
  ASSERT_FALSE(planned.cache.layers().empty());
  for (const auto& [signature, timings] : planned.cache.layers())
    EXPECT_NE(signature.find(memfmt::to_string(precision)), std::string::npos) << signature;

  const bool bf16 = precision == memfmt::dtype::bfloat16;
  const std::vector<float> got = bf16 ? run<memfmt::bfloat16>(*planned.run, x) : run<memfmt::half>(*planned.run, x);
  double scale = 1;
  for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  const double eps = bf16 ? 1.0 / 256 : 1.0 / 2048;
  const double tol = 4 * eps * std::sqrt(static_cast<double>(memfmt_test::longest_reduction(net))) * scale;
  double worst = 0;
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    ASSERT_LE(err, tol) << "element " << i << ": " << got[i] << ", float32 " << want[i];
    worst = std::max(worst, err);
  }
  EXPECT_GT(worst, 16 * std::numeric_limits<float>::epsilon() * scale);
}

TEST(ChannelsLast, OneCallPlansWithMeasurementsAndRunsLikeTheReference) {
  const network net = small();
  const parameter_store params = memfmt::runtime::random_parameters(net, 7);
  memfmt::reference::backend backend;
  memfmt::runtime::channels_last_options o;
  const std::string path = ::testing::TempDir() + "memfmt_channels_last_cache.json";
  std::remove(path.c_str());
  o.pins = {{"b", format_family::channels_last, true, 0}};
  o.calibration.repetitions = 2;
  EXPECT_FALSE(memfmt::io::read_timing_cache_file_if_exists(path));
  auto planned = memfmt::runtime::channels_last(net, backend, params, o);
  memfmt::io::write_timing_cache_file(path, planned.cache);
  EXPECT_EQ(planned.plan.format(*net.find("b")), format_family::channels_last);
  EXPECT_EQ(planned.cache.key(), calibration_key(backend));
  const cost_model measured = [&] {
    cost_model m;
    m.set_timing_cache(planned.cache);
    return m;
  }();
  EXPECT_EQ(measured.node_costs(net, *net.find("a")).source, "measured");

  // The file holds what was measured, and a second call given it times nothing again.
  const std::optional<timing_cache> file = memfmt::io::read_timing_cache_file_if_exists(path, calibration_key(backend));
  ASSERT_TRUE(file);
  EXPECT_EQ(file->layers(), planned.cache.layers());
  o.calibration.known = &*file;
  auto again = memfmt::runtime::channels_last(net, backend, params, o);
  EXPECT_EQ(again.cache.layers(), planned.cache.layers());
  EXPECT_EQ(again.cache.conversions(), planned.cache.conversions());

  const std::vector<float> x = random_input();
  const std::vector<float> want = float32_truth(net, params, x), got = run<float>(*planned.run, x);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << i;

  // Another device's file is refused; a pin on a layer the network lacks is an error.
  const timing_cache other({"Other CPU", "reference", "0"});
  o.calibration.known = &other;
  EXPECT_THROW(memfmt::runtime::channels_last(net, backend, params, o), memfmt::error);
  o.calibration.known = nullptr;
  std::remove(path.c_str());
  o.pins = {{"nope", format_family::channels_last, true, 0}};
  try {
    memfmt::runtime::channels_last(net, backend, params, o);
    FAIL() << "accepted a pin on an unknown layer";
  } catch (const memfmt::error& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
  }
}

// The reference backend, with its channels_last activations refused, or each 2 ms slower (a plan's
// whole-network time then depends on its formats by far more than the machine's noise). One type
// for both, as each backend type instantiates the executor and calibration anew.
struct altered_channels_last_activation : memfmt::reference::backend {
  using element_types = memfmt::element_types<float>;  // all the tests run; compiled for no other
  bool refuse = false, slow = false;
  memfmt::op_support support(const memfmt::op_query& q) const {
    if (refuse && q.op == memfmt::layer_kind::activation && q.format == memfmt::format_family::channels_last)
      return memfmt::op_support::no(memfmt::errc::unsupported, "no channels_last activation here");
    return memfmt::reference::backend::support(q);
  }
  template <class T, class XF, class YF>
  void activation_forward(const memfmt::activation_params& kind, memfmt::tensor_view<const T, XF> x,
                          memfmt::tensor_view<T, YF> y) const {
    if (slow && memfmt::family_v<YF> == memfmt::format_family::channels_last)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    memfmt::reference::backend::activation_forward(kind, x, y);
  }
};

TEST(ChannelsLast, PlansOnlyFormatsTheBackendRuns) {
  const network net = small();
  const parameter_store params = memfmt::runtime::random_parameters(net, 7);
  altered_channels_last_activation backend;
  backend.refuse = true;
  memfmt::runtime::channels_last_options o;
  o.pins = {{"a", format_family::channels_last, true, 0}, {"b", format_family::channels_last, true, 0}};
  o.calibration.repetitions = 2;
  auto planned = memfmt::runtime::channels_last(net, backend, params, o);
  EXPECT_EQ(planned.plan.format(*net.find("a")), format_family::channels_last);
  EXPECT_EQ(planned.plan.format(*net.find("r")), format_family::channels_first);
  const std::vector<float> x = random_input();
  const std::vector<float> want = float32_truth(net, params, x), got = run<float>(*planned.run, x);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << i;
}

TEST(ChannelsLast, LowerPrecisionOnTheReferenceBackend) {
  memfmt::reference::backend backend;
  check_precision(backend, memfmt::dtype::bfloat16);
  check_precision(backend, memfmt::dtype::float16);
}

#ifdef MEMFMT_TEST_HAVE_ONEDNN
TEST(ChannelsLast, Bfloat16OnOneDnn) {
  if (!memfmt::onednn::supports(memfmt::dtype::bfloat16))
    GTEST_SKIP() << memfmt::onednn::support_for(memfmt::dtype::bfloat16).reason;
  memfmt::onednn::backend backend;
  check_precision(backend, memfmt::dtype::bfloat16);
}
#endif

// x -> batch norm -> y, [1, 2, 2, 2], with running means 16 +- 1/128 and a running variance of
// 1e-4: the outputs are (x - mean) * 100 or so, so rounding a mean to bfloat16 or float16 (which
// both round 16 +- 1/128 to 16 or a neighbour 1/64 to 1/8 away) moves them by about 0.78, while
// the inputs (multiples of 1/8 near 16) are exact in both dtypes.
struct sharp_batch_norm {
  network net;
  parameter_store params;
  std::vector<float> x{15.75f, 15.875f, 16.f, 16.125f, 16.25f, 16.125f, 15.875f, 16.f};
  sharp_batch_norm() {
    const node_id in = net.input("x", {1, 2, 2, 2}, memfmt::dtype::float32, format_family::channels_first);
    net.output("y", net.batch_norm("bn", in), format_family::channels_first);
    params.insert<float>("bn.weight", {2}, {1.f, 2.f});
    params.insert<float>("bn.bias", {2}, {0.25f, -0.5f});
    params.insert<float>("bn.running_mean", {2}, {16.f + 1.f / 128, 16.f - 1.f / 128});
    params.insert<float>("bn.running_var", {2}, {1e-4f, 1.5e-4f});
    params.insert<std::int64_t>("bn.num_batches_tracked", {}, {0});
  }
  // y in double from the parameters, each first passed through `round` (float32 ones or rounded to
  // the low precision by hand).
  template <class Round>
  std::vector<double> by_hand(Round round) const {
    const double eps = net.at(*net.find("bn")).get<memfmt::batch_norm_params>().epsilon;
    const auto v = [&](const char* k, std::size_t c) {
      return round(static_cast<double>(params.at(std::string("bn.") + k).values<float>().at(c)));
    };
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t c = i / 4;
      y[i] = (x[i] - v("running_mean", c)) / std::sqrt(v("running_var", c) + eps) * v("weight", c) + v("bias", c);
    }
    return y;
  }
};

// In bfloat16 or float16 the batch norm keeps its parameters in float32, as AMP does: the planned
// network declares them so, the executor's store holds the given values unrounded, and the output
// is the float32 parameters' within the output's rounding, where parameters rounded to the low
// precision would be off by a hundred times that.
template <class T, class Backend>
void check_batch_norm_parameters_stay_float32(Backend& backend) {
  constexpr memfmt::dtype precision = memfmt::dtype_of_v<T>;
  SCOPED_TRACE(memfmt::to_string(precision));
  const sharp_batch_norm m;
  memfmt::runtime::channels_last_options o;
  o.precision = precision;
  o.calibration.repetitions = 2;
  auto planned = memfmt::runtime::channels_last(m.net, backend, m.params, o);
  const node_id bn = *planned.network.find("bn");
  EXPECT_EQ(planned.network.at(bn).type, precision);
  for (const parameter_spec& p : planned.network.parameters(bn))
    EXPECT_EQ(p.type, p.name == "bn.num_batches_tracked" ? memfmt::dtype::int64 : memfmt::dtype::float32) << p.name;
  const parameter_store held = memfmt::runtime::in_network_dtypes(planned.network, m.params);
  for (const char* k : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"})
    EXPECT_EQ(held.at(k).values<float>(), m.params.at(k).values<float>()) << k;
  memfmt::runtime::check_parameters(planned.network, held);

  std::vector<T> in(m.x.size()), out(m.x.size());
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<T>(m.x[i]);
  planned.run->forward({{"x", tensor_ref{precision, {1, 2, 2, 2}, format_family::channels_first, in.data()}}},
                       {{"y", tensor_ref{precision, {1, 2, 2, 2}, format_family::channels_first, out.data()}}});
  const std::vector<double> want = m.by_hand([](double v) { return v; });
  const std::vector<double> rounded = m.by_hand(
      [](double v) { return static_cast<double>(static_cast<float>(static_cast<T>(static_cast<float>(v)))); });
  const double eps = precision == memfmt::dtype::bfloat16 ? 1.0 / 256 : 1.0 / 2048;
  double rounding_error = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double tol = 2 * eps * (1 + std::fabs(want[i]));  // the output's rounding and float32 arithmetic
    EXPECT_NEAR(static_cast<float>(out[i]), want[i], tol)
        << "element " << i << ", rounded parameters give " << rounded[i];
    rounding_error = std::max(rounding_error, std::fabs(rounded[i] - want[i]) / tol);
  }
  EXPECT_GT(rounding_error, 20) << "the case does not tell float32 parameters from rounded ones";
}

TEST(ChannelsLast, LowPrecisionBatchNormKeepsFloat32Parameters) {
  memfmt::reference::backend backend;
  check_batch_norm_parameters_stay_float32<memfmt::bfloat16>(backend);
  check_batch_norm_parameters_stay_float32<memfmt::half>(backend);
#ifdef MEMFMT_TEST_HAVE_ONEDNN
  if (memfmt::onednn::supports(memfmt::dtype::bfloat16)) {
    memfmt::onednn::backend onednn_backend;
    check_batch_norm_parameters_stay_float32<memfmt::bfloat16>(onednn_backend);
  }
#endif
}

// Before anything is timed: a dtype that is no precision, and one the backend cannot compute in,
// naming the precision, the backend, a layer and the backend's reason.
TEST(ChannelsLast, PrecisionTheBackendCannotRunIsAnError) {
  const network net = small();
  const parameter_store params = memfmt::runtime::random_parameters(net, 7);
  memfmt::runtime::channels_last_options o;
  memfmt::reference::backend reference;
  o.precision = memfmt::dtype::float64;
  memfmt_test::expect_error([&] { memfmt::runtime::channels_last(net, reference, params, o); },
                            memfmt::errc::unsupported_dtype, {"precision float64", "float32, bfloat16 or float16"});
#ifdef MEMFMT_TEST_HAVE_ONEDNN
  memfmt::onednn::backend onednn_backend;
  std::vector<memfmt::dtype> refused{memfmt::dtype::float16};
  if (!memfmt::onednn::supports(memfmt::dtype::bfloat16)) refused.push_back(memfmt::dtype::bfloat16);
  for (memfmt::dtype t : refused) {
    o.precision = t;
    memfmt_test::expect_error([&] { memfmt::runtime::channels_last(net, onednn_backend, params, o); },
                              memfmt::errc::unsupported_dtype,
                              {"precision " + std::string(memfmt::to_string(t)) + " on the onednn backend", "layer 'a'",
                               memfmt::onednn::support_for(t).reason});
  }
#endif
}

}  // namespace

TEST(SelectPlan, KeepsThePlanThatRunsFastest) {
  const network net = small();
  const parameter_store params = memfmt::runtime::random_parameters(net, 7);
  altered_channels_last_activation backend;
  backend.slow = true;
  const cost_model model;
  const std::vector<memfmt::runtime::plan_candidate> candidates{
      {"last", plan_with(net, model, policy::all_channels_last)},
      {"first", plan_with(net, model, policy::all_channels_first)},
      {"last_again", plan_with(net, model, policy::all_channels_last)}};
  memfmt::runtime::plan_selection_options o;
  o.repetitions = 3;
  auto picked = memfmt::runtime::select_plan(net, backend, params, candidates, o);
  EXPECT_EQ(picked.chosen, 1u);
  ASSERT_EQ(picked.timings.size(), 3u);
  EXPECT_EQ(picked.timings[0].name, "last");
  EXPECT_GE(picked.timings[0].ms, 2.0);  // at least one slowed activation per pass
  EXPECT_LT(picked.timings[1].ms, picked.timings[0].ms);
  EXPECT_EQ(picked.timings[2].same_as, "last");  // same formats: timed once, the time shared
  EXPECT_EQ(picked.timings[2].ms, picked.timings[0].ms);
  EXPECT_EQ(picked.timings[0].conversions, 2);  // the channels_first input in, the output out
  EXPECT_EQ(picked.timings[1].conversions, 0);

  // The executor it returns is the chosen plan's, ready to run.
  const std::vector<float> x = random_input();
  const std::vector<float> want = float32_truth(net, params, x), got = run<float>(*picked.run, x);
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << i;
}

TEST(SelectPlan, ReportsAndSkipsAPlanItCannotBuild) {
  const network net = small();
  const parameter_store params = memfmt::runtime::random_parameters(net, 7);
  memfmt::reference::backend backend;
  network other = small();
  other.conv("extra", *other.find("y"), conv_spec(8, 1));  // a plan of another network
  const plan foreign = plan_with(other, cost_model(), policy::all_channels_last);
  const std::vector<memfmt::runtime::plan_candidate> candidates{
      {"foreign", foreign}, {"first", plan_with(net, cost_model(), policy::all_channels_first)}};
  auto picked = memfmt::runtime::select_plan(net, backend, params, candidates);
  EXPECT_EQ(picked.chosen, 1u);
  EXPECT_FALSE(picked.timings[0].error.empty());
  EXPECT_EQ(picked.timings[0].ms, 0.0);
  EXPECT_TRUE(picked.timings[1].error.empty());
  EXPECT_GT(picked.timings[1].ms, 0.0);

  // Nothing it can build, or nothing at all: an error naming the candidate.
  try {
    memfmt::runtime::select_plan(net, backend, params, {{"foreign", foreign}});
    FAIL() << "selected among plans it cannot build";
  } catch (const memfmt::error& e) {
    EXPECT_NE(std::string(e.what()).find("'foreign'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(memfmt::runtime::select_plan(net, backend, params, {}), memfmt::error);
}

TEST(ChannelsLast, ReturnsTheFastestOfTheCalibratedPriorsAndAllChannelsLastPlans) {
  const network net = small();
  const parameter_store params = memfmt::runtime::random_parameters(net, 7);
  altered_channels_last_activation backend;
  backend.slow = true;
  memfmt::runtime::channels_last_options o;
  o.calibration.repetitions = 2;
  auto planned = memfmt::runtime::channels_last(net, backend, params, o);
  ASSERT_EQ(planned.candidates.size(), 3u);
  EXPECT_EQ(planned.candidates[0].name, "optimal_calibrated");
  EXPECT_EQ(planned.candidates[1].name, "optimal_priors");
  EXPECT_EQ(planned.candidates[2].name, "all_channels_last");
  // all channels_last runs the activation slowed; the calibrated plan, which measured that, not.
  EXPECT_EQ(planned.plan.format(*net.find("r")), format_family::channels_first);
  EXPECT_NE(planned.chosen, "all_channels_last");
  double fastest = planned.candidates[0].ms, chosen = -1;
  for (const auto& c : planned.candidates) {
    EXPECT_TRUE(c.error.empty()) << c.name << ": " << c.error;
    fastest = std::min(fastest, c.ms);
    if (c.name == planned.chosen) chosen = c.ms;
  }
  EXPECT_EQ(chosen, fastest);

  o.select_by_timing = false;  // the calibrated plan, untimed
  auto untimed = memfmt::runtime::channels_last(net, backend, params, o);
  EXPECT_TRUE(untimed.candidates.empty());
  EXPECT_EQ(untimed.chosen, "optimal_calibrated");
}
