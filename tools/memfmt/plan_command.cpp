#include "plan_command.hpp"

#include <filesystem>
#include <fstream>
#include <ostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memfmt/error.hpp"
#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/explain.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/graph/report.hpp"
#include "calibration_headers.hpp"
#include "model_file.hpp"

#ifdef MEMFMT_CLI_HAVE_GRAPH_IO
#include "memfmt/io/plan_json.hpp"
#include "memfmt/io/priors_json.hpp"
#endif

namespace memfmt_cli {

namespace {

using json = nlohmann::ordered_json;

std::string policy_names() {
  std::string s;
  for (auto p : memfmt::graph::all_policies) s += std::string(s.empty() ? "" : ", ") + to_string(p);
  return s;
}

json compare_json(const memfmt::graph::network& net, const std::vector<memfmt::graph::policy_summary>& rows) {
  json out = json::array();
  for (const auto& s : rows) {
    json lost = json::array();
    for (auto id : s.lost) lost.push_back(net.at(id).name);
    out.push_back({{"policy", to_string(s.which)},
                   {"conversions", s.result.copies()},
                   {"relabels", s.result.relabels()},
                   {"bytes_moved", s.bytes_moved},
                   {"estimated_ns", s.result.total()},
                   {"lose_channels_last", lost}});
  }
  return out;
}

// m.unsupported as JSON objects {"op", "onnx_node", "node" (null where no network node), "reason"}:
// the machine-readable twin of unsupported_lines(), every entry.
template <class Json>
Json barriers_json(const model_file& m) {
  Json out = Json::array();
  for (const memfmt::onnx::unsupported_node& b : m.unsupported)
    out.push_back(Json{{"op", b.op},
                       {"onnx_node", b.onnx_node},
                       {"node", b.node.empty() ? Json(nullptr) : Json(b.node)},
                       {"reason", b.reason}});
  return out;
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) memfmt::detail::fail(memfmt::errc::invalid_argument, "--dot: '" + path + "' cannot be written");
}

#ifdef MEMFMT_CLI_HAVE_GRAPH_IO
// Whose measurements calibrating on `backend` here gives; an error for a backend this build
// cannot calibrate on, and for cuDNN without a CUDA device.
memfmt::graph::cache_key key_for(const std::string& backend) {
  if (backend == "reference") return calibration_key(memfmt::reference::backend{});
#ifdef MEMFMT_CLI_HAVE_ONEDNN
  if (backend == "onednn") return calibration_key(memfmt::onednn::backend{});
#endif
#ifdef MEMFMT_CLI_HAVE_CUDNN
  if (backend == "cudnn") {
    try {
      return memfmt::cudnn::device_calibration_key();
    } catch (const memfmt::error& e) {
      memfmt::detail::fail(e.code(), "--calibrate cudnn: " + std::string(e.what()) +
                                         "; without a GPU, plan for cuDNN with --priors data/priors/cudnn_gpu.json");
    }
  }
#endif
  memfmt::detail::fail(
      memfmt::errc::unsupported,
      "--calibrate " + backend + ": this build of memfmt cannot calibrate on " + backend +
          (backend == "onednn"  ? " (built without oneDNN, the memfmt::onednn component)"
           : backend == "cudnn" ? " (built without cuDNN, the memfmt::cudnn component; for cuDNN's costs plan with "
                                  "--priors data/priors/cudnn_gpu.json)"
                                : "") +
          "; use --calibrate reference" +
#ifdef MEMFMT_CLI_HAVE_ONEDNN
          " or --calibrate onednn"
#else
          ""
#endif
  );
}

memfmt::graph::timing_cache calibrate_on(const std::string& backend, const memfmt::graph::network& net,
                                         const memfmt::runtime::calibrate_options& o) {
#ifdef MEMFMT_CLI_HAVE_ONEDNN
  if (backend == "onednn") {
    memfmt::onednn::backend b;
    return memfmt::runtime::calibrate(net, b, o);
  }
#endif
#ifdef MEMFMT_CLI_HAVE_CUDNN
  if (backend == "cudnn") {
    memfmt::cudnn::backend b(cudnn_options());
    return memfmt::runtime::calibrate(net, b, o);
  }
#endif
  key_for(backend);  // refuses what this build cannot calibrate on
  memfmt::reference::backend b;
  return memfmt::runtime::calibrate(net, b, o);
}

// --cache and --calibrate: the cache file when it exists (it must be this device's and backend's),
// then whatever --calibrate still has to time, saved back to the file. A summary goes to `err`.
memfmt::graph::timing_cache measured_costs(const memfmt::graph::network& net, const std::string& backend,
                                           const std::string& cache_path, std::ostream& err) {
  namespace fs = std::filesystem;
  const bool have_file = !cache_path.empty() && fs::exists(cache_path);
  if (backend.empty()) {
    if (!have_file)
      memfmt::detail::fail(
          memfmt::errc::invalid_argument,
          "--cache '" + cache_path + "' does not exist; add --calibrate BACKEND to measure and create it");
    memfmt::graph::timing_cache c = memfmt::io::read_timing_cache_file(cache_path);
    c.require_key(key_for(c.key().backend), "timing cache file '" + cache_path + "'");
    err << "memfmt plan: " << c.layers().size() << " layer signatures and " << c.conversions().size()
        << " conversions measured on " << to_string(c.key()) << " (from " << cache_path << ")\n";
    return c;
  }
  const memfmt::graph::cache_key key = key_for(backend);
  std::optional<memfmt::graph::timing_cache> known;
  if (have_file) known = memfmt::io::read_timing_cache_file(cache_path, key);
  std::vector<std::string> skipped;
  memfmt::runtime::calibrate_options o;
  o.known = known ? &*known : nullptr;
  o.skipped = &skipped;
  memfmt::graph::timing_cache c = calibrate_on(backend, net, o);
  const std::size_t before = known ? known->layers().size() : 0;
  err << "memfmt plan: calibrated on " << to_string(key) << ": " << c.layers().size() - before
      << " layer signatures timed, " << before << " from the cache, " << c.conversions().size()
      << " conversion shapes; " << skipped.size() << " signatures keep their priors\n";
  for (const std::string& s : skipped) err << "  prior kept: " << s << '\n';
  if (!cache_path.empty()) {
    memfmt::io::write_timing_cache_file(cache_path, c);
    err << "memfmt plan: timing cache written to " << cache_path << '\n';
  }
  return c;
}
#endif

}  // namespace

plan_command::plan_command(CLI::App& app) {
  cmd_ = app.add_subcommand("plan", "the memory-format plan of a network (memfmt.network JSON or ONNX model)");
  cmd_->add_option("network", network_path_, "NETWORK.json (memfmt.network) or MODEL.onnx")->required();
  auto* policy = cmd_->add_option("--policy", policy_, "one of " + policy_names() + " (default optimal)");
  cmd_->add_flag("--compare", compare_, "every policy side by side: conversions, bytes moved, estimated time")
      ->excludes(policy);
  cmd_->add_option("--calibrate", calibrate_, "time the layers on this backend before planning")
      ->check(CLI::IsMember({"onednn", "reference", "cudnn"}));
  cmd_->add_option("--cache", cache_,
                   "timing cache file: loaded when present (it must be this device's), "
                   "updated with what --calibrate measures");
  cmd_->add_option("--priors", priors_,
                   "prior table (memfmt.priors JSON, e.g. data/priors/cudnn_gpu.json) for "
                   "what is not measured; default the compiled-in oneDNN CPU table");
  cmd_->add_flag("--json", json_, "print JSON (the memfmt.plan document, or the comparison rows)");
  cmd_->add_option("--dot", dot_path_, "write the plan (the --policy one; optimal with --compare) as Graphviz DOT");
}

int plan_command::run(std::ostream& out, std::ostream& err) const {
  return exit_code_of(*cmd_, err, [&] {
    const memfmt::graph::policy which = parse_policy_argument(policy_);
    for (const std::string* written : {&dot_path_, &cache_})
      if (!written->empty() && same_file(*written, network_path_))
        throw usage_error{(written == &dot_path_ ? "--dot " : "--cache ") + *written + " is the network file (" +
                          network_path_ + "): writing it would overwrite it"};
    const model_file m = load_model(network_path_, std::nullopt);
    const memfmt::graph::network& net = m.network;
    memfmt::graph::cost_model model;
    if (!calibrate_.empty() || !cache_.empty() || !priors_.empty()) {
#ifdef MEMFMT_CLI_HAVE_GRAPH_IO
      if (!priors_.empty()) model = memfmt::graph::cost_model(memfmt::io::read_priors_file(priors_));
      if (!calibrate_.empty() || !cache_.empty()) model.set_timing_cache(measured_costs(net, calibrate_, cache_, err));
#else
      memfmt::detail::fail(memfmt::errc::unsupported,
                           "--calibrate, --cache and --priors need the memfmt::graph_io component (JSON files), which "
                           "this build of memfmt lacks");
#endif
    }
    const memfmt::graph::plan p = memfmt::graph::plan_with(net, model, which);
    if (!dot_path_.empty())
      write_text_file(dot_path_, memfmt::graph::to_dot(net, p, network_path_ + ", " + to_string(which)));

    if (compare_) {
      const auto rows = memfmt::graph::compare_policies(net, model);
      if (json_) {
        out << json{{"network", network_path_},
                    {"policies", compare_json(net, rows)},
                    {"opaque_barriers", barriers_json<json>(m)}}
                   .dump(1)
            << '\n';
      } else {
        out << "network " << network_path_ << " (" << m.kind << ", " << net.size() << " layers)\n"
            << memfmt::graph::compare_text(net, rows);
      }
    } else if (json_) {
#ifdef MEMFMT_CLI_HAVE_GRAPH_IO
      nlohmann::json doc = memfmt::io::plan_to_json(net, model, p, to_string(which));
      doc["opaque_barriers"] = barriers_json<nlohmann::json>(m);
      out << doc.dump(1) << '\n';
#else
      memfmt::detail::fail(memfmt::errc::unsupported,
                           "--json needs the memfmt::graph_io component, which this build of memfmt lacks");
#endif
    } else {
      out << "network " << network_path_ << " (" << m.kind << ", " << net.size() << " layers), policy "
          << to_string(which) << '\n'
          << memfmt::graph::explain(net, model, p);
    }
    if (!m.unsupported.empty() && !json_) {
      out << "opaque barriers (planned around, not runnable):\n" << unsupported_lines(m, "  ");
    }
    return 0;
  });
}

}  // namespace memfmt_cli
