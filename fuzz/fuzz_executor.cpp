// Fuzz target: the executor and the trainer (runtime/) on small random networks
// (random_network.hpp), run on the reference backend with random parameters. Properties, besides
// "no crash, no sanitizer report, only memfmt::error":
// - what one plan builds, every plan builds (the reference backend runs every layer in both
//   formats): the all-channels-first, all-channels-last and optimal plans and one assignment drawn
//   from the input;
// - their forward passes, buffers poisoned when their liveness ends, give the same outputs: a
//   format moves values, it does not change them;
// - a training step in the all-channels-first and the all-channels-last plan gives the same
//   outputs, parameter gradients and batch-norm running statistics.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/plan.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/runtime/computing_in.hpp"
#include "memfmt/runtime/executor.hpp"
#include "memfmt/runtime/random_parameters.hpp"
#include "memfmt/runtime/training.hpp"
#include "random_network.hpp"
#include "run_check.hpp"

namespace {

namespace graph = memfmt::graph;
namespace runtime = memfmt::runtime;
using memfmt::format_family;
using memfmt_fuzz::accepted;
using memfmt_fuzz::must;
using memfmt_fuzz::require;

constexpr std::size_t max_layers = 8;

// The reference backend compiled for float only, the one dtype random_network builds: the executor
// and trainer for all four were most of the fuzz build's time (345 s of 810).
using float_reference = memfmt::runtime::computing_in<memfmt::reference::backend, float>;

// The graph's one input and one output, their bytes in the formats the plan gives them (their
// pins are mandatory, so every plan gives the same); the input holds input_values().
struct io {
  std::vector<float> x, y, dy;
  runtime::tensor_ref x_ref, y_ref, dy_ref;
};

io make_io(const graph::network& net, const graph::plan& p) {
  const graph::node& in = net.at(*net.find("x"));
  const graph::node& out = net.at(*net.find("y"));
  io r;
  r.x = memfmt_fuzz::input_values(in.numel());
  r.y.assign(static_cast<std::size_t>(out.numel()), 0.f);
  r.dy = memfmt_fuzz::input_values(out.numel(), 1.1);
  const auto format = [&](const graph::node& n) { return p.format(n.id).value_or(format_family::channels_first); };
  r.x_ref = {memfmt::dtype::float32, in.extents, format(in), r.x.data()};
  r.y_ref = {memfmt::dtype::float32, out.extents, format(out), r.y.data()};
  r.dy_ref = {memfmt::dtype::float32, out.extents, format(out), r.dy.data()};
  return r;
}

std::vector<float> forward(const graph::network& net, const graph::plan& p, const graph::parameter_store& params) {
  float_reference backend;
  runtime::executor_options options;
  options.poison = true;
  runtime::executor<float_reference> ex(net, p, backend, params, options);
  io t = make_io(net, p);
  ex.forward({{"x", t.x_ref}}, {{"y", t.y_ref}});
  return t.y;
}

struct step_result {
  std::vector<float> y;
  graph::parameter_store grads, stats;
};

step_result train(const graph::network& net, const graph::plan& p, const graph::parameter_store& params) {
  float_reference backend;
  runtime::trainer<float_reference> tr(net, p, backend, params);
  io t = make_io(net, p);
  step_result r;
  r.grads = tr.train_step({{"x", t.x_ref}}, {{"y", t.y_ref}}, {{"y", t.dy_ref}});
  r.stats = tr.running_stats();
  r.y = t.y;
  return r;
}

void require_same_store(const graph::parameter_store& a, const graph::parameter_store& b, const char* what) {
  require(a.names() == b.names(), std::string(what) + ": the two plans return different tensors");
  for (const auto& [name, p] : a)
    if (p.type == memfmt::dtype::float32)
      memfmt_fuzz::require_close(memfmt_fuzz::to_floats(p.bytes), memfmt_fuzz::to_floats(b.at(name).bytes),
                                 std::string(what) + " '" + name + "'", "all channels-first", "all channels-last");
    else require(p.bytes == b.at(name).bytes, std::string(what) + " '" + name + "' differs between the plans");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::optional<graph::network> built = memfmt_fuzz::random_network(in, max_layers);
  if (!built) return 0;
  const graph::network& net = *built;
  if (memfmt_fuzz::forward_work(net) > memfmt_fuzz::max_forward_work) return 0;
  const graph::parameter_store params = runtime::random_parameters(net, 7);
  const graph::cost_model model;
  const graph::plan first = graph::plan_with(net, model, graph::policy::all_channels_first);

  // A network the executor refuses (an opaque layer without a callback) is refused at build time.
  const auto reference = accepted([&] { return forward(net, first, params); });
  if (!reference) return 0;
  std::vector<std::optional<format_family>> drawn(net.size());
  for (graph::node_id id = 0; id < net.size(); ++id)
    if (net.has_format(id)) drawn[id] = in.ConsumeBool() ? format_family::channels_last : format_family::channels_first;
  const graph::plan last = graph::plan_with(net, model, graph::policy::all_channels_last);
  std::vector<std::pair<const char*, graph::plan>> others{
      {"all channels-last", last}, {"optimal", graph::plan_with(net, model, graph::policy::optimal)}};
  // The drawn assignment, where the pins allow it.
  if (auto p = accepted([&] { return graph::make_plan(net, model, drawn); })) others.emplace_back("drawn", *p);
  for (const auto& other : others) {
    const std::vector<float> y =
        must("forward in a plan other than all channels-first", [&] { return forward(net, other.second, params); });
    memfmt_fuzz::require_close(*reference, y, "output 'y'", "all channels-first", other.first);
  }

  // Training: the trainer refuses what has no backward here (a dropout with p > 0, a user op).
  const auto step_first = accepted([&] { return train(net, first, params); });
  if (!step_first) return 0;
  const step_result step_last =
      must("a training step all channels-last after one all channels-first", [&] { return train(net, last, params); });
  memfmt_fuzz::require_close(step_first->y, step_last.y, "training output 'y'", "all channels-first",
                             "all channels-last");
  require_same_store(step_first->grads, step_last.grads, "gradient");
  require_same_store(step_first->stats, step_last.stats, "running statistic");
  return 0;
}
