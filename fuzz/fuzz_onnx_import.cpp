// Fuzz target: the ONNX importer (onnx/import.hpp) on arbitrary bytes, mutated from small models,
// and the executor on what it imports. Properties, besides "no crash, no sanitizer report, only
// memfmt::error":
// - an imported model is complete: its graph inputs and outputs are nodes of the network, and
//   every parameter the network lists is in the store with the extents and dtype it expects;
// - the planner plans it, and the plan passes verify();
// - a runnable float32 model small enough to run in milliseconds runs forward on the reference
//   backend (buffers poisoned when their liveness ends) in the all-channels-first and the
//   all-channels-last plan, and the two give the same outputs: a format moves values, it does not
//   change them (the all-channels-last plan converts at the pinned graph boundaries).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/graph/verify.hpp"
#include "memfmt/onnx/import.hpp"
#include "memfmt/onnx/run.hpp"
#include "run_check.hpp"

namespace {

namespace graph = memfmt::graph;
namespace runtime = memfmt::runtime;
namespace mo = memfmt::onnx;
using memfmt::dtype;
using memfmt::runtime::parameter;
using memfmt_fuzz::accepted;
using memfmt_fuzz::must;
using memfmt_fuzz::require;

// Outputs of two plans: the same shapes, and values that agree (run_check.hpp).
void require_same_outputs(const mo::imported_model& m, const std::map<std::string, parameter>& a,
                          const std::map<std::string, parameter>& b) {
  for (const mo::graph_value& out : m.outputs) {
    const parameter& x = a.at(out.name);
    const parameter& y = b.at(out.name);
    require(x.shape == out.shape && y.shape == out.shape && x.type == y.type,
            "output '" + out.name + "' is " + runtime::describe(x.type, x.shape) + " and " +
                runtime::describe(y.type, y.shape) + ", the model says " + runtime::describe(out.type, out.shape));
    memfmt_fuzz::require_close(memfmt_fuzz::to_floats(x.bytes), memfmt_fuzz::to_floats(y.bytes), "output '" + out.name + "'", "all channels-first",
                               "all channels-last");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // Large folds are legitimate but slow under the sanitizers: a smaller budget keeps inputs quick.
  mo::import_options import;
  import.max_folded_elements = std::int64_t{1} << 22;
  const auto m = accepted([&] { return mo::import_bytes(bytes, import, "fuzz input"); });
  if (!m) return 0;
  const graph::network& net = m->network;
  for (const auto* values : {&m->inputs, &m->outputs})
    for (const mo::graph_value& v : *values)
      require(net.find(v.name).has_value(), "graph value '" + v.name + "' is no node of the imported network");
  for (const graph::node& n : net.nodes())
    for (const graph::parameter_spec& spec : net.parameters(n.id)) {
      const parameter* p = m->parameters.find(spec.name);
      require(p != nullptr, "parameter '" + spec.name + "' of node '" + n.name + "' was not imported");
      require(p->type == spec.type && p->shape == spec.extents,
              "parameter '" + spec.name + "' is " + runtime::describe(p->type, p->shape) + ", node '" + n.name +
                  "' expects " + runtime::describe(spec.type, spec.extents));
    }

  const graph::cost_model model;
  const auto solved = accepted([&] { return graph::solve(net, model); });
  if (solved) {
    const auto bad = graph::verify(net, model, *solved);
    require(bad.empty(), "the solved plan of an imported model fails verify(): " + (bad.empty() ? "" : bad.front()));
  }

  if (!m->runnable() || memfmt_fuzz::forward_work(net) > memfmt_fuzz::max_forward_work) return 0;
  std::map<std::string, parameter> feeds;
  for (const mo::graph_value& in : m->inputs) {
    if (in.type != dtype::float32) return 0;
    const std::int64_t n = memfmt::detail::checked_numel(in.shape, "graph input");
    feeds[in.name] = parameter{in.type, in.shape, memfmt_fuzz::to_bytes(memfmt_fuzz::input_values(n))};
  }
  for (const mo::graph_value& out : m->outputs)
    if (out.type != dtype::float32) return 0;
  memfmt::reference::backend backend;
  runtime::executor_options options;
  options.poison = true;
  // A model the reference backend refuses (a dtype it does not compute) is refused at build time.
  const auto first = accepted([&] {
    return mo::run_model(*m, graph::plan_with(net, model, graph::policy::all_channels_first), backend, feeds, options);
  });
  if (!first) return 0;
  const auto last = must("running all channels-last what ran all channels-first", [&] {
    return mo::run_model(*m, graph::plan_with(net, model, graph::policy::all_channels_last), backend, feeds, options);
  });
  require_same_outputs(*m, *first, last);
  return 0;
}
