// What `memfmt plan` and `memfmt run` share: reading a model file (an ONNX model or a memfmt.network
// JSON document) into a network and resizing its batch, and the usage error
// both report with exit code 2.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>

#include "memfmt/dtype.hpp"
#include "memfmt/graph/network.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/onnx/unsupported_node.hpp"
#include "memfmt/runtime/parameter_store.hpp"

namespace memfmt_cli {

// A malformed command line: the subcommand prints it with its usage text and exits with code 2.
struct usage_error {
  std::string message;
};

struct model_file {
  memfmt::graph::network network;
  // An ONNX model's initializers; a network JSON document carries no weights.
  std::optional<memfmt::graph::parameter_store> parameters;
  std::vector<memfmt::onnx::unsupported_node> unsupported;  // in the ONNX graph's node order
  std::string kind;                                         // "ONNX model" or "network JSON"
};

// The first `shown` entries of m.unsupported, one "op 'X' (ONNX node 'Y'): why" per line after
// `indent`, and how many more there are: a transformer has thousands of such nodes, the first of
// each barrier says why.
std::string unsupported_lines(const model_file& m, const std::string& indent, std::size_t shown = 20);

// Reads `path`: an ONNX model when it ends in ".onnx", a memfmt.network JSON document otherwise.
// `batch` (when given) is the batch of every graph input: an ONNX model's symbolic batch takes it,
// a fixed one must equal it; a network JSON is rebuilt with it. A file that cannot be read, is
// malformed or needs a component this build lacks is a memfmt::error naming the file and the key.
model_file load_model(const std::string& path, std::optional<std::int64_t> batch);

// Runs a subcommand's body and turns its failures into exit codes: a usage_error is printed on `err`
// with the subcommand's usage (exit 2), a memfmt::error with its message (exit 1).
int exit_code_of(const CLI::App& command, std::ostream& err, const std::function<int()>& body);

// Whether paths `a` and `b` name the same existing file (links and relative paths resolved); false
// where either does not exist.
bool same_file(const std::string& a, const std::string& b);

// A check for an integer option of type T that must be positive: the text must be a decimal
// integer that fits in T (CLI11 would otherwise clamp 9223372036854775808 into range silently).
template <class T>
CLI::Validator positive_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        T v{};
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec == std::errc::result_out_of_range)
          return "'" + text + "' does not fit in " + std::to_string(sizeof(T) * 8) + " bits";
        if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
          return "'" + text + "' is not a decimal integer";
        if (v <= 0) return "'" + text + "' is not positive";
        return std::string();
      },
      "POSITIVE");
}

// --policy NAME as a policy; a usage_error listing the names otherwise.
memfmt::graph::policy parse_policy_argument(const std::string& name);

// "float32" -> dtype::float32, for the dtypes the executor runs; a usage_error otherwise.
memfmt::dtype parse_float_dtype(const std::string& name);

}  // namespace memfmt_cli
