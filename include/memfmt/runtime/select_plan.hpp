// memfmt/runtime/select_plan.hpp - the fastest of a few plans, each timed as a whole network.
//
// Calibration times every layer and conversion on its own, and the solver adds them up. Inside a
// network they cost differently: a conversion reads a value its producer just wrote, a layer's
// input may or may not still be in cache, a backend call has its own overhead. So a plan that is
// optimal for the summed costs can lose to all channels-last by a few percent once run (MobileNetV2
// in bfloat16, the ONNX-imported ResNet-50 at batch 1: bench_network's optimal_calibrated rows).
// select_plan settles that the way TensorRT settles a tactic: it builds an executor for every
// candidate plan, runs each on random inputs in turns, round robin (so a slower period of the
// machine falls on all of them), and keeps the one with the smallest median time. Each turn times
// a pass right after untimed ones of the same candidate, so that its weights and buffers are as
// warm as in a loop of forward calls: timing passes that directly follow another candidate's
// favours the plan that suffers least from a cold cache (MobileNetV2 at batch 1). Candidates
// whose formats equal an earlier one's are timed once; a candidate the backend cannot run (a build
// error) is reported and skipped.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../graph/network.hpp"
#include "../graph/plan.hpp"
#include "calibrate.hpp"
#include "executor.hpp"
#include "parameter_store.hpp"
#include "tensor_ref.hpp"

namespace memfmt::runtime {

struct plan_candidate {
  std::string name;  // e.g. "optimal", "all_channels_last"
  graph::plan plan;
};

struct plan_timing {
  std::string name;
  double ms = 0;                 // median forward pass; 0 where the candidate was not run
  std::int64_t conversions = 0;  // copies per pass (executor_report::conversions)
  std::string same_as;           // the earlier candidate with the same formats, timed once for both
  std::string error;             // why the candidate could not be built; empty when it ran
};

struct plan_selection_options {
  int warmup = 1;       // untimed passes of a candidate before each of its timed ones
  int repetitions = 5;  // turns, one timed pass of each candidate per turn; the median is kept
  // More turns while some candidate's timed passes add up to less: the median of a few passes of
  // a millisecond network is the machine's noise (MobileNetV2 at batch 1 needs about 20).
  double min_seconds = 0.25;
  int max_repetitions = 200;
  std::uint64_t seed = 1;
  executor_options execution;
};

template <class Backend>
struct plan_selection {
  std::size_t chosen = 0;            // index into candidates and timings
  std::vector<plan_timing> timings;  // one per candidate, in their order
  std::unique_ptr<executor<Backend>> run;
};

namespace detail {

inline bool same_formats(const graph::plan& a, const graph::plan& b) {
  if (a.nodes.size() != b.nodes.size()) return false;
  for (std::size_t i = 0; i < a.nodes.size(); ++i)
    if (a.nodes[i].format != b.nodes[i].format) return false;
  return true;
}

// Host tensors for every graph input and output of `kind`, in the plan's formats, inputs filled
// with deterministic values.
class io_tensors {
 public:
  io_tensors(const graph::network& net, const graph::plan& plan, layer_kind kind, std::uint64_t seed) {
    filler fill(seed);
    for (const graph::node& n : net.nodes()) {
      if (n.kind != kind) continue;
      const std::int64_t count = memfmt::detail::checked_numel(n.extents, n.name.c_str());
      std::vector<std::byte> bytes = dispatch_float_dtype(n.type, "select_plan: '" + n.name + "'", [&](auto tag) {
        using T = decltype(tag);
        const std::vector<T> v = fill.template values<T>(count);
        std::vector<std::byte> b(v.size() * sizeof(T));
        std::copy_n(reinterpret_cast<const std::byte*>(v.data()), b.size(), b.data());
        return b;
      });
      data_.push_back(std::move(bytes));
      refs_[n.name] =
          tensor_ref{n.type, n.extents, plan.format(n.id).value_or(format_family::channels_first), data_.back().data()};
    }
  }
  const std::map<std::string, tensor_ref>& refs() const { return refs_; }

 private:
  std::vector<std::vector<std::byte>> data_;
  std::map<std::string, tensor_ref> refs_;
};

}  // namespace detail

// The fastest of `candidates` on `backend`, with `params`, and its executor (ready to run). Needs
// at least one candidate the backend can build; with none, the first build error is thrown.
template <class Backend>
plan_selection<Backend> select_plan(const graph::network& net, Backend& backend, const parameter_store& params,
                                    const std::vector<plan_candidate>& candidates,
                                    const plan_selection_options& o = {}) {
  if (candidates.empty()) memfmt::detail::fail(errc::invalid_argument, "select_plan: no candidate plans");
  if (o.repetitions < 1 || o.warmup < 0 || o.max_repetitions < o.repetitions || !(o.min_seconds >= 0))
    memfmt::detail::fail(errc::invalid_argument, "select_plan: repetitions " + std::to_string(o.repetitions) +
                                                     " (>= 1), max_repetitions " + std::to_string(o.max_repetitions) +
                                                     " (>= repetitions), warmup " + std::to_string(o.warmup) +
                                                     " (>= 0), min_seconds " + std::to_string(o.min_seconds) +
                                                     " (>= 0)");
  struct entry {
    std::size_t index;
    std::unique_ptr<executor<Backend>> run;
    detail::io_tensors inputs, outputs;
    std::vector<std::int64_t> ns;
  };
  plan_selection<Backend> out;
  std::vector<entry> runs;
  std::string first_error;
  std::vector<std::size_t> original(candidates.size());  // the candidate timed for each
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    plan_timing t;
    t.name = candidates[i].name;
    original[i] = i;
    for (const entry& e : runs)
      if (detail::same_formats(candidates[e.index].plan, candidates[i].plan)) {
        t.same_as = candidates[e.index].name;
        original[i] = e.index;
      }
    if (t.same_as.empty()) {
      try {
        auto ex = std::make_unique<executor<Backend>>(net, candidates[i].plan, backend, params, o.execution);
        t.conversions = ex->report().conversions;
        runs.push_back(entry{i,
                             std::move(ex),
                             detail::io_tensors(net, candidates[i].plan, layer_kind::input, o.seed),
                             detail::io_tensors(net, candidates[i].plan, layer_kind::output, o.seed),
                             {}});
      } catch (const error& e) {
        t.error = e.what();
        if (first_error.empty()) first_error = "select_plan: candidate '" + t.name + "': " + e.what();
      }
    }
    out.timings.push_back(std::move(t));
  }
  if (runs.empty()) memfmt::detail::fail(errc::unsupported, first_error);
  const auto timed_enough = [&] {
    for (const entry& e : runs) {
      std::int64_t sum = 0;
      for (std::int64_t t : e.ns) sum += t;
      if (static_cast<double>(sum) * 1e-9 < o.min_seconds) return false;
    }
    return true;
  };
  for (int rep = 0; rep < o.repetitions || (rep < o.max_repetitions && !timed_enough()); ++rep)
    for (entry& e : runs) {
      for (int w = 0; w < o.warmup; ++w) e.run->forward(e.inputs.refs(), e.outputs.refs());
      detail::settle(backend);
      const auto t0 = std::chrono::steady_clock::now();
      e.run->forward(e.inputs.refs(), e.outputs.refs());
      detail::settle(backend);
      const auto t1 = std::chrono::steady_clock::now();
      e.ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    }
  std::size_t best = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    out.timings[runs[r].index].ms = static_cast<double>(detail::median_of(runs[r].ns)) / 1e6;
    if (out.timings[runs[r].index].ms < out.timings[runs[best].index].ms) best = r;
  }
  for (std::size_t i = 0; i < candidates.size(); ++i)  // a duplicate shares its original's time
    if (original[i] != i) {
      out.timings[i].ms = out.timings[original[i]].ms;
      out.timings[i].conversions = out.timings[original[i]].conversions;
    }
  out.chosen = runs[best].index;
  out.run = std::move(runs[best].run);
  return out;
}

}  // namespace memfmt::runtime
