// memfmt/graph/policy.hpp - the plans other tools would run, as graph::plan, beside the optimum.
//
// Every policy returns make_plan() of its assignment, so explain(), verify() and the reports apply
// to all of them alike; node_decision::reason says which rule placed each layer. Mandatory pins
// (graph boundaries, opaque barriers, the user's) hold under every policy, and a layer that cannot
// run in the format a rule asks for runs in the other one.
//   all_channels_first  every layer NCHW / NCDHW: PyTorch's default.
//   all_channels_last   every layer NHWC / NDHWC: Composer's apply_channels_last when every op
//                       supports it (the flatten before a linear included, its weight permuted).
//   pytorch_eager       what PyTorch 1.13 eager does after model.to(channels_last) (rules below).
//   greedy              ORT/TVM-style local rules: each compute layer its cheaper format, memory-
//                       bound layers their producer's (naive_plan).
//   optimal             solve(): the exact minimum.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../error.hpp"
#include "../tensor/relabel.hpp"
#include "cost_model.hpp"
#include "kinds.hpp"
#include "naive.hpp"
#include "network.hpp"
#include "plan.hpp"
#include "solve.hpp"

namespace memfmt::graph {

enum class policy : std::uint8_t { all_channels_first, all_channels_last, pytorch_eager, greedy, optimal };

inline constexpr std::array<policy, 5> all_policies{policy::all_channels_first, policy::all_channels_last,
                                                    policy::pytorch_eager, policy::greedy, policy::optimal};

constexpr const char* to_string(policy p) noexcept {
  switch (p) {
    case policy::all_channels_first: return "all_channels_first";
    case policy::all_channels_last: return "all_channels_last";
    case policy::pytorch_eager: return "pytorch_eager";
    case policy::greedy: return "greedy";
    case policy::optimal: return "optimal";
  }
  return "?";
}

// The policy of that name; an error listing the names otherwise.
inline policy parse_policy(std::string_view name) {
  std::string names;
  for (policy p : all_policies) {
    if (name == to_string(p)) return p;
    names += std::string(names.empty() ? "" : ", ") + to_string(p);
  }
  memfmt::detail::fail(errc::invalid_argument, "unknown policy '" + std::string(name) + "' (one of " + names + ")");
}

namespace detail {

inline placed hold_constraints(const network& net, const cost_model& model, node_id id, placed wanted) {
  const pin* p = net.at(id).binding_pin();
  if (p && p->mandatory) return {p->format, "pinned (mandatory, " + p->origin + ")"};
  if (!model.allowed(net, id, wanted.format))
    return {other(wanted.format), wanted.reason + ", but it cannot run in " + to_string(wanted.format) + " (" +
                                      model.node_costs(net, id).basis + ")"};
  return wanted;
}

// PyTorch 1.13's CPU rules after model.to(channels_last), as recorded with forward hooks
// (tests/graph/fixtures/record_eager_formats.py); each kind's home (graph/kinds/) holds its own:
// - a 2-D conv writes channels_last whatever its input: its weight is channels_last and ATen's
//   conv takes the output format from the input or the weight (1x1 and depthwise too);
//   module.to(channels_last) rejects 5-D weights and Conv3d returns contiguous;
// - a 4-D buffer the model holds is channels_last after module.to(channels_last), others stay;
// - layer norm over channels is F.layer_norm of a channels-last permute, permuted back (ConvNeXt):
//   the norm writes [N, H, W, C] contiguous, so the result is channels_last from either input;
// - ConvTranspose2d, InstanceNorm, reflection and replication padding and softmax have no
//   channels_last kernel and return contiguous, and so do reductions (mean, sum, amax... with
//   keepdim); flatten reshapes into the logical order;
// - batch norm, group norm, activations, dropout, pooling, upsampling, zero padding and channel
//   slices keep their input's format;
// - a binary op follows TensorIterator's first decisive operand: the first input whose extents
//   are not ambiguous (a [N, C, 1, 1] gate decides nothing);
// - cat is channels_last only when every decisive input is.
inline placed eager_rule(const network& net, node_id id, const std::vector<std::optional<format_family>>& formats) {
  const eager_context e{net, id, formats};
  return graph::visit_kind(net.at(id).kind, [&](auto k) -> placed {
    using traits = decltype(k);
    if constexpr (has_eager<traits>::value) {
      return traits::eager(e);
    } else {
      return e.keeps_input();
    }
  });
}

inline placed uniform_rule(format_family f, policy p) {
  return {f, std::string(to_string(p)) + ": every layer " + to_string(f)};
}

inline placed greedy_reason(const network& net, const cost_model& model, node_id id,
                            const std::vector<std::optional<format_family>>& formats) {
  const format_family f = *formats[id];
  if (const pin* p = net.at(id).binding_pin(); p && p->mandatory) return {f, "pinned (mandatory, " + p->origin + ")"};
  const format_costs costs = model.node_costs(net, id);
  if (costs.preferred() == f) return {f, "greedy: its own cheaper format (" + costs.basis + ")"};
  if (const auto from = net.producer(id); from && formats[*from] == f)
    return {f, "greedy: inherits from '" + net.at(*from).name + "'"};
  return {f, "greedy: " + costs.basis};
}

}  // namespace detail

// The plan a policy gives; its node_decision::reason names the rule behind each layer.
inline plan plan_with(const network& net, const cost_model& model, policy which) {
  if (which == policy::optimal) return solve(net, model);
  if (which == policy::greedy) {
    plan p = naive_plan(net, model);
    std::vector<std::optional<format_family>> formats;
    for (const node_decision& d : p.nodes) formats.push_back(d.format);
    for (node_id id = 0; id < net.size(); ++id)
      p.nodes[id].reason =
          formats[id] ? detail::greedy_reason(net, model, id, formats).reason : "no layout (rank-2 value)";
    return p;
  }
  std::vector<std::optional<format_family>> formats(net.size());
  std::vector<std::string> reasons(net.size(), "no layout (rank-2 value)");
  for (const node& n : net.nodes()) {
    if (!net.has_format(n.id)) continue;
    placed wanted = which == policy::pytorch_eager
                        ? detail::eager_rule(net, n.id, formats)
                        : detail::uniform_rule(which == policy::all_channels_last ? format_family::channels_last
                                                                                  : format_family::channels_first,
                                               which);
    const placed got = detail::hold_constraints(net, model, n.id, std::move(wanted));
    formats[n.id] = got.format;
    reasons[n.id] = got.reason;
  }
  plan p = make_plan(net, model, formats);
  for (node_id id = 0; id < net.size(); ++id) p.nodes[id].reason = std::move(reasons[id]);
  return p;
}

// Layers whose output is not channels_last although an input is (PyTorch's tutorial check "operator
// lost channels_last", done statically): where a plan breaks channels_last propagation. Ambiguous
// outputs (C == 1, 1x1 spatial) are both formats and never listed, nor are graph outputs (a
// boundary the caller pinned, not an operator).
inline std::vector<node_id> lost_channels_last(const network& net, const plan& p) {
  std::vector<node_id> lost;
  for (const node& n : net.nodes()) {
    if (!n.spatial() || n.kind == layer_kind::output || is_ambiguous_shape(n.extents) ||
        p.nodes.at(n.id).format != format_family::channels_first)
      continue;
    for (node_id i : n.inputs)
      if (net.at(i).spatial() && !is_ambiguous_shape(net.at(i).extents) &&
          p.nodes[i].format == format_family::channels_last) {
        lost.push_back(n.id);
        break;
      }
  }
  return lost;
}

}  // namespace memfmt::graph
