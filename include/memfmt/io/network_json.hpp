// memfmt/io/network_json.hpp - graph::network as a JSON document and back (docs/formats.md,
// "memfmt.network" version 1). Needs nlohmann-json: part of the optional memfmt::graph_io component.
//
// A node is written with its name, kind, input names, output extents, dtype, attributes and pins.
// Loading replays the builders (network.hpp), so every layer is validated as if built in code, and
// the stored extents must equal the inferred ones. A malformed document is a memfmt::error naming
// the node and key (and, for a syntax error, nlohmann's line and column). An opaque layer's callback
// is the executor's and is not stored.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../error.hpp"
#include "../graph/kinds.hpp"
#include "../graph/network.hpp"
#include "file.hpp"
#include "json.hpp"

namespace memfmt::io {

inline constexpr int network_format_version = 1;

namespace detail {

using json = nlohmann::json;

using graph::enum_names;

// The kinds' names are kind_infos'.
constexpr enum_names<layer_kind, layer_kind_count> kind_name_table() {
  enum_names<layer_kind, layer_kind_count> t{};
  for (std::size_t i = 0; i < layer_kind_count; ++i) t.names[i] = kind_infos[i].name;
  return t;
}
inline constexpr auto kind_names = kind_name_table();
inline constexpr const auto& family_names = graph::names::family;
inline constexpr enum_names<memfmt::dtype, 10> dtype_names{
    {"float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool"}};

[[noreturn]] inline void bad(const std::string& where, const std::string& what) {
  memfmt::detail::fail(errc::invalid_argument, where + ": " + what);
}

// The member `key` of object `j`, which must exist.
inline const json& member(const json& j, const char* key, const std::string& where) {
  if (!j.is_object()) bad(where, "expected a JSON object");
  const auto it = j.find(key);
  if (it == j.end()) bad(where, "key '" + std::string(key) + "' is missing");
  return *it;
}

inline std::int64_t integer(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_number_integer()) bad(where, "key '" + std::string(key) + "' must be an integer, got " + io::excerpt(v));
  return v.get<std::int64_t>();
}
inline double number(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_number()) bad(where, "key '" + std::string(key) + "' must be a number, got " + io::excerpt(v));
  return v.get<double>();
}
inline bool boolean(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_boolean()) bad(where, "key '" + std::string(key) + "' must be true or false, got " + io::excerpt(v));
  return v.get<bool>();
}
inline std::string text(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_string()) bad(where, "key '" + std::string(key) + "' must be a string, got " + io::excerpt(v));
  return v.get<std::string>();
}
inline std::vector<std::int64_t> integers(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  std::vector<std::int64_t> out;
  if (v.is_array())
    for (const json& e : v) {
      if (!e.is_number_integer()) break;
      out.push_back(e.get<std::int64_t>());
    }
  if (!v.is_array() || out.size() != v.size())
    bad(where, "key '" + std::string(key) + "' must be an array of integers, got " + io::excerpt(v));
  return out;
}
inline spatial3 triple(const json& j, const char* key, const std::string& where) {
  const std::vector<std::int64_t> v = integers(j, key, where);
  if (v.size() != 3)
    bad(where, "key '" + std::string(key) + "' must have 3 entries (D, H, W order; 2-D uses the first 2), got " +
                   std::to_string(v.size()));
  return {v[0], v[1], v[2]};
}
template <class E, std::size_t N>
E named(const enum_names<E, N>& table, const json& j, const char* key, const std::string& where) {
  const std::string s = text(j, key, where);
  std::string all;
  for (std::size_t i = 0; i < N; ++i) {
    if (s == table.names[i]) return static_cast<E>(i);
    all += std::string(i ? ", " : "") + table.names[i];
  }
  bad(where, "key '" + std::string(key) + "' is '" + s + "', not one of " + all);
}

inline json triple_json(const spatial3& a) { return json::array({a[0], a[1], a[2]}); }

// A kind's codec (graph/kinds/kind_traits.hpp) writing its attributes into `out`.
struct attrs_writer {
  json& out;
  static constexpr bool reading() { return false; }
  static constexpr bool present(const char*, bool written) { return written; }
  template <class T>
  void field(const char* key, const T& v) {
    if constexpr (std::is_same_v<T, spatial3>) out[key] = triple_json(v);
    else if constexpr (std::is_same_v<T, std::array<double, 3>>) out[key] = json::array({v[0], v[1], v[2]});
    else out[key] = v;
  }
  template <class E, std::size_t N>
  void field(const char* key, const E& v, const enum_names<E, N>& names) {
    out[key] = names(v);
  }
  template <class T>
  void field(const char* key, const T& v, const graph::int_range&) {
    out[key] = v;
  }
};

// A kind's codec reading its attributes from `in`, every error naming `at` and the key.
struct attrs_reader {
  const json& in;
  const std::string& at;
  static constexpr bool reading() { return true; }
  bool present(const char* key, bool) const { return in.contains(key); }
  void field(const char* key, std::int64_t& v) const { v = integer(in, key, at); }
  void field(const char* key, double& v) const { v = number(in, key, at); }
  void field(const char* key, bool& v) const { v = boolean(in, key, at); }
  void field(const char* key, spatial3& v) const { v = triple(in, key, at); }
  void field(const char* key, std::array<double, 3>& v) const {
    const json& s = member(in, key, at);
    if (!s.is_array() || s.size() != 3 || !s[0].is_number() || !s[1].is_number() || !s[2].is_number())
      bad(at, "key '" + std::string(key) +
                  "' must be an array of 3 numbers (D, H, W order; 2-D uses the first 2), got " + io::excerpt(s));
    for (std::size_t i = 0; i < 3; ++i) v[i] = s[i].get<double>();
  }
  template <class E, std::size_t N>
  void field(const char* key, E& v, const enum_names<E, N>& names) const {
    v = named(names, in, key, at);
  }
  void field(const char* key, int& v, const graph::int_range& r) const {
    const std::int64_t x = integer(in, key, at);
    if (x < r.lo || x > r.hi)
      bad(at, "key '" + std::string(key) + "' must be " + r.says + ", got " + std::to_string(x));
    v = static_cast<int>(x);
  }
  void field(const char* key, std::vector<std::int64_t>& v, const graph::int_range& r) const {
    v = integers(in, key, at);
    for (const std::int64_t x : v)
      if (x < r.lo || x > r.hi)
        bad(at, "key '" + std::string(key) + "' must hold " + r.says + ", got " + std::to_string(x));
  }
};

inline json attrs_json(const graph::node& n) {
  json a = json::object();
  graph::visit_kind(n.kind, [&](auto k) {
    using traits = decltype(k);
    typename traits::attrs v = traits::of(n);
    attrs_writer w{a};
    traits::codec(w, v);
  });
  return a;
}

// Replays one node's builder call.
inline graph::node_id build_node(graph::network& net, const json& j, const std::string& where) {
  graph::node_args args;
  args.name = text(j, "name", where);
  // "channel_reduce", the reduction's name before it took spatial axes, still reads.
  const layer_kind kind =
      text(j, "kind", where) == "channel_reduce" ? layer_kind::reduce : named(kind_names, j, "kind", where);
  const json& a = member(j, "attrs", where);
  const std::string at = where + " ('" + args.name + "') attrs";
  const json& inputs = member(j, "inputs", where);
  if (!inputs.is_array()) bad(where, "key 'inputs' must be an array of node names, got " + io::excerpt(inputs));
  for (const json& i : inputs) {
    if (!i.is_string()) bad(where, "key 'inputs' must be an array of node names, got " + io::excerpt(inputs));
    const auto id = net.find(i.get<std::string>());
    if (!id) bad(where, "input '" + i.get<std::string>() + "' is not an earlier node");
    args.inputs.push_back(*id);
  }
  args.extents = integers(j, "extents", where);
  args.type = named(dtype_names, j, "dtype", where);
  return graph::visit_kind(kind, [&](auto k) {
    using traits = decltype(k);
    if (traits::inputs != graph::any_inputs && args.inputs.size() != static_cast<std::size_t>(traits::inputs))
      bad(where, std::string(kind_names(kind)) + " takes " + std::to_string(traits::inputs) +
                     " input(s), key 'inputs' has " + std::to_string(args.inputs.size()));
    typename traits::attrs v{};
    const attrs_reader r{a, at};
    traits::codec(r, v);
    return traits::build(net, args, v);
  });
}

// The bounded JSON reader (json.hpp), its errors as memfmt::error naming `what`.
inline json parse(std::string_view text, const std::string& what) { return io::parse_json(text, what); }

inline void check_header(const json& j, const char* format, int version, const std::string& what) {
  const std::string f = text(j, "format", what);
  if (f != format) bad(what, "key 'format' is '" + f + "', expected '" + format + "'");
  const std::int64_t v = integer(j, "version", what);
  if (v != version)
    bad(what, "key 'version' is " + std::to_string(v) + "; this memfmt reads version " + std::to_string(version));
}

inline std::string read_file(const std::string& path, const char* what) { return io::read_text_file(path, what); }

inline void write_file(const std::string& path, const std::string& content, const char* what) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  if (!out) memfmt::detail::fail(errc::invalid_argument, std::string(what) + " '" + path + "' cannot be written");
}

}  // namespace detail

inline nlohmann::json network_to_json(const graph::network& net) {
  using detail::json;
  json nodes = json::array();
  for (const graph::node& n : net.nodes()) {
    json inputs = json::array();
    for (graph::node_id i : n.inputs) inputs.push_back(net.at(i).name);
    json pins = json::array();
    for (const graph::pin& p : n.pins)
      pins.push_back({{"format", detail::family_names(p.format)},
                      {"mandatory", p.mandatory},
                      {"priority", p.priority},
                      {"origin", p.origin}});
    nodes.push_back({{"name", n.name},
                     {"kind", detail::kind_names(n.kind)},
                     {"inputs", inputs},
                     {"extents", n.extents},
                     {"dtype", detail::dtype_names(n.type)},
                     {"attrs", detail::attrs_json(n)},
                     {"pins", pins}});
  }
  return {{"format", "memfmt.network"}, {"version", network_format_version}, {"nodes", nodes}};
}

inline graph::network network_from_json(const nlohmann::json& j) {
  using detail::json;
  detail::check_header(j, "memfmt.network", network_format_version, "network file");
  const json& nodes = detail::member(j, "nodes", "network file");
  if (!nodes.is_array()) detail::bad("network file", "key 'nodes' must be an array");
  graph::network net;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string where = "network file: nodes[" + std::to_string(i) + "]";
    const graph::node_id id = detail::build_node(net, nodes[i], where);
    const graph::node& n = net.at(id);
    const std::vector<std::int64_t> stored = detail::integers(nodes[i], "extents", where);
    if (stored != n.extents)
      detail::bad(where, "('" + n.name + "') key 'extents' is " + memfmt::detail::dims_to_string(stored) +
                             ", the layer computes " + memfmt::detail::dims_to_string(n.extents));
    const json& pins = detail::member(nodes[i], "pins", where);
    if (!pins.is_array()) detail::bad(where, "key 'pins' must be an array");
    for (const json& p : pins) {
      const format_family f = detail::named(detail::family_names, p, "format", where + " pin");
      const bool mandatory = detail::boolean(p, "mandatory", where + " pin");
      const auto priority = detail::integer(p, "priority", where + " pin");
      if (priority < 0 || priority > 1'000'000)
        detail::bad(where + " pin", "key 'priority' is " + std::to_string(priority) + ", must be in [0, 1000000]");
      const std::string origin = detail::text(p, "origin", where + " pin");
      bool present = false;  // the builder's own pins (graph boundaries, barriers)
      for (const graph::pin& q : n.pins)
        present =
            present || (q.format == f && q.mandatory == mandatory && q.priority == priority && q.origin == origin);
      if (!present) net.pin_format(id, f, mandatory, static_cast<int>(priority), origin);
    }
  }
  return net;
}

inline std::string save_network(const graph::network& net) {
  return io::dump_json(network_to_json(net), 1, "network file") + "\n";
}
inline graph::network load_network(std::string_view text) {
  return network_from_json(detail::parse(text, "network file"));
}
inline void write_network_file(const std::string& path, const graph::network& net) {
  detail::write_file(path, save_network(net), "network file");
}
inline graph::network read_network_file(const std::string& path) {
  return network_from_json(detail::parse(detail::read_file(path, "network file"), "network file '" + path + "'"));
}

}  // namespace memfmt::io
