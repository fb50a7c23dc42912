// memfmt/runtime/channels_last.hpp - calibrate, plan and build the executor in one call.
//
// The spirit of Composer's apply_channels_last(model) and fastai's to_channelslast(), with the
// formats chosen by measurement instead of "everything NHWC": channels_last(net, backend, params,
// options) calibrates on `backend` what options.calibration.known (timings measured before, on this
// device and backend: io::read_timing_cache_file_if_exists reads them) lacks, applies the pins,
// solves, and returns an executor with the weights converted once into their layers' formats, and
// the timing cache with every timing, for the caller to keep (io::write_timing_cache_file). No file
// is read or written here: files are the caller's (io/, the tools).
//
// Calibration times layers one by one; inside the network their costs differ a little (caches,
// conversions next to their producers), which can turn a close call the wrong way. So by default
// (options.select_by_timing) the solved plan is run as a whole network beside the plan the priors
// give and all channels-last (runtime/select_plan.hpp), and the fastest of the three is returned;
// `candidates` says what each took.
//
// options.precision runs the network in bfloat16 or float16, as autocast does for convs and
// linears: every activation, weight and the forward pass's inputs and outputs are in that dtype
// (the caller converts at the boundary, as the executor takes tensors in the network's dtypes),
// the parameters may come in float32 and are rounded once at build, except the norms', which stay
// float32 as AMP keeps them (network::norm_parameter_type): a batch norm folds from them and
// computes its statistics in float32. Calibration times the layers in that dtype. A
// precision the backend cannot compute in is an error naming it and the backend's reason.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../graph/cost_model.hpp"
#include "../graph/network.hpp"
#include "../graph/plan.hpp"
#include "../graph/policy.hpp"
#include "../graph/solve.hpp"
#include "../graph/timing_cache.hpp"
#include "backend_support.hpp"
#include "calibrate.hpp"
#include "executor.hpp"
#include "parameter_store.hpp"
#include "precision.hpp"
#include "select_plan.hpp"

namespace memfmt::runtime {

// A format requirement by layer name (graph::network::pin_format's arguments).
struct format_pin {
  std::string node;
  format_family format = format_family::channels_last;
  bool mandatory = true;
  int priority = 0;  // preferred pins: >= 1
};

struct channels_last_options {
  std::vector<format_pin> pins;
  graph::cost_priors priors;      // for what calibration does not measure
  calibrate_options calibration;  // its `known`: timings measured before, not timed again
  executor_options execution;
  // float32, bfloat16 or float16 for every floating-point value and parameter; nullopt runs the
  // network in its own dtypes.
  std::optional<memfmt::dtype> precision;
  // Run the calibrated plan, the priors' plan and all channels-last as whole networks and keep
  // the fastest; false returns the calibrated plan untimed.
  bool select_by_timing = true;
  plan_selection_options selection;  // its `execution` is replaced by `execution` above
};

// The plan, its costs and the executor that runs it.
template <class Backend>
struct planned_executor {
  graph::network network;  // with the pins applied, in the precision asked for
  graph::plan plan;
  graph::timing_cache cache;
  std::unique_ptr<executor<Backend>> run;  // ready for forward(); holds a reference to the backend
  // With select_by_timing: "optimal_calibrated", "optimal_priors" and "all_channels_last", each
  // with its time per pass; `chosen` is the one `plan` is.
  std::vector<plan_timing> candidates;
  std::string chosen = "optimal_calibrated";
};

namespace detail {

// The precision as a clear error before anything runs: a dtype other than the three, or one the
// backend cannot compute some layer in, names the precision, the layer and the backend's reason.
template <class Backend>
void check_precision(const graph::network& net, const Backend& backend, memfmt::dtype precision) {
  if (precision != memfmt::dtype::float32 && precision != memfmt::dtype::bfloat16 &&
      precision != memfmt::dtype::float16)
    memfmt::detail::fail(errc::unsupported_dtype, "channels_last: precision " + std::string(to_string(precision)) +
                                                      " (float32, bfloat16 or float16)");
  for (const graph::node& n : net.nodes()) {
    std::optional<op_query> q = op_query_of(n, format_family::channels_first);
    if (!q) continue;
    q->type = precision;
    const op_support s = backend.support(*q);
    if (!s && s.code == errc::unsupported_dtype)
      memfmt::detail::fail(errc::unsupported_dtype, "channels_last: precision " + std::string(to_string(precision)) +
                                                        " on the " + Backend::name + " backend (layer '" + n.name +
                                                        "'): " + s.reason);
  }
}

}  // namespace detail

template <class Backend>
planned_executor<Backend> channels_last(const graph::network& net, Backend& backend, const parameter_store& params,
                                        const channels_last_options& options = {}) {
  planned_executor<Backend> out;
  out.network = net;
  parameter_store converted;
  if (options.precision) {
    detail::check_precision(net, backend, *options.precision);
    out.network = net.with_float_type(*options.precision);
    converted = in_network_dtypes(out.network, params);
  }
  for (const format_pin& p : options.pins) {
    const std::optional<graph::node_id> id = net.find(p.node);
    if (!id)
      memfmt::detail::fail(errc::invalid_argument,
                           "channels_last: pin on '" + p.node + "', which is no layer of the network");
    out.network.pin_format(*id, p.format, p.mandatory, p.priority, "channels_last option");
  }
  out.cache = calibrate(out.network, backend, options.calibration);  // refuses another device's `known`
  graph::cost_model model(options.priors);
  model.set_timing_cache(out.cache);
  model.set_support_query(support_query_for(backend));  // a format the backend refuses a layer is not planned
  out.plan = graph::solve(out.network, model);
  const parameter_store& weights = options.precision ? converted : params;
  if (!options.select_by_timing) {
    out.run = std::make_unique<executor<Backend>>(out.network, out.plan, backend, weights, options.execution);
    return out;
  }
  graph::cost_model priors(options.priors);
  priors.set_support_query(support_query_for(backend));
  std::vector<plan_candidate> candidates{
      {"optimal_calibrated", out.plan},
      {"optimal_priors", graph::solve(out.network, priors)},
      {"all_channels_last", graph::plan_with(out.network, model, graph::policy::all_channels_last)}};
  plan_selection_options so = options.selection;
  so.execution = options.execution;
  plan_selection<Backend> picked = select_plan(out.network, backend, weights, candidates, so);
  out.plan = std::move(candidates[picked.chosen].plan);
  out.chosen = candidates[picked.chosen].name;
  out.candidates = std::move(picked.timings);
  out.run = std::move(picked.run);
  return out;
}

}  // namespace memfmt::runtime
