// `memfmt run MODEL.onnx|NETWORK.json [--weights FILE] [--input FILE | --random] [--output FILE]
//  [--backend reference|onednn|cudnn] [--policy NAME] [--dtype float32|bfloat16|float16] [--batch N]
//  [--threads N] [--repeat N] [--calibrate | --priors-only] [--cache FILE] [--profile] [--json]`: runs a model in
//  its planned formats and reports the time. The optimal policy on onednn and cudnn plans for this
//  machine, as TensorRT's builder does: the layers are timed on --backend first (a second or two;
//  --cache keeps the timings), --priors-only plans from the prior table instead. --calibrate also
//  times the calibrated plan, the priors' plan and all channels-last as whole networks and runs the
//  fastest (runtime::channels_last). --profile then times every layer in --repeat more passes
//  (executor::forward_profiled) and reports the time by layer kind and the slowest layers.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

namespace memfmt_cli {

class run_command {
 public:
  // Registers the subcommand on `app`.
  explicit run_command(CLI::App& app);

  bool chosen() const { return cmd_->parsed(); }
  // The exit code: 0 ran, 1 the model, a file or the backend is bad or missing (the message names
  // it), 2 bad arguments.
  // Answers on `out`; progress, warnings and errors go to `err`.
  int run(std::ostream& out, std::ostream& err) const;

 private:
  CLI::App* cmd_ = nullptr;
  CLI::Option* batch_opt_ = nullptr;
  std::string model_path_, weights_, input_, output_, backend_ = "reference", policy_ = "optimal", dtype_ = "float32",
                                                      cache_;
  bool random_ = false, json_ = false, calibrate_ = false, priors_only_ = false, profile_ = false;
  std::int64_t batch_ = 1;
  int threads_ = 0, repeat_ = 10;
};

}  // namespace memfmt_cli
