// Test helpers over the models header: options for a dtype and size, priors with an indifferent
// batch norm, and a greedy local pusher to compare plans with.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/network.hpp"
#include "memfmt/graph/plan.hpp"

namespace zoo {

using namespace memfmt::graph;

inline models::options sized(memfmt::dtype type, std::int64_t batch, std::int64_t resolution = 224) {
  models::options o;
  o.type = type;
  o.batch = batch;
  o.resolution = resolution;
  return o;
}

// Priors with batch norm indifferent to the format (its default NCHW penalty off), for tests of
// the tie rules, where memory-bound layers must be free to inherit.
inline cost_priors indifferent_batch_norm() {
  cost_priors p;
  p.batch_norm_channels_last_speedup_fp32 = p.batch_norm_channels_last_speedup_low_precision = 1.0;
  return p;
}

// An ORT-style greedy pusher: start from the naive per-layer choice and flip one layer at a time, in
// id order, whenever that strictly lowers the total; stop when no single flip helps.
inline plan greedy_plan(const network& net, const cost_model& model, const plan& start) {
  std::vector<std::optional<family>> formats;
  for (const auto& d : start.nodes) formats.push_back(d.format);
  cost_t best = start.total();
  for (bool improved = true; improved;) {
    improved = false;
    for (node_id id = 0; id < net.size(); ++id) {
      if (!formats[id] || !model.allowed(net, id, other(*formats[id]))) continue;
      formats[id] = other(*formats[id]);
      const cost_t t = make_plan(net, model, formats).total();
      if (t < best) {
        best = t;
        improved = true;
      } else {
        formats[id] = other(*formats[id]);
      }
    }
  }
  return make_plan(net, model, formats);
}

}  // namespace zoo
