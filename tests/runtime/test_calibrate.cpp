// calibrate on the reference backend and on test backends built from it: every distinct layer
// signature timed once in each format (identical layers share one entry and one set of runs), every
// conversion the network could need timed both ways, medians positive, the cache keyed by the
// backend, known signatures not timed again, refused formats recorded as unsupported, kinds without
// a method left to their priors, and solve and explain using the result; on a backend that owns its
// memory and queues its calls, every buffer comes from its hooks and every timed call is followed by
// its synchronize. No timing is asserted.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/convert/convert.hpp"
#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/explain.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/runtime/calibrate.hpp"
#include "memfmt/tensor/relabel.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::format_family;
using memfmt::runtime::calibrate;
using memfmt::runtime::calibrate_options;

// conv a and conv b are identical (same signature); conv c differs by stride.
struct block {
  network net;
  node_id a, b, c;
  block(memfmt::dtype t = memfmt::dtype::float32) {
    const node_id x = net.input("x", {1, 4, 8, 8}, t, format_family::channels_first);
    a = net.conv("a", x, conv_spec(4, 3, 1, 1));
    const node_id ra = net.activation("ra", net.batch_norm("bna", a), memfmt::activation::relu);
    b = net.conv("b", ra, conv_spec(4, 3, 1, 1));
    const node_id rb = net.activation("rb", net.batch_norm("bnb", b), memfmt::activation::relu);
    const node_id sum = net.binary("sum", ra, rb, memfmt::binary_op::add);
    c = net.conv("c", sum, conv_spec(8, 3, 2, 1, 1, true));
    const node_id cat = net.concat("cat", {c, c});
    const node_id pool = net.max_pool("pool", cat, 2, 2);
    net.output("y", net.global_pool("gap", pool), format_family::channels_first);
  }
};

// The reference backend, counting conv_forward calls per output layout; refuses NHWC convs when asked.
struct counting_backend : memfmt::reference::backend {
  using element_types = memfmt::element_types<float>;  // all the tests run; compiled for no other
  mutable std::map<std::string, int> conv_calls;
  bool refuse_channels_last = false;
  template <class T, class XF, class WF, class YF>
  void conv_forward(memfmt::tensor_view<const T, XF> x, memfmt::tensor_view<const T, WF> w, const T* bias,
                    memfmt::tensor_view<T, YF> y, const memfmt::conv_params& p) const {
    if (refuse_channels_last && std::string(YF::name) != "nchw")
      memfmt::detail::fail(memfmt::errc::unsupported, "test backend: no NHWC conv");
    ++conv_calls[YF::name];
    memfmt::reference::backend::conv_forward(x, w, bias, y, p);
  }
};

// Only a conv: every other kind keeps its prior.
struct conv_only_backend {
  static constexpr const char* name = "conv_only";
  template <class T, class XF, class WF, class YF>
  void conv_forward(memfmt::tensor_view<const T, XF> x, memfmt::tensor_view<const T, WF> w, const T* bias,
                    memfmt::tensor_view<T, YF> y, const memfmt::conv_params& p) const {
    memfmt::reference::conv_forward(x, w, bias, y, p);
  }
};

cache_key test_key() { return {"test device", "conv_only", "1"}; }

std::set<std::string> signatures(const network& net) {
  std::set<std::string> s;
  for (const node& n : net.nodes())
    if (const auto sig = layer_signature(net, n.id)) s.insert(*sig);
  return s;
}

calibrate_options quick() {
  calibrate_options o;
  o.warmup = 1;
  o.repetitions = 3;
  return o;
}

TEST(Calibrate, TimesEachDistinctSignatureOnceInBothFormats) {
  block blk;
  counting_backend backend;
  const timing_cache cache = calibrate(blk.net, backend, quick());

  EXPECT_EQ(cache.key(), calibration_key(memfmt::reference::backend{}));
  EXPECT_EQ(cache.key().backend, "reference");
  EXPECT_FALSE(cache.key().device.empty());

  const std::set<std::string> want = signatures(blk.net);
  ASSERT_EQ(cache.layers().size(), want.size());
  for (const auto& [sig, t] : cache.layers()) {
    EXPECT_TRUE(want.count(sig)) << sig;
    ASSERT_TRUE(t[0] && t[1]) << sig;
    EXPECT_GT(*t[0], 0) << sig;
    EXPECT_GT(*t[1], 0) << sig;
  }
  // a and b share one entry; two distinct convs, each run warmup + repetitions times per format.
  EXPECT_EQ(*layer_signature(blk.net, blk.a), *layer_signature(blk.net, blk.b));
  EXPECT_EQ(backend.conv_calls["nchw"], 2 * 4);
  EXPECT_EQ(backend.conv_calls["nhwc"], 2 * 4);

  // Every spatial value with a reader, but the relabels (gap's [1, 16, 1, 1]): both directions.
  std::set<std::string> values;
  for (const node& n : blk.net.nodes())
    if (n.spatial() && !blk.net.consumers(n.id).empty() && !memfmt::is_ambiguous_shape(n.extents))
      values.insert(conversion_signature(n.extents, n.type));
  ASSERT_EQ(cache.conversions().size(), values.size());
  for (const auto& [sig, t] : cache.conversions()) {
    EXPECT_TRUE(values.count(sig)) << sig;
    ASSERT_TRUE(t[0] && t[1]) << sig;
    EXPECT_GT(*t[0], 0);
    EXPECT_GT(*t[1], 0);
  }
}

TEST(Calibrate, KnownSignaturesAreNotTimedAgainAndOtherKeysAreRefused) {
  block blk;
  counting_backend backend;
  const timing_cache first = calibrate(blk.net, backend, quick());
  backend.conv_calls.clear();
  calibrate_options again = quick();
  again.known = &first;
  const timing_cache second = calibrate(blk.net, backend, again);
  EXPECT_TRUE(backend.conv_calls.empty());
  EXPECT_EQ(second.layers(), first.layers());
  EXPECT_EQ(second.conversions(), first.conversions());

  const timing_cache foreign({"another CPU", "reference", first.key().backend_version});
  again.known = &foreign;
  try {
    calibrate(blk.net, backend, again);
    FAIL() << "used another device's cache";
  } catch (const memfmt::error& e) {
    EXPECT_NE(std::string(e.what()).find("another CPU"), std::string::npos) << e.what();
  }
  calibrate_options bad = quick();
  bad.repetitions = 0;
  EXPECT_THROW(calibrate(blk.net, backend, bad), memfmt::error);
}

TEST(Calibrate, RefusedFormatsAreUnsupportedAndSolveAvoidsThem) {
  block blk;
  counting_backend backend;
  backend.refuse_channels_last = true;
  const timing_cache cache = calibrate(blk.net, backend, quick());
  const family_timings* conv = cache.find_layer(*layer_signature(blk.net, blk.a));
  ASSERT_NE(conv, nullptr);
  EXPECT_TRUE((*conv)[0]);
  EXPECT_FALSE((*conv)[1]);
  cost_model model;
  model.set_timing_cache(cache);
  const plan p = solve(blk.net, model);
  for (node_id id : {blk.a, blk.b, blk.c}) EXPECT_EQ(p.format(id), format_family::channels_first) << id;
}

TEST(Calibrate, KindsWithoutAMethodKeepTheirPriors) {
  block blk;
  conv_only_backend backend;
  std::vector<std::string> skipped;
  calibrate_options o = quick();
  o.key = test_key();
  o.skipped = &skipped;
  const timing_cache cache = calibrate(blk.net, backend, o);
  EXPECT_EQ(cache.key(), test_key());
  EXPECT_EQ(cache.layers().size(), 2u);  // the two distinct convs
  EXPECT_EQ(skipped.size(), signatures(blk.net).size() - 2);
  for (const std::string& s : skipped) EXPECT_NE(s.find("no conv_only method"), std::string::npos) << s;

  cost_model model;
  model.set_timing_cache(cache);
  const plan p = solve(blk.net, model);
  const std::string report = explain(blk.net, model, p);
  EXPECT_EQ(model.node_costs(blk.net, blk.a).source, "measured");
  EXPECT_EQ(model.node_costs(blk.net, *blk.net.find("pool")).source.rfind("prior: ", 0), 0u);
  EXPECT_NE(report.find("a (conv [1, 4, 8, 8] float32)"), std::string::npos) << report;
  EXPECT_NE(report.find("[costs: measured]"), std::string::npos) << report;
}

TEST(Calibrate, OtherDtypesRunInTheirOwnType) {
  block blk(memfmt::dtype::bfloat16);
  memfmt::reference::backend backend;
  const timing_cache cache = calibrate(blk.net, backend, quick());
  EXPECT_EQ(cache.layers().size(), signatures(blk.net).size());
  for (const auto& [sig, t] : cache.layers()) EXPECT_NE(sig.find("bfloat16"), std::string::npos) << sig;
}

// A backend keeping its tensors in its own memory (the executor's hooks) and queueing its calls, as
// cuDNN does: it counts the pointers it is handed that it never allocated, the runs and conversions
// it is asked for, and how often it is synchronised.
struct device_like_backend {
  static constexpr const char* name = "device_like";
  using element_types = memfmt::element_types<float>;
  std::map<const std::byte*, std::size_t> live;  // allocations not given back yet
  int allocations = 0, bad_frees = 0, foreign_pointers = 0, runs = 0, converts = 0, synchronizes = 0;

  bool owns(const void* p, std::size_t bytes) const {
    const auto* b = static_cast<const std::byte*>(p);
    auto it = live.upper_bound(b);
    if (it == live.begin()) return false;
    --it;
    return b + bytes <= it->first + it->second;
  }
  template <class V>
  void check(const V& v) {
    if (!owns(v.data(), static_cast<std::size_t>(v.numel()) * sizeof(*v.data()))) ++foreign_pointers;
  }

  void* allocate(std::size_t bytes) {
    auto* p = static_cast<std::byte*>(::operator new(bytes));
    live[p] = bytes;
    ++allocations;
    return p;
  }
  void deallocate(void* p, std::size_t bytes) noexcept {
    const auto it = live.find(static_cast<const std::byte*>(p));
    if (it == live.end() || it->second != bytes) {
      ++bad_frees;
      return;
    }
    live.erase(it);
    ::operator delete(p);
  }
  void copy_in(void* dst, const void* host, std::size_t bytes) {
    if (!owns(dst, bytes)) ++foreign_pointers;
    std::memcpy(dst, host, bytes);
  }
  void copy_out(void* host, const void* src, std::size_t bytes) {
    if (!owns(src, bytes)) ++foreign_pointers;
    std::memcpy(host, src, bytes);
  }
  void synchronize() { ++synchronizes; }
  template <class T, class From, class To>
  void convert(memfmt::tensor_view<const T, From> src, memfmt::tensor_view<T, To> dst) {
    check(src);
    check(dst);
    ++converts;
    memfmt::convert(src, dst);
  }

  template <class T, class XF, class WF, class YF>
  void conv_forward(memfmt::tensor_view<const T, XF> x, memfmt::tensor_view<const T, WF> w, const T* bias,
                    memfmt::tensor_view<T, YF> y, const memfmt::conv_params& p) {
    check(x);
    check(w);
    check(y);
    if (bias && !owns(bias, static_cast<std::size_t>(y.channels()) * sizeof(T))) ++foreign_pointers;
    ++runs;
    memfmt::reference::conv_forward(x, w, bias, y, p);
  }
  template <class T, class XF, class YF>
  void activation_forward(const memfmt::activation_params& kind, memfmt::tensor_view<const T, XF> x,
                          memfmt::tensor_view<T, YF> y) {
    check(x);
    check(y);
    ++runs;
    memfmt::reference::activation_forward(kind, x, y);
  }
};

TEST(Calibrate, DeviceBackendsGetTheirOwnBuffersConversionsAndSynchronisation) {
  network net;
  const node_id x = net.input("x", {1, 4, 6, 6}, memfmt::dtype::float32, format_family::channels_first);
  const node_id c = net.conv("c", x, conv_spec(8, 3, 1, 1, 1, true));
  net.output("y", net.activation("r", c, memfmt::activation::relu), format_family::channels_first);

  device_like_backend backend;
  calibrate_options o = quick();
  o.key = cache_key{"test device", "device_like", "1"};
  const timing_cache cache = calibrate(net, backend, o);

  EXPECT_EQ(backend.foreign_pointers, 0);
  EXPECT_EQ(backend.bad_frees, 0);
  EXPECT_GT(backend.allocations, 0);
  EXPECT_TRUE(backend.live.empty()) << backend.live.size() << " allocations never given back";
  ASSERT_EQ(cache.layers().size(), 2u);  // the conv and the relu, both formats
  for (const auto& [sig, t] : cache.layers()) EXPECT_TRUE(t[0] && t[1]) << sig;
  ASSERT_FALSE(cache.conversions().empty());
  for (const auto& [sig, t] : cache.conversions()) EXPECT_TRUE(t[0] && t[1]) << sig;
  // Each measurement: warmup + repetitions calls through the backend, and as many synchronisations
  // (one after the warm-up, one after each timed call).
  const int per = o.warmup + o.repetitions;
  EXPECT_EQ(backend.runs, 2 * 2 * per);
  EXPECT_EQ(backend.converts, static_cast<int>(cache.conversions().size()) * 2 * per);
  EXPECT_EQ(backend.synchronizes, (backend.runs + backend.converts) / per * (1 + o.repetitions));
}

}  // namespace
