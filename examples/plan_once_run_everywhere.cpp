// Data-parallel training needs every rank to run the same formats, but calibrations taken on each
// rank differ by noise and can tip a close choice. So one rank plans and writes the plan file; the
// others load it, which gives them exactly its formats (priced with their own costs), and a plan
// made for another network is refused. The ranks here are simulated in one process.
#include <cstdio>
#include <exception>
#include <string>

#include "memfmt/graph/models.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/io/plan_json.hpp"

using namespace memfmt;

int main() {
  graph::models::options o;
  o.batch = 8;
  o.resolution = 112;
  const graph::network net = graph::models::resnet50(o);

  // Rank 0 plans with its costs and publishes the plan (a file, or a broadcast of this text).
  const graph::cost_model rank0_costs;
  const graph::plan rank0 = graph::solve(net, rank0_costs);
  const std::string published = io::save_plan(net, rank0_costs, rank0);

  // Rank 1 measured its own costs: here every conv is a little cheaper in channels-first, enough
  // that solving on its own would give a different plan.
  graph::cost_model rank1_costs;
  for (const graph::node& n : net.nodes())
    if (n.kind == layer_kind::conv) {
      const graph::format_costs c = rank0_costs.node_costs(net, n.id);
      if (c.by_family[0] && c.by_family[1])
        rank1_costs.override_node(net, n.id, *c.by_family[0] * 0.5, *c.by_family[1]);
    }
  const graph::plan own = graph::solve(net, rank1_costs);
  const io::loaded_plan loaded = io::load_plan(published, net, rank1_costs);

  int differ_own = 0, differ_loaded = 0;
  for (const graph::node& n : net.nodes()) {
    differ_own += own.format(n.id) != rank0.format(n.id);
    differ_loaded += loaded.plan.format(n.id) != rank0.format(n.id);
  }
  std::printf("rank 1 solving alone: %d of %zu layers in another format than rank 0\n", differ_own, net.size());
  std::printf("rank 1 loading rank 0's plan: %d layers differ; same costs: %s\n", differ_loaded,
              loaded.same_costs ? "yes" : "no (the formats are rank 0's, the estimates rank 1's)");

  // A rank that built another network (here: another input resolution) is refused.
  o.resolution = 96;
  bool refused = false;
  try {
    (void)io::load_plan(published, graph::models::resnet50(o), rank1_costs);
  } catch (const std::exception& e) {
    refused = true;
    std::printf("another network: refused: %s\n", e.what());
  }
  const bool ok = differ_own > 0 && differ_loaded == 0 && !loaded.same_costs && refused;
  std::puts(ok ? "plan_once_run_everywhere: ok" : "plan_once_run_everywhere: FAILED");
  return ok ? 0 : 1;
}
