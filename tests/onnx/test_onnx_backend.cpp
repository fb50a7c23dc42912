// Conformance against a suite nobody here wrote: the ONNX project's backend tests (Debian
// libonnx-testdata: node/, pytorch-converted/, pytorch-operator/, simple/). ImportEveryTest imports
// every test and counts what imports; a test whose ops are all ones the importer maps must import
// without an opaque node unless the network cannot express that use (a reason the test lists); an
// import error that is not errc::unsupported / unsupported_dtype on a model the ONNX project ships
// is a failure. RunEverySupportedTest runs every test that imports runnable through the executor
// in three plans, on the reference backend, oneDNN where built and cuDNN where a GPU is present, and
// compares with the expected outputs at ONNX's tolerances.
//
// MEMFMT_ONNX_LIST_UNSUPPORTED=1 makes RunEverySupportedTest print every unsupported case whose ops
// are all ones the importer maps, with its full reason (an import refusal or a backend's support()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/onnx/backend_test.hpp"
#include "memfmt/session/onnx.hpp"
#ifdef MEMFMT_TEST_ONEDNN
#include "memfmt/backends/onednn/backend.hpp"
#endif
#ifdef MEMFMT_TEST_CUDNN
#include "memfmt/backends/cudnn/backend.hpp"
#endif
#include "plans.hpp"

namespace {

const std::set<std::string>& mapped_ops() {
  static const std::set<std::string> ops = {"Conv",
                                            "ConvTranspose",
                                            "BatchNormalization",
                                            "InstanceNormalization",
                                            "LRN",
                                            "Relu",
                                            "Clip",
                                            "Sigmoid",
                                            "HardSigmoid",
                                            "HardSwish",
                                            "Tanh",
                                            "LeakyRelu",
                                            "Elu",
                                            "Softplus",
                                            "Mish",
                                            "PRelu",
                                            "Add",
                                            "Sub",
                                            "Mul",
                                            "Div",
                                            "MaxPool",
                                            "AveragePool",
                                            "GlobalAveragePool",
                                            "GlobalMaxPool",
                                            "Concat",
                                            "Split",
                                            "Slice",
                                            "Resize",
                                            "Upsample",
                                            "Pad",
                                            "ReduceMean",
                                            "ReduceMax",
                                            "ReduceMin",
                                            "ReduceSum",
                                            "ReduceL1",
                                            "ReduceL2",
                                            "ReduceSumSquare",
                                            "Flatten",
                                            "Reshape",
                                            "Gemm",
                                            "MatMul",
                                            "Softmax",
                                            "LogSoftmax",
                                            "Dropout",
                                            "Identity",
                                            "Constant",
                                            "Shape"};
  return ops;
}

bool all_ops_mapped(const ::onnx::ModelProto& model) {
  bool mapped = true;
  for (const auto& n : model.graph().node()) mapped = mapped && n.domain().empty() && mapped_ops().count(n.op_type());
  return mapped;
}

class OnnxBackendTests : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxBackendTests, ImportEveryTest) {
  const std::string data = memfmt::onnx::backend_test_root();
  if (data.empty())
    GTEST_SKIP() << "ONNX backend test data not found (Debian libonnx-testdata, or set MEMFMT_ONNX_BACKEND_TESTS)";
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
    const bool mapped = all_ops_mapped(c.model);
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

INSTANTIATE_TEST_SUITE_P(Suites, OnnxBackendTests,
                         ::testing::Values("node", "pytorch-converted", "pytorch-operator", "simple"),
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

// ---- running them ----
namespace {

using memfmt_test::plan_kind;
using memfmt_test::plans;

// Tests that run and give wrong outputs today, each with why; the run checks that every one still
// fails in the plans it lists, so the list cannot outlive the bug.
struct known_failure {
  const char* suite;
  const char* test;
  const char* reason;
};
const std::vector<known_failure>& known_failures() {
  static const std::vector<known_failure> list = {};
  return list;
}
const known_failure* find_known(const std::string& suite, const std::string& test) {
  for (const auto& k : known_failures())
    if (suite == k.suite && test == k.test) return &k;
  return nullptr;
}

// Cases whose inputs and outputs together hold more elements than this are skipped for size
// (reported as such): the reference kernels are direct loops, and the sanitizer build runs them too.
constexpr std::int64_t max_case_elements = std::int64_t{1} << 22;

struct run_counts {
  std::size_t passed = 0, failed = 0, unsupported = 0, too_large = 0, known = 0;
  std::size_t channels_last = 0;  // cases run with a layer channels_last in a shape where the formats differ
  std::map<std::string, std::size_t> unsupported_by_reason;
};

// What makes a case unsupported, for the summary: the op, the rank or the dtype.
std::string reason_key(const std::string& what) {
  const auto word_after = [&](const std::string& key, const std::string& label) -> std::string {
    const auto at = what.find(key);
    if (at == std::string::npos) return "";
    const auto from = at + key.size();
    return label + what.substr(from, what.find_first_of(" ):,", from) - from);
  };
  for (const auto& [key, label] : {std::pair<std::string, std::string>{"unsupported op ", "op "},
                                   {"has rank ", "rank "},
                                   {"ONNX element type ", "element type "},
                                   {"dtype ", "dtype "}}) {
    const std::string k = word_after(key, label);
    if (!k.empty()) return k;
  }
  // "ONNX node 'n' (Op): ..." from the importer's refusals.
  const auto open = what.find(") (");
  const auto paren = what.find("' (");
  if (paren != std::string::npos && open == std::string::npos) return word_after("' (", "op ");
  return what.substr(0, std::min<std::size_t>(what.size(), 60));
}

// Every test of `suite` through import and runtime::executor<Backend> in plan `p`. Generic over the
// backend: another backend is one more call with its object.
template <class Backend>
run_counts run_suite(const std::string& suite, const plan_kind& p, Backend& backend,
                     std::vector<std::string>& failures) {
  run_counts n;
  const char* list_env = std::getenv("MEMFMT_ONNX_LIST_UNSUPPORTED");
  const bool list_unsupported = list_env && std::string(list_env) != "0";
  const std::string where = std::string(Backend::name) + " " + p.name + " " + suite + "/";
  for (const std::string& dir : memfmt::onnx::list_backend_tests(memfmt::onnx::backend_test_root() + "/" + suite)) {
    const std::string name = std::filesystem::path(dir).filename().string();
    const known_failure* known = find_known(suite, name);
    memfmt::onnx::backend_test_case c;
    const auto unsupported = [&](const std::string& why) {
      ++n.unsupported;
      if (list_unsupported && c.model.has_graph() && all_ops_mapped(c.model))
        std::printf("  unsupported %s%s: %s\n", where.c_str(), name.c_str(), why.c_str());
      ++n.unsupported_by_reason[reason_key(why)];
      if (known) failures.push_back(where + name + " is a known failure but is not run (" + why + ")");
    };
    memfmt::onnx::backend_import imported;
    try {
      c = memfmt::onnx::load_backend_test(dir);
      imported = memfmt::onnx::import_backend_test(c, memfmt_test::options_for(p));
    } catch (const memfmt::error& e) {
      if (e.code() == memfmt::errc::unsupported || e.code() == memfmt::errc::unsupported_dtype) {
        unsupported(e.what());
        continue;
      }
      failures.push_back(where + name + ": import: " + e.what());
      ++n.failed;
      continue;
    }
    if (!imported.model.runnable()) {
      unsupported("unsupported op " + imported.model.unsupported.front().op + " (" +
                  imported.model.unsupported.front().reason + ")");
      continue;
    }
    std::int64_t elements = 0;
    for (const auto& [k, v] : c.inputs) elements += v.numel();
    for (const auto& [k, v] : c.outputs) elements += v.numel();
    if (elements > max_case_elements) {
      ++n.too_large;
      continue;
    }
    memfmt::onnx::backend_result r;
    try {
      const auto plan = memfmt_test::plan_of(imported.model, p);
      const auto& net = imported.model.network;
      bool any_last = false;
      for (const auto& node : net.nodes())
        any_last = any_last || (net.has_format(node.id) && !memfmt::is_ambiguous_shape(node.extents) &&
                                plan.format(node.id) == memfmt::format_family::channels_last);
      n.channels_last += any_last;
      r = memfmt::onnx::run_backend_test(c, imported, [&](const memfmt::onnx::imported_model& m, const auto& feeds) {
        memfmt::runtime::executor_options eo;
        // A value read after its liveness ends reads NaN and fails the comparison (host arenas only:
        // the executor refuses to poison a backend's device memory).
        eo.poison = !memfmt::runtime::detail::owns_memory<Backend>::value;
        return memfmt::onnx::run_model(m, plan, backend, feeds, eo);
      });
    } catch (const memfmt::error& e) {
      if (e.code() == memfmt::errc::unsupported || e.code() == memfmt::errc::unsupported_dtype) {
        unsupported(e.what());
        continue;
      }
      r = {false, std::string("error: ") + e.what()};
    }
    if (r.passed) {
      ++n.passed;
      if (known) failures.push_back(where + name + " is listed as a known failure (" + known->reason + ") but passes");
    } else if (known) {
      ++n.known;
      std::printf("  known failure %s%s: %s\n", where.c_str(), name.c_str(), r.detail.c_str());
    } else {
      ++n.failed;
      failures.push_back(where + name + ": " + r.detail);
    }
  }
  std::printf(
      "ONNX backend tests %s, %s backend, plan %s: %zu passed / %zu failed / %zu unsupported / "
      "%zu known failures / %zu skipped for size (%zu run with channels_last layers)\n",
      suite.c_str(), Backend::name, p.name, n.passed, n.failed, n.unsupported, n.known, n.too_large, n.channels_last);
  return n;
}

class OnnxBackendRun : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(OnnxBackendRun, RunEverySupportedTest) {
  if (memfmt::onnx::backend_test_root().empty())
    GTEST_SKIP() << "ONNX backend test data not found (Debian libonnx-testdata, or set MEMFMT_ONNX_BACKEND_TESTS)";
  const std::string suite = std::get<0>(GetParam());
  const plan_kind& p = plans[std::get<1>(GetParam())];
  std::vector<std::string> failures;
  // One line per backend; a layer a backend refuses (its capability query) counts as unsupported there.
  // A host backend must pass some of every suite (else the runner is broken); cuDNN may refuse all
  // of a suite (simple/ holds one model). The reference backend passes at least the counts
  // docs/networks.md states for ONNX 1.12's data (libonnx-testdata goes with libonnx-dev), so a
  // change that makes a passing test unsupported fails here.
  const std::map<std::string, std::size_t> reference_floor = {
      {"node", 118}, {"pytorch-converted", 69}, {"pytorch-operator", 11}, {"simple", 1}};
  const auto report = [&](const run_counts& n, bool must_pass = true) {
    std::printf("  unsupported, most common first:");
    std::vector<std::pair<std::size_t, std::string>> reasons;
    for (const auto& [why, count] : n.unsupported_by_reason) reasons.emplace_back(count, why);
    std::sort(reasons.rbegin(), reasons.rend());
    for (std::size_t i = 0; i < reasons.size() && i < 12; ++i)
      std::printf("%s %s x%zu", i ? "," : "", reasons[i].second.c_str(), reasons[i].first);
    std::printf("\n");
    if (must_pass) {
      EXPECT_GT(n.passed, 0u);
    }
  };
  memfmt::reference::backend reference;
  const run_counts on_reference = run_suite(suite, p, reference, failures);
  report(on_reference);
  if (std::string(MEMFMT_TEST_ONNX_VERSION) == "1.12.0") {
    EXPECT_GE(on_reference.passed, reference_floor.at(suite)) << "fewer ONNX backend tests pass than documented";
  }
#ifdef MEMFMT_TEST_ONEDNN
  memfmt::onednn::backend onednn;
  report(run_suite(suite, p, onednn, failures));
#endif
#ifdef MEMFMT_TEST_CUDNN
  // On a GPU only. ONNX's tolerances hold for float32 without TF32: run with NVIDIA_TF32_OVERRIDE=0
  // (scripts/gpu_check.sh does), or cuDNN may convolve with 10-bit mantissas.
  if (memfmt::cudnn::device_count() > 0) {
    memfmt::cudnn::backend cudnn;
    report(run_suite(suite, p, cudnn, failures), false);
  } else {
    std::printf("  cuDNN backend: no CUDA device, not run\n");
  }
#endif
  for (const auto& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(SuitesAndPlans, OnnxBackendRun,
                         ::testing::Combine(::testing::Values("node", "pytorch-converted", "pytorch-operator",
                                                              "simple"),
                                            ::testing::Values(0, 1, 2)),
                         [](const auto& info) {
                           std::string n =
                               std::string(std::get<0>(info.param)) + "_" + plans[std::get<1>(info.param)].name;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
