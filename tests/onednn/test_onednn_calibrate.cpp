// runtime::calibrate on the oneDNN backend: the key names oneDNN's version and effective ISA, the
// conv, batch-norm and relu signatures are timed in both formats (identical ones once), and a
// bfloat16 network calibrates where oneDNN computes in it. No timing is asserted.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "memfmt/runtime/onednn/calibrate.hpp"
#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/solve.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::format_family;

network conv_bn_relu_twice(memfmt::dtype t) {
  network net;
  node_id h = net.input("x", {1, 8, 8, 8}, t, format_family::channels_first);
  for (const char* name : {"a", "b"}) {
    const std::string n = name;
    h = net.activation(n + ".relu", net.batch_norm(n + ".bn", net.conv(n, h, conv_spec(8, 3, 1, 1))),
                       memfmt::activation::relu);
  }
  net.output("y", h, format_family::channels_first);
  return net;
}

void expect_every_layer_timed(const network& net, const timing_cache& cache, const std::vector<std::string>& skipped) {
  std::set<std::string> want;
  for (const char* name : {"a", "a.bn", "a.relu", "b", "b.bn", "b.relu"})
    want.insert(*layer_signature(net, *net.find(name)));
  EXPECT_EQ(want.size(), 3u);  // the two blocks' conv, batch norm and relu are identical
  ASSERT_EQ(cache.layers().size(), want.size());
  for (const auto& [sig, t] : cache.layers()) {
    EXPECT_TRUE(want.count(sig)) << sig;
    ASSERT_TRUE(t[0] && t[1]) << sig;
    EXPECT_GT(*t[0], 0);
    EXPECT_GT(*t[1], 0);
  }
  EXPECT_TRUE(skipped.empty()) << skipped.front();  // oneDNN runs every layer of this network
  EXPECT_EQ(cache.conversions().size(), 1u);        // every value is [1, 8, 8, 8]
}

TEST(OnednnCalibrate, KeyNamesOneDnnVersionAndIsa) {
  memfmt::onednn::backend backend;
  const cache_key k = calibration_key(backend);
  EXPECT_EQ(k.backend, "onednn");
  const dnnl_version_t* v = dnnl::version();
  EXPECT_EQ(k.backend_version,
            std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch));
  EXPECT_NE(k.device.find(std::string("isa ") + memfmt::onednn::isa_name(memfmt::onednn::effective_isa())),
            std::string::npos)
      << k.device;
}

TEST(OnednnCalibrate, TimesEveryDistinctLayerInBothFormats) {
  const network net = conv_bn_relu_twice(memfmt::dtype::float32);
  memfmt::onednn::backend backend;
  std::vector<std::string> skipped;
  memfmt::runtime::calibrate_options o;
  o.repetitions = 3;
  o.skipped = &skipped;
  const timing_cache cache = memfmt::runtime::calibrate(net, backend, o);
  EXPECT_EQ(cache.key(), calibration_key(backend));
  expect_every_layer_timed(net, cache, skipped);
  cost_model model;
  model.set_timing_cache(cache);
  EXPECT_EQ(model.node_costs(net, *net.find("b")).source, "measured");
  EXPECT_NO_THROW(solve(net, model));
}

TEST(OnednnCalibrate, Bfloat16WhereOneDnnComputesInIt) {
  if (!memfmt::onednn::supports(memfmt::dtype::bfloat16))
    GTEST_SKIP() << memfmt::onednn::support_for(memfmt::dtype::bfloat16).reason;
  const network net = conv_bn_relu_twice(memfmt::dtype::bfloat16);
  memfmt::onednn::backend backend;
  std::vector<std::string> skipped;
  memfmt::runtime::calibrate_options o;
  o.repetitions = 3;
  o.skipped = &skipped;
  expect_every_layer_timed(net, memfmt::runtime::calibrate(net, backend, o), skipped);
}

}  // namespace
