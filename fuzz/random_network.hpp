// A small random network drawn from fuzz input: extents and attributes from the input, huge values
// and invalid ones (NaN parameters, out-of-range enums) included, every layer kind the builder has.
// fuzz_graph plans these networks; fuzz_executor runs them.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "memfmt/graph/network.hpp"

namespace memfmt_fuzz {

using namespace memfmt::graph;
using memfmt::format_family;

inline const std::int64_t large_values[] = {std::int64_t{1} << 31, std::int64_t{1} << 40, std::int64_t{1} << 62,
                                            INT64_MAX};

inline std::int64_t pick(FuzzedDataProvider& in, std::int64_t lo, std::int64_t hi) {
  if (in.ConsumeIntegralInRange<int>(0, 31) == 0) return in.PickValueInArray(large_values);
  return in.ConsumeIntegralInRange<std::int64_t>(lo, hi);
}

inline format_family pick_family(FuzzedDataProvider& in) {
  return in.ConsumeBool() ? format_family::channels_last : format_family::channels_first;
}

// One layer on a random earlier value (or two); builders refuse what does not fit (memfmt::error).
inline void add_layer(FuzzedDataProvider& in, network& net, std::size_t i) {
  const std::string name = "l" + std::to_string(i);
  const node_id a = in.ConsumeIntegralInRange<node_id>(0, net.size() - 1);
  const node_id b = in.ConsumeIntegralInRange<node_id>(0, net.size() - 1);
  switch (in.ConsumeIntegralInRange<int>(0, 24)) {
    case 0:
      net.conv(name, a,
               conv_spec(pick(in, 1, 8), pick(in, 1, 3), pick(in, 1, 2), pick(in, 0, 1),
                         in.ConsumeBool() ? 1 : pick(in, 1, 4)));
      break;
    case 1: net.batch_norm(name, a); break;
    case 2: {  // any function (one past the last too) with parameters that may be NaN, infinite or crossed
      const double values[] = {0.0,
                               0.01,
                               -1.0,
                               6.0,
                               1e308,
                               -std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::quiet_NaN()};
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
    case 7: {  // along C mostly, any axis (N and past the last too) otherwise
      const int axis = in.ConsumeBool() ? 1 : in.ConsumeIntegralInRange<int>(-1, 5);
      net.concat(name, {a, b}, memfmt::concat_params{axis});
      break;
    }
    case 8: net.flatten(name, a); break;
    case 9: net.linear(name, a, pick(in, 1, 8)); break;
    case 10:
      net.opaque(name, {a}, {pick(in, 0, 3), pick(in, 0, 8), pick(in, 1, 6), pick(in, 1, 6)}, pick_family(in));
      break;
    case 11: {  // a constant operand, of any extents (zero and huge ones too), on either side
      const node_id c = net.constant(name + ".c", {pick(in, 0, 2), pick(in, 0, 8), pick(in, 0, 6), pick(in, 0, 6)},
                                     memfmt::dtype::float32, in.ConsumeBool());
      if (in.ConsumeBool()) net.binary(name, c, a, memfmt::binary_op::sub);
      else net.binary(name, a, c, memfmt::binary_op::div);
      break;
    }
    case 12: {  // any rearrangement kind and order (one past the last too), any factor, any perm
      const auto kind = static_cast<memfmt::rearrange_kind>(in.ConsumeIntegralInRange<int>(0, 4));
      const std::int64_t factor = pick(in, -1, 9);
      const auto order = static_cast<memfmt::block_order>(in.ConsumeIntegralInRange<int>(0, 2));
      memfmt::rearrange_params r{kind, factor, order};
      for (int& d : r.perm) d = in.ConsumeBool() ? d : in.ConsumeIntegralInRange<int>(-1, 40);
      net.rearrange(name, a, r);
      break;
    }
    case 13: {  // any epsilon, NaN and infinities too
      const double eps[] = {1e-6, 0.0, -1.0, std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN()};
      net.layer_norm(name, a, in.PickValueInArray(eps), in.ConsumeBool());
      break;
    }
    case 14:
      net.conv_transpose(name, a,
                         conv_transpose_spec(pick(in, 1, 8), pick(in, 1, 3), pick(in, 1, 2), pick(in, 0, 1),
                                             pick(in, 0, 1), in.ConsumeBool() ? 1 : pick(in, 1, 4), in.ConsumeBool()));
      break;
    case 15: net.group_norm(name, a, pick(in, 1, 4), 1e-5, in.ConsumeBool()); break;
    case 16: net.instance_norm(name, a, 1e-5, in.ConsumeBool()); break;
    case 17: {  // any mode, padding and value (reflect needs padding < extent)
      memfmt::pad_params p;
      p.mode = static_cast<memfmt::pad_mode>(in.ConsumeIntegralInRange<int>(0, 2));
      for (std::size_t d = 0; d < 3; ++d) p.begin[d] = pick(in, 0, 2), p.end[d] = pick(in, 0, 2);
      p.value = in.ConsumeBool() ? 0.0 : -1.5;
      net.pad(name, a, p);
      break;
    }
    case 18:
      net.avg_pool(name, a, pick(in, 1, 3), pick(in, 1, 2), pick(in, 0, 1), in.ConsumeBool(), in.ConsumeBool());
      break;
    case 19: {  // any axis (N and one past the last too), range and step
      const memfmt::slice_params p{in.ConsumeIntegralInRange<int>(0, 5), pick(in, -1, 4), pick(in, 0, 8),
                                   pick(in, 0, 3)};
      net.slice(name, a, p);
      break;
    }
    case 20: net.softmax(name, a, memfmt::softmax_params{in.ConsumeBool()}); break;
    case 21: net.dropout(name, a, in.ConsumeBool() ? 0.0 : 0.5); break;
    case 22: net.upsample(name, a, pick(in, 1, 3), memfmt::resample_mode::linear); break;
    case 23:  // any reduction (one past the last too) over any axes (N and past the last too)
      net.reduce(name, a,
                 memfmt::reduce_params{
                     static_cast<memfmt::reduce_op>(in.ConsumeIntegralInRange<int>(0, memfmt::reduce_op_count)),
                     in.ConsumeIntegralInRange<std::uint32_t>(0, 63)});
      break;
    default: net.mul(name, a, b); break;
  }
}

// An input of rank 4 (or 5), up to `max_layers` layers, each on random earlier values (refused
// layers are skipped), and a graph output on the last node; nullopt when the input or the output
// is refused.
inline std::optional<network> random_network(FuzzedDataProvider& in, std::size_t max_layers) {
  network net;
  try {
    std::vector<std::int64_t> extents{pick(in, 0, 3), pick(in, 1, 8), pick(in, 1, 8), pick(in, 1, 8)};
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) extents.push_back(pick(in, 1, 4));
    net.input("x", std::move(extents), memfmt::dtype::float32, pick_family(in));
  } catch (const memfmt::error&) {
    return std::nullopt;
  }
  const std::size_t layers = in.ConsumeIntegralInRange<std::size_t>(1, max_layers);
  for (std::size_t i = 0; i < layers && in.remaining_bytes() > 0; ++i) {
    try {
      add_layer(in, net, i);
    } catch (const memfmt::error&) {
    }
  }
  try {
    net.output("y", net.size() - 1, pick_family(in));
  } catch (const memfmt::error&) {
    return std::nullopt;
  }
  return net;
}

}  // namespace memfmt_fuzz
