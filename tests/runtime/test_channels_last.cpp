// channels_last(net, backend, params, options): the pins hold, the timing cache file is written and
// read back (another device's is refused), the executor it returns computes what an executor of the
// all-channels_first plan computes on the reference backend, and a pin on an unknown layer is an error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/io/timing_cache_json.hpp"
#include "memfmt/runtime/channels_last.hpp"
#include "memfmt/runtime/random_parameters.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::runtime::parameter_store;
using memfmt::runtime::tensor_ref;

network small() {
  network net;
  const node_id x = net.input("x", {2, 4, 8, 8}, memfmt::dtype::float32, family::channels_first);
  const node_id a = net.conv("a", x, conv_spec(8, 3, 1, 1, 1, true));
  const node_id r = net.activation("r", net.batch_norm("bn", a), memfmt::activation::relu);
  const node_id b = net.conv("b", r, conv_spec(8, 1));
  net.output("y", net.binary("sum", r, b, memfmt::binary_op::add), family::channels_first);
  return net;
}

template <class Ex>
std::vector<float> run(Ex& ex, const std::vector<float>& x) {
  std::vector<float> in = x, out(static_cast<std::size_t>(2 * 8 * 8 * 8));
  ex.forward({{"x", tensor_ref{memfmt::dtype::float32, {2, 4, 8, 8}, family::channels_first, in.data()}}},
             {{"y", tensor_ref{memfmt::dtype::float32, {2, 8, 8, 8}, family::channels_first, out.data()}}});
  return out;
}

TEST(ChannelsLast, OneCallPlansWithMeasurementsAndRunsLikeTheReference) {
  const network net = small();
  const parameter_store params = memfmt::runtime::random_parameters(net, 7);
  memfmt::reference::backend backend;
  memfmt::runtime::channels_last_options o;
  o.timing_cache_path = ::testing::TempDir() + "memfmt_channels_last_cache.json";
  std::remove(o.timing_cache_path.c_str());
  o.pins = {{"b", family::channels_last, true, 0}};
  o.calibration.repetitions = 2;
  auto planned = memfmt::runtime::channels_last(net, backend, params, o);
  EXPECT_EQ(planned.plan.format(*net.find("b")), family::channels_last);
  EXPECT_EQ(planned.cache.key(), calibration_key(backend));
  const cost_model measured = [&] {
    cost_model m;
    m.set_timing_cache(planned.cache);
    return m;
  }();
  EXPECT_EQ(measured.node_costs(net, *net.find("a")).source, "measured");

  // The file holds what was measured, and a second call reads it instead of timing again.
  const timing_cache file = memfmt::io::read_timing_cache_file(o.timing_cache_path, calibration_key(backend));
  EXPECT_EQ(file.layers(), planned.cache.layers());
  auto again = memfmt::runtime::channels_last(net, backend, params, o);
  EXPECT_EQ(again.cache.layers(), planned.cache.layers());
  EXPECT_EQ(again.cache.conversions(), planned.cache.conversions());

  std::vector<float> x(2 * 4 * 8 * 8);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (float& e : x) e = d(rng);
  const plan all_first = plan_with(net, cost_model(), policy::all_channels_first);
  memfmt::runtime::executor<memfmt::reference::backend> truth(net, all_first, backend, params);
  const std::vector<float> want = run(truth, x), got = run(*planned.run, x);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << i;

  // Another device's file is refused; a pin on a layer the network lacks is an error.
  memfmt::io::write_timing_cache_file(o.timing_cache_path, timing_cache({"Other CPU", "reference", "0"}));
  EXPECT_THROW(memfmt::runtime::channels_last(net, backend, params, o), memfmt::error);
  std::remove(o.timing_cache_path.c_str());
  o.pins = {{"nope", family::channels_last, true, 0}};
  try {
    memfmt::runtime::channels_last(net, backend, params, o);
    FAIL() << "accepted a pin on an unknown layer";
  } catch (const memfmt::error& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
  }
}

}  // namespace
