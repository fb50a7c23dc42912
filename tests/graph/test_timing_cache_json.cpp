// Timing cache files: a round trip keeps every entry, key and unsupported family; a file of another
// device, backend or version is refused naming whose it is; a fixed table of malformed documents
// (no random inputs) each fails naming the entry and key.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/expect_error.hpp"
#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/explain.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/io/timing_cache_json.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::format_family;
using nlohmann::json;

cache_key key() { return {"Test CPU 9000 (isa avx2)", "onednn", "2.6.3"}; }

timing_cache sample() {
  timing_cache c(key());
  c.record_layer("conv out 8 ... in [1, 8, 8, 8] out [1, 8, 8, 8] float32", {1200, 800});
  c.record_layer("batch_norm in [1, 8, 8, 8] out [1, 8, 8, 8] float32", {500, std::nullopt});
  c.record_conversion("[1, 8, 8, 8] float32", format_family::channels_first, 90);
  c.record_conversion("[1, 8, 8, 8] float32", format_family::channels_last, 110);
  c.record_conversion("[1, 16, 4, 4] bfloat16", format_family::channels_last, 40);
  return c;
}

TEST(TimingCacheJson, RoundTripKeepsEveryEntry) {
  const timing_cache c = sample();
  const std::string text = memfmt::io::save_timing_cache(c);
  const timing_cache back = memfmt::io::load_timing_cache(text, key());
  EXPECT_EQ(back.key(), c.key());
  EXPECT_EQ(back.layers(), c.layers());
  EXPECT_EQ(back.conversions(), c.conversions());
  EXPECT_EQ(memfmt::io::save_timing_cache(back), text);
  EXPECT_TRUE(json::parse(text)["layers"][0]["channels_last_ns"].is_null() ||
              json::parse(text)["layers"][1]["channels_last_ns"].is_null());

  const std::string path = ::testing::TempDir() + "memfmt_timing_cache_test.json";
  memfmt::io::write_timing_cache_file(path, c);
  EXPECT_EQ(memfmt::io::read_timing_cache_file(path).layers(), c.layers());
  std::remove(path.c_str());
}

TEST(TimingCacheJson, ALoadedCachePlansAsTheOriginal) {
  network net;
  const node_id x = net.input("x", {1, 64, 56, 56}, memfmt::dtype::float32, format_family::channels_first);
  const node_id conv = net.conv("conv", x, conv_spec(64, 3, 1, 1));
  net.output("y", conv, format_family::channels_first);
  timing_cache c(key());
  c.record_layer(*layer_signature(net, conv), {1'000'000, 10'000'000});
  cost_model a, b;
  a.set_timing_cache(c);
  b.set_timing_cache(memfmt::io::load_timing_cache(memfmt::io::save_timing_cache(c), key()));
  const plan pa = solve(net, a), pb = solve(net, b);
  EXPECT_EQ(pb.format(conv), format_family::channels_first);
  EXPECT_EQ(explain(net, a, pa), explain(net, b, pb));
}

TEST(TimingCacheJson, AnotherDevicesOrVersionsFileIsRefusedNamingWhoseItIs) {
  const std::string text = memfmt::io::save_timing_cache(sample());
  for (const cache_key& other :
       {cache_key{"Other CPU (isa avx512_core)", "onednn", "2.6.3"}, cache_key{key().device, "reference", "2.6.3"},
        cache_key{key().device, "onednn", "3.1.0"}}) {
    const std::string e = memfmt_test::error_text([&] { memfmt::io::load_timing_cache(text, other); });
    EXPECT_NE(
        e.find("timing cache file holds the measurements of device 'Test CPU 9000 (isa avx2)', backend onednn 2.6.3"),
        std::string::npos)
        << e;
    EXPECT_NE(e.find(to_string(other)), std::string::npos) << e;
  }
  EXPECT_NO_THROW(memfmt::io::load_timing_cache(text));  // no expectation: any key loads
}

// Each row: a change to a valid document and the words the error must contain.
struct malformed {
  const char* name;
  std::function<void(json&)> edit;
  const char* error;
};

TEST(TimingCacheJson, MalformedFilesNameTheKey) {
  const json valid = memfmt::io::timing_cache_to_json(sample());
  const std::vector<malformed> cases = {
      {"format", [](json& j) { j["format"] = "memfmt.plan"; }, "key 'format' is 'memfmt.plan'"},
      {"version", [](json& j) { j["version"] = 2; }, "key 'version' is 2"},
      {"no device", [](json& j) { j.erase("device"); }, "timing cache file: key 'device' is missing"},
      {"backend type", [](json& j) { j["backend"] = 3; }, "key 'backend' must be a string"},
      {"layers type", [](json& j) { j["layers"] = json::object(); }, "key 'layers' must be an array"},
      {"no conversions", [](json& j) { j.erase("conversions"); }, "key 'conversions' is missing"},
      {"layer not object", [](json& j) { j["layers"][1] = 5; }, "layers[1]: expected a JSON object"},
      {"no signature", [](json& j) { j["layers"][0].erase("signature"); }, "layers[0]: key 'signature' is missing"},
      {"ns type", [](json& j) { j["layers"][0]["channels_first_ns"] = "12"; },
       "layers[0]: key 'channels_first_ns' must be an integer"},
      {"ns fraction", [](json& j) { j["layers"][0]["channels_last_ns"] = 1.5; },
       "layers[0]: key 'channels_last_ns' must be an integer"},
      {"negative", [](json& j) { j["layers"][0]["channels_first_ns"] = -3; }, "key 'channels_first_ns' is -3"},
      {"both null", [](json& j) { j["layers"][0]["channels_first_ns"] = j["layers"][0]["channels_last_ns"] = nullptr; },
       "layers[0]: keys 'channels_first_ns' and 'channels_last_ns' are both null"},
      {"twice", [](json& j) { j["layers"].push_back(j["layers"][0]); }, "layers[2]: key 'signature'"},
      {"from", [](json& j) { j["conversions"][0]["from"] = "nhwc"; },
       "conversions[0]: key 'from' is 'nhwc', not one of channels_first, channels_last"},
      {"conversion null", [](json& j) { j["conversions"][2]["ns"] = nullptr; },
       "conversions[2]: key 'ns' must be an integer"},
      {"conversion twice", [](json& j) { j["conversions"].push_back(j["conversions"][1]); },
       "conversions[3]: conversion"},
  };
  for (const malformed& m : cases) {
    json j = valid;
    m.edit(j);
    const std::string e = memfmt_test::error_text([&] { memfmt::io::timing_cache_from_json(j); });
    EXPECT_NE(e.find(m.error), std::string::npos) << m.name << ": " << e;
  }
  const std::string syntax = memfmt_test::error_text([] { memfmt::io::load_timing_cache("{\"format\": \n"); });
  EXPECT_NE(syntax.find("timing cache file: not valid JSON"), std::string::npos) << syntax;
  EXPECT_NE(memfmt_test::error_text([] {
              memfmt::io::read_timing_cache_file("/nonexistent/cache.json");
            }).find("cannot be opened"),
            std::string::npos);
}

}  // namespace
