// memfmt/graph/solve.hpp - the exact two-format assignment by s-t minimum cut (F1, F2).
//
// Encoding (propagation-anchors.md, section 7.1): a binary variable per layer (0 = channels_first,
// 1 = channels_last) and, per value with a nonzero conversion cost c, two availability variables
// b ("also materialized channels_last") and a ("not available channels_first"). The producer's and
// every consumer's format imply availability (infinite pairwise terms b -> x, x -> a), and the
// conversion costs c * (b - a): unary up to a constant. All terms are submodular, so the minimum
// cut is the global optimum (Kolmogorov & Zabih 2004), and one converted copy serves every
// consumer that needs it.
//
// Objective, lexicographic and exact:
//  1. the total cost, plan::total() (layers + conversions + violated preferred pins);
//  2. among plans of minimal total, the fewest inherit breaks (plan::inherit_breaks): memory-bound
//     layers (inherits_format: batch_norm, pointwise, add, pool, global_pool, upsample, concat;
//     not opaque, which declares its format) whose format differs from their producer's, the
//     first input with a layout (network::producer: the add's first operand, the concat's first
//     part), and (constant, reader) pairs in different formats (network::inherits_from).
//     Memory-bound layers inherit their producer's format unless that costs something (the
//     oneDNN / cudnn-frontend rule: compute layers choose, memory-bound layers inherit), so a
//     tied conversion sits right before the layer that needs the other format (after conv -> bn
//     -> relu, not between the conv and its bn, which would break fusion);
//  3. what is still tied goes to channels_last: the cut taken is the inclusion-minimal source side,
//     which every maximum flow yields, so a layer is channels_first only when it is channels_first
//     in every plan optimal for 1 and 2, and the plan does not depend on node insertion order or
//     edge order.
// Criterion 2 lives in the same cut: every primary capacity is scaled by M = (number of inherit
// terms) + 1, more than any sum of them, and each inherit pair (layer and producer, constant and
// reader) adds a Potts term, capacity 1 both ways between the two variables (submodular). The cut value is then
// M * primary + breaks with breaks < M; dividing by M recovers both. Costs so large that the
// scaled capacities would overflow int64 are an error. flip_delta and saves stay in primary units.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../detail/checked.hpp"
#include "../error.hpp"
#include "cost_model.hpp"
#include "detail/residual_cut.hpp"
#include "network.hpp"
#include "plan.hpp"

namespace memfmt::graph {
namespace detail {

// Per-node cost (layer + preferred-pin penalty) in each allowed family, and per-value conversion cost.
struct assignment_terms {
  std::vector<std::array<std::optional<cost_t>, 2>> unary;
  std::vector<cost_t> conversion;
};

inline assignment_terms make_terms(const network& net, const cost_model& model) {
  model.check_overrides(net);
  assignment_terms t;
  t.unary.resize(net.size());
  t.conversion.resize(net.size());
  for (const node& n : net.nodes()) {
    const format_costs costs = model.node_costs(net, n.id);
    for (format_family f : {format_family::channels_first, format_family::channels_last})
      if (model.allowed(net, n.id, f))
        t.unary[n.id][index(f)] = *costs.by_family[index(f)] + model.pin_penalty(net, n.id, f);
    if (net.has_format(n.id) && !t.unary[n.id][0] && !t.unary[n.id][1]) {
      const pin* p = n.binding_pin();
      if (!p || !p->mandatory)
        memfmt::detail::fail(errc::unsupported,
                             "node '" + n.name + "' cannot run in either format (" + costs.basis + ")");
      memfmt::detail::fail(errc::unsupported, "node '" + n.name + "' is pinned to " +
                                                  std::string(to_string(p->format)) + " ('" + p->origin +
                                                  "') but cannot run in it (" + costs.basis + ")");
    }
    t.conversion[n.id] = model.conversion_cost(net, n.id);
  }
  return t;
}

struct assignment {
  std::vector<std::optional<format_family>> formats;
  cost_t total = 0;                // primary: plan::total()
  std::size_t inherit_breaks = 0;  // secondary: plan::inherit_breaks
};

// a + b and a * b on costs, failing with the solver's overflow error.
inline cost_t add_cost(cost_t a, cost_t b, const char* what) {
  cost_t r = 0;
  if (memfmt::detail::add_overflows(a, b, &r))
    memfmt::detail::fail(errc::overflow, std::string("format solve: ") + what + " " + std::to_string(a) + " + " +
                                             std::to_string(b) + " overflows int64 (costs in ns are too large)");
  return r;
}

// The edges each of solve()'s `questions` what-if questions (flip_delta, saves) may look at: a
// share of a fixed total (5e7 edges, about a quarter of a second), at least 1,000 each, which
// covers every question of the models in graph/models.hpp. A question that needs more is answered "not computed"
// (node_decision::flip_unknown); the plan itself is always the exact optimum. Without the budget a
// chain of thousands of tied memory-bound layers (each question walks the chain to its ends) took
// quadratic time: `memfmt plan` of a 10,000-Relu ONNX chain 523 s (bench_planner
// BM_load_onnx_chain measures it).
inline std::size_t question_budget(std::size_t questions) {
  constexpr std::size_t total = 50000000, least = 1000;
  return std::max(least, total / std::max<std::size_t>(questions, 1));
}

// The cut of one network's terms, built and solved once; optimum() is the plan's assignment and
// forced() the optimum with some nodes fixed to a family, answered from the residual graph.
class format_cut {
 public:
  format_cut(const network& net, const assignment_terms& t) : net_(net), t_(t), graph_(2 + 3 * net.size()) {
    // Secondary terms: (memory-bound layer, producer) and (constant, each reader) pairs; the scale
    // M exceeds their count.
    std::vector<std::pair<node_id, node_id>> inherit;
    for (const node& n : net.nodes())
      for (node_id from : net.inherits_from(n.id)) inherit.emplace_back(n.id, from);
    scale_ = static_cast<cost_t>(inherit.size()) + 1;
    // "Infinite" = more than any finite primary cut; a feasible assignment always has a finite cut.
    cost_t infinite = 1;
    for (node_id id = 0; id < net.size(); ++id) {
      const auto& u = t.unary[id];
      if (u[0] && u[1]) infinite = add_cost(infinite, std::max(*u[0], *u[1]), "cut bound");
      if (net.at(id).spatial())
        infinite = add_cost(infinite, add_cost(t.conversion[id], t.conversion[id], "cut bound"), "cut bound");
    }
    // Residual capacities reach at most twice the largest capacity (an edge plus the flow it
    // carries); a forced question's cut, the optimum's plus less than `infinite`, also fits.
    if (memfmt::detail::mul_overflows(infinite, scale_, &infinite_) ||
        infinite_ > std::numeric_limits<cost_t>::max() / 2)
      memfmt::detail::fail(errc::overflow, "format solve: the cut bound " + std::to_string(infinite) +
                                               " ns times the tie scale " + std::to_string(scale_) + " (" +
                                               std::to_string(inherit.size()) +
                                               " inherit terms + 1) overflows int64 capacities; costs are too large");
    std::size_t next_aux = 2 + net.size();
    for (node_id id = 0; id < net.size(); ++id) {
      const auto& [first, last] = t.unary[id];
      if (!net.has_format(id)) {  // layout-free: the same cost either way
        constant_ = add_cost(constant_, *first, "constant");
        continue;
      }
      const cost_t base = first && last ? std::min(*first, *last) : first ? *first : *last;
      constant_ = add_cost(constant_, base, "constant");
      // Every finite primary capacity is below `infinite`, so its scaled value fits.
      graph_.add_edge(s, var(id), last ? (*last - base) * scale_ : infinite_);       // cut when channels_last
      graph_.add_edge(var(id), sink, first ? (*first - base) * scale_ : infinite_);  // cut when channels_first
    }
    for (node_id v = 0; v < net.size(); ++v) {
      const cost_t c = t.conversion[v];
      if (!net.at(v).spatial() || c == 0 || net.consumers(v).empty()) continue;
      const std::size_t also_last = next_aux++, not_first = next_aux++;
      graph_.add_edge(s, also_last, c * scale_);
      graph_.add_edge(not_first, sink, c * scale_);
      constant_ -= c;
      const auto touch = [&](node_id u) {
        if (u != v && net.at(u).kind == layer_kind::opaque) {  // reads in its declared format, whatever it writes
          if (net.read_format(u, format_family::channels_first) == format_family::channels_last)
            graph_.add_edge(also_last, sink, infinite_);  // the channels_last copy must exist
          else graph_.add_edge(s, not_first, infinite_);  // the channels_first copy must exist
          return;
        }
        graph_.add_edge(also_last, var(u), infinite_);  // u channels_last needs the channels_last copy
        graph_.add_edge(var(u), not_first, infinite_);  // u channels_first needs the channels_first copy
      };
      for (node_id u : net.consumers(v)) touch(u);
      touch(v);
    }
    for (const auto& [layer, from] : inherit) {  // Potts: 1 when the two sides differ
      graph_.add_edge(var(layer), var(from), 1);
      graph_.add_edge(var(from), var(layer), 1);
    }
    cut_ = graph_.run(s, sink);
  }

  assignment optimum() const {
    assignment a = score(cut_);
    a.formats.resize(net_.size());
    const std::vector<char>& first_side = graph_.source_side();
    for (node_id id = 0; id < net_.size(); ++id)
      if (net_.has_format(id))
        a.formats[id] = first_side[var(id)] ? format_family::channels_first : format_family::channels_last;
    return a;
  }

  // The optimum's total and inherit breaks when every node of `nodes` runs in `f` (formats left
  // empty); nullopt when a node cannot run in `f`, or, with `unknown` set, when the question looked
  // at more than `budget` edges of the residual graph.
  std::optional<assignment> forced(const std::vector<node_id>& nodes, format_family f, std::size_t budget,
                                   bool& unknown) {
    unknown = false;
    std::vector<std::size_t> vertices;
    for (node_id id : nodes) {
      if (!t_.unary[id][index(f)]) return std::nullopt;
      vertices.push_back(var(id));
    }
    const std::optional<cost_t> extra =
        graph_.extra_cut(vertices, f == format_family::channels_first, infinite_, budget);
    if (!extra) {
      unknown = true;
      return std::nullopt;
    }
    if (*extra >= infinite_) return std::nullopt;
    return score(cut_ + *extra);
  }

 private:
  static constexpr std::size_t s = 0, sink = 1;
  static std::size_t var(node_id id) { return 2 + id; }
  // Cut value M * primary + breaks, breaks < M: both recovered.
  assignment score(cost_t cut) const {
    assignment a;
    a.total = cut / scale_ + constant_;
    a.inherit_breaks = static_cast<std::size_t>(cut % scale_);
    return a;
  }

  const network& net_;
  const assignment_terms& t_;
  residual_cut graph_;
  cost_t scale_ = 1, infinite_ = 0, constant_ = 0, cut_ = 0;
};

inline std::string describe(const network& net, const cost_model& model, const plan& p, node_id id) {
  const node& n = net.at(id);
  const node_decision& d = p.nodes[id];
  if (!d.format) return "no layout (rank-2 value)";
  const format_family f = *d.format;
  const pin* binding = n.binding_pin();
  const format_costs costs = model.node_costs(net, id);
  std::string why;
  if (binding && binding->mandatory) {
    why = "pinned (mandatory, " + binding->origin + ")";
  } else if (binding && binding->format == f) {
    why = "preferred pin '" + binding->origin + "' (priority " + std::to_string(binding->priority) + ")";
  } else if (const auto pref = costs.preferred()) {
    const std::optional<cost_t> alt = costs.by_family[index(other(f))];
    if (*pref == f)
      why = "own preference, " +
            (alt ? cost_string(*alt - d.cost) + " cheaper here" : std::string("the only format it runs in")) + ": " +
            costs.basis;
    else
      why = "against own preference (+" + cost_string(d.cost - *alt) + " here, " + costs.basis +
            "), the conversions it avoids cost more";
  } else {
    const std::optional<node_id> producer = net.producer(id);
    std::size_t readers_in_f = 0;
    for (node_id u : net.consumers(id)) readers_in_f += p.nodes[u].format == f;
    if (n.kind == layer_kind::constant && readers_in_f > 0)
      why = (readers_in_f == net.consumers(id).size() ? std::string("laid out as its readers run")
                                                      : "laid out as " + std::to_string(readers_in_f) + " of its " +
                                                            std::to_string(net.consumers(id).size()) + " readers run") +
            " (" + costs.basis + ")";
    else if (producer && p.nodes[*producer].format == f)
      why = "inherits from '" + net.at(*producer).name + "' (" + costs.basis + ")";
    else why = "follows its consumers (" + costs.basis + ")";
  }
  if (binding && !binding->mandatory && binding->format != f)
    why += "; overrides preferred pin '" + binding->origin + "' (+" + cost_string(d.pin_penalty) + ")";
  if (d.flip_unknown)
    why += "; the cost of " + std::string(to_string(other(f))) +
           " here is not computed (too far from any layer with "
           "a cost of its own)";
  else if (!d.flip_delta) why += "; " + std::string(to_string(other(f))) + " not allowed";
  else if (*d.flip_delta == 0 && d.flip_breaks > 0 && n.kind == layer_kind::constant)
    why += "; tie in cost with " + std::string(to_string(other(f))) + ", unlike " + std::to_string(d.flip_breaks) +
           " more of its readers";
  else if (*d.flip_delta == 0 && d.flip_breaks > 0)
    why += "; tie in cost with " + std::string(to_string(other(f))) + ", which would take " +
           std::to_string(d.flip_breaks) + " more memory-bound layer" + (d.flip_breaks == 1 ? "" : "s") +
           " off the producer's format";
  else if (*d.flip_delta == 0) why += "; tie with " + std::string(to_string(other(f))) + ", channels_last by rule";
  else why += "; " + std::string(to_string(other(f))) + " would cost +" + cost_string(*d.flip_delta) + " overall";
  return why;
}

}  // namespace detail

// The minimum-cost plan, with each node's reason and each conversion's saving filled in. The
// alternatives behind flip_delta and saves are exact optima too, answered from the optimum's
// residual graph (detail/residual_cut.hpp) rather than re-solved, so solve stays near-linear on
// layered networks (bench_planner --benchmark_filter=BM_solve_explain).
inline plan solve(const network& net, const cost_model& model) {
  const detail::assignment_terms terms = detail::make_terms(net, model);
  detail::format_cut cut(net, terms);
  const detail::assignment best = cut.optimum();
  plan p = make_plan(net, model, best.formats);
  const std::size_t budget = detail::question_budget(net.size() + p.conversions.size());
  for (node_id id = 0; id < net.size(); ++id) {
    if (!best.formats[id]) continue;
    if (const auto alt = cut.forced({id}, other(*best.formats[id]), budget, p.nodes[id].flip_unknown)) {
      p.nodes[id].flip_delta = alt->total - p.total();
      if (alt->total == p.total()) p.nodes[id].flip_breaks = alt->inherit_breaks - best.inherit_breaks;
    }
  }
  for (conversion& c : p.conversions) {
    std::vector<node_id> kept = c.consumers;
    kept.push_back(c.value);
    if (const auto alt = cut.forced(kept, c.from, budget, c.saves_unknown)) {
      c.saves = alt->total - p.total() + c.cost;
      if (alt->total == p.total()) c.kept_breaks = alt->inherit_breaks - best.inherit_breaks;
    }
  }
  for (node_id id = 0; id < net.size(); ++id) p.nodes[id].reason = detail::describe(net, model, p, id);
  return p;
}

}  // namespace memfmt::graph
