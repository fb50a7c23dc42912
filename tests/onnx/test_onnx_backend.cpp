// Conformance against a suite nobody here wrote: the ONNX project's backend tests (Debian
// libonnx-testdata: node/, pytorch-converted/, pytorch-operator/). Every test is imported; the counts are printed and recorded as test
// properties. A test whose ops are all ones the importer maps must import without an opaque node
// unless the network cannot express that use (a reason the test lists); an import error that is
// not errc::unsupported / unsupported_dtype on a model the ONNX project ships is a failure.
// Running the imported tests and comparing outputs is run_backend_test's job, given an executor.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "memfmt/onnx/backend_test.hpp"

namespace {

const std::set<std::string>& mapped_ops() {
  static const std::set<std::string> ops = {
      "Conv", "ConvTranspose", "BatchNormalization", "InstanceNormalization", "Relu", "Clip", "Sigmoid",
      "HardSigmoid", "HardSwish", "Tanh", "Add", "Sub", "Mul", "Div", "MaxPool", "AveragePool",
      "GlobalAveragePool", "GlobalMaxPool", "Concat", "Split", "Slice", "Resize", "Upsample", "Pad", "ReduceMean",
      "ReduceMax", "Flatten", "Reshape", "Gemm", "MatMul", "Softmax", "LogSoftmax", "Dropout", "Identity", "Constant",
      "Shape"};
  return ops;
}

class OnnxBackendTests : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxBackendTests, ImportEveryTest) {
  const std::string data = memfmt::onnx::backend_test_root();
  if (data.empty()) GTEST_SKIP() << "ONNX backend test data not found (Debian libonnx-testdata, or set MEMFMT_ONNX_BACKEND_TESTS)";
  const std::string root = data + "/" + GetParam();
  const auto dirs = memfmt::onnx::list_backend_tests(root);
  ASSERT_FALSE(dirs.empty()) << root;

  std::size_t all_mapped = 0, runnable = 0, with_opaque = 0, not_importable = 0;
  std::size_t mapped_runnable = 0;
  std::vector<std::string> failures, mapped_not_runnable;
  for (const std::string& dir : dirs) {
    memfmt::onnx::backend_test_case c;
    try {
      c = memfmt::onnx::load_backend_test(dir);
    } catch (const memfmt::error&) {
      ++not_importable;  // e.g. string or complex tensors memfmt has no dtype for
      continue;
    } catch (const std::exception& e) {
      failures.push_back(dir + ": loading: " + e.what());
      continue;
    }
    bool mapped = true;
    for (const auto& n : c.model.graph().node()) mapped = mapped && n.domain().empty() && mapped_ops().count(n.op_type());
    all_mapped += mapped;
    try {
      const auto imported = memfmt::onnx::import_backend_test(c);
      if (imported.model.runnable()) {
        ++runnable;
        mapped_runnable += mapped;
      } else {
        ++with_opaque;
        if (mapped)
          mapped_not_runnable.push_back(c.name + ": " + imported.model.unsupported.front().op + " (" +
                                        imported.model.unsupported.front().reason + ")");
      }
    } catch (const memfmt::error& e) {
      if (e.code() == memfmt::errc::unsupported || e.code() == memfmt::errc::unsupported_dtype) {
        ++not_importable;
        if (mapped) mapped_not_runnable.push_back(c.name + ": " + e.what());
      } else {
        failures.push_back(c.name + ": " + e.what());
      }
    } catch (const std::exception& e) {
      failures.push_back(c.name + ": " + e.what());
    }
  }
  std::printf("ONNX backend tests in %s: %zu\n", root.c_str(), dirs.size());
  std::printf("  imported, runnable:                 %zu (all ops mapped: %zu of %zu)\n", runnable, mapped_runnable,
              all_mapped);
  std::printf("  imported with opaque (unsupported) nodes: %zu\n", with_opaque);
  std::printf("  not importable (rank/dtype a network cannot hold): %zu\n", not_importable);
  std::printf("  import errors: %zu\n", failures.size());
  std::printf("  tests of mapped ops that are not runnable: %zu\n", mapped_not_runnable.size());
  for (const auto& s : mapped_not_runnable) std::printf("    %s\n", s.c_str());
  RecordProperty("node_tests", static_cast<int>(dirs.size()));
  RecordProperty("runnable", static_cast<int>(runnable));
  RecordProperty("opaque", static_cast<int>(with_opaque));
  RecordProperty("not_importable", static_cast<int>(not_importable));
  for (const auto& f : failures) ADD_FAILURE() << f;
  EXPECT_GT(runnable, 0u);
}

INSTANTIATE_TEST_SUITE_P(Suites, OnnxBackendTests, ::testing::Values("node", "pytorch-converted", "pytorch-operator"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace

namespace {

// One case through the loader: the Conv's W (input_1.pb) becomes the layer's weight, x stays the
// network's input, and the expected output has the network output's extents.
TEST(OnnxBackendTests, LoaderBindsWeightsAndKeepsData) {
  const std::string data = memfmt::onnx::backend_test_root();
  const std::string dir = data + "/node/test_conv_with_strides_padding";
  if (data.empty() || !std::filesystem::exists(dir)) GTEST_SKIP() << "ONNX backend test data not found";
  const auto c = memfmt::onnx::load_backend_test(dir);
  ASSERT_EQ(c.inputs.size(), 2u);
  const auto imported = memfmt::onnx::import_backend_test(c);
  ASSERT_EQ(imported.feeds.size(), 1u);
  EXPECT_EQ(imported.feeds.begin()->first, c.inputs[0].first);
  const auto& net = imported.model.network;
  const auto& out = net.at(*net.find(c.outputs[0].first));
  EXPECT_EQ(out.extents, c.outputs[0].second.shape);
  bool found = false;
  for (const auto& [name, p] : imported.model.parameters)
    if (imported.model.source.at(name) == c.inputs[1].first) {
      found = true;
      EXPECT_EQ(p.bytes, c.inputs[1].second.bytes);
    }
  EXPECT_TRUE(found);
  // compare_outputs: equal passes, one element off by more than the tolerance fails and says where.
  auto off = c.outputs[0].second;
  EXPECT_EQ(memfmt::onnx::compare_outputs(c.outputs[0].second, off), "");
  memfmt::onnx::store_element(off, 3, memfmt::onnx::element_as_double(off, 3) + 0.5, 0);
  EXPECT_NE(memfmt::onnx::compare_outputs(c.outputs[0].second, off).find("first at 3"), std::string::npos);
}

}  // namespace
