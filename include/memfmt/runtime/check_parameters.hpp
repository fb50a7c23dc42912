// memfmt/runtime/check_parameters.hpp - does a parameter store fit a network?
//
// The network lists what each layer needs (graph::network::parameters: PyTorch's state_dict names,
// logical shapes and dtypes); the store holds what a file or the user gave. They must match
// exactly: every needed tensor present with its dtype and shape, nothing left over (a left-over
// tensor is usually a misspelt name or the weights of another network, and loading it silently
// would run the network with whatever the missing tensor defaulted to).
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "../error.hpp"
#include "../graph/network.hpp"
#include "parameter_store.hpp"

namespace memfmt::runtime {

// Throws one memfmt::error listing the problems (the first few, then how many more): shape_mismatch
// when a tensor has the wrong dtype or shape, else invalid_argument for missing or extra tensors.
// Each problem names the tensor, its layer and the expected and found dtype and shape.
inline void check_parameters(const graph::network& net, const parameter_store& store) {
  constexpr std::size_t shown = 6;
  std::vector<std::string> problems;
  bool mismatch = false;
  std::set<std::string> needed;
  for (const graph::node& n : net.nodes())
    for (const graph::parameter_spec& p : net.parameters(n.id)) {
      needed.insert(p.name);
      const parameter* found = store.find(p.name);
      if (!found) {
        problems.push_back("'" + p.name + "' (layer '" + n.name + "') expected " + describe(p.type, p.extents) +
                           ", missing");
      } else if (found->type != p.type || found->shape != p.extents) {
        mismatch = true;
        problems.push_back("'" + p.name + "' (layer '" + n.name + "') expected " + describe(p.type, p.extents) +
                           ", found " + describe(found->type, found->shape));
      }
    }
  for (const auto& [name, p] : store)
    if (!needed.count(name))
      problems.push_back("'" + name + "' " + describe(p.type, p.shape) + " belongs to no layer of the network");
  if (problems.empty()) return;
  std::string what = "parameters do not fit the network (" + std::to_string(needed.size()) + " expected, " +
                     std::to_string(store.size()) + " given): ";
  for (std::size_t i = 0; i < problems.size() && i < shown; ++i) what += (i ? "; " : "") + problems[i];
  if (problems.size() > shown) what += "; and " + std::to_string(problems.size() - shown) + " more";
  memfmt::detail::fail(mismatch ? errc::shape_mismatch : errc::invalid_argument, what);
}

}  // namespace memfmt::runtime
