#include "model_file.hpp"

#include <filesystem>
#include <functional>
#include <ostream>
#include <utility>

#include "memfmt/error.hpp"

#ifdef MEMFMT_CLI_HAVE_GRAPH_IO
#include "memfmt/io/network_json.hpp"
#endif
#ifdef MEMFMT_CLI_HAVE_ONNX
#include "memfmt/onnx/import.hpp"
#endif

namespace memfmt_cli {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

[[noreturn, maybe_unused]] void missing_component(const std::string& what, const char* component, const char* debian) {
  memfmt::detail::fail(memfmt::errc::unsupported,
                       what + " needs the " + component +
                           " component, which this build of memfmt lacks (Debian: " + debian + ", then reconfigure)");
}

#ifdef MEMFMT_CLI_HAVE_GRAPH_IO
// The network rebuilt from its own JSON document after `edit` changed every node: the builders
// check the edited layers as they check a file, so an edit that breaks a layer is an error naming it.
memfmt::graph::network rebuilt(const memfmt::graph::network& net,
                               const std::function<void(nlohmann::json& node)>& edit) {
  nlohmann::json j = memfmt::io::network_to_json(net);
  for (nlohmann::json& n : j.at("nodes")) edit(n);
  return memfmt::io::network_from_json(j);
}
#endif

}  // namespace

int exit_code_of(const CLI::App& command, std::ostream& err, const std::function<int()>& body) {
  const std::string who = "memfmt " + command.get_name() + ": ";
  try {
    return body();
  } catch (const usage_error& e) {
    err << who << e.message << "\n\n" << command.help();
    return 2;
  } catch (const memfmt::error& e) {
    err << who << e.what() << '\n';
    return 1;
  }
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  const bool same = std::filesystem::equivalent(a, b, ec);
  return !ec && same;
}

memfmt::graph::policy parse_policy_argument(const std::string& name) {
  try {
    return memfmt::graph::parse_policy(name);
  } catch (const memfmt::error& e) {
    throw usage_error{std::string("--policy: ") + e.what()};
  }
}

memfmt::dtype parse_float_dtype(const std::string& name) {
  for (memfmt::dtype t : {memfmt::dtype::float32, memfmt::dtype::bfloat16, memfmt::dtype::float16})
    if (name == memfmt::to_string(t)) return t;
  throw usage_error{"--dtype: '" + name + "' is not one of float32, bfloat16, float16"};
}

std::string unsupported_lines(const model_file& m, const std::string& indent, std::size_t shown) {
  std::string text;
  for (std::size_t i = 0; i < m.unsupported.size() && i < shown; ++i) {
    const memfmt::onnx::unsupported_node& b = m.unsupported[i];
    text += indent + "op '" + b.op + "' (ONNX node '" + b.onnx_node + "'): " + b.reason + '\n';
  }
  if (m.unsupported.size() > shown)
    text += indent + "... and " + std::to_string(m.unsupported.size() - shown) + " more ONNX nodes\n";
  return text;
}

model_file load_model(const std::string& path, std::optional<std::int64_t> batch) {
  if (batch && *batch <= 0) throw usage_error{"--batch: " + std::to_string(*batch) + " must be positive"};
  model_file m;
  if (ends_with(path, ".onnx")) {
    m.kind = "ONNX model";
#ifdef MEMFMT_CLI_HAVE_ONNX
    memfmt::onnx::import_options o;
    if (batch) o.batch = *batch;
    memfmt::onnx::imported_model im = memfmt::onnx::import_file(path, o);
    if (batch)
      for (const auto& in : im.inputs)
        if (!in.shape.empty() && in.shape[0] != *batch)
          memfmt::detail::fail(memfmt::errc::invalid_argument,
                               path + ": graph input '" + in.name + "' has a fixed batch of " +
                                   std::to_string(in.shape[0]) + " " + memfmt::detail::dims_to_string(in.shape) +
                                   "; --batch " + std::to_string(*batch) + " applies to a symbolic batch only");
    m.network = std::move(im.network);
    m.parameters = std::move(im.parameters);
    m.unsupported = std::move(im.unsupported);
    return m;
#else
    missing_component("reading ONNX model '" + path + "'", "memfmt::onnx", "libonnx-dev libprotobuf-dev");
#endif
  }
  m.kind = "network JSON";
#ifdef MEMFMT_CLI_HAVE_GRAPH_IO
  m.network = memfmt::io::read_network_file(path);
  bool has_output = false;
  for (const memfmt::graph::node& n : m.network.nodes())
    has_output = has_output || n.kind == memfmt::layer_kind::output;
  if (!has_output)
    memfmt::detail::fail(memfmt::errc::invalid_argument, path + ": the network has no output node (" +
                                                             std::to_string(m.network.size()) +
                                                             " nodes): nothing to plan or run");
  if (batch)
    m.network = rebuilt(m.network, [&](nlohmann::json& n) {
      // Every value's first extent is the batch (4-D/5-D activations and [N, features] alike).
      auto& e = n.at("extents");
      if (!e.empty()) e[0] = *batch;
    });
  return m;
#else
  missing_component("reading network file '" + path + "'", "memfmt::graph_io", "nlohmann-json3-dev");
#endif
}

}  // namespace memfmt_cli
