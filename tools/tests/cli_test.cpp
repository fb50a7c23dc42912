// Runs the memfmt binary: its JSON answers against the PyTorch 1.13 fixtures (tests/strided for
// `explain`, tests/strided_ops for the operations), and exit code 2 with a usage message for bad
// command lines.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "format_fixtures.hpp"
#include "run_cli.hpp"

namespace {

using json = nlohmann::json;
using dims = std::vector<std::int64_t>;
using memfmt_test::expect_usage_errors;
using memfmt_test::run_cli;

std::string join(const dims& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

std::string tensor_arg(const json& t) {
  return join(t.at("sizes").get<dims>()) + "@" + join(t.at("strides").get<dims>());
}

json load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return json::parse(in);
}

// Compares one request entry of `explain --json` with the fixture's outcome.
void expect_request(const json& got, const memfmt_test::outcome& want, const memfmt::strided_desc& t,
                    const std::string& where) {
  using memfmt_test::outcome;
  switch (want.kind) {
    case outcome::unobserved: return;
    case outcome::error: EXPECT_EQ(got.value("error", std::string("<none>")), want.message) << where; return;
    case outcome::alias:
      ASSERT_TRUE(got.contains("alias")) << where << ": " << got.dump();
      EXPECT_TRUE(got["alias"].get<bool>()) << where;
      EXPECT_EQ(got["sizes"].get<dims>(), t.sizes) << where;
      EXPECT_EQ(got["strides"].get<dims>(), t.strides) << where;
      return;
    case outcome::copy:
      ASSERT_TRUE(got.contains("alias")) << where << ": " << got.dump();
      EXPECT_FALSE(got["alias"].get<bool>()) << where;
      EXPECT_EQ(got["sizes"].get<dims>(), t.sizes) << where;
      EXPECT_EQ(got["strides"].get<dims>(), want.strides) << where;
      return;
  }
}

TEST(memfmt_cli, explain_json_matches_pytorch_fixtures) {
  std::size_t checked = 0;
  for (const char* file : memfmt_test::format_fixture_files) {
    const auto cases = memfmt_test::load_format_cases(MEMFMT_STRIDED_FIXTURE_DIR, file);
    // A spread of each file (cases are sorted by sizes, so a fixed step covers ranks and shapes).
    const std::size_t step = cases.size() / 40 + 1;
    for (std::size_t i = 0; i < cases.size(); i += step) {
      const auto& c = cases[i];
      const auto r = run_cli({"explain", "--sizes", join(c.t.sizes), "--strides", join(c.t.strides), "--json"}, false);
      ASSERT_EQ(r.exit_code, 0) << c.origin << ": " << r.output;
      const auto j = json::parse(r.output);
      const std::string where = c.origin + " (" + memfmt_test::describe(c.t) + ")";
      EXPECT_EQ(j.at("is_contiguous").get<bool>(), c.is_contiguous) << where;
      EXPECT_EQ(j.at("is_contiguous_channels_last").get<bool>(), c.is_contiguous_channels_last) << where;
      EXPECT_EQ(j.at("is_contiguous_channels_last_3d").get<bool>(), c.is_contiguous_channels_last_3d) << where;
      EXPECT_EQ(j.at("non_overlapping_and_dense").get<bool>(), c.non_overlapping_and_dense) << where;
      EXPECT_EQ(j.at("suggest").get<std::string>(), memfmt::to_string(c.suggest)) << where;
      EXPECT_EQ(j.size(), 8u) << "exactly the documented keys: " << j.dump();
      for (std::size_t f = 0; f < 4; ++f) {
        const std::string name(memfmt::to_string(memfmt::all_memory_formats[f]));
        expect_request(j.at("to").at(name), c.to[f], c.t, where + " .to(" + name + ")");
        expect_request(j.at("contiguous").at(name), c.contiguous[f], c.t, where + " .contiguous(" + name + ")");
        expect_request(j.at("empty_like").at(name), c.empty_like[f], c.t, where + " empty_like(" + name + ")");
      }
      ++checked;
    }
  }
  std::cout << "[ cli      ] explain: " << checked << " fixture cases checked through the binary\n";
  EXPECT_GT(checked, 150u);
}

// Runs an operation subcommand and compares with a tests/strided_ops fixture case.
void expect_op(const std::vector<std::string>& args, const json& c, const std::string& where) {
  const auto r = run_cli(args, false);
  const auto j = json::parse(r.output);
  if (c.contains("error")) {
    EXPECT_EQ(r.exit_code, 1) << where;
    EXPECT_EQ(j.value("error", std::string("<none>")), c["error"].get<std::string>()) << where;
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << where << ": " << r.output;
  EXPECT_EQ(j.at("output").at("sizes").get<dims>(), c.at("out").at("sizes").get<dims>()) << where;
  EXPECT_EQ(j.at("output").at("strides").get<dims>(), c.at("out").at("strides").get<dims>()) << where;
}

TEST(memfmt_cli, pointwise_matches_pytorch_fixtures) {
  const auto doc = load(std::string(MEMFMT_OPS_FIXTURE_DIR) + "/pointwise.json");
  std::size_t checked = 0, seen = 0;
  for (const auto& c : doc.at("cases")) {
    const auto& ops = c.at("operands");
    if (ops.size() != 2 || !c.contains("out")) continue;
    bool plain = true;  // float32 tensors, which is what the CLI builds
    for (const auto& o : ops) plain = plain && o.contains("sizes") && o.value("dtype", "") == "float32";
    if (!plain || seen++ % 40 != 0) continue;
    expect_op({"explain", "pointwise", "--a", tensor_arg(ops[0]), "--b", tensor_arg(ops[1]), "--json"}, c,
              "pointwise " + ops.dump());
    ++checked;
  }
  std::cout << "[ cli      ] pointwise: " << checked << " fixture cases checked\n";
  EXPECT_GT(checked, 40u);
}

TEST(memfmt_cli, conv_matches_pytorch_fixtures) {
  const auto doc = load(std::string(MEMFMT_OPS_FIXTURE_DIR) + "/conv.json");
  std::size_t checked = 0, seen = 0;
  for (const auto& c : doc.at("cases")) {
    // The CLI models F.conv{weight rank - 2}d with several threads, as the fixture's default run.
    const auto& w = c.at("weight");
    if (c.at("threads").get<int>() != 2 || c.at("spatial_dims").get<std::size_t>() + 2 != w.at("sizes").size() ||
        c.at("input").at("dtype") != w.at("dtype"))
      continue;
    if (seen++ % 40 != 0) continue;
    expect_op({"explain", "conv", "--input", tensor_arg(c.at("input")), "--weight", tensor_arg(w), "--stride",
               join(c.at("stride").get<dims>()), "--padding", join(c.at("padding").get<dims>()), "--dilation",
               join(c.at("dilation").get<dims>()), "--groups", std::to_string(c.at("groups").get<std::int64_t>()),
               "--dtype", w.at("dtype").get<std::string>(), "--json"},
              c, "conv " + c.dump());
    ++checked;
  }
  std::cout << "[ cli      ] conv: " << checked << " fixture cases checked\n";
  EXPECT_GT(checked, 40u);
}

TEST(memfmt_cli, batch_norm_matches_pytorch_fixtures) {
  const auto doc = load(std::string(MEMFMT_OPS_FIXTURE_DIR) + "/batch_norm.json");
  std::size_t checked = 0, seen = 0;
  for (const auto& c : doc.at("cases")) {
    if (c.at("training").get<bool>() || !c.at("affine").get<bool>()) continue;  // the CLI: eval mode, affine
    if (seen++ % 8 != 0) continue;
    expect_op({"explain", "batch_norm", "--input", tensor_arg(c.at("input")), "--json"}, c, "batch_norm " + c.dump());
    ++checked;
  }
  std::cout << "[ cli      ] batch_norm: " << checked << " fixture cases checked\n";
  EXPECT_GT(checked, 30u);
}

TEST(memfmt_cli, readable_explanation_names_the_ambiguity) {
  // NC11 / C == 1: channels-last contiguous but not suggested channels last (PyTorch 1.13).
  const auto r = run_cli({"explain", "--sizes", "2,1,4,5", "--strides", "20,20,5,1"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("channels last: yes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("C == 1, so .to(channels_last) copies while .contiguous(channels_last) aliases"),
            std::string::npos)
      << r.output;
  const auto scalar = run_cli({"explain", "pointwise", "--a", "2,3@3,1", "--b", "@"});
  EXPECT_EQ(scalar.exit_code, 0) << scalar.output;
  EXPECT_NE(scalar.output.find("strides [3, 1]"), std::string::npos) << scalar.output;
}

TEST(memfmt_cli, bad_arguments_exit_2_with_usage) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"frobnicate"},
      {"explain"},
      {"explain", "--sizes", "2,3"},
      {"explain", "--sizes", "2,x", "--strides", "3,1"},
      {"explain", "--sizes", "2,3", "--strides", "3,1.5"},
      {"explain", "--sizes", "2,3", "--strides", "3"},
      {"explain", "--sizes", "2,-3", "--strides", "3,1"},
      {"explain", "--sizes", "2,3", "--strides", "-3,1"},
      {"explain", "--sizes", "99999999999999999999", "--strides", "1"},
      {"explain", "--sizes", "2,,3", "--strides", "3,1,1"},
      {"explain", "frobnicate"},
      {"explain", "pointwise", "--a", "2,3@3,1"},
      {"explain", "pointwise", "--a", "2,3", "--b", "@"},
      {"explain", "pointwise", "--a", "2,3@3,1@1", "--b", "@"},
      {"explain", "conv", "--input", "1,3,8,8@192,64,8,1"},
      {"explain", "conv", "--input", "1,3,8,8@192,64,8,1", "--weight", "4,3,3,3@27,9,3,1", "--groups", "x"},
      {"explain", "conv", "--input", "1,3,8,8@192,64,8,1", "--weight", "4,3,3,3@27,9,3,1", "--dtype", "int8"},
      {"explain", "conv", "--input", "1,3,8,8@192,64,8,1", "--weight", "4,3,3,3@27,9,3,1", "--stride", "a"},
      {"explain", "batch_norm"},
      {"explain", "batch_norm", "--input", "2,3@1"},
      {"explain", "--sizes", "2", "--strides", "1", "batch_norm", "--input", "2,3@3,1"},
  };
  expect_usage_errors(bad);
  // An operation PyTorch itself rejects is an answer, not a usage error.
  const auto rejected = run_cli({"explain", "batch_norm", "--input", "3@1", "--json"}, false);
  EXPECT_EQ(rejected.exit_code, 1) << rejected.output;
  EXPECT_TRUE(json::parse(rejected.output).contains("error")) << rejected.output;
}

// Hostile command lines: each answers, or exits 1 (no answer, saying whose limit) or 2 (usage),
// never 3 (internal error) or a signal.
TEST(memfmt_cli, explain_text_mode_survives_a_failed_empty_like) {
  // empty_like(preserve) cannot be computed (its strides pass 2^63); the text notes used to read its
  // absent strides and exit 3.
  const auto r = run_cli({"explain", "--sizes", "4611686018427387904,2", "--strides", "1,1"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("empty_like   past memfmt's limits: infer_dense_strides: strides of sizes "
                          "[4611686018427387904, 2] overflow 64 bits"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(".contiguous  PyTorch raises: preserve memory format is unsupported"), std::string::npos)
      << r.output;
  const auto j =
      json::parse(run_cli({"explain", "--sizes", "4611686018427387904,2", "--strides", "1,1", "--json"}, false).output);
  EXPECT_EQ(j["empty_like"]["preserve"].value("error_source", ""), "memfmt") << j.dump();
  EXPECT_EQ(j["contiguous"]["preserve"].value("error_source", ""), "pytorch") << j.dump();
}

TEST(memfmt_cli, results_past_64_bits_are_memfmts_limit_not_pytorch_errors) {
  const std::string q = "4611686018427387904", max = "9223372036854775807";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"pointwise", "--a", "2,2,1@1,2,1", "--b", "1,1," + q + "@1,1,1"}, "[2, 2, " + q + "]"},
      {{"pointwise", "--a", "4,1@1,1", "--b", "1," + q + "@1,1"}, "[4, " + q + "]"},
      {{"batch_norm", "--input", "2,2,0," + q + "@1,2,4,4"}, "[2, 2, 0, " + q + "]"},
      {{"conv", "--input", "3,8,8@" + q + ",24,3", "--weight", "4,3,3,3@27,9,3,1"}, "[" + q + ", 24, 3]"},
      {{"conv", "--input", "2,0," + max + "," + max + "@1,1,1,1", "--weight", "4,0,1,1@1,1,1,1"},
       "[2, 0, " + max + ", " + max + "]"},
      {{"conv", "--input", "2,3,8,8@192,64,8,1", "--weight", "4,3,3,3@27,9,3,1", "--dilation", max + ",1"},
       "dilation [" + max + ", 1]"},
  };
  for (const auto& [args, names] : cases) {
    std::vector<std::string> argv = {"explain"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = run_cli(argv);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("past memfmt's limits (not a PyTorch error): "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("overflow"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(names), std::string::npos) << r.output;
    argv.push_back("--json");
    const auto j = json::parse(run_cli(argv, false).output);
    EXPECT_EQ(j.value("error_source", ""), "memfmt") << j.dump();
  }
  // PyTorch's own errors keep their label.
  const auto r = run_cli({"explain", "batch_norm", "--input", "3@1"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("batch_norm: PyTorch raises: "), std::string::npos) << r.output;
  const auto j = json::parse(run_cli({"explain", "batch_norm", "--input", "3@1", "--json"}, false).output);
  EXPECT_EQ(j.value("error_source", ""), "pytorch") << j.dump();
}

TEST(memfmt_cli, groups_are_parsed_like_sizes) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"0", "'0' is not a positive integer"},
      {"-1", "'-1' is not a positive integer"},
      {"abc", "'abc' is not a decimal integer"},
      {"", "'' is not a decimal integer"},
      {"0x10", "'0x10' is not a decimal integer"},
      {"99999999999999999999", "'99999999999999999999' does not fit in 64 bits"},
  };
  for (const auto& [groups, message] : bad) {
    const auto r = run_cli(
        {"explain", "conv", "--input", "1,3,8,8@192,64,8,1", "--weight", "3,1,3,3@9,9,3,1", "--groups", groups});
    EXPECT_EQ(r.exit_code, 2) << groups << ": " << r.output;
    EXPECT_NE(r.output.find("--groups: " + message), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("179769"), std::string::npos) << "no 309-digit bound: " << r.output;
  }
  // --sizes rejects the same forms.
  for (const std::string v : {"0x10", "99999999999999999999", ""}) {
    const auto r = run_cli({"explain", "--sizes", "2," + v, "--strides", "1,1"});
    EXPECT_EQ(r.exit_code, 2) << v << ": " << r.output;
  }
  // memfmt's limit on dimensions, so the quadratic rules stay cheap.
  std::string many = "1";
  for (int i = 0; i < 64; ++i) many += ",1";
  const auto r = run_cli({"explain", "--sizes", many, "--strides", many});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("more than 64 values"), std::string::npos) << r.output;
}

TEST(memfmt_cli, group_count_costs_no_time) {
  // One descriptor per group used to take 3.3 s and 600 MB at 4,000,000 groups, and never end at
  // 2^40. The answer is the dense layout of the [1, G, 1, 1] output (float64: PyTorch's slow path).
  for (const std::string g : {"4000000", "1099511627776"}) {
    const auto r = run_cli({"explain", "conv", "--input", "1," + g + ",1,1@" + g + ",1,1,1", "--weight",
                            g + ",1,1,1@1,1,1,1", "--groups", g, "--dtype", "float64", "--json"},
                           false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto j = json::parse(r.output);
    EXPECT_EQ(j["output"]["sizes"].get<dims>(), (dims{1, std::stoll(g), 1, 1}));
    EXPECT_EQ(j["output"]["strides"].get<dims>(), (dims{std::stoll(g), 1, 1, 1}));
  }
}

}  // namespace
