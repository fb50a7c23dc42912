// Fuzz target: the network builder (graph/network.hpp) and the planner (graph/solve.hpp) on small
// random networks, extents and attributes drawn from the input, huge values included. Properties,
// besides "no crash, no sanitizer report, only memfmt::error": every value a builder accepts has
// non-negative extents whose element count fits, and every activation it accepts valid parameters;
// solve()'s plan passes verify(); and its total is the minimum over every assignment priced by
// make_plan() (brute force, the independent truth), which no other policy beats.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "memfmt/detail/checked.hpp"
#include "memfmt/graph/plan.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/graph/verify.hpp"

namespace {

using namespace memfmt::graph;
using memfmt_fuzz::require;

constexpr std::size_t max_layers = 10;
constexpr std::size_t brute_limit_vars = 8;  // 256 assignments: thousands of inputs a second

const std::int64_t large_values[] = {std::int64_t{1} << 31, std::int64_t{1} << 40, std::int64_t{1} << 62, INT64_MAX};

std::int64_t pick(FuzzedDataProvider& in, std::int64_t lo, std::int64_t hi) {
  if (in.ConsumeIntegralInRange<int>(0, 31) == 0) return in.PickValueInArray(large_values);
  return in.ConsumeIntegralInRange<std::int64_t>(lo, hi);
}

family pick_family(FuzzedDataProvider& in) {
  return in.ConsumeBool() ? family::channels_last : family::channels_first;
}

// One layer on a random earlier value; builders refuse what does not fit (memfmt::error).
void add_layer(FuzzedDataProvider& in, network& net, std::size_t i) {
  const std::string name = "l" + std::to_string(i);
  const node_id a = in.ConsumeIntegralInRange<node_id>(0, net.size() - 1);
  const node_id b = in.ConsumeIntegralInRange<node_id>(0, net.size() - 1);
  switch (in.ConsumeIntegralInRange<int>(0, 14)) {
    case 0: net.conv(name, a, conv_spec(pick(in, 1, 8), pick(in, 1, 3), pick(in, 1, 2), pick(in, 0, 1),
                                        in.ConsumeBool() ? 1 : pick(in, 1, 4)));
      break;
    case 1: net.batch_norm(name, a); break;
    case 2: {  // any function (one past the last too) with parameters that may be NaN, infinite or crossed
      const double values[] = {0.0, 0.01, -1.0, 6.0, 1e308, -std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
      const memfmt::activation_params f(
          static_cast<memfmt::activation>(in.ConsumeIntegralInRange<int>(0, memfmt::activation_count)),
          in.PickValueInArray(values), in.PickValueInArray(values));
      const node_id id = net.activation(name, a, f);
      try {
        memfmt::validate_activation(net.at(id).get<memfmt::activation_params>(), name);
      } catch (const memfmt::error& e) {
        memfmt_fuzz::property_failed("node '" + name + "' was accepted with " + e.what());
      }
      break;
    }
    case 3: net.add(name, a, b); break;
    case 4: net.max_pool(name, a, pick(in, 1, 3), pick(in, 1, 2)); break;
    case 5: net.global_pool(name, a); break;
    case 6: net.upsample(name, a, pick(in, 1, 3), memfmt::resample_mode::nearest); break;
    case 7: net.concat(name, {a, b}); break;
    case 8: net.flatten(name, a); break;
    case 9: net.linear(name, a, pick(in, 1, 8)); break;
    case 10: net.opaque(name, {a}, {pick(in, 0, 3), pick(in, 0, 8), pick(in, 1, 6), pick(in, 1, 6)}, pick_family(in));
      break;
    case 11: {  // a constant operand, of any extents (zero and huge ones too), on either side
      const node_id c = net.constant(name + ".c", {pick(in, 0, 2), pick(in, 0, 8), pick(in, 0, 6), pick(in, 0, 6)},
                                     memfmt::dtype::float32, in.ConsumeBool());
      if (in.ConsumeBool()) net.binary(name, c, a, memfmt::binary_op::sub);
      else net.binary(name, a, c, memfmt::binary_op::div);
      break;
    }
    case 12: {  // any rearrangement kind and order (one past the last too), any factor
      const auto kind = static_cast<memfmt::rearrange_kind>(in.ConsumeIntegralInRange<int>(0, 3));
      const std::int64_t factor = pick(in, -1, 9);
      const auto order = static_cast<memfmt::block_order>(in.ConsumeIntegralInRange<int>(0, 2));
      const memfmt::rearrange_params r{kind, factor, order};
      net.rearrange(name, a, r);
      break;
    }
    case 13: {  // any epsilon, NaN and infinities too
      const double eps[] = {1e-6, 0.0, -1.0, std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN()};
      net.layer_norm(name, a, in.PickValueInArray(eps), in.ConsumeBool());
      break;
    }
    default: net.mul(name, a, b); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  network net;
  try {
    net.input("x", {pick(in, 0, 3), pick(in, 1, 8), pick(in, 1, 8), pick(in, 1, 8)}, memfmt::dtype::float32,
              pick_family(in));
  } catch (const memfmt::error&) {
    return 0;
  }
  const std::size_t layers = in.ConsumeIntegralInRange<std::size_t>(1, max_layers);
  for (std::size_t i = 0; i < layers && in.remaining_bytes() > 0; ++i) {
    try {
      add_layer(in, net, i);
    } catch (const memfmt::error&) {
    }
  }
  for (const node& n : net.nodes()) {
    for (auto e : n.extents) require(e >= 0, "node '" + n.name + "' has a negative extent");
    try {
      (void)memfmt::detail::checked_numel(n.extents, "fuzz_graph");
    } catch (const memfmt::error&) {
      memfmt_fuzz::property_failed("node '" + n.name + "' was accepted with an element count past 64 bits");
    }
    if (n.kind == node_kind::rearrange)  // moves each element once
      require(n.numel() == net.at(n.inputs[0]).numel(), "rearrangement '" + n.name + "' changes the element count");
  }
  try {
    net.output("y", net.size() - 1, pick_family(in));
  } catch (const memfmt::error&) {
    return 0;
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
      require(plan_with(net, model, p).total() >= best.total(), std::string("policy ") + to_string(p) +
                                                                     " beats the optimum");
    } catch (const memfmt::error&) {
    }
  }

  std::vector<node_id> vars;
  for (node_id id = 0; id < net.size(); ++id)
    if (net.has_format(id)) vars.push_back(id);
  if (vars.size() > brute_limit_vars) return 0;
  std::optional<cost_t> minimum;
  std::vector<std::optional<family>> formats(net.size());
  for (std::uint32_t mask = 0; mask < (1u << vars.size()); ++mask) {
    for (std::size_t i = 0; i < vars.size(); ++i)
      formats[vars[i]] = (mask >> i) & 1u ? family::channels_last : family::channels_first;
    try {
      const cost_t t = make_plan(net, model, formats).total();
      if (!minimum || t < *minimum) minimum = t;
    } catch (const memfmt::error&) {  // an assignment pins or support forbid
    }
  }
  require(minimum && *minimum == best.total(),
          "solve's total " + std::to_string(best.total()) + " is not the brute-force minimum " +
              (minimum ? std::to_string(*minimum) : std::string("(none)")));
  return 0;
}
