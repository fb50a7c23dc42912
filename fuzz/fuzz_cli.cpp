// Fuzz target: the memfmt command line, in process (tools/memfmt/cli.hpp). Properties: the exit code
// is 0, 1 or 2, never 3 (an internal error); an answer asked for with --json is one JSON document;
// exit 1 names whose limit it is (PyTorch's error or memfmt's); exit 2 says what was wrong.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "fuzz_check.hpp"

namespace {

using memfmt_fuzz::require;

const char* const words[] = {"explain", "pointwise", "conv",     "batch_norm", "--sizes",   "--strides",  "--a",
                             "--b",     "--input",   "--weight", "--stride",   "--padding", "--dilation", "--groups",
                             "--dtype", "--json",    "--help",   "float32",    "float64",   "int8",       "@",
                             "",        "-",         "--",       "=",          ","};
const char* const numbers[] = {"0",
                               "1",
                               "2",
                               "3",
                               "4",
                               "7",
                               "8",
                               "16",
                               "-1",
                               "4611686018427387904",
                               "9223372036854775807",
                               "9223372036854775808",
                               "-9223372036854775808",
                               "99999999999999999999",
                               "0x10",
                               "1e3",
                               " 1",
                               "+1",
                               "1.5"};

// A list of numbers ("2,3,4,5"), sometimes with an @ and strides: the shape of most arguments.
std::string number_list(FuzzedDataProvider& in) {
  std::string s;
  const int n = in.ConsumeIntegralInRange<int>(0, 6);
  for (int i = 0; i < n; ++i) {
    if (i) s += ',';
    s += in.ConsumeIntegralInRange<int>(0, 3) == 0 ? in.PickValueInArray(numbers)
                                                   : std::to_string(in.ConsumeIntegralInRange<int>(0, 9));
  }
  return s;
}

std::string argument(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
    case 1:
    case 2:
    case 3: return in.PickValueInArray(words);
    case 4:
    case 5: return number_list(in);
    case 6:
    case 7: return number_list(in) + "@" + number_list(in);
    default: return in.ConsumeRandomLengthString(64);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  std::vector<std::string> args{"memfmt"};
  if (in.ConsumeIntegralInRange<int>(0, 7) != 0) args.push_back("explain");
  const int count = in.ConsumeIntegralInRange<int>(0, 12);
  for (int i = 0; i < count; ++i) args.push_back(argument(in));
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);

  std::ostringstream out, err;
  const int code = memfmt_cli::run(static_cast<int>(args.size()), argv.data(), out, err);
  std::string line;
  for (const auto& a : args) line += " '" + a + "'";
  require(code == 0 || code == 1 || code == 2,
          "exit code " + std::to_string(code) + " for" + line + "\nstderr: " + err.str());
  bool as_json = false;
  for (const auto& a : args) as_json = as_json || a == "--json";
  // Help comes from CLI11 for -h, --help and short-flag groups that contain h: its text has a usage.
  const bool help = code == 0 && out.str().find("Usage:") != std::string::npos;
  if (code == 2) require(err.str().rfind("memfmt: ", 0) == 0, "exit 2 without a reason for" + line);
  if (help || code == 2) return 0;
  if (as_json) {
    const auto j = nlohmann::json::parse(out.str(), nullptr, false);
    require(!j.is_discarded(), "--json printed no JSON for" + line + ": " + out.str());
    if (code == 1) require(j.contains("error") && j.contains("error_source"), "exit 1 JSON without its reason" + line);
  } else if (code == 1) {
    const std::string o = out.str();
    require(o.find("PyTorch raises: ") != std::string::npos ||
                o.find("past memfmt's limits (not a PyTorch error): ") != std::string::npos,
            "exit 1 without saying whose error it is for" + line + ": " + o);
  }
  return 0;
}
