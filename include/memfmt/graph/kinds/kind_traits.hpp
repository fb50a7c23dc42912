// memfmt/graph/kinds/kind_traits.hpp - what a layer kind's home (graph/kinds/<kind>.hpp) defines, and
// the helpers the homes share.
//
// kind_traits<K> is where the graph's files, the timing cache, the cost model, the eager policy and
// the support queries learn about kind K; graph/kinds.hpp lists the homes and dispatches to them
// (visit_kind). A home defines:
//
//   using attrs;                     what a network file stores for the layer
//   static attrs of(const node&);    the node's attrs as stored (its own attributes, usually)
//   static constexpr int inputs;     the number of inputs its builder takes, or any_inputs
//   template <class Codec>
//   static void codec(Codec&, attrs&);  its keys in network JSON, one list for writing and reading
//   static node_id build(network&, const node_args&, const attrs&);  replays its builder
//   static void signature(const node&, std::size_t dims, std::string&);  optional: appends what
//                                    changes its running time (timing cache); absent: not measured
//   static placed eager(const eager_context&);  optional: PyTorch eager's format for it (policy.hpp);
//                                    absent: it keeps its input's format
//   static void query(const node&, op_query&);  optional: what a backend decides on besides the
//                                    kind (runtime/backend_support.hpp)
//   template <class Cost>
//   static format_costs prior(const Cost&);  optional: its cost per family before any measurement
//                                    (cost_model.hpp's context); absent: memory-bound, the same
//                                    cost in both families
//
// A Codec (io/network_json.hpp has the writer and the reader) offers
//   c.field(key, v)               v: std::int64_t, double, bool, spatial3 or std::array<double, 3>
//   c.field(key, v, names)        v: an enum, stored by its name in `names`
//   c.field(key, v, range)        v: int or std::vector<std::int64_t>, each in [range.lo, range.hi]
//   c.present(key, written)       writing: `written`; reading: whether the key is there (keys that
//                                 may be left out, or that only some attribute values have)
//   c.reading()                   true for the reader (activation: a function read resets the
//                                 parameters to its defaults)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../../layers/layer_kind.hpp"
#include "../../layers/layer_params.hpp"
#include "../../layers/op_query.hpp"
#include "../../tensor/relabel.hpp"
#include "../network.hpp"

namespace memfmt::graph {

template <layer_kind K>
struct kind_traits;

// kind_traits::inputs for a builder that takes a list.
inline constexpr int any_inputs = -1;

// What a file gives a builder besides the kind's attributes.
struct node_args {
  std::string name;
  std::vector<node_id> inputs;
  std::vector<std::int64_t> extents;  // the stored output extents
  memfmt::dtype type = memfmt::dtype::float32;
};

// The names an enum is stored by, in its order.
template <class E, std::size_t N>
struct enum_names {
  std::array<const char*, N> names;
  const char* operator()(E e) const { return names.at(static_cast<std::size_t>(e)); }
};

// The values an integer key may hold, and how an error states them.
struct int_range {
  std::int64_t lo;
  std::int64_t hi;
  const char* says;  // "1 (C) or a spatial axis (2 to 4)"
};

// A kind whose file attributes are the node's own.
template <class A>
struct stored_attrs {
  using attrs = A;
  static attrs of(const node& n) { return n.get<A>(); }
};

namespace names {
inline constexpr enum_names<memfmt::pool_kind, 2> pool{{"max", "average"}};
inline constexpr enum_names<format_family, 2> family{{"channels_first", "channels_last"}};
}  // namespace names

// What the graph boundaries (input, output) share: a file stores the format a boundary is pinned
// to, and a boundary costs nothing. Their homes add the input count and the builder.
struct boundary_kind {
  struct attrs {
    format_family format = format_family::channels_first;
  };
  static attrs of(const node& n) {
    const pin* p = n.binding_pin();
    return {p ? p->format : format_family::channels_first};
  }
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("format", a.format, names::family);
  }
  template <class Cost>
  static auto prior(const Cost& c) {
    return c.same(0, "graph boundary", "none: graph boundary");
  }
};

// A family chosen for a layer, with the reason (a policy's answer, report.hpp prints it).
struct placed {
  format_family format;
  std::string reason;
};

// What a kind's eager rule sees: the network, the layer and the formats chosen for earlier layers.
struct eager_context {
  const network& net;
  node_id id;
  const std::vector<std::optional<format_family>>& formats;

  const node& layer() const { return net.at(id); }
  // The default: the format of the first spatial input.
  placed keeps_input() const {
    if (const auto from = net.producer(id))
      return {*formats[*from], "keeps its input's format ('" + net.at(*from).name + "')"};
    return {format_family::channels_first, "no spatial input: contiguous"};
  }
  static placed contiguous(const char* why) { return {format_family::channels_first, why}; }
};

namespace detail {

// Timing-signature text (timing_cache.hpp): extents, and per-spatial-dim values in the layer's dims.
inline std::string dims_text(const std::vector<std::int64_t>& e) { return memfmt::detail::dims_to_string(e); }

inline std::string spatial_text(const spatial3& v, std::size_t dims) {
  std::string s;
  for (std::size_t d = 0; d < dims; ++d) s += (d ? "x" : "") + std::to_string(v[d]);
  return s;
}

inline std::string window_text(const spatial3& kernel, const spatial3& stride, const spatial3& padding,
                               const spatial3& padding_end, std::size_t dims) {
  return " kernel " + spatial_text(kernel, dims) + " stride " + spatial_text(stride, dims) + " pad " +
         spatial_text(padding, dims) + "/" + spatial_text(padding_end, dims);
}

inline std::string conv_text(const spatial3& kernel, const memfmt::conv_params& p, std::size_t dims) {
  spatial3 end{};
  for (std::size_t d = 0; d < dims; ++d) end[d] = p.end_padding(static_cast<int>(d));
  return window_text(kernel, p.stride, p.padding, end, dims) + " dilation " + spatial_text(p.dilation, dims) +
         " groups " + std::to_string(p.groups);
}

// A slice's or concatenation's axis.
inline constexpr int_range axis_range{1, 4, "1 (C) or a spatial axis (2 to 4)"};

// Group norm and instance norm time alike.
inline void norm_signature(const node& n, std::string& s) {
  const norm_attrs& a = n.get<norm_attrs>();
  s += " groups " + std::to_string(a.params.groups) + (a.affine ? " affine" : "");
}

// The keys conv and conv_transpose share (conv_attrs, conv_transpose_attrs).
template <class Codec, class A>
void conv_codec(Codec& c, A& a) {
  c.field("out_channels", a.out_channels);
  c.field("kernel", a.kernel);
  c.field("stride", a.params.stride);
  c.field("padding", a.params.padding);
  c.field("dilation", a.params.dilation);
  c.field("groups", a.params.groups);
  c.field("bias", a.bias);
}

}  // namespace detail

}  // namespace memfmt::graph
