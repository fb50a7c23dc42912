// `memfmt plan NETWORK.json|MODEL.onnx [--policy NAME | --compare] [--calibrate onednn|reference]
//  [--cache FILE] [--priors FILE] [--json] [--dot FILE]`: the format plan of a network, or every policy side by side,
//  with the costs measured on this machine where --calibrate or --cache give them.
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

namespace memfmt_cli {

class plan_command {
 public:
  // Registers the subcommand on `app`.
  explicit plan_command(CLI::App& app);

  bool chosen() const { return cmd_->parsed(); }
  // The exit code: 0 planned, 1 a file or the network is bad (the message names it), 2 bad arguments.
  // Answers on `out`; progress, warnings and errors go to `err`.
  int run(std::ostream& out, std::ostream& err) const;

 private:
  CLI::App* cmd_ = nullptr;
  std::string network_path_, policy_ = "optimal", calibrate_, cache_, priors_, dot_path_;
  bool compare_ = false, json_ = false;
};

}  // namespace memfmt_cli
