// memfmt/runtime/precision.hpp - a network's parameters in the dtypes its layers run in.
//
// Running a float32 network in bfloat16 or float16 (graph::network::with_float_type) changes the
// dtype each layer takes its parameters in, while checkpoints hold them in float32.
// in_network_dtypes converts a store once, before the executor is built, as PyTorch's
// model.to(dtype) does; the integer tensors (batch counts) stay as they are.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "../dtype.hpp"
#include "../error.hpp"
#include "../graph/network.hpp"
#include "executor.hpp"
#include "parameter_store.hpp"

namespace memfmt::runtime {

// A floating-point tensor's values rounded to `type` (nearest even); `name` is for messages.
inline parameter cast_parameter(const parameter& p, memfmt::dtype type, const std::string& name) {
  if (p.type == type) return p;
  const std::string who = "parameter '" + name + "'";
  return detail::dispatch_float_dtype(p.type, who, [&](auto from) {
    const auto v = p.template values<decltype(from)>(name);
    return detail::dispatch_float_dtype(type, who, [&](auto to) {
      using To = decltype(to);
      std::vector<To> out(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) {
        if constexpr (std::is_same_v<To, double>) out[i] = detail::as_double(v[i]);
        else out[i] = static_cast<To>(static_cast<float>(detail::as_double(v[i])));
      }
      parameter r;
      r.type = type;
      r.shape = p.shape;
      r.bytes.resize(out.size() * sizeof(To));
      if (!out.empty()) std::memcpy(r.bytes.data(), out.data(), r.bytes.size());
      return r;
    });
  });
}

// Every floating-point parameter of `given` in the dtype `net` names for it (network::parameters);
// other tensors, and names the network does not know, are kept as given so that
// check_parameters still names them.
inline parameter_store in_network_dtypes(const graph::network& net, const parameter_store& given) {
  parameter_store out;
  for (const graph::node& n : net.nodes())
    for (const graph::parameter_spec& spec : net.parameters(n.id)) {
      const parameter* p = given.find(spec.name);
      if (p && memfmt::is_floating(p->type) && memfmt::is_floating(spec.type))
        out.insert(spec.name, cast_parameter(*p, spec.type, spec.name));
    }
  for (const auto& [name, p] : given)
    if (!out.contains(name)) out.insert(name, p);
  out.metadata = given.metadata;
  return out;
}

}  // namespace memfmt::runtime
