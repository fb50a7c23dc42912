// memfmt/runtime/check_io.hpp - do the tensors given for a network's inputs or outputs fit it?
//
// Each input (or output) node must be named once with the node's dtype and extents and, for
// rank 4/5 values, the format the plan gives it; nothing else may be named. Checked before a run
// writes anything, so a bad call changes nothing.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "../error.hpp"
#include "../graph/network.hpp"
#include "../graph/plan.hpp"
#include "parameter_store.hpp"
#include "tensor_ref.hpp"

namespace memfmt::runtime {

// Throws memfmt::error naming `who` ("executor"), the value and the expected and given dtype,
// extents and format: unsupported_dtype, shape_mismatch or format_mismatch for a misfit,
// invalid_argument for a missing or unknown name, null_pointer for missing data.
inline void check_io(const graph::network& net, const graph::plan& plan, const std::map<std::string, tensor_ref>& given,
                     layer_kind kind, const char* what, const char* who) {
  const auto format_of = [&](graph::node_id id) { return plan.format(id).value_or(format_family::channels_first); };
  std::size_t expected = 0;
  for (const graph::node& n : net.nodes()) {
    if (n.kind != kind) continue;
    ++expected;
    const auto it = given.find(n.name);
    if (it == given.end())
      memfmt::detail::fail(errc::invalid_argument, std::string(who) + ": no " + what + " '" + n.name + "' given (" +
                                                       describe(n.type, n.extents) + ")");
    const tensor_ref& t = it->second;
    // The messages are built only for a misfit: forward checks on every call.
    if (t.type != n.type || t.extents != n.extents || (n.spatial() && t.format != format_of(n.id))) {
      const std::string expect = describe(n.type, n.extents) +
                                 (n.spatial() ? " " + std::string(graph::to_string(format_of(n.id))) : std::string());
      const std::string found =
          describe(t.type, t.extents) + (n.spatial() ? " " + std::string(graph::to_string(t.format)) : std::string());
      memfmt::detail::fail(
          t.type != n.type         ? errc::unsupported_dtype
          : t.extents != n.extents ? errc::shape_mismatch
                                   : errc::format_mismatch,
          std::string(who) + ": " + what + " '" + n.name + "' expected " + expect + ", given " + found);
    }
    if (t.data == nullptr && t.numel() > 0)
      memfmt::detail::fail(errc::null_pointer, std::string(who) + ": " + what + " '" + n.name + "' has no data");
  }
  for (const auto& [name, t] : given) {
    const auto id = net.find(name);
    if (!id || net.at(*id).kind != kind)
      memfmt::detail::fail(errc::invalid_argument,
                           std::string(who) + ": '" + name + "' " + describe(t.type, t.extents) + " is no " + what +
                               " of the network (" + std::to_string(expected) + " " + what + "s)");
  }
}

}  // namespace memfmt::runtime
