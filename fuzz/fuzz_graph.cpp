// Fuzz target: the network builder (graph/network.hpp) and the planner (graph/solve.hpp) on small
// random networks (random_network.hpp: extents and attributes drawn from the input, huge values
// included). Properties, besides "no crash, no sanitizer report, only memfmt::error": every value
// a builder accepts has non-negative extents whose element count and dense strides fit, and every
// activation it accepts valid parameters; solve()'s plan passes verify(); and its total is the
// minimum over every assignment priced by make_plan() (brute force, the independent truth), which
// no other policy beats.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "memfmt/detail/checked.hpp"
#include "memfmt/graph/plan.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/graph/verify.hpp"
#include "random_network.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::format_family;
using memfmt::layer_kind;
using memfmt_fuzz::require;

constexpr std::size_t max_layers = 10;
constexpr std::size_t brute_limit_vars = 8;  // 256 assignments: thousands of inputs a second

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::optional<network> built = memfmt_fuzz::random_network(in, max_layers);
  if (!built) return 0;
  const network& net = *built;
  for (const node& n : net.nodes()) {
    for (auto e : n.extents) require(e >= 0, "node '" + n.name + "' has a negative extent");
    try {
      (void)memfmt::detail::checked_numel(n.extents, "fuzz_graph");
      (void)memfmt::detail::checked_dense_extent(n.extents, "fuzz_graph");
    } catch (const memfmt::error&) {
      memfmt_fuzz::property_failed("node '" + n.name + "' was accepted with an element count or strides past 64 bits");
    }
    if (n.kind == layer_kind::rearrange)  // moves each element once
      require(n.numel() == net.at(n.inputs[0]).numel(), "rearrangement '" + n.name + "' changes the element count");
    if (n.kind == layer_kind::reduce) {  // extent 1 on the reduced axes, never N, each with values
      const std::uint32_t axes = n.get<memfmt::reduce_params>().axes;
      std::vector<std::int64_t> e = net.at(n.inputs[0]).extents;
      require(axes != 0 && (axes & 1u) == 0 && (axes >> e.size()) == 0,
              "reduction '" + n.name + "' over axes " + memfmt::axes_to_string(axes) + " was accepted");
      for (std::size_t d = 1; d < e.size(); ++d)
        if (axes & memfmt::axis_bit(static_cast<int>(d))) {
          require(e[d] >= 1, "reduction '" + n.name + "' over an empty axis was accepted");
          e[d] = 1;
        }
      require(n.extents == e, "reduction '" + n.name + "' has extents " + memfmt::detail::dims_to_string(n.extents));
    }
    if (n.kind == layer_kind::slice) {  // the axis holds the indices begin, begin + step, ... below end
      const auto& p = n.get<memfmt::slice_params>();
      const std::vector<std::int64_t>& x = net.at(n.inputs[0]).extents;
      const auto axis = static_cast<std::size_t>(p.axis);
      require(p.step >= 1 && p.begin >= 0 && p.end <= x[axis],
              "slice '" + n.name + "' from " + std::to_string(p.begin) + " to " + std::to_string(p.end) + " step " +
                  std::to_string(p.step) + " was accepted");
      std::vector<std::int64_t> e = x;
      e[axis] = p.begin < p.end ? (p.end - p.begin - 1) / p.step + 1 : 0;  // counted, not walked: an axis may be huge
      require(n.extents == e, "slice '" + n.name + "' has extents " + memfmt::detail::dims_to_string(n.extents));
    }
  }
  const cost_model model;
  plan best;
  try {
    best = solve(net, model);
  } catch (const memfmt::error&) {
    return 0;  // e.g. costs past int64 for huge layers: refused, not wrapped
  }
  const auto issues = verify(net, model, best);
  require(issues.empty(), "solve's plan fails verify: " + (issues.empty() ? std::string() : issues.front()));
  for (policy p : all_policies) {
    try {
      require(plan_with(net, model, p).total() >= best.total(),
              std::string("policy ") + to_string(p) + " beats the optimum");
    } catch (const memfmt::error&) {
    }
  }

  std::vector<node_id> vars;
  for (node_id id = 0; id < net.size(); ++id)
    if (net.has_format(id)) vars.push_back(id);
  if (vars.size() > brute_limit_vars) return 0;
  std::optional<cost_t> minimum;
  std::vector<std::optional<format_family>> formats(net.size());
  for (std::uint32_t mask = 0; mask < (1u << vars.size()); ++mask) {
    for (std::size_t i = 0; i < vars.size(); ++i)
      formats[vars[i]] = (mask >> i) & 1u ? format_family::channels_last : format_family::channels_first;
    try {
      const cost_t t = make_plan(net, model, formats).total();
      if (!minimum || t < *minimum) minimum = t;
    } catch (const memfmt::error&) {  // an assignment pins or support forbid
    }
  }
  require(minimum && *minimum == best.total(), "solve's total " + std::to_string(best.total()) +
                                                   " is not the brute-force minimum " +
                                                   (minimum ? std::to_string(*minimum) : std::string("(none)")));
  return 0;
}
