// The plans the ONNX checks run every model in, and a model file through import and executor in one.
#pragma once

#include <map>
#include <string>

#include "memfmt/graph/policy.hpp"
#include "memfmt/onnx/import.hpp"
#include "memfmt/session/onnx.hpp"

namespace memfmt_test {

// Every value channels-first; every value channels-last, the graph's inputs and outputs included
// (run_model lays the feeds out and reads the outputs back); the planner's optimum between
// channels-first boundaries.
struct plan_kind {
  const char* name;
  memfmt::graph::policy which;
  memfmt::format_family boundary;
};
inline constexpr plan_kind plans[] = {
    {"all_channels_first", memfmt::graph::policy::all_channels_first, memfmt::format_family::channels_first},
    {"all_channels_last", memfmt::graph::policy::all_channels_last, memfmt::format_family::channels_last},
    {"optimal", memfmt::graph::policy::optimal, memfmt::format_family::channels_first}};

inline memfmt::onnx::import_options options_for(const plan_kind& p, memfmt::onnx::import_options o = {}) {
  o.input_format = o.output_format = p.boundary;
  return o;
}

inline memfmt::graph::plan plan_of(const memfmt::onnx::imported_model& m, const plan_kind& p) {
  return memfmt::graph::plan_with(m.network, memfmt::graph::cost_model{}, p.which);
}

// An ONNX file imported for plan `p` and run once on `feeds` with poisoning on (a value read after
// its liveness ends reads NaN); the graph outputs by name.
template <class Backend>
std::map<std::string, memfmt::onnx::parameter> run_file(const std::string& path, const plan_kind& p, Backend& backend,
                                                        const std::map<std::string, memfmt::onnx::parameter>& feeds) {
  const memfmt::onnx::imported_model m = memfmt::onnx::import_file(path, options_for(p));
  memfmt::runtime::executor_options eo;
  eo.poison = true;
  return memfmt::onnx::run_model(m, plan_of(m, p), backend, feeds, eo);
}

}  // namespace memfmt_test
