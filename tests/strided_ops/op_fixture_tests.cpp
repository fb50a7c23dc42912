// Every case PyTorch 1.13 recorded in tests/strided_ops/fixtures (gen_op_fixtures.py) must come
// out of op_rules.hpp with the same sizes, strides and dtype, or the same error message.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memfmt/strided/op_rules.hpp"

namespace {

using json = nlohmann::json;
using memfmt::strided_desc;

json load(const std::string& name) {
  const std::string path = std::string(MEMFMT_OP_FIXTURES_DIR) + "/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open fixture " + path);
  return json::parse(in);
}

strided_desc to_desc(const json& j) {
  strided_desc d;
  if (j.contains("sizes")) {
    d.sizes = j.at("sizes").get<std::vector<std::int64_t>>();
    d.strides = j.at("strides").get<std::vector<std::int64_t>>();
    const auto t = j.at("dtype").get<std::string>();
    d.type = t == "float64" ? memfmt::dtype::float64 : memfmt::dtype::float32;
  }
  return d;
}

std::string describe(const strided_desc& d) {
  return "sizes " + memfmt::detail::dims_to_string(d.sizes) + " strides " + memfmt::detail::dims_to_string(d.strides) +
         " " + std::string(memfmt::to_string(d.type));
}

struct tally {
  int checked = 0, layout_mismatches = 0, error_mismatches = 0;
  std::vector<std::string> first;
  void report(const std::string& what) {
    if (first.size() < 15) first.push_back(what);
  }
};

// Runs one case: compares a result with "out", or the thrown memfmt::error with "error".
void check_case(const json& c, const std::function<strided_desc()>& op, tally& t) {
  ++t.checked;
  std::string got;
  bool threw = false;
  strided_desc result;
  try {
    result = op();
  } catch (const memfmt::error& e) {
    threw = true;
    got = e.what();
  }
  if (c.contains("error")) {
    const auto want = c.at("error").get<std::string>();
    if (!threw) {
      ++t.layout_mismatches;
      t.report(c.dump() + "\n    expected error: " + want + "\n    got: " + describe(result));
    } else if (got != want) {
      ++t.error_mismatches;
      t.report(c.dump() + "\n    expected error: " + want + "\n    got error:      " + got);
    }
    return;
  }
  const auto want = to_desc(c.at("out"));
  if (threw || result != want) {
    ++t.layout_mismatches;
    t.report(c.dump() + "\n    expected: " + describe(want) +
             "\n    got: " + (threw ? "error " + got : describe(result)));
  }
}

void expect_clean(const std::string& op, const tally& t, std::size_t cases) {
  std::ostringstream os;
  os << op << ": " << t.checked << " cases checked, " << t.layout_mismatches << " layout mismatches, "
     << t.error_mismatches << " error-message mismatches\n";
  for (const auto& m : t.first) os << "  " << m << "\n";
  std::cout << os.str().substr(0, os.str().find('\n') + 1);
  EXPECT_EQ(static_cast<std::size_t>(t.checked), cases);
  EXPECT_GT(t.checked, 1000) << "fixture file looks truncated";
  EXPECT_EQ(t.layout_mismatches, 0) << os.str();
  EXPECT_EQ(t.error_mismatches, 0) << os.str();
}

TEST(StridedOpsFixtures, Pointwise) {
  const auto j = load("pointwise.json");
  tally t;
  for (const auto& c : j.at("cases")) {
    std::vector<strided_desc> ops;
    for (const auto& o : c.at("operands")) ops.push_back(to_desc(o));
    check_case(
        c, [&] { return memfmt::pointwise_result(ops); }, t);
  }
  expect_clean("pointwise", t, j.at("cases").size());
}

TEST(StridedOpsFixtures, Cat) {
  const auto j = load("cat.json");
  tally t;
  for (const auto& c : j.at("cases")) {
    std::vector<strided_desc> inputs;
    for (const auto& o : c.at("inputs")) inputs.push_back(to_desc(o));
    const auto dim = c.at("dim").get<std::int64_t>();
    check_case(
        c, [&] { return memfmt::cat_result(inputs, dim); }, t);
  }
  expect_clean("cat", t, j.at("cases").size());
}

TEST(StridedOpsFixtures, Conv) {
  const auto j = load("conv.json");
  tally t;
  for (const auto& c : j.at("cases")) {
    const auto input = to_desc(c.at("input"));
    const auto weight = to_desc(c.at("weight"));
    memfmt::torch_conv_args args;
    args.stride = c.at("stride").get<std::vector<std::int64_t>>();
    args.padding = c.at("padding").get<std::vector<std::int64_t>>();
    args.dilation = c.at("dilation").get<std::vector<std::int64_t>>();
    args.groups = c.at("groups").get<std::int64_t>();
    memfmt::torch_conv_context ctx;
    ctx.spatial_dims = c.at("spatial_dims").get<int>();
    ctx.num_threads = c.at("threads").get<int>();
    check_case(
        c, [&] { return memfmt::conv_result(input, weight, args, ctx); }, t);
  }
  expect_clean("conv", t, j.at("cases").size());
}

TEST(StridedOpsFixtures, BatchNorm) {
  const auto j = load("batch_norm.json");
  tally t;
  for (const auto& c : j.at("cases")) {
    const auto input = to_desc(c.at("input"));
    const bool training = c.at("training").get<bool>();
    const bool affine = c.at("affine").get<bool>();
    check_case(
        c, [&] { return memfmt::batch_norm_result(input, training, affine); }, t);
  }
  expect_clean("batch_norm", t, j.at("cases").size());
}

}  // namespace
