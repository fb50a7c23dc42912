// memfmt - ask what PyTorch 1.13 would do with a strided tensor.
//
//   memfmt explain --sizes 2,1,4,5 --strides 20,20,5,1 [--json]
//   memfmt explain pointwise --a 2,3@3,1 --b @ [--json]
//   memfmt explain conv --input SIZES@STRIDES --weight SIZES@STRIDES [--stride 1,1] [--padding 0,0]
//                       [--dilation 1,1] [--groups 1] [--dtype float32|float64] [--json]
//   memfmt explain batch_norm --input SIZES@STRIDES [--json]
//   memfmt plan NETWORK.json|MODEL.onnx ...  (plan_command.hpp)
//   memfmt run MODEL.onnx|NETWORK.json ...   (run_command.hpp)
//
// Exit codes: 0 answered (PyTorch errors for a format request are part of the answer), 1 the
// operation itself has no answer: PyTorch rejects it, or it is past memfmt's limits (sizes whose
// strides or element count do not fit in 64 bits); the message says which. 2 bad arguments.
#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdint>
#include <exception>
#include <ostream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "memfmt/error.hpp"
#include "memfmt/format/memory_format.hpp"
#include "memfmt/strided/classify.hpp"
#include "memfmt/strided/descriptor.hpp"
#include "memfmt/strided/format_requests.hpp"
#include "memfmt/strided/op_rules.hpp"
#include "plan_command.hpp"
#include "run_command.hpp"

namespace memfmt_cli {
namespace {

using json = nlohmann::ordered_json;  // keeps keys in the documented order
using dims = std::vector<std::int64_t>;

// A malformed command line: reported with the usage text, exit code 2.
struct usage_error {
  std::string message;
};

// memfmt's own limit on a tensor's rank: the rules sort dimensions (quadratic in the rank), so the
// work a command line asks for stays small; real tensors have far fewer.
constexpr std::size_t max_dims = 64;

// One decimal integer in [-2^63, 2^63); `item` is quoted in the message as part of `text`.
std::int64_t parse_int(const std::string& item, const std::string& text, const std::string& what) {
  std::int64_t v = 0;
  const char* first = item.data();
  const char* last = item.data() + item.size();
  const auto [ptr, ec] = std::from_chars(first, last, v);
  const std::string where = "'" + item + "'" + (item == text ? std::string() : " in '" + text + "'");
  if (ec == std::errc::result_out_of_range) throw usage_error{what + ": " + where + " does not fit in 64 bits"};
  if (item.empty() || ec != std::errc() || ptr != last)
    throw usage_error{what + ": " + where + " is not a decimal integer"};
  return v;
}

// "2,1,4,5" -> {2, 1, 4, 5}; "" -> {} (a 0-dim tensor). Every item must be a decimal integer.
dims parse_dims(const std::string& text, const std::string& what) {
  dims out;
  if (text.empty()) return out;
  std::size_t pos = 0;
  while (true) {
    const auto comma = text.find(',', pos);
    if (out.size() == max_dims)
      throw usage_error{what + ": more than " + std::to_string(max_dims) + " values in '" + text +
                        "' (memfmt's limit on dimensions)"};
    out.push_back(
        parse_int(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos), text, what));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// A positive integer option (--groups): parsed like --sizes, then checked for its range.
std::int64_t parse_positive(const std::string& text, const std::string& what) {
  const std::int64_t v = parse_int(text, text, what);
  if (v <= 0) throw usage_error{what + ": '" + text + "' is not a positive integer"};
  return v;
}

// Who says no: PyTorch (the rules replay its checks and messages), or memfmt, whose own limit is
// 64-bit sizes, strides and element counts (and the dtypes it models).
bool is_memfmt_limit(const memfmt::error& e) {
  return e.code() == memfmt::errc::overflow || e.code() == memfmt::errc::unsupported_dtype;
}
const char* error_source(const memfmt::error& e) { return is_memfmt_limit(e) ? "memfmt" : "pytorch"; }
std::string error_label(const memfmt::error& e) {
  return is_memfmt_limit(e) ? "past memfmt's limits (not a PyTorch error): " : "PyTorch raises: ";
}

memfmt::strided_desc make_desc(dims sizes, dims strides, const std::string& what) {
  if (sizes.size() != strides.size())
    throw usage_error{what + ": sizes " + memfmt::detail::dims_to_string(sizes) + " and strides " +
                      memfmt::detail::dims_to_string(strides) + " differ in length"};
  for (auto s : sizes)
    if (s < 0) throw usage_error{what + ": negative size in sizes " + memfmt::detail::dims_to_string(sizes)};
  for (auto s : strides)
    if (s < 0)
      throw usage_error{what + ": negative stride in strides " + memfmt::detail::dims_to_string(strides) +
                        " (PyTorch cannot build such a tensor)"};
  return memfmt::strided_desc{std::move(sizes), std::move(strides)};
}

// "2,3@3,1" -> sizes [2, 3], strides [3, 1]; "@" -> a 0-dim tensor.
memfmt::strided_desc parse_tensor(const std::string& text, const std::string& what) {
  const auto at = text.find('@');
  if (at == std::string::npos || text.find('@', at + 1) != std::string::npos)
    throw usage_error{what + ": expected SIZES@STRIDES (e.g. 2,3@3,1, or @ for a 0-dim tensor), got '" + text + "'"};
  return make_desc(parse_dims(text.substr(0, at), what + " sizes"), parse_dims(text.substr(at + 1), what + " strides"),
                   what);
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

// A format request's result: {"alias","sizes","strides"}, or {"error","error_source"} where
// error_source is "pytorch" (PyTorch raises this) or "memfmt" (past memfmt's limits).
template <class F>
json request_json(F&& request) {
  try {
    const memfmt::format_result r = request();
    return json{{"alias", r.alias}, {"sizes", r.sizes}, {"strides", r.strides}};
  } catch (const memfmt::error& e) {
    return json{{"error", e.what()}, {"error_source", error_source(e)}};
  }
}

json explain_json(const memfmt::strided_desc& t) {
  using memfmt::memory_format;
  json j;
  j["is_contiguous"] = memfmt::is_contiguous(t);
  j["is_contiguous_channels_last"] = memfmt::is_contiguous(t, memory_format::channels_last);
  j["is_contiguous_channels_last_3d"] = memfmt::is_contiguous(t, memory_format::channels_last_3d);
  j["non_overlapping_and_dense"] = memfmt::is_non_overlapping_and_dense(t);
  j["suggest"] = std::string(to_string(memfmt::suggest_memory_format(t)));
  json to, contiguous, empty_like;
  for (auto f : memfmt::all_memory_formats) {
    const std::string name(to_string(f));
    to[name] = request_json([&] { return memfmt::to_format(t, f); });
    contiguous[name] = request_json([&] { return memfmt::contiguous_format(t, f); });
    empty_like[name] = request_json([&] {
      return memfmt::format_result{false, t.sizes, memfmt::empty_like_strides(t, f)};
    });
  }
  j["to"] = to;
  j["contiguous"] = contiguous;
  j["empty_like"] = empty_like;
  return j;
}

std::string describe_request(const json& r) {
  if (r.contains("error"))
    return (r["error_source"] == "memfmt" ? "past memfmt's limits: " : "PyTorch raises: ") +
           r["error"].get<std::string>();
  const auto strides = memfmt::detail::dims_to_string(r["strides"].get<dims>());
  return r["alias"].get<bool>() ? "returns x itself" : "new tensor, strides " + strides;
}

// Why .to and .contiguous disagree, or why a layout is surprising, in a person's words.
std::vector<std::string> notes_for(const memfmt::strided_desc& t, const json& j) {
  std::vector<std::string> notes;
  const bool cl_contig = j["is_contiguous_channels_last"].get<bool>();
  const auto suggest = j["suggest"].get<std::string>();
  if (t.dim() == 4) {
    std::vector<std::string> why;
    if (t.sizes[1] == 1) why.push_back("C == 1");
    if (t.sizes[2] == 1 && t.sizes[3] == 1) why.push_back("H == W == 1");
    if (memfmt::detail::has_zero_size(t)) why.push_back("the tensor is empty");
    std::string reason = why.empty() ? "size-1 dimensions" : why[0];
    for (std::size_t i = 1; i < why.size(); ++i) reason += " and " + why[i];
    if (cl_contig && suggest != "channels_last")
      notes.push_back("ambiguous: " + reason +
                      ", so .to(channels_last) copies while .contiguous(channels_last) aliases");
    if (cl_contig && j["is_contiguous"].get<bool>() && suggest == "channels_last")
      notes.push_back("ambiguous: " + reason + ", so .contiguous() aliases while .to(contiguous_format) copies");
    if (suggest == "channels_last" && !cl_contig)
      notes.push_back(
          "strided like channels last but not dense: .to(channels_last) aliases while "
          ".contiguous(channels_last) copies");
    if (t.strides[1] == 0) notes.push_back("C has stride 0 (broadcast): PyTorch never calls that channels last");
  }
  if (t.dim() == 5 && suggest == "channels_last_3d" && !j["is_contiguous_channels_last_3d"].get<bool>())
    notes.push_back(
        "strided like channels_last_3d but not dense: .to(channels_last_3d) aliases while "
        ".contiguous(channels_last_3d) copies");
  const json& preserve = j["empty_like"]["preserve"];
  if (!j["non_overlapping_and_dense"].get<bool>() && preserve.contains("strides"))
    notes.push_back("overlapping or with gaps: empty_like/clone(preserve) infer dense strides " +
                    memfmt::detail::dims_to_string(preserve["strides"].get<dims>()) + " in the same dimension order");
  return notes;
}

void print_explain(const memfmt::strided_desc& t, bool as_json, std::ostream& out) {
  const json j = explain_json(t);
  if (as_json) {
    out << j.dump() << '\n';
    return;
  }
  out << "tensor sizes " << memfmt::detail::dims_to_string(t.sizes) << " strides "
      << memfmt::detail::dims_to_string(t.strides) << '\n'
      << "  contiguous: " << yes_no(j["is_contiguous"].get<bool>())
      << "; channels last: " << yes_no(j["is_contiguous_channels_last"].get<bool>())
      << "; channels last 3d: " << yes_no(j["is_contiguous_channels_last_3d"].get<bool>())
      << "; non-overlapping and dense: " << yes_no(j["non_overlapping_and_dense"].get<bool>()) << '\n'
      << "  suggested memory format: " << j["suggest"].get<std::string>() << '\n';
  for (const auto& note : notes_for(t, j)) out << "  note: " << note << '\n';
  for (auto f : memfmt::all_memory_formats) {
    const std::string name(to_string(f));
    out << "  memory_format=" << name << ":\n"
        << "    .to          " << describe_request(j["to"][name]) << '\n'
        << "    .contiguous  " << describe_request(j["contiguous"][name]) << '\n'
        << "    empty_like   " << describe_request(j["empty_like"][name]) << '\n';
  }
}

// Prints an operation's output, or why it has none (exit code 1).
template <class F>
int print_op(const char* what, bool as_json, std::ostream& os, F&& op) {
  try {
    const memfmt::strided_desc out = op();
    if (as_json) {
      os << json{{"output", json{{"sizes", out.sizes}, {"strides", out.strides}}}}.dump() << '\n';
    } else {
      os << what << " output: sizes " << memfmt::detail::dims_to_string(out.sizes) << " strides "
         << memfmt::detail::dims_to_string(out.strides) << " (suggests "
         << to_string(memfmt::suggest_memory_format(out)) << ")\n";
    }
    return 0;
  } catch (const memfmt::error& e) {
    if (as_json) os << json{{"error", e.what()}, {"error_source", error_source(e)}}.dump() << '\n';
    else os << what << ": " << error_label(e) << e.what() << '\n';
    return 1;
  }
}

int run_checked(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"memfmt: what PyTorch 1.13 does with a strided tensor's memory format", "memfmt"};
  app.require_subcommand(1);
  auto* explain = app.add_subcommand("explain", "classify a tensor, or the output layout of an operation");
  std::string sizes_text, strides_text;
  bool explain_json_flag = false;
  auto* sizes_opt = explain->add_option("--sizes", sizes_text, "sizes, e.g. 2,1,4,5 (empty for 0-dim)");
  auto* strides_opt = explain->add_option("--strides", strides_text, "strides in elements, e.g. 20,20,5,1");
  explain->add_flag("--json", explain_json_flag, "print JSON");
  explain->require_subcommand(0, 1);

  bool op_json = false;
  auto* pointwise = explain->add_subcommand("pointwise", "a + b (TensorIterator output strides)");
  std::string a_text, b_text;
  pointwise->add_option("--a", a_text, "SIZES@STRIDES, @ alone for a 0-dim tensor")->required();
  pointwise->add_option("--b", b_text, "SIZES@STRIDES, @ alone for a 0-dim tensor")->required();
  pointwise->add_flag("--json", op_json, "print JSON");

  auto* conv = explain->add_subcommand("conv", "F.conv{1,2,3}d on CPU (no bias)");
  std::string input_text, weight_text, stride_text = "1", padding_text = "0", dilation_text = "1",
                                       dtype_text = "float32";
  std::string groups_text = "1";
  conv->add_option("--input", input_text, "SIZES@STRIDES")->required();
  conv->add_option("--weight", weight_text, "SIZES@STRIDES")->required();
  conv->add_option("--stride", stride_text, "e.g. 1,1 (one value applies to every spatial dim)");
  conv->add_option("--padding", padding_text, "e.g. 0,0");
  conv->add_option("--dilation", dilation_text, "e.g. 1,1");
  conv->add_option("--groups", groups_text, "a positive integer (default 1)");
  conv->add_option("--dtype", dtype_text, "float32 or float64")->check(CLI::IsMember({"float32", "float64"}));
  conv->add_flag("--json", op_json, "print JSON");

  auto* batch_norm = explain->add_subcommand("batch_norm", "F.batch_norm in eval mode, affine, on CPU");
  std::string bn_input_text;
  batch_norm->add_option("--input", bn_input_text, "SIZES@STRIDES")->required();
  batch_norm->add_flag("--json", op_json, "print JSON");

  const memfmt_cli::plan_command plan(app);
  const memfmt_cli::run_command run_model(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    err << "memfmt: " << e.what() << "\n\n" << app.help();
    return 2;
  }
  if (plan.chosen()) return plan.run(out, err);
  if (run_model.chosen()) return run_model.run(out, err);

  const bool as_json = op_json || explain_json_flag;
  try {
    const bool op_given = *pointwise || *conv || *batch_norm;
    if (op_given && (*sizes_opt || *strides_opt))
      throw usage_error{"explain: --sizes/--strides describe a tensor; operations take their own tensors"};
    if (*pointwise) {
      const auto a = parse_tensor(a_text, "--a");
      const auto b = parse_tensor(b_text, "--b");
      return print_op("a + b", as_json, out, [&] { return memfmt::pointwise_result({a, b}); });
    }
    if (*conv) {
      auto input = parse_tensor(input_text, "--input");
      auto weight = parse_tensor(weight_text, "--weight");
      input.type = weight.type = dtype_text == "float64" ? memfmt::dtype::float64 : memfmt::dtype::float32;
      memfmt::torch_conv_args args;
      args.stride = parse_dims(stride_text, "--stride");
      args.padding = parse_dims(padding_text, "--padding");
      args.dilation = parse_dims(dilation_text, "--dilation");
      args.groups = parse_positive(groups_text, "--groups");
      return print_op("conv", as_json, out, [&] { return memfmt::conv_result(input, weight, args); });
    }
    if (*batch_norm) {
      const auto input = parse_tensor(bn_input_text, "--input");
      return print_op("batch_norm", as_json, out, [&] { return memfmt::batch_norm_result(input); });
    }
    if (!*sizes_opt || !*strides_opt)
      throw usage_error{
          "explain: --sizes and --strides are both required (or name an operation: pointwise, conv, "
          "batch_norm)"};
    const auto t = make_desc(parse_dims(sizes_text, "--sizes"), parse_dims(strides_text, "--strides"), "explain");
    print_explain(t, as_json, out);
    return 0;
  } catch (const usage_error& e) {
    err << "memfmt: " << e.message << "\n\n" << (*explain ? explain->help() : app.help());
    return 2;
  }
}

}  // namespace

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  try {
    return run_checked(argc, argv, out, err);
  } catch (const std::exception& e) {
    // Nothing above should get here (the fuzzer checks it does not); if something does, say so
    // instead of crashing.
    err << "memfmt: internal error: " << e.what() << '\n';
    return 3;
  }
}

}  // namespace memfmt_cli
