// memfmt/graph/network.hpp - a small layer DAG whose formats a plan decides.
//
// Each node is a layer and names its one output value: logical extents (N, C, spatial...; rank 2
// after flatten/linear), dtype and the ids of its inputs. Ids are issued in order and an input
// must already exist, so the graph is acyclic by construction: a self or forward reference (the
// only way to write a cycle) is rejected as an unknown id. Every builder checks its arguments and
// throws memfmt::error naming the node and the offending values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../dtype.hpp"
#include "../error.hpp"

namespace memfmt::graph {

// The two layout families a plan chooses between: NCHW/NCDHW and NHWC/NDHWC.
enum class family : std::uint8_t { channels_first, channels_last };

constexpr family other(family f) noexcept {
  return f == family::channels_first ? family::channels_last : family::channels_first;
}
constexpr std::size_t index(family f) noexcept { return static_cast<std::size_t>(f); }
constexpr const char* to_string(family f) noexcept {
  return f == family::channels_first ? "channels_first" : "channels_last";
}

enum class node_kind : std::uint8_t {
  input, output, conv, batch_norm, pointwise, add, pool, global_pool, upsample, concat, flatten, linear, opaque,
};

constexpr const char* to_string(node_kind k) noexcept {
  switch (k) {
    case node_kind::input: return "input";
    case node_kind::output: return "output";
    case node_kind::conv: return "conv";
    case node_kind::batch_norm: return "batch_norm";
    case node_kind::pointwise: return "pointwise";
    case node_kind::add: return "add";
    case node_kind::pool: return "pool";
    case node_kind::global_pool: return "global_pool";
    case node_kind::upsample: return "upsample";
    case node_kind::concat: return "concat";
    case node_kind::flatten: return "flatten";
    case node_kind::linear: return "linear";
    case node_kind::opaque: return "opaque";
  }
  return "?";
}

// Layers that cost the same in either format and so inherit it from their producer (solve.hpp's
// second criterion; oneDNN and cudnn-frontend: compute layers choose, memory-bound layers inherit).
// Not opaque (a barrier declares its format), flatten (a view with its own constraint), the graph
// boundaries (pinned) nor conv / linear (they choose).
constexpr bool inherits_format(node_kind k) noexcept {
  switch (k) {
    case node_kind::batch_norm:
    case node_kind::pointwise:
    case node_kind::add:
    case node_kind::pool:
    case node_kind::global_pool:
    case node_kind::upsample:
    case node_kind::concat: return true;
    default: return false;
  }
}

using node_id = std::size_t;

// A format requirement on a node (F8). Mandatory pins must hold; a preferred pin is a soft cost
// (cost_model::pin_penalty) and, between preferred pins on one node, the higher priority wins.
struct pin {
  family format;
  bool mandatory;
  int priority;        // preferred pins: >= 1, the penalty scales with it
  std::string origin;  // who asked, for messages and the report
};

struct node {
  node_id id = 0;
  std::string name;
  node_kind kind = node_kind::opaque;
  std::vector<node_id> inputs;
  std::vector<std::int64_t> extents;  // of the output value
  memfmt::dtype type = memfmt::dtype::float32;
  std::int64_t kernel = 1;  // conv, pool: square (cubic) kernel size
  std::int64_t groups = 1;  // conv
  std::vector<pin> pins;

  // A 4-D or 5-D value, the only kind that has a layout.
  bool spatial() const noexcept { return extents.size() >= 4; }
  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (auto e : extents) n *= e;
    return n;
  }
  // The winning pin: the mandatory one, else the highest-priority preferred one.
  const pin* binding_pin() const noexcept {
    const pin* best = nullptr;
    for (const auto& p : pins)
      if (!best || (p.mandatory && !best->mandatory) ||
          (p.mandatory == best->mandatory && p.priority > best->priority))
        best = &p;
    return best;
  }
};

struct conv_attrs {
  std::int64_t out_channels = 0;
  std::int64_t kernel = 1;
  std::int64_t stride = 1;
  std::int64_t padding = 0;
  std::int64_t groups = 1;
};

struct pool_attrs {
  std::int64_t kernel = 2;
  std::int64_t stride = 2;
  std::int64_t padding = 0;
};

class network {
 public:
  node_id input(std::string name, std::vector<std::int64_t> extents, memfmt::dtype type, family format) {
    if (extents.size() != 2 && extents.size() != 4 && extents.size() != 5)
      fail_node(name, "input extents " + memfmt::detail::dims_to_string(extents) + " must have rank 2, 4 or 5");
    for (auto e : extents)
      if (e < 0) fail_node(name, "input extents " + memfmt::detail::dims_to_string(extents) + " must be >= 0");
    node n = make(std::move(name), node_kind::input, {}, std::move(extents), type);
    return add_pinned(std::move(n), format, "graph input");
  }

  // Rank-2 values have no layout; `format` applies to spatial ones.
  node_id output(std::string name, node_id in, family format) {
    node n = make(std::move(name), node_kind::output, {in});
    n.extents = nodes_[in].extents;
    return add_pinned(std::move(n), format, "graph output");
  }

  node_id conv(std::string name, node_id in, conv_attrs a) {
    node n = make(std::move(name), node_kind::conv, {in});
    const node& x = require_spatial(n, in);
    const std::int64_t c = x.extents[1];
    if (a.out_channels <= 0 || a.groups <= 0 || a.kernel <= 0 || a.stride <= 0 || a.padding < 0)
      fail_node(n.name, "conv out_channels " + std::to_string(a.out_channels) + ", kernel " + std::to_string(a.kernel) +
                            ", stride " + std::to_string(a.stride) + ", padding " + std::to_string(a.padding) +
                            ", groups " + std::to_string(a.groups) + " must be positive (padding >= 0)");
    if (c % a.groups != 0 || a.out_channels % a.groups != 0)
      fail_node(n.name, "groups " + std::to_string(a.groups) + " must divide input channels " + std::to_string(c) +
                            " and out_channels " + std::to_string(a.out_channels));
    n.extents = windowed(n.name, x.extents, a.kernel, a.stride, a.padding);
    n.extents[1] = a.out_channels;
    n.kernel = a.kernel;
    n.groups = a.groups;
    return add(std::move(n));
  }

  node_id batch_norm(std::string name, node_id in) { return same_shape(std::move(name), node_kind::batch_norm, in); }
  node_id pointwise(std::string name, node_id in) { return same_shape(std::move(name), node_kind::pointwise, in); }

  // Binary pointwise op (residual add); both operands have the same extents and dtype (no broadcast).
  node_id add(std::string name, node_id a, node_id b) {
    node n = make(std::move(name), node_kind::add, {a, b});
    const node& x = require_spatial(n, a);
    const node& y = require_spatial(n, b);
    if (x.extents != y.extents || x.type != y.type)
      fail_node(n.name, "add operands '" + x.name + "' " + memfmt::detail::dims_to_string(x.extents) + " " +
                            std::string(memfmt::to_string(x.type)) + " and '" + y.name + "' " +
                            memfmt::detail::dims_to_string(y.extents) + " " + std::string(memfmt::to_string(y.type)) +
                            " must match");
    n.extents = x.extents;
    return add(std::move(n));
  }

  node_id pool(std::string name, node_id in, pool_attrs a) {
    node n = make(std::move(name), node_kind::pool, {in});
    const node& x = require_spatial(n, in);
    if (a.kernel <= 0 || a.stride <= 0 || a.padding < 0)
      fail_node(n.name, "pool kernel " + std::to_string(a.kernel) + ", stride " + std::to_string(a.stride) +
                            ", padding " + std::to_string(a.padding) + " must be positive (padding >= 0)");
    n.extents = windowed(n.name, x.extents, a.kernel, a.stride, a.padding);
    n.kernel = a.kernel;
    return add(std::move(n));
  }

  node_id global_pool(std::string name, node_id in) {
    node n = make(std::move(name), node_kind::global_pool, {in});
    n.extents = require_spatial(n, in).extents;
    for (std::size_t d = 2; d < n.extents.size(); ++d) n.extents[d] = 1;
    return add(std::move(n));
  }

  node_id upsample(std::string name, node_id in, std::int64_t scale) {
    node n = make(std::move(name), node_kind::upsample, {in});
    n.extents = require_spatial(n, in).extents;
    if (scale <= 0) fail_node(n.name, "upsample scale " + std::to_string(scale) + " must be positive");
    for (std::size_t d = 2; d < n.extents.size(); ++d) n.extents[d] *= scale;
    return add(std::move(n));
  }

  // Concatenation along C: same rank, N, spatial extents and dtype.
  node_id concat(std::string name, std::vector<node_id> inputs) {
    node n = make(std::move(name), node_kind::concat, inputs);
    if (inputs.empty()) fail_node(n.name, "concat needs at least one input");
    const node& first = require_spatial(n, inputs[0]);
    n.extents = first.extents;
    n.extents[1] = 0;
    for (node_id id : inputs) {
      const node& x = require_spatial(n, id);
      std::vector<std::int64_t> a = x.extents, b = first.extents;
      a[1] = b[1] = 0;
      if (a != b || x.type != first.type)
        fail_node(n.name, "concat input '" + x.name + "' " + memfmt::detail::dims_to_string(x.extents) + " " +
                              std::string(memfmt::to_string(x.type)) + " does not match '" + first.name + "' " +
                              memfmt::detail::dims_to_string(first.extents) + " " +
                              std::string(memfmt::to_string(first.type)) + " outside C");
      n.extents[1] += x.extents[1];
    }
    return add(std::move(n));
  }

  // [N, C, spatial...] -> [N, C * prod(spatial)]; in channels_last the element order is N, spatial, C.
  node_id flatten(std::string name, node_id in) {
    node n = make(std::move(name), node_kind::flatten, {in});
    const node& x = require_spatial(n, in);
    std::int64_t features = 1;
    for (std::size_t d = 1; d < x.extents.size(); ++d) features *= x.extents[d];
    n.extents = {x.extents[0], features};
    return add(std::move(n));
  }

  node_id linear(std::string name, node_id in, std::int64_t out_features) {
    node n = make(std::move(name), node_kind::linear, {in});
    const node& x = at(n, in);
    if (x.extents.size() != 2)
      fail_node(n.name, "linear input '" + x.name + "' " + memfmt::detail::dims_to_string(x.extents) +
                            " must have rank 2 (flatten it first)");
    if (out_features <= 0) fail_node(n.name, "linear out_features " + std::to_string(out_features) + " must be positive");
    n.extents = {x.extents[0], out_features};
    return add(std::move(n));
  }

  // A layer the helper knows nothing about: a barrier that runs in one declared format (F5).
  node_id opaque(std::string name, std::vector<node_id> inputs, std::vector<std::int64_t> extents, family format) {
    node n = make(std::move(name), node_kind::opaque, std::move(inputs));
    if (extents.size() != 2 && extents.size() != 4 && extents.size() != 5)
      fail_node(n.name, "opaque extents " + memfmt::detail::dims_to_string(extents) + " must have rank 2, 4 or 5");
    n.extents = std::move(extents);
    return add_pinned(std::move(n), format, "opaque barrier");
  }

  // Adds a pin; a mandatory pin that contradicts another, or a preferred pin that contradicts one of
  // the same priority, is an error naming both.
  void pin_format(node_id id, family format, bool mandatory, int priority, std::string origin) {
    if (id >= nodes_.size())
      memfmt::detail::fail(errc::invalid_argument, "pin '" + origin + "': node id " + std::to_string(id) + " does not exist (" +
                                               std::to_string(nodes_.size()) + " nodes)");
    node& n = nodes_[id];
    if (!has_format(id))
      fail_node(n.name, "pin '" + origin + "' asks for " + to_string(format) + " but the node has no layout (extents " +
                            memfmt::detail::dims_to_string(n.extents) + ")");
    if (!mandatory && priority < 1)
      fail_node(n.name, "preferred pin '" + origin + "' has priority " + std::to_string(priority) + ", must be >= 1");
    for (const pin& p : n.pins)
      if (p.format != format && p.mandatory == mandatory && (mandatory || p.priority == priority))
        fail_node(n.name, std::string(mandatory ? "mandatory" : "preferred") + " pins conflict: '" + p.origin +
                              "' wants " + to_string(p.format) + ", '" + origin + "' wants " + to_string(format) +
                              (mandatory ? "" : " at the same priority " + std::to_string(priority)));
    n.pins.push_back(pin{format, mandatory, priority, std::move(origin)});
  }

  std::size_t size() const noexcept { return nodes_.size(); }
  const node& at(node_id id) const {
    if (id >= nodes_.size())
      memfmt::detail::fail(errc::invalid_argument,
                   "node id " + std::to_string(id) + " does not exist (" + std::to_string(nodes_.size()) + " nodes)");
    return nodes_[id];
  }
  const std::vector<node>& nodes() const noexcept { return nodes_; }
  const std::vector<node_id>& consumers(node_id id) const {
    at(id);
    return consumers_[id];
  }
  std::optional<node_id> find(std::string_view name) const {
    for (const node& n : nodes_)
      if (n.name == name) return n.id;
    return std::nullopt;
  }

  // The value a layer inherits its format from: its first input (in the order the builder got them,
  // so the add's first operand, the concat's first part) that has a layout, i.e. a rank 4/5 value.
  std::optional<node_id> producer(node_id id) const {
    for (node_id i : at(id).inputs)
      if (nodes_[i].spatial()) return i;
    return std::nullopt;
  }

  // A node has a layout decision when it reads or writes a spatial value.
  bool has_format(node_id id) const {
    const node& n = at(id);
    if (n.spatial()) return true;
    for (node_id i : n.inputs)
      if (nodes_[i].spatial()) return true;
    return false;
  }

 private:
  [[noreturn]] static void fail_node(const std::string& name, const std::string& what) {
    memfmt::detail::fail(errc::invalid_argument, "node '" + name + "': " + what);
  }

  node make(std::string name, node_kind kind, std::vector<node_id> inputs) const {
    if (name.empty()) fail_node(name, std::string(to_string(kind)) + " needs a name");
    if (find(name)) fail_node(name, "the name is already used by node " + std::to_string(*find(name)));
    node n;
    n.id = nodes_.size();
    n.name = std::move(name);
    n.kind = kind;
    n.inputs = std::move(inputs);
    for (node_id id : n.inputs) at(n, id);
    if (!n.inputs.empty()) n.type = nodes_[n.inputs[0]].type;
    return n;
  }
  node make(std::string name, node_kind kind, std::vector<node_id> inputs, std::vector<std::int64_t> extents,
            memfmt::dtype type) const {
    node n = make(std::move(name), kind, std::move(inputs));
    n.extents = std::move(extents);
    n.type = type;
    return n;
  }

  const node& at(const node& n, node_id id) const {
    if (id >= nodes_.size())
      fail_node(n.name, "input id " + std::to_string(id) + " is not an earlier node (ids 0.." +
                            std::to_string(static_cast<long long>(nodes_.size()) - 1) +
                            " exist; a later id would make a cycle)");
    return nodes_[id];
  }
  const node& require_spatial(const node& n, node_id id) const {
    const node& x = at(n, id);
    if (!x.spatial())
      fail_node(n.name, std::string(to_string(n.kind)) + " input '" + x.name + "' " + memfmt::detail::dims_to_string(x.extents) +
                            " must have rank 4 or 5");
    return x;
  }

  static std::vector<std::int64_t> windowed(const std::string& name, std::vector<std::int64_t> e, std::int64_t kernel,
                                            std::int64_t stride, std::int64_t padding) {
    for (std::size_t d = 2; d < e.size(); ++d) {
      const std::int64_t span = e[d] + 2 * padding - kernel;
      if (span < 0)
        fail_node(name, "kernel " + std::to_string(kernel) + " with padding " + std::to_string(padding) +
                            " is larger than the input extents " + memfmt::detail::dims_to_string(e));
      e[d] = span / stride + 1;
    }
    return e;
  }

  node_id same_shape(std::string name, node_kind kind, node_id in) {
    node n = make(std::move(name), kind, {in});
    n.extents = require_spatial(n, in).extents;
    return add(std::move(n));
  }

  node_id add(node n) {
    for (node_id i : n.inputs) consumers_[i].push_back(n.id);
    nodes_.push_back(std::move(n));
    consumers_.emplace_back();
    return nodes_.back().id;
  }
  node_id add_pinned(node n, family format, const char* origin) {
    const node_id id = add(std::move(n));
    if (has_format(id)) pin_format(id, format, true, 0, origin);
    return id;
  }

  std::vector<node> nodes_;
  std::vector<std::vector<node_id>> consumers_;
};

}  // namespace memfmt::graph
