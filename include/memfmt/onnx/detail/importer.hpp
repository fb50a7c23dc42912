// memfmt/onnx/detail/importer.hpp - the importer's core: one pass over the ONNX graph in node order.
//
// run() validates the model (validate.hpp), turns initializers into constants, adds the graph
// inputs, translates every node and adds the graph outputs. translate() folds nodes whose inputs
// are all constant (fold.hpp), sends every other op through the op table (ops.hpp: one entry per
// ONNX op, naming its translator) and makes an opaque node of what the network cannot express.
// This file keeps the value bookkeeping, names, parameters and opaque nodes; the translators live
// by op family in translate_*.hpp, the exporters' patterns in recognise.hpp, the graph's inputs and
// outputs in graph_io.hpp. Include onnx/import.hpp, which brings them all.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "../../detail/checked.hpp"
#include "../../error.hpp"
#include "../../graph/network.hpp"
#include "../../graph/parameter_store.hpp"
#include "../../layers/rearrange.hpp"
#include "../model.hpp"
#include "../tensor.hpp"
#include "attributes.hpp"
#include "fold.hpp"
#include "infer.hpp"
#include "validate.hpp"

namespace memfmt::onnx::detail {

using shape_t = std::vector<std::int64_t>;

// A Reshape that splits a network value, then a Transpose of that (perm set): the first stages of
// a Reshape -> Transpose -> Reshape chain, which exporters write for channel shuffles and pixel
// shuffles and the chain's last Reshape resolves into one layer.
struct reshape_chain {
  graph::node_id source = 0;
  shape_t source_shape;  // ONNX shapes
  shape_t split;
  std::vector<std::int64_t> perm;  // empty until the Transpose
};

// A value during import: a network value (node), a constant, or a stage of a reshape chain. A
// network value may be seen through a Transpose that moves C last ([N, spatial..., C]: PyTorch's
// permute(0, 2, 3, 1) in ConvNeXt and other channels-last code): channels_last is then set, shape is
// the permuted one, and node the logical value, for no copy is made; the ops that read such a
// value along its last axis (LayerNormalization, MatMul, elementwise ops) become the same layers
// over C, and the Transpose back is the logical value again.
struct value {
  std::optional<graph::node_id> node;
  bool channels_last = false;
  std::optional<parameter> constant;
  std::optional<reshape_chain> chain;
  std::string initializer;  // the ONNX tensor a constant came from, when it was one
  // Set for the output of an op the network cannot express that is no network value either (rank
  // 0, 1 or over 5, or no static shape: a transformer's token tensors, shape arithmetic on them).
  // An op that reads it is opaque too and depends on its sources.
  struct barrier_output {
    std::vector<graph::node_id> sources;  // the network values it was computed from
    bool shape_unknown = false;           // ONNX's inference gives it no static shape
    std::size_t listed = 0;               // its entry in imported_model::unsupported
  };
  std::optional<barrier_output> barrier;
  shape_t shape;  // as ONNX sees it
  memfmt::dtype type = memfmt::dtype::float32;
  bool lifted() const noexcept { return node && shape.size() == 3; }
};

// An ONNX value of rank 3 lives in the network as rank 4 with H = 1.
inline shape_t lift(shape_t s) {
  if (s.size() == 3) s.insert(s.begin() + 2, 1);
  return s;
}

// The Transpose perm that moves C last in rank r ([0, 2, ..., r - 1, 1]), and its inverse.
inline std::vector<std::int64_t> channels_last_perm(std::size_t r) {
  std::vector<std::int64_t> p{0};
  for (std::size_t d = 2; d < r; ++d) p.push_back(static_cast<std::int64_t>(d));
  p.push_back(1);
  return p;
}
inline std::vector<std::int64_t> channels_first_perm(std::size_t r) {
  std::vector<std::int64_t> p{0, static_cast<std::int64_t>(r) - 1};
  for (std::size_t d = 1; d + 1 < r; ++d) p.push_back(static_cast<std::int64_t>(d));
  return p;
}
inline shape_t permuted(const shape_t& s, const std::vector<std::int64_t>& perm) {
  shape_t out(s.size());
  for (std::size_t d = 0; d < s.size(); ++d) out[d] = s[static_cast<std::size_t>(perm[d])];
  return out;
}

// Whether conv_params has a per-side `padding_end`; without it, asymmetric conv padding goes into a
// separate pad node.
constexpr bool conv_pads_per_side = graph::detail::has_padding_end<memfmt::conv_params>::value;

template <class P>
void set_padding_end(P& p, const spatial3& end) {
  if constexpr (graph::detail::has_padding_end<P>::value) p.padding_end = end;
}

// Thrown by an op's translation when the network cannot express this use of the op; the node
// becomes opaque. Malformed models throw memfmt::error instead.
struct not_expressible {
  std::string reason;
};

class importer {
 public:
  importer(const ::onnx::ModelProto& model, const import_options& options) : model_(model), options_(options) {}

  imported_model run() {
    const auto& g = model_.graph();
    result_.opset = validate_model(model_);  // before anything reads a name or an input
    for (const auto& in : g.input()) reserved_.insert(in.name());
    for (const auto& out : g.output()) reserved_.insert(out.name());
    for (const auto& n : g.node()) {
      for (const auto& i : n.input()) readers_[i].push_back(&n);
      for (const auto& o : n.output()) producers_[o] = &n;
    }
    for (const auto& t : g.initializer()) {
      value v;
      v.constant = to_parameter(t, "initializer");
      v.shape = v.constant->shape;
      v.type = v.constant->type;
      v.initializer = t.name();
      values_[t.name()] = std::move(v);
    }
    for (const auto& in : g.input()) add_graph_input(in);
    for (int i = 0; i < g.node_size(); ++i) translate(g.node(i), i);
    for (const auto& out : g.output()) add_graph_output(out);
    check_onnx_shapes();
    return std::move(result_);
  }

 private:
  // ---- nodes ----
  void translate(const ::onnx::NodeProto& n, int index) {
    const std::string onnx_name = n.name().empty() ? "#" + std::to_string(index) : n.name();
    const node_reader r(n, "ONNX node '" + onnx_name + "' (" + n.op_type() + ")");
    current_onnx_name_ = onnx_name;
    if (fused_.count(&n)) return;  // part of a pattern an earlier node became (the GELUs, hardswish, a bias add)
    for (int i = 0; i < n.input_size(); ++i)
      if (!n.input(i).empty()) lookup(n.input(i), r.label() + " input " + std::to_string(i));
    if (!n.domain().empty() && n.domain() != "ai.onnx") return opaque(r, "op of domain '" + n.domain() + "'");
    // Constants in, constants out.
    if (n.op_type() == "Shape" && n.input_size() > 0 && !n.input(0).empty()) {
      const value& x = values_.at(n.input(0));
      if (x.barrier && x.barrier->shape_unknown)
        return opaque(r, "the shape of a value whose shape is unknown until run time");
    }
    if (n.op_type() == "Constant" || n.op_type() == "Shape") {
      const std::string& out = first_output(r);
      return set_constant(out, n.op_type() == "Constant" ? constant_attribute(r) : shape_of(r));
    }
    bool all_constant = n.input_size() > 0;
    std::vector<const parameter*> in;
    for (int i = 0; i < n.input_size(); ++i) {
      if (n.input(i).empty()) {
        in.push_back(nullptr);
        continue;
      }
      const value& v = values_.at(n.input(i));
      all_constant = all_constant && v.constant.has_value();
      in.push_back(v.constant ? &*v.constant : nullptr);
    }
    if (all_constant) {
      if (auto out = fold(r, in, static_cast<int>(result_.opset))) {
        for (const parameter& p : *out) folded_elements_ += p.numel();
        if (folded_elements_ > options_.max_folded_elements)
          r.fail(errc::unsupported, "constant folding reaches " + std::to_string(folded_elements_) +
                                        " elements, past import_options::max_folded_elements (" +
                                        std::to_string(options_.max_folded_elements) + ")");
        for (std::size_t o = 0; o < out->size() && static_cast<int>(o) < n.output_size(); ++o)
          set_constant(n.output(static_cast<int>(o)), std::move((*out)[o]));
        return;
      }
    }
    const auto entry = ops().find(n.op_type());
    try {
      for (int i = 0; i < n.input_size(); ++i) {
        if (n.input(i).empty()) continue;
        const value& v = values_.at(n.input(i));
        if (v.barrier)
          throw not_expressible{"input " + std::to_string(i) + " '" + n.input(i) +
                                "' is computed by an op the network "
                                "cannot express and is no network value"};
        if (v.channels_last && (entry == ops().end() || !entry->second.reads_channels_last))
          throw not_expressible{"input " + std::to_string(i) + " '" + n.input(i) +
                                "' is a network value transposed to channels-last, which this op cannot read as such"};
      }
      // A layer has one output (ONNX's recurrent ops may leave their first unnamed).
      if (n.output_size() == 0 || n.output(0).empty()) throw not_expressible{"its first output is unnamed"};
      if (entry == ops().end()) throw not_expressible{"no memfmt layer for this op"};
      entry->second.translate(*this, r);
    } catch (const not_expressible& e) {
      opaque(r, e.reason);
    }
  }

  // One entry per ONNX op a network layer expresses (ops.hpp): its translator, and whether it reads a
  // channels-last transpose of a network value (value::channels_last) as the same layer over C.
  struct op_entry {
    void (*translate)(importer&, const node_reader&);
    bool reads_channels_last = false;
  };
  static const std::map<std::string, op_entry>& ops();

  // The output of Constant or Shape: a node without it is malformed.
  static const std::string& first_output(const node_reader& r) {
    if (r.proto().output_size() == 0 || r.proto().output(0).empty()) r.fail(errc::invalid_argument, "has no output");
    return r.proto().output(0);
  }

  // ---- values ----
  graph::network& net() { return result_.network; }

  const value& lookup(const std::string& name, const std::string& who) const {
    const auto it = values_.find(name);
    if (it == values_.end())
      memfmt::detail::fail(errc::invalid_argument,
                           who + ": value '" + name + "' is produced by no earlier node, graph input or initializer");
    return it->second;
  }

  void set_constant(const std::string& name, parameter p) {
    value v;
    v.shape = p.shape;
    v.type = p.type;
    v.constant = std::move(p);
    values_[name] = std::move(v);
  }
  void alias(const std::string& name, const value& v) { values_[name] = v; }

  // Input i, a network value or a constant; a missing input is an error.
  const value& input_value(const node_reader& r, int i) const {
    const std::string name = r.input(i);
    if (name.empty()) r.fail(errc::invalid_argument, "input " + std::to_string(i) + " is missing");
    return values_.at(name);
  }
  // Input i as a network value; a constant there means the network has nothing to run it on.
  const value& tensor_input(const node_reader& r, int i) const {
    const value& v = input_value(r, i);
    if (!v.node) throw not_expressible{"input " + std::to_string(i) + " '" + r.input(i) + "' is a constant"};
    return v;
  }
  // Input i as a constant; nullptr when optional and absent.
  const value* constant_input(const node_reader& r, int i, bool required) const {
    const std::string name = r.input(i);
    if (name.empty()) {
      if (required) r.fail(errc::invalid_argument, "input " + std::to_string(i) + " is missing");
      return nullptr;
    }
    const value& v = values_.at(name);
    if (!v.constant) throw not_expressible{"input " + std::to_string(i) + " '" + name + "' is computed at run time"};
    return &v;
  }

  // The output of a network node, checked against ONNX's inference; channels_last: onnx_shape is
  // the node's extents transposed to [N, spatial..., C] (value::channels_last).
  void set_tensor(const node_reader& r, const std::string& name, graph::node_id id, shape_t onnx_shape,
                  bool channels_last = false) {
    const graph::node& nd = net().at(id);
    const shape_t logical =
        channels_last ? permuted(onnx_shape, channels_first_perm(onnx_shape.size())) : lift(onnx_shape);
    if (nd.extents != logical)
      r.fail(errc::shape_mismatch, "network node '" + nd.name + "' has extents " +
                                       memfmt::detail::dims_to_string(nd.extents) + " for ONNX shape " +
                                       memfmt::detail::dims_to_string(onnx_shape));
    if (options_.check_shapes) shape_checks_.push_back({r.label(), name, onnx_shape});
    value v;
    v.node = id;
    v.channels_last = channels_last;
    v.shape = std::move(onnx_shape);
    v.type = nd.type;
    values_[name] = std::move(v);
  }
  // Output `name` of a layer over network value `like`, in like's layout (a channels-last view
  // where like is one).
  void set_like(const node_reader& r, const std::string& name, graph::node_id id, const value& like) {
    if (!like.channels_last) {
      shape_t s = net().at(id).extents;
      if (like.lifted() && s.size() == 4) s.erase(s.begin() + 2);
      return set_tensor(r, name, id, s);
    }
    const shape_t& e = net().at(id).extents;
    set_tensor(r, name, id, permuted(e, channels_last_perm(e.size())), true);
  }
  void set_like(const node_reader& r, graph::node_id id, const value& like) {
    set_like(r, r.proto().output(0), id, like);
  }

  // The one node that reads value `name` (it may read it twice), or nullptr: none, several, or a
  // graph output.
  const ::onnx::NodeProto* only_reader(const std::string& name) const {
    const auto it = readers_.find(name);
    if (it == readers_.end() || it->second.empty()) return nullptr;
    for (const ::onnx::NodeProto* n : it->second)
      if (n != it->second.front()) return nullptr;
    for (const auto& out : model_.graph().output())
      if (out.name() == name) return nullptr;
    return it->second.front();
  }
  // Constant `name`, if it is one: a known constant, or the output of a Constant node later in the
  // graph (a pattern's later nodes may read those).
  std::optional<value> constant_named(const std::string& name) const {
    if (const auto it = values_.find(name); it != values_.end())
      return it->second.constant ? std::optional<value>(it->second) : std::nullopt;
    const auto p = producers_.find(name);
    if (p == producers_.end() || p->second->op_type() != "Constant") return std::nullopt;
    value v;
    v.constant = constant_attribute(node_reader(*p->second, "ONNX Constant '" + name + "'"));
    v.shape = v.constant->shape;
    v.type = v.constant->type;
    return v;
  }
  // The one-element floating constant `name` as a double, if it is one.
  std::optional<double> scalar_constant(const std::string& name) const {
    const std::optional<value> c = constant_named(name);
    if (!c || !memfmt::is_floating(c->type) || c->constant->bytes.size() != memfmt::size_of(c->type))
      return std::nullopt;
    return element_as_double(*c->constant, 0);
  }
  // The other input of a two-input node that reads `name`.
  static const std::string& other_input(const ::onnx::NodeProto& n, const std::string& name) {
    return n.input(0) == name ? n.input(1) : n.input(0);
  }
  // Same, the ONNX shape being the node's extents less the lifted H of a rank-3 input.
  void set_tensor(const node_reader& r, graph::node_id id, bool lifted) {
    shape_t s = net().at(id).extents;
    if (lifted && s.size() == 4) s.erase(s.begin() + 2);
    set_tensor(r, r.proto().output(0), id, s);
  }

  // The outputs past the first must be unused (a BatchNormalization's running stats in training,
  // a MaxPool's indices, a Dropout's mask).
  void require_single_output(const node_reader& r) const {
    for (int o = 1; o < r.proto().output_size(); ++o) {
      const std::string& name = r.proto().output(o);
      if (name.empty()) continue;
      for (const auto& n : model_.graph().node())
        for (const auto& i : n.input())
          if (i == name) throw not_expressible{"output " + std::to_string(o) + " '" + name + "' is used"};
      for (const auto& out : model_.graph().output())
        if (out.name() == name)
          throw not_expressible{"output " + std::to_string(o) + " '" + name + "' is a graph output"};
    }
  }

  // ---- names ----
  std::string unique_name(const std::string& preferred) {
    std::string name = preferred.empty() ? "node" : preferred;
    for (int k = 2; reserved_.count(name) || net().find(name); ++k) name = preferred + "_" + std::to_string(k);
    reserved_.insert(name);
    return name;
  }
  // The PyTorch module path of a parameter the exporter kept under its state_dict name
  // ("layer1.0.conv1.weight" -> "layer1.0.conv1" for suffix ".weight"), where no layer has it yet.
  std::optional<std::string> free_module(const value* tensor, const std::string& suffix) const {
    if (!tensor || tensor->initializer.size() <= suffix.size() ||
        tensor->initializer.compare(tensor->initializer.size() - suffix.size(), suffix.size(), suffix) != 0)
      return std::nullopt;
    std::string module = tensor->initializer.substr(0, tensor->initializer.size() - suffix.size());
    if (reserved_.count(module) || result_.network.find(module)) return std::nullopt;
    return module;
  }
  // A layer with weights takes its weight's module path, so its parameters keep their state_dict
  // names; else the ONNX node's name.
  std::string layer_name(const node_reader& r, const value* weight) {
    if (const auto module = free_module(weight, ".weight")) return unique_name(*module);
    return unique_name(r.proto().name().empty() ? r.op() + "_" + current_onnx_name_.substr(1) : r.proto().name());
  }

  // Stores `values` as the parameters network.parameters(id) lists, in its order, checking dtype
  // and shape (a low-precision norm's are widened to float32); num_batches_tracked, which ONNX does
  // not carry, is 0.
  void bind_parameters(const node_reader& r, graph::node_id id,
                       const std::vector<std::pair<parameter, std::string>>& values) {
    const auto specs = net().parameters(id);
    std::size_t k = 0;
    for (const auto& spec : specs) {
      parameter p;
      std::string from;
      if (spec.name.size() > 20 && spec.name.compare(spec.name.size() - 20, 20, ".num_batches_tracked") == 0) {
        p = make_parameter(memfmt::dtype::int64, {}, spec.name);
      } else {
        if (k >= values.size()) r.fail(errc::invalid_argument, "no value for parameter '" + spec.name + "'");
        p = values[k].first;
        from = values[k].second;
        ++k;
        // A float16 / bfloat16 norm's initializers in its own dtype, widened exactly to the float32
        // its parameters are kept in (network::norm_parameter_type).
        if (p.type != spec.type && p.type == net().at(id).type && memfmt::is_floating(p.type) &&
            spec.type == graph::network::norm_parameter_type(p.type)) {
          parameter wide = make_parameter(spec.type, p.shape, spec.name);
          for (std::size_t i = 0; i < p.bytes.size() / memfmt::size_of(p.type); ++i)
            store_element(wide, i, element_as_double(p, i), 0);
          p = std::move(wide);
        }
        if (p.type != spec.type)
          r.fail(errc::unsupported_dtype, "parameter '" + from + "' is " + std::string(to_string(p.type)) +
                                              ", the layer computes in " + std::string(to_string(spec.type)));
        if (memfmt::detail::checked_numel(p.shape, "parameter") !=
            memfmt::detail::checked_numel(spec.extents, "parameter"))
          r.fail(errc::shape_mismatch, "parameter '" + from + "' " + memfmt::detail::dims_to_string(p.shape) +
                                           " does not fit the layer's " + spec.name + " " +
                                           memfmt::detail::dims_to_string(spec.extents));
        p.shape = spec.extents;
      }
      if (!from.empty()) result_.source[spec.name] = from;
      result_.parameters.insert(spec.name, std::move(p));
    }
  }
  static std::pair<parameter, std::string> named(const value& v) { return {*v.constant, v.initializer}; }

  // ---- opaque ----
  // An op the network cannot express: each output with a static shape of rank 2 to 5 becomes an
  // opaque node reading the network values the op's inputs come from; any other output is an
  // value::barrier, so that a run of such ops (a transformer's encoder) plans as barriers
  // between the network values around it.
  void opaque(const node_reader& r, const std::string& reason) {
    std::vector<graph::node_id> inputs;
    const auto depend_on = [&](graph::node_id from) {
      if (std::find(inputs.begin(), inputs.end(), from) == inputs.end()) inputs.push_back(from);
    };
    for (int i = 0; i < r.inputs(); ++i) {
      if (r.input(i).empty()) continue;
      const value& v = values_.at(r.input(i));
      if (v.chain) depend_on(v.chain->source);
      if (v.node) depend_on(*v.node);
      if (v.barrier)
        for (graph::node_id from : v.barrier->sources) depend_on(from);
    }
    const std::string base = r.proto().name().empty() ? r.op() + "_" + current_onnx_name_.substr(1) : r.proto().name();
    const std::string& domain = r.proto().domain();
    const std::string op = domain.empty() || domain == "ai.onnx" ? r.op() : domain + "." + r.op();
    const int outputs = r.proto().output_size();
    for (int o = 0; o < outputs; ++o) {
      const std::string& out = r.proto().output(o);
      if (out.empty()) continue;
      const std::optional<shape_t> s = opaque_output_shape(r.proto(), out);
      if (!s || s->size() < 2 || s->size() > 5) {
        value v;
        v.barrier = value::barrier_output{inputs, !s, result_.unsupported.size()};
        if (s) v.shape = *s;
        values_[out] = std::move(v);
        result_.unsupported.push_back(unsupported_node{"", current_onnx_name_, op, reason});
        continue;
      }
      const std::string name = unique_name(outputs > 1 ? base + "." + std::to_string(o) : base);
      const graph::node_id id =
          net().opaque(name, inputs, lift(*s), format_family::channels_first, format_family::channels_first);
      result_.unsupported.push_back(unsupported_node{name, current_onnx_name_, op, reason});
      value v;
      v.node = id;
      v.shape = *s;
      v.type = net().at(id).type;
      values_[out] = std::move(v);
    }
  }

  // ---- constants ----
  parameter constant_attribute(const node_reader& r) const {
    if (const auto* t = r.get_tensor("value")) return to_parameter(*t, r.label());
    if (r.has("value_float")) {
      parameter p = make_parameter(memfmt::dtype::float32, {}, r.label());
      store_element(p, 0, r.get_float("value_float", 0.f), 0);
      return p;
    }
    if (r.has("value_floats")) {
      const auto f = r.get_floats("value_floats");
      parameter p = make_parameter(memfmt::dtype::float32, {static_cast<std::int64_t>(f.size())}, r.label());
      for (std::size_t i = 0; i < f.size(); ++i) store_element(p, i, f[i], 0);
      return p;
    }
    if (r.has("value_int")) return reshaped(int64_vector({r.get_int("value_int", 0)}), {});
    if (r.has("value_ints")) return int64_vector(r.get_ints("value_ints"));
    r.fail(errc::unsupported,
           "a Constant without value, value_float(s) or value_int(s) (sparse and string "
           "constants are not supported)");
  }

  parameter shape_of(const node_reader& r) const {
    const value& v = input_value(r, 0);
    const auto rank = static_cast<std::int64_t>(v.shape.size());
    std::int64_t start = r.get_int("start", 0), end = r.get_int("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<std::int64_t>(start, 0, rank);
    end = std::clamp<std::int64_t>(end, start, rank);
    return int64_vector(shape_t(v.shape.begin() + start, v.shape.begin() + end));
  }

  // A scalar (or one-element) constant input as double; `fallback` when absent.
  double scalar_input(const node_reader& r, int i, double fallback) const {
    const value* c = constant_input(r, i, false);
    if (!c) return fallback;
    if (c->constant->bytes.size() != memfmt::size_of(c->type))
      r.fail(errc::invalid_argument, "input " + std::to_string(i) + " must hold one element, has shape " +
                                         memfmt::detail::dims_to_string(c->shape));
    return element_as_double(*c->constant, 0);
  }

  // ---- window geometry (conv, pooling) ----
  struct window {
    shape_t kernel, stride, dilation, begin, end;  // per ONNX spatial dim
  };

  static shape_t spatial_of(const shape_t& s) { return shape_t(s.begin() + 2, s.end()); }

  // Whether a pattern's constant v is the positive `want` an exporter wrote, to float rounding.
  static bool near(std::optional<double> v, double want) { return v && std::fabs(*v - want) <= 1e-6 * want; }

  // The per-channel affine transform that may follow a written-out normalisation of x whose result
  // is `out`: * weight, then (only after a weight) + bias, each a channel_constant. The matched
  // nodes join `nodes` and `out` moves past them.
  struct channel_affine_t {
    std::optional<value> weight, bias;
  };

  // ---- graph_io.hpp: the graph's inputs and outputs; ONNX's shape inference as a check ----
  void add_graph_input(const ::onnx::ValueInfoProto& in);
  std::optional<shape_t> resolved_shape(const ::onnx::TensorShapeProto& declared, const std::string* where) const;
  void add_graph_output(const ::onnx::ValueInfoProto& out);
  const std::map<std::string, shape_t>& onnx_shapes_of(const ::onnx::NodeProto& n);
  void end_barrier(const std::string& output, const value::barrier_output& b, const shape_t& shape);
  std::optional<shape_t> opaque_output_shape(const ::onnx::NodeProto& n, const std::string& name);
  void check_onnx_shapes();

  // ---- translate_conv.hpp: Conv, ConvTranspose, pooling, Gemm, MatMul; window geometry ----
  void resolve_pads(const node_reader& r, window& w, const shape_t& in) const;
  window read_window(const node_reader& r, const shape_t& kernel, const shape_t& in) const;
  static spatial3 to_spatial(const shape_t& v, bool lifted, std::int64_t h);
  graph::node_id pad_asymmetric(const std::string& name, graph::node_id in, window& w, bool lifted);
  void conv(const node_reader& r);
  void conv_transpose(const node_reader& r);
  void pool(const node_reader& r, memfmt::pool_kind kind);
  void global_pool(const node_reader& r, memfmt::pool_kind kind, bool flatten_after);
  void linear(const node_reader& r, const value& a, const value& b, bool b_is_out_in, double alpha, const value* c,
              double beta);
  void gemm(const node_reader& r);
  void matmul(const node_reader& r);
  void pointwise_conv(const node_reader& r, const value& x, const value& w);

  // ---- translate_norm.hpp: the normalisations, LRN, Softmax, Dropout ----
  void require_spatial_input(const value& x) const;
  void require_channel_vectors(const node_reader& r, const value& x, std::initializer_list<const value*> vs) const;
  void batch_norm(const node_reader& r);
  void instance_norm(const node_reader& r);
  void group_norm(const node_reader& r);
  void layer_norm(const node_reader& r);
  void lrn(const node_reader& r);
  void softmax(const node_reader& r, bool log);
  void dropout(const node_reader& r);

  // ---- translate_elementwise.hpp: activations, Clip, PRelu, binary ops, Pow, reductions ----
  void gelu(const node_reader& r);
  void activation(const node_reader& r, const activation_params& f);
  void prelu(const node_reader& r);
  void clip(const node_reader& r);
  void binary(const node_reader& r, memfmt::binary_op op);
  graph::node_id constant_node(const node_reader& r, const std::string& name, const value& c, const value& x);
  void reduce(const node_reader& r, memfmt::reduce_op op);
  void power(const node_reader& r);
  shape_t reduce_axes(const node_reader& r);

  // ---- translate_shape.hpp: Concat, Split, Slice, Resize, Pad, Flatten, Reshape, Transpose ... ----
  void concat(const node_reader& r);
  static int network_axis(const value& x, std::size_t a);
  static int sliced_axis(const value& x, std::size_t a, const char* what);
  void split(const node_reader& r);
  void slice(const node_reader& r);
  void resize(const node_reader& r);
  static std::vector<std::size_t> distinct_axes(const node_reader& r, const shape_t& axes, std::size_t rank);
  void pad(const node_reader& r);
  void flatten_to_matrix(const node_reader& r, const value& x);
  void flatten(const node_reader& r);
  void reshape(const node_reader& r);
  void transpose(const node_reader& r);
  void transpose_value(const node_reader& r, const value& in, const std::vector<std::int64_t>& perm,
                       const std::string& out);
  void finish_chain(const node_reader& r, const reshape_chain& c, const shape_t& target);
  void depth_space(const node_reader& r, bool to_space);

  // ---- recognise.hpp: the exporters' decompositions of one layer ----
  bool gelu(const node_reader& r, const value& x, const std::string& x_name, const std::string& c_name,
            memfmt::binary_op op);
  bool gelu_tanh(const node_reader& r, const value& x, const std::string& x_name);
  bool times_input(const node_reader& r, std::initializer_list<const char*> through, memfmt::activation f);
  bool squares_summed_over_channels(const node_reader& r);
  bool chain_follows(const std::string& name) const;
  bool gathered_transpose(const node_reader& r, const value& x, const shape_t& target);
  static bool is_node(const ::onnx::NodeProto* n, const char* op, int inputs);
  std::optional<value> channel_constant(const ::onnx::NodeProto* n, const std::string& from, const char* op,
                                        const value& x, std::size_t c_axis) const;
  channel_affine_t channel_affine(std::string& out, std::set<const ::onnx::NodeProto*>& nodes, const value& x,
                                  std::size_t c_axis) const;
  bool decomposed_layer_norm(const node_reader& r, const value& x);
  bool decomposed_group_norm(const node_reader& r, const value& x, const shape_t& target);

  const ::onnx::ModelProto& model_;
  const import_options& options_;
  imported_model result_;
  std::map<std::string, value> values_;
  std::map<std::pair<std::string, shape_t>, graph::node_id> constant_nodes_;  // constant_node's, by ONNX name and shape
  std::map<const ::onnx::NodeProto*, std::map<std::string, shape_t>> inferred_;  // onnx_shapes_of(), per node
  const std::int64_t schema_opset_ = schema_opset();
  std::int64_t folded_elements_ = 0;  // of the constants fold() made so far
  struct shape_check {
    std::string node;  // node_reader::label()
    std::string value;
    shape_t shape;  // what the network infers
  };
  std::vector<shape_check> shape_checks_;  // every translated output, checked by check_onnx_shapes()
  std::map<std::string, std::vector<const ::onnx::NodeProto*>> readers_;  // by value name
  std::map<std::string, const ::onnx::NodeProto*> producers_;
  std::set<const ::onnx::NodeProto*> fused_;  // skipped: an earlier node's pattern covered them
  std::set<std::string> reserved_;
  std::string current_onnx_name_;
};

}  // namespace memfmt::onnx::detail
