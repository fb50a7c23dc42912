// Priors as data: the shipped files data/priors/*.json equal the compiled-in tables, every row names
// a benchmark case, a table survives a round trip, an edited file changes the plan without a code
// change, and malformed files fail naming the row and key.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/expect_error.hpp"
#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/priors.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/io/priors_json.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::format_family;
using nlohmann::json;

std::string shipped(const char* name) { return std::string(MEMFMT_PRIORS_DIR) + "/" + name + ".json"; }

TEST(PriorsJson, ShippedFilesEqualTheCompiledInTables) {
  const std::pair<const char*, cost_priors> tables[] = {{"onednn_cpu", onednn_cpu_priors()},
                                                        {"cudnn_gpu", cudnn_gpu_priors()}};
  for (const auto& [name, compiled] : tables) {
    const cost_priors loaded = memfmt::io::read_priors_file(shipped(name));
    EXPECT_EQ(memfmt::io::priors_to_json(loaded, name), memfmt::io::priors_to_json(compiled, name)) << name;
    const json file = json::parse(memfmt::io::detail::read_file(shipped(name), "test"));
    EXPECT_EQ(file, memfmt::io::priors_to_json(compiled, name)) << name;
    for (const json& row : file["rows"]) EXPECT_FALSE(row.at("benchmark").get<std::string>().empty()) << row.dump();
  }
  // The default model is the oneDNN CPU table.
  EXPECT_EQ(memfmt::io::priors_to_json(cost_model().priors(), "onednn_cpu"),
            memfmt::io::priors_to_json(onednn_cpu_priors(), "onednn_cpu"));
  EXPECT_NE(memfmt::io::priors_to_json(onednn_cpu_priors(), "x"), memfmt::io::priors_to_json(cudnn_gpu_priors(), "x"));
}

TEST(PriorsJson, AnEditedFileChangesThePlanAndTheCitedCase) {
  network net;
  const node_id x = net.input("x", {1, 64, 56, 56}, memfmt::dtype::float32, format_family::channels_first);
  const node_id conv = net.conv("conv", x, conv_spec(64, 3, 1, 1));
  net.output("y", conv, format_family::channels_first);
  ASSERT_EQ(solve(net, cost_model(onednn_cpu_priors())).format(conv), format_family::channels_last);

  json edited = memfmt::io::priors_to_json(onednn_cpu_priors(), "onednn_cpu");
  for (json& row : edited["rows"])
    if (row["prior"] == "kxk_conv") {
      row["fp32"] = 0.1;  // NCHW 10x faster
      row["benchmark"] = "my_bench --case=3x3";
    }
  const cost_model model(memfmt::io::load_priors(edited.dump()));
  EXPECT_EQ(solve(net, model).format(conv), format_family::channels_first);
  EXPECT_EQ(model.node_costs(net, conv).source, "prior: my_bench --case=3x3");
  const cost_priors back = memfmt::io::load_priors(memfmt::io::save_priors(model.priors(), "onednn_cpu"));
  EXPECT_EQ(back.kxk_conv.fp32, 0.1);
}

TEST(PriorsJson, MalformedFilesNameTheRowAndKey) {
  const json valid = memfmt::io::priors_to_json(onednn_cpu_priors(), "onednn_cpu");
  const auto row_index = [&](const char* prior) {
    for (std::size_t i = 0; i < valid["rows"].size(); ++i)
      if (valid["rows"][i]["prior"] == prior) return i;
    return std::size_t{0};
  };
  const std::size_t kxk = row_index("kxk_conv"), bw = row_index("bandwidth");
  struct malformed {
    const char* name;
    std::function<void(json&)> edit;
    std::string error;
  };
  const std::vector<malformed> cases = {
      {"format", [](json& j) { j["format"] = "memfmt.timing_cache"; }, "key 'format' is 'memfmt.timing_cache'"},
      {"version", [](json& j) { j["version"] = 7; }, "key 'version' is 7"},
      {"rows", [](json& j) { j.erase("rows"); }, "priors file: key 'rows' is missing"},
      {"missing row", [&](json& j) { j["rows"].erase(kxk); }, "no row for prior 'kxk_conv'"},
      {"twice", [&](json& j) { j["rows"].push_back(j["rows"][kxk]); }, "prior 'kxk_conv' is listed twice"},
      {"unknown", [&](json& j) { j["rows"][kxk]["prior"] = "kxk"; }, "key 'prior' is 'kxk', which is no prior"},
      {"value type", [&](json& j) { j["rows"][kxk]["fp32"] = "fast"; },
       "rows[" + std::to_string(kxk) + "]: key 'fp32' must be a number"},
      {"no benchmark", [&](json& j) { j["rows"][bw].erase("benchmark"); },
       "rows[" + std::to_string(bw) + "]: key 'benchmark' is missing"},
      {"no key", [&](json& j) { j["rows"][bw].erase("memory_bytes_per_ns"); }, "key 'memory_bytes_per_ns' is missing"},
      {"not positive", [&](json& j) { j["rows"][kxk]["low_precision"] = 0; },
       "cost_priors::kxk_conv.low_precision = 0"},
      {"pin unit", [](json& j) { j["preferred_pin_unit_ns"] = 1.5; }, "key 'preferred_pin_unit_ns' must be an integer"},
  };
  for (const malformed& m : cases) {
    json j = valid;
    m.edit(j);
    const std::string e = memfmt_test::error_text([&] { memfmt::io::priors_from_json(j); });
    EXPECT_NE(e.find(m.error), std::string::npos) << m.name << ": " << e;
  }
}

}  // namespace
