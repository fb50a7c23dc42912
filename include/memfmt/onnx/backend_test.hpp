// memfmt/onnx/backend_test.hpp - the ONNX project's backend test data, as memfmt imports it.
//
// Each test is a folder: model.onnx and test_data_set_N/ with input_K.pb and output_K.pb
// (serialized TensorProtos, in the order of the graph's inputs and outputs). Debian's
// libonnx-testdata installs them under /usr/share/libonnx-testdata/data (node/, pytorch-converted/,
// pytorch-operator/, simple/, real/). Node tests feed weights as inputs (a Conv's W is input_1.pb);
// import_backend_test binds those as constants, as a deployed model's initializers would be, and
// leaves the data inputs to the network. run_backend_test runs a case through any runner (the
// executor, with the plan of the caller's choosing) and compares with the expected outputs at
// ONNX's own tolerances.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "import.hpp"
#include "tensor.hpp"

namespace memfmt::onnx {

struct backend_test_case {
  std::string name;  // the folder's name (test_conv_with_strides_padding)
  std::string dir;
  ::onnx::ModelProto model;
  std::vector<std::pair<std::string, parameter>> inputs;   // named as the graph's inputs, in order
  std::vector<std::pair<std::string, parameter>> outputs;  // expected, named as the graph's outputs
};

// The folder of the suites (node/, pytorch-converted/, ...): $MEMFMT_ONNX_BACKEND_TESTS, else
// Debian's libonnx-testdata folder ("" when neither exists).
inline std::string backend_test_root() {
  if (const char* env = std::getenv("MEMFMT_ONNX_BACKEND_TESTS")) return env;
  const std::string debian = "/usr/share/libonnx-testdata/data";
  return std::filesystem::is_directory(debian) ? debian : std::string();
}

// The test folders under `root` (those holding a model.onnx), sorted by name.
inline std::vector<std::string> list_backend_tests(const std::string& root) {
  std::vector<std::string> r;
  if (!std::filesystem::is_directory(root)) return r;
  for (const auto& e : std::filesystem::directory_iterator(root))
    if (e.is_directory() && std::filesystem::exists(e.path() / "model.onnx")) r.push_back(e.path().string());
  std::sort(r.begin(), r.end());
  return r;
}

inline backend_test_case load_backend_test(const std::string& dir, int data_set = 0) {
  namespace fs = std::filesystem;
  backend_test_case c;
  c.dir = dir;
  c.name = fs::path(dir).filename().string();
  {
    std::ifstream in(fs::path(dir) / "model.onnx", std::ios::binary);
    if (!in) memfmt::detail::fail(errc::invalid_argument, "backend test '" + dir + "' has no model.onnx");
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!c.model.ParseFromString(bytes))
      memfmt::detail::fail(errc::invalid_argument, "backend test '" + c.name + "': model.onnx is not a ModelProto");
  }
  const fs::path data = fs::path(dir) / ("test_data_set_" + std::to_string(data_set));
  std::set<std::string> initializers;
  for (const auto& t : c.model.graph().initializer()) initializers.insert(t.name());
  // input_K.pb holds the K-th graph input that is not an initializer.
  int k = 0;
  for (const auto& in : c.model.graph().input()) {
    if (initializers.count(in.name())) continue;
    if (!in.type().has_tensor_type())
      memfmt::detail::fail(errc::unsupported, "backend test '" + c.name + "': input '" + in.name() +
                                                  "' is a sequence, map or optional, not a tensor");
    const fs::path f = data / ("input_" + std::to_string(k++) + ".pb");
    if (!fs::exists(f)) continue;  // an optional input left out
    c.inputs.emplace_back(in.name(), to_parameter(read_tensor_proto(f.string()), c.name + " " + f.filename().string()));
  }
  k = 0;
  for (const auto& out : c.model.graph().output()) {
    if (!out.type().has_tensor_type())
      memfmt::detail::fail(errc::unsupported, "backend test '" + c.name + "': output '" + out.name() +
                                                  "' is a sequence, map or optional, not a tensor");
    const fs::path f = data / ("output_" + std::to_string(k++) + ".pb");
    if (!fs::exists(f))
      memfmt::detail::fail(errc::invalid_argument, "backend test '" + c.name + "' lacks " + f.string());
    c.outputs.emplace_back(out.name(),
                           to_parameter(read_tensor_proto(f.string()), c.name + " " + f.filename().string()));
  }
  return c;
}

// An imported test case: the model, and the inputs the network takes (the rest became constants).
struct backend_import {
  imported_model model;
  std::map<std::string, parameter> feeds;
};

inline backend_import import_backend_test(const backend_test_case& c, import_options options = {}) {
  const std::set<std::string> weights = parameter_inputs(c.model);
  backend_import r;
  for (const auto& [name, value] : c.inputs) {
    if (weights.count(name)) options.input_values[name] = value;
    else r.feeds[name] = value;
  }
  // The test's data fixes the symbolic dims.
  for (const auto& in : c.model.graph().input())
    if (r.feeds.count(in.name()) && in.type().has_tensor_type())
      for (int d = 0; d < in.type().tensor_type().shape().dim_size(); ++d) {
        const auto& dim = in.type().tensor_type().shape().dim(d);
        const auto& shape = r.feeds.at(in.name()).shape;
        if (dim.has_dim_param() && static_cast<std::size_t>(d) < shape.size())
          options.dims[dim.dim_param()] = shape[static_cast<std::size_t>(d)];
      }
  r.model = import_model(c.model, options);
  return r;
}

// numpy.testing.assert_allclose's rule, which ONNX's backend runner applies with rtol 1e-3 and
// atol 1e-7: |actual - expected| <= atol + rtol * |expected|, NaN matching NaN.
struct tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

// "" when `actual` matches `expected`; otherwise what differs (dtype, shape or the first element out
// of tolerance, with how many are).
inline std::string compare_outputs(const parameter& expected, const parameter& actual, tolerance tol = {}) {
  if (expected.type != actual.type || expected.shape != actual.shape)
    return "expected " + graph::describe(expected.type, expected.shape) + ", got " +
           graph::describe(actual.type, actual.shape);
  const std::size_t n = expected.bytes.size() / memfmt::size_of(expected.type);
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = element_as_double(expected, i), a = element_as_double(actual, i);
    const bool ok = (std::isnan(e) && std::isnan(a)) || std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e);
    if (!ok && bad++ == 0) first = i;
  }
  if (!bad) return "";
  return std::to_string(bad) + " of " + std::to_string(n) + " elements differ; first at " + std::to_string(first) +
         ": expected " + std::to_string(element_as_double(expected, first)) + ", got " +
         std::to_string(element_as_double(actual, first));
}

// Computes the graph outputs (by name) of an imported model from its feeds. Feeds and outputs have
// the model's shapes: a 1-D net's [N, C, L], which the network holds as [N, C, 1, L] (same bytes).
using backend_runner = std::function<std::map<std::string, parameter>(const imported_model&,
                                                                      const std::map<std::string, parameter>& feeds)>;

struct backend_result {
  bool passed = false;
  std::string detail;  // why not
};

// Runs a runnable imported case and compares every output.
inline backend_result run_backend_test(const backend_test_case& c, const backend_import& imported,
                                       const backend_runner& run, tolerance tol = {}) {
  if (!imported.model.runnable())
    return {false, "unsupported op " + imported.model.unsupported.front().op + " (node '" +
                       imported.model.unsupported.front().onnx_node + "')"};
  const auto outputs = run(imported.model, imported.feeds);
  for (const auto& [name, expected] : c.outputs) {
    const auto it = outputs.find(name);
    if (it == outputs.end()) return {false, "output '" + name + "' was not produced"};
    const std::string why = compare_outputs(expected, it->second, tol);
    if (!why.empty()) return {false, "output '" + name + "': " + why};
  }
  return {true, ""};
}

}  // namespace memfmt::onnx
