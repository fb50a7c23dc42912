#include "plan_command.hpp"

#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "memfmt/error.hpp"
#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/explain.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/graph/report.hpp"
#include "model_file.hpp"

#ifdef MEMFMT_CLI_HAVE_GRAPH_IO
#include "memfmt/io/plan_json.hpp"
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
    out.push_back({{"policy", to_string(s.which)}, {"conversions", s.result.copies()},
                   {"relabels", s.result.relabels()}, {"bytes_moved", s.bytes_moved},
                   {"estimated_ns", s.result.total()}, {"lose_channels_last", lost}});
  }
  return out;
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) memfmt::detail::fail(memfmt::errc::invalid_argument, "--dot: '" + path + "' cannot be written");
}

}  // namespace

plan_command::plan_command(CLI::App& app) {
  cmd_ = app.add_subcommand("plan", "the memory-format plan of a network (memfmt.network JSON or ONNX model)");
  cmd_->add_option("network", network_path_, "NETWORK.json (memfmt.network) or MODEL.onnx")->required();
  auto* policy = cmd_->add_option("--policy", policy_, "one of " + policy_names() + " (default optimal)");
  cmd_->add_flag("--compare", compare_, "every policy side by side: conversions, bytes moved, estimated time")
      ->excludes(policy);
  cmd_->add_option("--calibrate", calibrate_, "time the layers on this backend before planning")
      ->check(CLI::IsMember({"onednn", "cudnn"}));
  cmd_->add_option("--cache", cache_, "timing cache file to load and update");
  cmd_->add_flag("--json", json_, "print JSON (the memfmt.plan document, or the comparison rows)");
  cmd_->add_option("--dot", dot_path_, "write the plan (the --policy one; optimal with --compare) as Graphviz DOT");
}

int plan_command::run() const {
  return exit_code_of(*cmd_, [&] {
    const memfmt::graph::policy which = parse_policy_argument(policy_);
    if (!calibrate_.empty() || !cache_.empty()) {
      std::cerr << "memfmt plan: calibration is not available in this build (--calibrate and --cache need the "
                   "timing-cache support, which this memfmt does not have yet); plan without them to use the "
                   "cost priors\n";
      return 1;
    }
    const model_file m = load_model(network_path_, std::nullopt);
    const memfmt::graph::network& net = m.network;
    const memfmt::graph::cost_model model;
    const memfmt::graph::plan p = memfmt::graph::plan_with(net, model, which);
    if (!dot_path_.empty())
      write_text_file(dot_path_, memfmt::graph::to_dot(net, p, network_path_ + ", " + to_string(which)));

    if (compare_) {
      const auto rows = memfmt::graph::compare_policies(net, model);
      if (json_) {
        std::cout << json{{"network", network_path_}, {"policies", compare_json(net, rows)}}.dump(1) << '\n';
      } else {
        std::cout << "network " << network_path_ << " (" << m.kind << ", " << net.size() << " layers)\n"
                  << memfmt::graph::compare_text(net, rows);
      }
    } else if (json_) {
#ifdef MEMFMT_CLI_HAVE_GRAPH_IO
      std::cout << memfmt::io::plan_to_json(net, model, p, to_string(which)).dump(1) << '\n';
#else
      memfmt::detail::fail(memfmt::errc::unsupported,
                           "--json needs the memfmt::graph_io component, which this build of memfmt lacks");
#endif
    } else {
      std::cout << "network " << network_path_ << " (" << m.kind << ", " << net.size() << " layers), policy "
                << to_string(which) << '\n'
                << memfmt::graph::explain(net, model, p);
    }
    if (!m.unsupported.empty() && !json_) {
      std::cout << "opaque barriers (planned around, not runnable):\n";
      for (const auto& u : m.unsupported) std::cout << "  " << u << '\n';
    }
    return 0;
  });
}

}  // namespace memfmt_cli
