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
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../error.hpp"
#include "../graph/network.hpp"
#include "file.hpp"
#include "json.hpp"

namespace memfmt::io {

inline constexpr int network_format_version = 1;

namespace detail {

using json = nlohmann::json;

template <class E, std::size_t N>
struct enum_names {
  std::array<const char*, N> names;
  const char* operator()(E e) const { return names.at(static_cast<std::size_t>(e)); }
};

// The kinds' names are kind_infos'.
constexpr enum_names<layer_kind, layer_kind_count> kind_name_table() {
  enum_names<layer_kind, layer_kind_count> t{};
  for (std::size_t i = 0; i < layer_kind_count; ++i) t.names[i] = kind_infos[i].name;
  return t;
}
inline constexpr auto kind_names = kind_name_table();
inline constexpr enum_names<memfmt::reduce_op, memfmt::reduce_op_count> reduce_names{memfmt::reduce_op_names};
inline constexpr enum_names<memfmt::rearrange_kind, 4> rearrange_names{
    {"channel_shuffle", "depth_to_space", "space_to_depth", "transpose"}};
inline constexpr enum_names<memfmt::block_order, 2> block_order_names{{"crd", "dcr"}};
inline constexpr enum_names<memfmt::activation, memfmt::activation_count> activation_names{memfmt::activation_names};
inline constexpr enum_names<memfmt::binary_op, 4> binary_names{{"add", "sub", "mul", "div"}};
inline constexpr enum_names<memfmt::pool_kind, 2> pool_names{{"max", "average"}};
inline constexpr enum_names<memfmt::resample_mode, 2> resample_names{{"nearest", "linear"}};
inline constexpr enum_names<memfmt::resample_coordinates, 6> coordinate_names{
    {"pytorch", "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"}};
inline constexpr enum_names<memfmt::nearest_rounding, 4> rounding_names{
    {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}};
inline constexpr enum_names<memfmt::pad_mode, 3> pad_names{{"constant", "reflect", "replicate"}};
inline constexpr enum_names<format_family, 2> family_names{{"channels_first", "channels_last"}};
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
// A slice's or concatenation's key 'axis': C (1) or a spatial axis.
inline int axis_of(const json& a, const std::string& where) {
  const std::int64_t axis = integer(a, "axis", where);
  if (axis < 1 || axis > 4)
    bad(where, "key 'axis' must be 1 (C) or a spatial axis (2 to 4), got " + std::to_string(axis));
  return static_cast<int>(axis);
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

// The attributes conv and conv_transpose share (conv_attrs, conv_transpose_attrs).
template <class A>
json conv_json(const A& c) {
  return {{"out_channels", c.out_channels},
          {"kernel", triple_json(c.kernel)},
          {"stride", triple_json(c.params.stride)},
          {"padding", triple_json(c.params.padding)},
          {"dilation", triple_json(c.params.dilation)},
          {"groups", c.params.groups},
          {"bias", c.bias}};
}
template <class A>
void read_conv(const json& a, const std::string& at, A& c) {
  c.out_channels = integer(a, "out_channels", at);
  c.kernel = triple(a, "kernel", at);
  c.params.stride = triple(a, "stride", at);
  c.params.padding = triple(a, "padding", at);
  c.params.dilation = triple(a, "dilation", at);
  c.params.groups = integer(a, "groups", at);
  c.bias = boolean(a, "bias", at);
}

inline json attrs_json(const graph::node& n) {
  json a = json::object();
  const auto pinned_format = [&] {
    const graph::pin* p = n.binding_pin();
    return family_names(p ? p->format : format_family::channels_first);
  };
  switch (n.kind) {
    case layer_kind::input: a["format"] = pinned_format(); break;
    case layer_kind::output: a["format"] = pinned_format(); break;
    case layer_kind::conv: a = conv_json(n.get<graph::conv_attrs>()); break;
    case layer_kind::conv_transpose: {
      const auto& c = n.get<graph::conv_transpose_attrs>();
      a = conv_json(c);
      a["output_padding"] = triple_json(c.output_padding);
      break;
    }
    case layer_kind::batch_norm: {
      const auto& b = n.get<memfmt::batch_norm_params>();
      a = {{"epsilon", b.epsilon}, {"momentum", b.momentum}, {"fuse_relu", b.fuse_relu}};
      break;
    }
    case layer_kind::instance_norm:
    case layer_kind::group_norm: {
      const auto& g = n.get<graph::norm_attrs>();
      a = {{"groups", g.params.groups}, {"epsilon", g.params.epsilon}, {"affine", g.affine}};
      break;
    }
    case layer_kind::layer_norm: {
      const auto& l = n.get<graph::layer_norm_attrs>();
      a = {{"epsilon", l.params.epsilon}, {"affine", l.affine}};
      break;
    }
    case layer_kind::pad: {
      const auto& p = n.get<memfmt::pad_params>();
      a = {{"mode", pad_names(p.mode)},
           {"begin", triple_json(p.begin)},
           {"end", triple_json(p.end)},
           {"value", p.value}};
      break;
    }
    case layer_kind::activation: {
      // alpha and beta for the functions that have them; an infinite clip bound (JSON has no
      // infinity) is left out and reads back as the default.
      const auto& f = n.get<memfmt::activation_params>();
      a["function"] = activation_names(f.kind);
      if (memfmt::has_parameters(f.kind)) {
        if (std::isfinite(f.alpha)) a["alpha"] = f.alpha;
        if (std::isfinite(f.beta)) a["beta"] = f.beta;
      }
      break;
    }
    case layer_kind::binary: a["op"] = binary_names(n.get<memfmt::binary_op>()); break;
    case layer_kind::pool: {
      const auto& p = n.get<memfmt::pool_params>();
      a = {{"kind", pool_names(p.kind)},
           {"kernel", triple_json(p.kernel)},
           {"stride", triple_json(p.stride)},
           {"padding", triple_json(p.padding)},
           {"padding_end", triple_json(p.padding_end)},
           {"ceil_mode", p.ceil_mode},
           {"count_include_pad", p.count_include_pad}};
      break;
    }
    case layer_kind::global_pool: a["kind"] = pool_names(n.get<graph::global_pool_attrs>().kind); break;
    case layer_kind::upsample: {
      const auto& u = n.get<memfmt::upsample_params>();
      a = {{"mode", resample_names(u.mode)}, {"output", triple_json(u.output)}};
      // ONNX's coordinates only where set: PyTorch's upsamples keep their JSON.
      if (u.coordinates != memfmt::resample_coordinates::pytorch) {
        a["coordinates"] = coordinate_names(u.coordinates);
        a["rounding"] = rounding_names(u.rounding);
        a["scale"] = json::array({u.scale[0], u.scale[1], u.scale[2]});
      }
      break;
    }
    case layer_kind::slice: {
      const auto& p = n.get<memfmt::slice_params>();
      a = {{"axis", p.axis}, {"begin", p.begin}, {"end", p.end}, {"step", p.step}};
      break;
    }
    case layer_kind::linear: {
      const auto& l = n.get<graph::linear_attrs>();
      a = {{"out_features", l.out_features}, {"bias", l.bias}};
      break;
    }
    case layer_kind::softmax: a["log"] = n.get<memfmt::softmax_params>().log; break;
    case layer_kind::reduce: {
      const auto& p = n.get<memfmt::reduce_params>();
      json axes = json::array();
      for (int d = 1; d < 32; ++d)
        if (p.axes & memfmt::axis_bit(d)) axes.push_back(d);
      a = {{"op", reduce_names(p.op)}, {"axes", axes}};
      break;
    }
    case layer_kind::dropout: a["p"] = n.get<graph::dropout_attrs>().p; break;
    case layer_kind::opaque: {
      const auto& o = n.get<graph::opaque_attrs>();
      a = {{"input_format", family_names(o.input_format)}, {"output_format", family_names(o.output_format)}};
      break;
    }
    case layer_kind::constant: a["trainable"] = n.get<graph::constant_attrs>().trainable; break;
    case layer_kind::rearrange: {
      const auto& r = n.get<memfmt::rearrange_params>();
      if (r.kind == memfmt::rearrange_kind::transpose) {
        a = {
            {"op", rearrange_names(r.kind)},
            {"perm", std::vector<int>(r.perm.begin(), r.perm.begin() + static_cast<std::ptrdiff_t>(n.extents.size()))}};
        break;
      }
      a = {{"op", rearrange_names(r.kind)}, {"factor", r.factor}};
      if (r.kind != memfmt::rearrange_kind::channel_shuffle) a["order"] = block_order_names(r.order);
      break;
    }
    case layer_kind::concat: a["axis"] = n.get<memfmt::concat_params>().axis; break;
    case layer_kind::flatten: break;
  }
  return a;
}

// Replays one node's builder call.
inline graph::node_id build_node(graph::network& net, const json& j, const std::string& where) {
  const std::string name = text(j, "name", where);
  // "channel_reduce", the reduction's name before it took spatial axes, still reads.
  const layer_kind kind =
      text(j, "kind", where) == "channel_reduce" ? layer_kind::reduce : named(kind_names, j, "kind", where);
  const json& a = member(j, "attrs", where);
  const std::string at = where + " ('" + name + "') attrs";
  std::vector<graph::node_id> in;
  const json& inputs = member(j, "inputs", where);
  if (!inputs.is_array()) bad(where, "key 'inputs' must be an array of node names, got " + io::excerpt(inputs));
  for (const json& i : inputs) {
    if (!i.is_string()) bad(where, "key 'inputs' must be an array of node names, got " + io::excerpt(inputs));
    const auto id = net.find(i.get<std::string>());
    if (!id) bad(where, "input '" + i.get<std::string>() + "' is not an earlier node");
    in.push_back(*id);
  }
  const auto arity = [&](std::size_t n) {
    if (in.size() != n)
      bad(where, std::string(kind_names(kind)) + " takes " + std::to_string(n) + " input(s), key 'inputs' has " +
                     std::to_string(in.size()));
  };
  switch (kind) {
    case layer_kind::input:
      arity(0);
      return net.input(name, integers(j, "extents", where), named(dtype_names, j, "dtype", where),
                       named(family_names, a, "format", at));
    case layer_kind::output: arity(1); return net.output(name, in[0], named(family_names, a, "format", at));
    case layer_kind::constant:
      arity(0);
      return net.constant(name, integers(j, "extents", where), named(dtype_names, j, "dtype", where),
                          boolean(a, "trainable", at));
    case layer_kind::conv: {
      arity(1);
      graph::conv_attrs c;
      read_conv(a, at, c);
      return net.conv(name, in[0], c);
    }
    case layer_kind::conv_transpose: {
      arity(1);
      graph::conv_transpose_attrs c;
      read_conv(a, at, c);
      c.output_padding = triple(a, "output_padding", at);
      return net.conv_transpose(name, in[0], c);
    }
    case layer_kind::batch_norm: {
      arity(1);
      memfmt::batch_norm_params b;
      b.epsilon = number(a, "epsilon", at);
      b.momentum = number(a, "momentum", at);
      b.fuse_relu = boolean(a, "fuse_relu", at);
      return net.batch_norm(name, in[0], b);
    }
    case layer_kind::instance_norm:
      arity(1);
      return net.instance_norm(name, in[0], number(a, "epsilon", at), boolean(a, "affine", at));
    case layer_kind::group_norm:
      arity(1);
      return net.group_norm(name, in[0], integer(a, "groups", at), number(a, "epsilon", at), boolean(a, "affine", at));
    case layer_kind::layer_norm:
      arity(1);
      return net.layer_norm(name, in[0], number(a, "epsilon", at), boolean(a, "affine", at));
    case layer_kind::pad: {
      arity(1);
      memfmt::pad_params p;
      p.mode = named(pad_names, a, "mode", at);
      p.begin = triple(a, "begin", at);
      p.end = triple(a, "end", at);
      p.value = number(a, "value", at);
      return net.pad(name, in[0], p);
    }
    case layer_kind::activation: {
      arity(1);
      memfmt::activation_params f(named(activation_names, a, "function", at));
      if (a.contains("alpha")) f.alpha = number(a, "alpha", at);
      if (a.contains("beta")) f.beta = number(a, "beta", at);
      return net.activation(name, in[0], f);
    }
    case layer_kind::binary: arity(2); return net.binary(name, in[0], in[1], named(binary_names, a, "op", at));
    case layer_kind::pool: {
      arity(1);
      memfmt::pool_params p;
      p.kind = named(pool_names, a, "kind", at);
      p.kernel = triple(a, "kernel", at);
      p.stride = triple(a, "stride", at);
      p.padding = triple(a, "padding", at);
      p.padding_end = triple(a, "padding_end", at);
      p.ceil_mode = boolean(a, "ceil_mode", at);
      p.count_include_pad = boolean(a, "count_include_pad", at);
      return net.pool(name, in[0], p);
    }
    case layer_kind::global_pool: arity(1); return net.global_pool(name, in[0], named(pool_names, a, "kind", at));
    case layer_kind::upsample: {
      arity(1);
      memfmt::upsample_params u;
      u.mode = named(resample_names, a, "mode", at);
      u.output = triple(a, "output", at);
      if (a.contains("coordinates")) {
        u.coordinates = named(coordinate_names, a, "coordinates", at);
        u.rounding = named(rounding_names, a, "rounding", at);
        const json& s = member(a, "scale", at);
        if (!s.is_array() || s.size() != 3 || !s[0].is_number() || !s[1].is_number() || !s[2].is_number())
          bad(at,
              "key 'scale' must be an array of 3 numbers (D, H, W order; 2-D uses the first 2), got " + io::excerpt(s));
        for (std::size_t i = 0; i < 3; ++i) u.scale[i] = s[i].get<double>();
      }
      return net.upsample(name, in[0], u);
    }
    case layer_kind::concat: {
      memfmt::concat_params p;  // "axis" may be left out: along C
      if (a.contains("axis")) p.axis = axis_of(a, at);
      return net.concat(name, in, p);
    }
    case layer_kind::slice: {
      arity(1);
      memfmt::slice_params p;  // "axis" and "step" may be left out: a channel slice
      p.begin = integer(a, "begin", at);
      p.end = integer(a, "end", at);
      if (a.contains("axis")) p.axis = axis_of(a, at);
      if (a.contains("step")) p.step = integer(a, "step", at);
      return net.slice(name, in[0], p);
    }
    case layer_kind::flatten: arity(1); return net.flatten(name, in[0]);
    case layer_kind::linear:
      arity(1);
      return net.linear(name, in[0], integer(a, "out_features", at), boolean(a, "bias", at));
    case layer_kind::softmax: {
      arity(1);
      memfmt::softmax_params p;
      p.log = boolean(a, "log", at);
      return net.softmax(name, in[0], p);
    }
    case layer_kind::reduce: {
      arity(1);
      memfmt::reduce_params p;  // "axes" may be left out: a reduction over C
      p.op = named(reduce_names, a, "op", at);
      if (a.contains("axes")) {
        p.axes = 0;
        for (const std::int64_t axis : integers(a, "axes", at)) {
          if (axis < 1 || axis > 4)
            bad(at, "key 'axes' must hold C (1) or spatial axes (2 to 4), got " + std::to_string(axis));
          p.axes |= memfmt::axis_bit(static_cast<int>(axis));
        }
      }
      return net.reduce(name, in[0], p);
    }
    case layer_kind::dropout: arity(1); return net.dropout(name, in[0], number(a, "p", at));
    case layer_kind::rearrange: {
      arity(1);
      memfmt::rearrange_params r;
      r.kind = named(rearrange_names, a, "op", at);
      if (r.kind == memfmt::rearrange_kind::transpose) {
        std::vector<int> perm;
        for (const std::int64_t d : integers(a, "perm", at)) {
          if (d < 0 || d > 4) bad(at, "key 'perm' must hold dims 0 to 4, got " + std::to_string(d));
          perm.push_back(static_cast<int>(d));
        }
        return net.transpose(name, in[0], perm);
      }
      r.factor = integer(a, "factor", at);
      if (r.kind != memfmt::rearrange_kind::channel_shuffle) r.order = named(block_order_names, a, "order", at);
      return net.rearrange(name, in[0], r);
    }
    case layer_kind::opaque:
      return net.opaque(name, in, integers(j, "extents", where), named(family_names, a, "output_format", at),
                        named(family_names, a, "input_format", at));
  }
  bad(where, "unknown kind");
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
