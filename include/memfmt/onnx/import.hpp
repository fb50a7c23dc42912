// memfmt/onnx/import.hpp - ONNX models as memfmt networks with their weights.
//
// import_file / import_bytes / import_model read a model with the ONNX project's own protobuf
// types (libonnx) and give the graph::network the planner and executor take, its parameters named
// as network::parameters() names them ("<node>.weight" ...; PyTorch's state_dict names where the
// exporter kept them) and the graph's inputs and outputs. Every shape is fixed at import (a
// symbolic batch dim takes import_options::batch), so subgraphs computing only from constants and
// shapes (Shape -> Gather -> Concat -> Pad's pads) are evaluated here (detail/fold.hpp).
//
// Layers the network describes become its nodes; a 1-D conv net's [N, C, L] values become
// [N, C, 1, L] (the same bytes in either layout); an initializer that an elementwise op reads
// becomes a constant node. Any other op becomes an opaque node that reads and
// writes channels-first, with the output shape ONNX's own shape inference gives; where that is no
// network value's (a transformer's [N, tokens, dim]), the ops up to the next one that is form one
// barrier. Every model can be planned, and imported_model::unsupported names the op and node for
// an executor to refuse.
// A malformed model (bad protobuf, missing initializer, wrong ranks, unknown attribute values, a
// shape that disagrees with ONNX's inference) is a memfmt::error naming the node and the values.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <fstream>
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

#include "../layers/rearrange.hpp"
#include "../detail/checked.hpp"
#include "../error.hpp"
#include "../graph/network.hpp"
#include "../io/file.hpp"
#include "../graph/parameter_store.hpp"
#include "detail/attributes.hpp"
#include "detail/fold.hpp"
#include "detail/infer.hpp"
#include "detail/validate.hpp"
#include "tensor.hpp"
#include "unsupported_node.hpp"

namespace memfmt::onnx {

struct import_options {
  std::int64_t batch = 1;                     // a symbolic first dim of a graph input
  std::map<std::string, std::int64_t> dims;   // other symbolic dims, by their dim_param name
  graph::family input_format = graph::family::channels_first;   // the pins of the graph inputs
  graph::family output_format = graph::family::channels_first;  // and outputs
  // Values for graph inputs that are weights at run time (ONNX's backend tests feed a Conv's W as
  // an input): they become constants, as initializers would. parameter_inputs() says which.
  std::map<std::string, parameter> input_values;
  bool check_shapes = true;  // each value's shape must equal ONNX shape inference's, where it has one
  // A bound on the work a model can ask of the importer: the elements of all the constants it folds
  // (each one is at most 2^26). Shape arithmetic folds a few; past the bound, errc::unsupported.
  std::int64_t max_folded_elements = std::int64_t{1} << 28;
};

// A graph input or output: its name (the network node's name too), shape as the model states it
// (a 1-D net's [N, C, L], where the network has [N, C, 1, L]) and dtype.
struct graph_value {
  std::string name;
  std::vector<std::int64_t> shape;
  memfmt::dtype type = memfmt::dtype::float32;
};

struct imported_model {
  graph::network network;
  graph::parameter_store parameters;        // every parameter network.parameters() lists
  std::map<std::string, std::string> source;  // parameter name -> the ONNX tensor it came from
  // The graph's inputs and the outputs that are network values (one that is not, such as a
  // detector's boxes behind a barrier, ends the barrier in an opaque node instead).
  std::vector<graph_value> inputs, outputs;
  std::vector<unsupported_node> unsupported;
  std::int64_t opset = 0;
  bool runnable() const noexcept { return unsupported.empty(); }
};

imported_model import_model(const ::onnx::ModelProto& model, const import_options& options = {});

// ---- which node inputs are weights ----

// Input `index` of `op` is a weight or shape operand (a Conv's W and B, a Pad's pads, ...), not
// data: the importer needs it constant.
inline bool is_parameter_slot(const std::string& op, int index) {
  static const std::map<std::string, int> first_parameter = {
      {"Conv", 1}, {"ConvTranspose", 1}, {"BatchNormalization", 1}, {"InstanceNormalization", 1}, {"LayerNormalization", 1},
      {"GroupNormalization", 1},
      {"Gemm", 1}, {"MatMul", 1}, {"Pad", 1}, {"Resize", 1}, {"Upsample", 1}, {"Clip", 1},
      {"Reshape", 1}, {"Slice", 1}, {"Split", 1}, {"Dropout", 1}, {"Unsqueeze", 1}, {"Squeeze", 1},
      {"Expand", 1}, {"ConstantOfShape", 0}, {"ReduceMean", 1}, {"ReduceMax", 1}, {"ReduceMin", 1}, {"ReduceSum", 1}, {"ReduceL1", 1},
      {"ReduceL2", 1}, {"ReduceSumSquare", 1}, {"PRelu", 1}, {"Pow", 1}};
  const auto it = first_parameter.find(op);
  return it != first_parameter.end() && index >= it->second;
}

// The graph inputs (without an initializer) that every consumer reads in a parameter slot: what an
// ONNX backend test feeds as an input but a deployed model has as an initializer.
inline std::set<std::string> parameter_inputs(const ::onnx::ModelProto& model) {
  const auto& g = model.graph();
  std::set<std::string> init;
  for (const auto& t : g.initializer()) init.insert(t.name());
  std::map<std::string, bool> only_parameter;
  for (const auto& in : g.input())
    if (!init.count(in.name())) only_parameter[in.name()] = false;
  std::map<std::string, int> uses;
  for (const auto& n : g.node())
    for (int i = 0; i < n.input_size(); ++i) {
      const auto it = only_parameter.find(n.input(i));
      if (it == only_parameter.end()) continue;
      const bool slot = is_parameter_slot(n.op_type(), i);
      it->second = uses[n.input(i)]++ == 0 ? slot : (it->second && slot);
    }
  std::set<std::string> r;
  for (const auto& [name, p] : only_parameter)
    if (p) r.insert(name);
  return r;
}

// ---- the importer ----
namespace detail {

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
  // ---- graph boundaries ----
  void add_graph_input(const ::onnx::ValueInfoProto& in) {
    if (values_.count(in.name())) return;  // an initializer listed as an input (IR < 4): a constant
    const std::string where = "ONNX graph input '" + in.name() + "'";
    if (const auto it = options_.input_values.find(in.name()); it != options_.input_values.end()) {
      value v;
      v.constant = it->second;
      v.shape = it->second.shape;
      v.type = it->second.type;
      v.initializer = in.name();
      values_[in.name()] = std::move(v);
      return;
    }
    if (!in.type().has_tensor_type())
      memfmt::detail::fail(errc::unsupported, where + " is not a tensor");
    const auto& tt = in.type().tensor_type();
    const memfmt::dtype type = dtype_from_onnx(tt.elem_type(), where);
    if (!tt.has_shape()) memfmt::detail::fail(errc::invalid_argument, where + " has no shape");
    const shape_t shape = *resolved_shape(tt.shape(), &where);
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 0)
        memfmt::detail::fail(errc::invalid_argument, where + " dim " + std::to_string(d) + " is " +
                                                         std::to_string(shape[d]));
      if (shape[d] == 0)
        memfmt::detail::fail(errc::unsupported, where + " dim " + std::to_string(d) + " is 0 (empty values are not supported)");
    }
    if (shape.size() < 2 || shape.size() > 5)
      memfmt::detail::fail(errc::unsupported, where + " " + memfmt::detail::dims_to_string(shape) +
                                                  " has rank " + std::to_string(shape.size()) +
                                                  " (a network takes rank 2, 3 as [N, C, L], 4 or 5)");
    value v;
    v.node = net().input(in.name(), lift(shape), type, options_.input_format);
    v.shape = shape;
    v.type = type;
    values_[in.name()] = std::move(v);
    result_.inputs.push_back(graph_value{in.name(), shape, type});
  }

  // A declared shape with its symbolic dims resolved: by name from import_options::dims, else the
  // batch for dim 0. A dim without a value is an error naming it when `where` is given, nullopt
  // otherwise.
  std::optional<shape_t> resolved_shape(const ::onnx::TensorShapeProto& declared, const std::string* where) const {
    shape_t shape;
    for (int d = 0; d < declared.dim_size(); ++d) {
      const auto& dim = declared.dim(d);
      if (dim.has_dim_value()) {
        shape.push_back(dim.dim_value());
      } else if (dim.has_dim_param() && options_.dims.count(dim.dim_param())) {
        shape.push_back(options_.dims.at(dim.dim_param()));
      } else if (d == 0) {
        shape.push_back(options_.batch);
      } else if (where) {
        memfmt::detail::fail(errc::invalid_argument, *where + " dim " + std::to_string(d) + " ('" + dim.dim_param() +
                                                         "') is symbolic: give its value in import_options::dims");
      } else {
        return std::nullopt;
      }
    }
    return shape;
  }

  void add_graph_output(const ::onnx::ValueInfoProto& out) {
    const value& v = lookup(out.name(), "ONNX graph output '" + out.name() + "'");
    if (v.barrier) return end_barrier(out.name(), *v.barrier, v.shape);
    if (!v.node)
      memfmt::detail::fail(errc::unsupported, "ONNX graph output '" + out.name() + "' is a constant " +
                                                  memfmt::detail::dims_to_string(v.shape));
    if (v.channels_last)
      memfmt::detail::fail(errc::unsupported, "ONNX graph output '" + out.name() + "' " +
                                                  memfmt::detail::dims_to_string(v.shape) +
                                                  " is a network value transposed to channels-last (network outputs "
                                                  "are [N, C, spatial...])");
    if (net().at(*v.node).kind == graph::node_kind::input && net().at(*v.node).name == out.name())
      memfmt::detail::fail(errc::unsupported, "ONNX graph output '" + out.name() + "' is the graph input itself");
    net().output(out.name(), *v.node, options_.output_format);
    result_.outputs.push_back(graph_value{out.name(), v.shape, v.type});
  }

  // ONNX's own shape inference, one node at a time (detail/infer.hpp): the output shapes of opaque
  // nodes, and the check of every translated one. libonnx sees a node only with inputs whose shapes
  // the importer knows and that pass its op's rank rule; its answers are kept per node.
  const std::map<std::string, shape_t>& onnx_shapes_of(const ::onnx::NodeProto& n) {
    const auto cached = inferred_.find(&n);
    if (cached != inferred_.end()) return cached->second;
    std::vector<known_input> in;
    for (const std::string& name : n.input()) {
      known_input k;
      k.present = !name.empty();
      const auto it = name.empty() ? values_.end() : values_.find(name);
      if (it != values_.end()) {
        const value& v = it->second;
        if (!(v.barrier && v.barrier->shape_unknown)) k.shape = v.shape;
        k.type = v.type;
        if (v.constant) k.constant = &*v.constant;
      }
      in.push_back(std::move(k));
    }
    std::map<std::string, shape_t> shapes;
    if (inferable(n, "ONNX node '" + n.name() + "'", in, result_.opset, schema_opset_))
      shapes = infer_node(n, in, result_.opset);
    return inferred_.emplace(&n, std::move(shapes)).first->second;
  }

  // A graph output that is no network value (a detector's boxes, of a size known only at run time)
  // ends its barrier in an opaque node, so that the network values it was computed from are read
  // channels-first as the barrier reads them; it is no output of the network. The node's extents
  // [1, elements] stand for its size ([1, 1] when unknown). The producer's entry in `unsupported`
  // names the node.
  void end_barrier(const std::string& output, const value::barrier_output& b, const shape_t& shape) {
    std::int64_t elements = 1;
    const std::string what = "ONNX graph output '" + output + "'";
    if (!b.shape_unknown) elements = memfmt::detail::checked_numel(shape, what.c_str());
    reserved_.erase(output);  // kept free for the network output this is not
    const std::string name = unique_name(output);
    net().opaque(name, b.sources, {1, elements}, graph::family::channels_first, graph::family::channels_first);
    result_.unsupported.at(b.listed).node = name;
  }

  // An opaque node's output shape: ONNX's inference of its node, or else the shape a graph output
  // declares.
  std::optional<shape_t> opaque_output_shape(const ::onnx::NodeProto& n, const std::string& name) {
    const auto& inferred = onnx_shapes_of(n);
    if (const auto it = inferred.find(name); it != inferred.end()) return it->second;
    for (const auto& out : model_.graph().output())
      if (out.name() == name && out.type().has_tensor_type() && out.type().tensor_type().has_shape())
        return resolved_shape(out.type().tensor_type().shape(), nullptr);
    return std::nullopt;
  }

  // Every translated output's shape against ONNX's inference of the node that writes it, where it
  // has one.
  void check_onnx_shapes() {
    for (const shape_check& c : shape_checks_) {
      const auto p = producers_.find(c.value);
      if (p == producers_.end()) continue;
      const auto& inferred = onnx_shapes_of(*p->second);
      const auto it = inferred.find(c.value);
      if (it != inferred.end() && it->second != c.shape)
        memfmt::detail::fail(errc::shape_mismatch, c.node + ": output '" + c.value + "': the network infers " +
                                                       memfmt::detail::dims_to_string(c.shape) + ", ONNX shape inference " +
                                                       memfmt::detail::dims_to_string(it->second));
    }
  }

  // ---- nodes ----
  void translate(const ::onnx::NodeProto& n, int index) {
    const std::string onnx_name = n.name().empty() ? "#" + std::to_string(index) : n.name();
    const node_reader r(n, "ONNX node '" + onnx_name + "' (" + n.op_type() + ")");
    current_onnx_name_ = onnx_name;
    if (fused_.count(&n)) return;  // part of a pattern an earlier node became (the GELUs, hardswish, a bias add)
    for (int i = 0; i < n.input_size(); ++i)
      if (!n.input(i).empty()) lookup(n.input(i), r.label() + " input " + std::to_string(i));
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      return opaque(r, "op of domain '" + n.domain() + "'");
    // Constants in, constants out.
    if (n.op_type() == "Shape" && n.input_size() > 0 && !n.input(0).empty()) {
      const value& x = values_.at(n.input(0));
      if (x.barrier && x.barrier->shape_unknown) return opaque(r, "the shape of a value whose shape is unknown until run time");
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
    try {
      for (int i = 0; i < n.input_size(); ++i) {
        if (n.input(i).empty()) continue;
        const value& v = values_.at(n.input(i));
        if (v.barrier)
          throw not_expressible{"input " + std::to_string(i) + " '" + n.input(i) + "' is computed by an op the network "
                                "cannot express and is no network value"};
        if (v.channels_last && !reads_channels_last(n.op_type()))
          throw not_expressible{"input " + std::to_string(i) + " '" + n.input(i) +
                                "' is a network value transposed to channels-last, which this op cannot read as such"};
      }
      // A layer has one output (ONNX's recurrent ops may leave their first unnamed).
      if (n.output_size() == 0 || n.output(0).empty()) throw not_expressible{"its first output is unnamed"};
      layer(r);
    } catch (const not_expressible& e) {
      opaque(r, e.reason);
    }
  }

  // The ops that read a channels-last transpose of a network value (value::channels_last) as the
  // same layer over C.
  static bool reads_channels_last(const std::string& op) {
    static const std::set<std::string> ops = {
        "Transpose", "LayerNormalization", "Concat", "Slice", "Split", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum",
        "ReduceL1", "ReduceL2", "ReduceSumSquare", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh",
        "HardSwish", "HardSigmoid", "LeakyRelu", "Elu", "Softplus", "Mish", "Gelu", "Clip", "PRelu", "Identity", "Pow"};
    return ops.count(op) != 0;
  }

  // The output of Constant or Shape: a node without it is malformed.
  static const std::string& first_output(const node_reader& r) {
    if (r.proto().output_size() == 0 || r.proto().output(0).empty()) r.fail(errc::invalid_argument, "has no output");
    return r.proto().output(0);
  }

  void layer(const node_reader& r) {
    const std::string& op = r.op();
    if (op == "Conv") return conv(r);
    if (op == "ConvTranspose") return conv_transpose(r);
    if (op == "BatchNormalization") return batch_norm(r);
    if (op == "InstanceNormalization") return instance_norm(r);
    if (op == "Relu") return activation(r, memfmt::activation::relu);
    if (op == "Sigmoid") {
      if (times_input(r, {}, memfmt::activation::silu)) return;
      return activation(r, memfmt::activation::sigmoid);
    }
    if (op == "Softplus") {
      if (times_input(r, {"Tanh"}, memfmt::activation::mish)) return;
      return activation(r, memfmt::activation::softplus);
    }
    if (op == "Mish") return activation(r, memfmt::activation::mish);
    if (op == "Tanh") return activation(r, memfmt::activation::tanh);
    if (op == "HardSwish") return activation(r, memfmt::activation::hardswish);
    if (op == "HardSigmoid") {
      const double alpha = r.get_float("alpha", 0.2f), beta = r.get_float("beta", 0.5f);
      if (near(alpha, 1.0 / 6.0) && beta == 0.5 && times_input(r, {}, memfmt::activation::hardswish)) return;
      return activation(r, activation_params::hardsigmoid(alpha, beta));
    }
    if (op == "LeakyRelu") return activation(r, activation_params::leaky_relu(r.get_float("alpha", 0.01f)));
    if (op == "Elu") return activation(r, activation_params::elu(r.get_float("alpha", 1.0f)));
    if (op == "PRelu") return prelu(r);
    if (op == "Clip") return clip(r);
    if (op == "Add") return binary(r, memfmt::binary_op::add);
    if (op == "Sub") return binary(r, memfmt::binary_op::sub);
    if (op == "Mul") return binary(r, memfmt::binary_op::mul);
    if (op == "Div") return binary(r, memfmt::binary_op::div);
    if (op == "MaxPool") return pool(r, memfmt::pool_kind::max);
    if (op == "AveragePool") return pool(r, memfmt::pool_kind::average);
    if (op == "GlobalAveragePool") return global_pool(r, memfmt::pool_kind::average, false);
    if (op == "GlobalMaxPool") return global_pool(r, memfmt::pool_kind::max, false);
    if (op == "ReduceMean") return reduce(r, memfmt::reduce_op::mean);
    if (op == "ReduceMax") return reduce(r, memfmt::reduce_op::max);
    if (op == "ReduceMin") return reduce(r, memfmt::reduce_op::min);
    if (op == "ReduceSum") return reduce(r, memfmt::reduce_op::sum);
    if (op == "ReduceL1") return reduce(r, memfmt::reduce_op::l1);
    if (op == "ReduceL2") return reduce(r, memfmt::reduce_op::l2);
    if (op == "ReduceSumSquare") return reduce(r, memfmt::reduce_op::sum_square);
    if (op == "Pow") return power(r);
    if (op == "Concat") return concat(r);
    if (op == "Split") return split(r);
    if (op == "Slice") return slice(r);
    if (op == "Resize" || op == "Upsample") return resize(r);
    if (op == "Pad") return pad(r);
    if (op == "Flatten") return flatten(r);
    if (op == "Reshape") return reshape(r);
    if (op == "Gemm") return gemm(r);
    if (op == "MatMul") return matmul(r);
    if (op == "Softmax") return softmax(r, false);
    if (op == "LogSoftmax") return softmax(r, true);
    if (op == "Dropout") return dropout(r);
    if (op == "Identity") return alias(r.proto().output(0), tensor_input(r, 0));
    if (op == "DepthToSpace" || op == "SpaceToDepth") return depth_space(r, op == "DepthToSpace");
    if (op == "Transpose") return transpose(r);
    if (op == "LayerNormalization") return layer_norm(r);
    if (op == "GroupNormalization") return group_norm(r);
    if (op == "Gelu") return gelu(r);
    throw not_expressible{"no memfmt layer for this op"};
  }

  // ---- values ----
  graph::network& net() { return result_.network; }

  const value& lookup(const std::string& name, const std::string& who) const {
    const auto it = values_.find(name);
    if (it == values_.end())
      memfmt::detail::fail(errc::invalid_argument, who + ": value '" + name +
                                                       "' is produced by no earlier node, graph input or initializer");
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
    const shape_t logical = channels_last ? permuted(onnx_shape, channels_first_perm(onnx_shape.size())) : lift(onnx_shape);
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
  void set_like(const node_reader& r, graph::node_id id, const value& like) { set_like(r, r.proto().output(0), id, like); }

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
    if (!c || !memfmt::is_floating(c->type) || c->constant->bytes.size() != memfmt::size_of(c->type)) return std::nullopt;
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
        if (out.name() == name) throw not_expressible{"output " + std::to_string(o) + " '" + name + "' is a graph output"};
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
  void bind_parameters(const node_reader& r, graph::node_id id, const std::vector<std::pair<parameter, std::string>>& values) {
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
        if (memfmt::detail::checked_numel(p.shape, "parameter") != memfmt::detail::checked_numel(spec.extents, "parameter"))
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
          net().opaque(name, inputs, lift(*s), graph::family::channels_first, graph::family::channels_first);
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
    r.fail(errc::unsupported, "a Constant without value, value_float(s) or value_int(s) (sparse and string "
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

  // pads / auto_pad of a sliding window over `in` (ONNX spatial extents).
  void resolve_pads(const node_reader& r, window& w, const shape_t& in) const {
    const std::size_t n = in.size();
    const std::string auto_pad = r.get_choice("auto_pad", "NOTSET", {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"});
    w.begin.assign(n, 0);
    w.end.assign(n, 0);
    if (auto_pad == "NOTSET") {
      const shape_t pads = r.get_ints("pads", shape_t(2 * n, 0));
      if (pads.size() != 2 * n)
        r.fail(errc::invalid_argument, "pads " + memfmt::detail::dims_to_string(pads) + " must have " +
                                           std::to_string(2 * n) + " entries");
      for (std::size_t d = 0; d < n; ++d) {
        w.begin[d] = pads[d];
        w.end[d] = pads[d + n];
        if (w.begin[d] < 0 || w.end[d] < 0)
          r.fail(errc::invalid_argument, "negative pads " + memfmt::detail::dims_to_string(pads));
      }
    } else if (auto_pad != "VALID") {
      for (std::size_t d = 0; d < n; ++d) {
        const std::string what = r.label() + ": SAME padding";
        const std::int64_t out = (in[d] + w.stride[d] - 1) / w.stride[d];
        const std::int64_t reach = memfmt::detail::checked_add(
            memfmt::detail::checked_mul(w.dilation[d], w.kernel[d] - 1, what), 1, what);
        const std::int64_t total = std::max<std::int64_t>(
            0, memfmt::detail::checked_sub(
                   memfmt::detail::checked_add(memfmt::detail::checked_mul(out - 1, w.stride[d], what), reach, what),
                   in[d], what));
        w.begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        w.end[d] = total - w.begin[d];
      }
    }
  }

  window read_window(const node_reader& r, const shape_t& kernel, const shape_t& in) const {
    const std::size_t n = in.size();
    window w;
    w.kernel = kernel;
    w.stride = r.get_ints("strides", shape_t(n, 1));
    w.dilation = r.get_ints("dilations", shape_t(n, 1));
    if (w.stride.size() != n || w.dilation.size() != n || w.kernel.size() != n)
      r.fail(errc::invalid_argument, "kernel " + memfmt::detail::dims_to_string(w.kernel) + ", strides " +
                                         memfmt::detail::dims_to_string(w.stride) + ", dilations " +
                                         memfmt::detail::dims_to_string(w.dilation) + " must have one entry per " +
                                         "spatial dim (" + std::to_string(n) + ")");
    for (std::size_t d = 0; d < n; ++d)
      if (w.kernel[d] < 1 || w.stride[d] < 1 || w.dilation[d] < 1)
        r.fail(errc::invalid_argument, "kernel " + memfmt::detail::dims_to_string(w.kernel) + ", strides " +
                                           memfmt::detail::dims_to_string(w.stride) + ", dilations " +
                                           memfmt::detail::dims_to_string(w.dilation) + " must be >= 1");
    resolve_pads(r, w, in);
    return w;
  }

  // The network's spatial3 of ONNX per-dim values; a lifted 1-D value's H gets `h`.
  static spatial3 to_spatial(const shape_t& v, bool lifted, std::int64_t h) {
    spatial3 s{h, h, h};
    const std::size_t off = lifted ? 1 : 0;
    for (std::size_t d = 0; d < v.size() && d + off < 3; ++d) s[d + off] = v[d];
    return s;
  }

  static shape_t spatial_of(const shape_t& s) { return shape_t(s.begin() + 2, s.end()); }

  // Asymmetric padding as a separate zero pad node when the conv parameters pad symmetrically:
  // the conv then pads min(begin, end) on both sides.
  graph::node_id pad_asymmetric(const std::string& name, graph::node_id in, window& w, bool lifted) {
    bool symmetric = true;
    for (std::size_t d = 0; d < w.begin.size(); ++d) symmetric = symmetric && w.begin[d] == w.end[d];
    if (symmetric) return in;
    memfmt::pad_params p;
    p.mode = memfmt::pad_mode::constant;
    shape_t extra_b(w.begin.size()), extra_e(w.begin.size());
    for (std::size_t d = 0; d < w.begin.size(); ++d) {
      const std::int64_t m = std::min(w.begin[d], w.end[d]);
      extra_b[d] = w.begin[d] - m;
      extra_e[d] = w.end[d] - m;
      w.begin[d] = w.end[d] = m;
    }
    p.begin = to_spatial(extra_b, lifted, 0);
    p.end = to_spatial(extra_e, lifted, 0);
    return net().pad(unique_name(name + ".pad"), in, p);
  }

  // ---- layers ----
  void conv(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    const value* w = constant_input(r, 1, true);
    const value* b = constant_input(r, 2, false);
    const std::size_t rank = x.shape.size();
    if (rank < 3 || rank > 5) throw not_expressible{"input rank " + std::to_string(rank)};
    if (w->shape.size() != rank)
      r.fail(errc::invalid_argument, "weight " + memfmt::detail::dims_to_string(w->shape) + " must have the rank of input " +
                                         memfmt::detail::dims_to_string(x.shape));
    const std::int64_t groups = r.get_int("group", 1);
    if (groups < 1 || x.shape[1] % groups != 0 || w->shape[1] * groups != x.shape[1])
      r.fail(errc::shape_mismatch, "input " + memfmt::detail::dims_to_string(x.shape) + ", weight " +
                                       memfmt::detail::dims_to_string(w->shape) + ", group " + std::to_string(groups) +
                                       ": weight dim 1 must be C / group");
    const shape_t kernel = spatial_of(w->shape);
    if (r.has("kernel_shape") && r.get_ints("kernel_shape") != kernel)
      r.fail(errc::shape_mismatch, "kernel_shape " + memfmt::detail::dims_to_string(r.get_ints("kernel_shape")) +
                                       " differs from the weight's " + memfmt::detail::dims_to_string(kernel));
    if (b && (b->shape.size() != 1 || b->shape[0] != w->shape[0]))
      r.fail(errc::shape_mismatch, "bias " + memfmt::detail::dims_to_string(b->shape) + " must be [" +
                                       std::to_string(w->shape[0]) + "]");
    window win = read_window(r, kernel, spatial_of(x.shape));
    const std::string name = layer_name(r, w);
    const bool lifted = x.lifted();
    graph::conv_attrs a;
    a.out_channels = w->shape[0];
    a.kernel = to_spatial(kernel, lifted, 1);
    a.params.stride = to_spatial(win.stride, lifted, 1);
    a.params.dilation = to_spatial(win.dilation, lifted, 1);
    a.params.groups = groups;
    a.bias = b != nullptr;
    graph::node_id in = *x.node;
    if (conv_pads_per_side)
      set_padding_end(a.params, to_spatial(win.end, lifted, 0));
    else
      in = pad_asymmetric(name, in, win, lifted);
    a.params.padding = to_spatial(win.begin, lifted, 0);
    const graph::node_id id = net().conv(name, in, a);
    std::vector<std::pair<parameter, std::string>> params{named(*w)};
    if (b) params.push_back(named(*b));
    bind_parameters(r, id, params);
    set_tensor(r, id, lifted);
  }

  void conv_transpose(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    const value* w = constant_input(r, 1, true);
    const value* b = constant_input(r, 2, false);
    const std::size_t rank = x.shape.size();
    if (rank < 3 || rank > 5) throw not_expressible{"input rank " + std::to_string(rank)};
    if (w->shape.size() != rank || w->shape[0] != x.shape[1])
      r.fail(errc::shape_mismatch, "weight " + memfmt::detail::dims_to_string(w->shape) +
                                       " must be [C, K / group, kernel...] for input " +
                                       memfmt::detail::dims_to_string(x.shape));
    const std::int64_t groups = r.get_int("group", 1);
    if (groups < 1 || x.shape[1] % groups != 0)
      r.fail(errc::invalid_argument, "group " + std::to_string(groups) + " must divide C " + std::to_string(x.shape[1]));
    const std::size_t n = rank - 2;
    const shape_t kernel = spatial_of(w->shape), in = spatial_of(x.shape);
    if (r.has("kernel_shape") && r.get_ints("kernel_shape") != kernel)
      r.fail(errc::shape_mismatch, "kernel_shape " + memfmt::detail::dims_to_string(r.get_ints("kernel_shape")) +
                                       " differs from the weight's " + memfmt::detail::dims_to_string(kernel));
    const std::int64_t out_channels = w->shape[1] * groups;
    if (b && (b->shape.size() != 1 || b->shape[0] != out_channels))
      r.fail(errc::shape_mismatch, "bias " + memfmt::detail::dims_to_string(b->shape) + " must be [" +
                                       std::to_string(out_channels) + "]");
    window win;
    win.kernel = kernel;
    win.stride = r.get_ints("strides", shape_t(n, 1));
    win.dilation = r.get_ints("dilations", shape_t(n, 1));
    shape_t out_pad = r.get_ints("output_padding", shape_t(n, 0));
    if (win.stride.size() != n || win.dilation.size() != n || out_pad.size() != n)
      r.fail(errc::invalid_argument, "strides, dilations and output_padding need one entry per spatial dim");
    const std::string auto_pad = r.get_choice("auto_pad", "NOTSET", {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"});
    shape_t out_shape = r.get_ints("output_shape");
    if (out_shape.size() == n + 2) out_shape = spatial_of(out_shape);
    if (!out_shape.empty() && out_shape.size() != n)
      r.fail(errc::invalid_argument, "output_shape " + memfmt::detail::dims_to_string(out_shape) + " needs " +
                                         std::to_string(n) + " spatial entries");
    if (out_shape.empty() && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"))
      for (std::size_t d = 0; d < n; ++d) out_shape.push_back(in[d] * win.stride[d]);
    win.begin.assign(n, 0);
    win.end.assign(n, 0);
    if (!out_shape.empty()) {
      // ONNX: total padding = stride * (in - 1) + output_padding + dilated kernel - output_shape,
      // split (rounding down) with the odd one at the end for SAME_UPPER and at the start otherwise.
      // A negative end pad (output_shape past the full output) is more output_padding: rows no
      // input reaches, the bias alone.
      for (std::size_t d = 0; d < n; ++d) {
        const std::int64_t total = win.stride[d] * (in[d] - 1) + out_pad[d] + (kernel[d] - 1) * win.dilation[d] + 1 -
                                   out_shape[d];
        const std::int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);  // floor(total / 2)
        win.begin[d] = auto_pad == "SAME_UPPER" ? half : total - half;
        win.end[d] = total - win.begin[d];
        if (win.begin[d] < 0)
          throw not_expressible{"output_shape " + memfmt::detail::dims_to_string(out_shape) +
                                " extends the transposed conv's output before its start"};
        if (win.end[d] < 0) {
          out_pad[d] -= win.end[d];
          win.end[d] = 0;
          if (out_pad[d] >= win.stride[d] && out_pad[d] >= win.dilation[d])
            throw not_expressible{"output_shape " + memfmt::detail::dims_to_string(out_shape) +
                                  " past the full output by stride and dilation or more"};
        }
      }
    } else if (auto_pad == "NOTSET") {
      resolve_pads(r, win, in);
    }
    // A larger front pad: symmetric padding of the front amount, the difference given back as
    // output_padding (the rows it adds are the ones the smaller end pad keeps).
    for (std::size_t d = 0; d < n; ++d) {
      if (conv_pads_per_side) break;
      if (win.begin[d] < win.end[d])
        throw not_expressible{"a transposed conv padding more at the end than at the start"};
      if (win.begin[d] > win.end[d]) {
        out_pad[d] += win.begin[d] - win.end[d];
        win.end[d] = win.begin[d];
        if (out_pad[d] >= win.stride[d] && out_pad[d] >= win.dilation[d])
          throw not_expressible{"asymmetric padding needing output_padding >= stride and dilation"};
      }
    }
    const bool lifted = x.lifted();
    graph::conv_transpose_attrs a;
    a.out_channels = out_channels;
    a.kernel = to_spatial(kernel, lifted, 1);
    a.params.stride = to_spatial(win.stride, lifted, 1);
    a.params.dilation = to_spatial(win.dilation, lifted, 1);
    a.params.padding = to_spatial(win.begin, lifted, 0);
    set_padding_end(a.params, to_spatial(win.end, lifted, 0));
    a.params.groups = groups;
    a.output_padding = to_spatial(out_pad, lifted, 0);
    a.bias = b != nullptr;
    const graph::node_id id = net().conv_transpose(layer_name(r, w), *x.node, a);
    std::vector<std::pair<parameter, std::string>> params{named(*w)};
    if (b) params.push_back(named(*b));
    bind_parameters(r, id, params);
    set_tensor(r, id, lifted);
  }

  void require_spatial_input(const value& x) const {
    if (x.shape.size() < 3 || x.shape.size() > 5)
      throw not_expressible{"input of rank " + std::to_string(x.shape.size()) + " (the layer takes [N, C, spatial...])"};
  }

  void require_channel_vectors(const node_reader& r, const value& x, std::initializer_list<const value*> vs) const {
    for (const value* v : vs)
      if (v->shape.size() != 1 || v->shape[0] != x.shape[1])
        r.fail(errc::shape_mismatch, "per-channel operand " + memfmt::detail::dims_to_string(v->shape) + " must be [" +
                                         std::to_string(x.shape[1]) + "] for input " +
                                         memfmt::detail::dims_to_string(x.shape));
  }

  void batch_norm(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    require_spatial_input(x);
    const value* scale = constant_input(r, 1, true);
    const value* bias = constant_input(r, 2, true);
    const value* mean = constant_input(r, 3, true);
    const value* var = constant_input(r, 4, true);
    require_channel_vectors(r, x, {scale, bias, mean, var});
    if (r.get_int("training_mode", 0) != 0) throw not_expressible{"training_mode 1"};
    require_single_output(r);
    memfmt::batch_norm_params p;
    p.epsilon = r.get_float("epsilon", 1e-5f);
    p.momentum = 1.0 - static_cast<double>(r.get_float("momentum", 0.9f));  // ONNX keeps the running share
    const graph::node_id id = net().batch_norm(layer_name(r, scale), *x.node, p);
    bind_parameters(r, id, {named(*scale), named(*bias), named(*mean), named(*var)});
    set_tensor(r, id, x.lifted());
  }

  void instance_norm(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    require_spatial_input(x);
    const value* scale = constant_input(r, 1, true);
    const value* bias = constant_input(r, 2, true);
    require_channel_vectors(r, x, {scale, bias});
    const graph::node_id id =
        net().instance_norm(layer_name(r, scale), *x.node, static_cast<double>(r.get_float("epsilon", 1e-5f)), true);
    bind_parameters(r, id, {named(*scale), named(*bias)});
    set_tensor(r, id, x.lifted());
  }

  // GroupNormalization (opset 18; PyTorch's nn.GroupNorm): a scale and bias of G values, one per
  // group, repeated here over the group's channels; from opset 21 of C values, one per channel.
  void group_norm(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    require_spatial_input(x);
    if (!r.has("num_groups")) r.fail(errc::invalid_argument, "has no num_groups");
    const std::int64_t groups = r.get_int("num_groups", 0), c = x.shape[1];
    if (groups < 1 || c % groups != 0)
      r.fail(errc::invalid_argument, "num_groups " + std::to_string(groups) + " does not divide the " +
                                         std::to_string(c) + " channels of " + memfmt::detail::dims_to_string(x.shape));
    const value* scale = constant_input(r, 1, true);
    const value* bias = constant_input(r, 2, true);
    const bool per_group = result_.opset < 21;
    const std::int64_t n = per_group ? groups : c;
    for (const value* v : {scale, bias})
      if (v->type != x.type || v->shape.size() != 1 || v->shape[0] != n)
        r.fail(errc::shape_mismatch, "scale or bias " + memfmt::detail::dims_to_string(v->shape) + " must be [" +
                                         std::to_string(n) + "] of the input's type (one per " +
                                         (per_group ? "group, opset " : "channel, opset ") +
                                         std::to_string(result_.opset) + ")");
    const graph::node_id id = net().group_norm(layer_name(r, scale), *x.node, groups,
                                               static_cast<double>(r.get_float("epsilon", 1e-5f)), true);
    if (per_group && groups != c) {
      parameter w = make_parameter(x.type, {c}, r.label()), b = make_parameter(x.type, {c}, r.label());
      for (std::int64_t i = 0; i < c; ++i) {
        const auto at = static_cast<std::size_t>(i), group = static_cast<std::size_t>(i / (c / groups));
        store_element(w, at, element_as_double(*scale->constant, group), 0);
        store_element(b, at, element_as_double(*bias->constant, group), 0);
      }
      bind_parameters(r, id, {{w, ""}, {b, ""}});
    } else {
      bind_parameters(r, id, {named(*scale), named(*bias)});
    }
    set_tensor(r, id, x.lifted());
  }

  // Gelu (opset 20): the exact GELU, or with approximate "tanh" PyTorch's tanh form.
  void gelu(const node_reader& r) {
    const std::string approximate = r.get_choice("approximate", "none", {"none", "tanh"});
    activation(r, approximate == "tanh" ? memfmt::activation::gelu_tanh : memfmt::activation::gelu);
  }

  void activation(const node_reader& r, const activation_params& f) {
    const value& x = tensor_input(r, 0);
    set_like(r, net().activation(layer_name(r, nullptr), *x.node, f), x);
  }

  // Whether a pattern's constant v is the positive `want` an exporter wrote, to float rounding.
  static bool near(std::optional<double> v, double want) { return v && std::fabs(*v - want) <= 1e-6 * want; }

  // x * (1 + erf(x / sqrt 2)) / 2 as exporters write the exact GELU (PyTorch: Div by sqrt 2, Erf,
  // Add 1, Mul by x, Mul by 0.5, or the last two swapped; x * (1 / sqrt 2) and either operand order
  // alike) is one gelu
  // activation, and the later nodes of the pattern are skipped. Each intermediate value must have
  // that one reader. Called with the first node (x op c, c constant); false where it is no GELU.
  bool gelu(const node_reader& r, const value& x, const std::string& x_name, const std::string& c_name,
            memfmt::binary_op op) {
    const double sqrt2 = std::sqrt(2.0);
    if (!(op == memfmt::binary_op::div && near(scalar_constant(c_name), sqrt2)) &&
        !(op == memfmt::binary_op::mul && near(scalar_constant(c_name), 1.0 / sqrt2)))
      return false;
    const ::onnx::NodeProto* erf = only_reader(r.proto().output(0));
    if (!erf || erf->op_type() != "Erf" || erf->output_size() != 1) return false;
    const ::onnx::NodeProto* add = only_reader(erf->output(0));
    if (!add || add->op_type() != "Add" || add->input_size() != 2 || !near(scalar_constant(other_input(*add, erf->output(0))), 1.0))
      return false;
    // Then * x, * 0.5 (the TorchScript exporter) or * 0.5, * x (the dynamo exporter).
    const ::onnx::NodeProto* mul = only_reader(add->output(0));
    if (!mul || mul->op_type() != "Mul" || mul->input_size() != 2) return false;
    const std::string first = other_input(*mul, add->output(0));
    const bool x_first = first == x_name;
    if (!x_first && !near(scalar_constant(first), 0.5)) return false;
    const ::onnx::NodeProto* last = only_reader(mul->output(0));
    if (!last || last->op_type() != "Mul" || last->input_size() != 2) return false;
    const std::string second = other_input(*last, mul->output(0));
    if (x_first ? !near(scalar_constant(second), 0.5) : second != x_name) return false;
    fused_.insert({erf, add, mul, last});
    set_like(r, last->output(0), net().activation(layer_name(r, nullptr), *x.node, memfmt::activation::gelu), x);
    return true;
  }

  // The tanh GELU as PyTorch 1.13 writes it (F.gelu(x, approximate="tanh")): x * x, * x, * 0.044715,
  // + x, * sqrt(2 / pi), Tanh, + 1, * x, * 0.5, either operand order alike, is one gelu_tanh
  // activation, and the later nodes are skipped. Each intermediate value must have that one reader.
  // Called with the first node (x * x); false where it is no tanh GELU.
  bool gelu_tanh(const node_reader& r, const value& x, const std::string& x_name) {
    // The one reader of `from`, an `op` whose other operand is `other` (a name) or, with `constant`,
    // a scalar constant near it.
    const auto next = [&](const std::string& from, const char* op, const std::string* other,
                          std::optional<double> constant) -> const ::onnx::NodeProto* {
      const ::onnx::NodeProto* n = only_reader(from);
      if (!n || n->op_type() != op || n->output_size() != 1) return nullptr;
      if (!other && !constant) return n->input_size() == 1 ? n : nullptr;
      if (n->input_size() != 2) return nullptr;
      const std::string& o = other_input(*n, from);
      return (other && o == *other) || (constant && near(scalar_constant(o), *constant)) ? n : nullptr;
    };
    const ::onnx::NodeProto* cube = next(r.proto().output(0), "Mul", &x_name, std::nullopt);
    const ::onnx::NodeProto* kappa = cube ? next(cube->output(0), "Mul", nullptr, memfmt::gelu_tanh_cubic) : nullptr;
    const ::onnx::NodeProto* sum = kappa ? next(kappa->output(0), "Add", &x_name, std::nullopt) : nullptr;
    const ::onnx::NodeProto* beta = sum ? next(sum->output(0), "Mul", nullptr, memfmt::gelu_tanh_sqrt_2_over_pi) : nullptr;
    const ::onnx::NodeProto* tanh = beta ? next(beta->output(0), "Tanh", nullptr, std::nullopt) : nullptr;
    const ::onnx::NodeProto* one = tanh ? next(tanh->output(0), "Add", nullptr, 1.0) : nullptr;
    const ::onnx::NodeProto* times_x = one ? next(one->output(0), "Mul", &x_name, std::nullopt) : nullptr;
    const ::onnx::NodeProto* half = times_x ? next(times_x->output(0), "Mul", nullptr, 0.5) : nullptr;
    if (!half) return false;
    fused_.insert({cube, kappa, sum, beta, tanh, one, times_x, half});
    set_like(r, half->output(0), net().activation(layer_name(r, nullptr), *x.node, memfmt::activation::gelu_tanh), x);
    return true;
  }

  // f(x) * x, as exporters write silu (Sigmoid, Mul: PyTorch's nn.SiLU), hardswish (HardSigmoid with
  // PyTorch's slope 1/6 and offset 1/2, Mul: nn.Hardswish before opset 14) and mish (Softplus, Tanh,
  // Mul: nn.Mish before opset 18): node r, then the one-input ops `through`, then a Mul by r's input,
  // each intermediate value read by the next node only, is one activation f, which the executor can
  // fuse into the conv before it where two or three memory-bound passes would run; the later nodes
  // are skipped. False where the pattern is not there.
  bool times_input(const node_reader& r, std::initializer_list<const char*> through, memfmt::activation f) {
    std::string at = r.proto().output(0);
    std::vector<const ::onnx::NodeProto*> skipped;
    for (const char* op : through) {
      const ::onnx::NodeProto* n = only_reader(at);
      if (!n || n->op_type() != op || n->input_size() != 1 || n->output_size() != 1) return false;
      skipped.push_back(n);
      at = n->output(0);
    }
    const ::onnx::NodeProto* mul = only_reader(at);
    if (!mul || mul->op_type() != "Mul" || mul->input_size() != 2 || mul->output_size() != 1 ||
        other_input(*mul, at) != r.input(0))
      return false;
    skipped.push_back(mul);
    const value& x = tensor_input(r, 0);
    fused_.insert(skipped.begin(), skipped.end());
    set_like(r, mul->output(0), net().activation(layer_name(r, nullptr), *x.node, f), x);
    return true;
  }

  // PRelu with a constant slope (per channel or one): max(x, 0) + slope * min(x, 0), the min a clip
  // to [-inf, 0]. One branch is an exact 0, so each output is PRelu's single rounding of slope * x,
  // infinities included; four memory-bound passes where one would do. Before opset 7 (no numpy
  // broadcasting yet) a slope of C values is per channel, as PyTorch's exporter wrote PReLU(C).
  void prelu(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    value s = *constant_input(r, 1, true);
    if (result_.opset < 7 && s.shape.size() == 1 && x.shape.size() >= 2 && s.shape[0] == x.shape[1]) {
      s.shape.resize(x.shape.size() - 1, 1);
      s.constant->shape = s.shape;
    }
    const graph::node_id slope = constant_node(r, r.input(1), s, x);
    const std::string name = layer_name(r, nullptr);
    const graph::node_id pos = net().relu(unique_name(name + ".positive"), *x.node);
    const graph::node_id neg = net().activation(unique_name(name + ".negative"), *x.node,
                                                activation_params::clip(-std::numeric_limits<double>::infinity(), 0.0));
    const graph::node_id scaled = net().mul(unique_name(name + ".scaled"), neg, slope);
    set_like(r, net().add(name, pos, scaled), x);
  }

  // Clip(0, 6) is relu6, Clip(0, inf) relu, any other a clip; bounds from attributes before opset
  // 11, inputs after.
  void clip(const node_reader& r) {
    const double inf = std::numeric_limits<double>::infinity();
    double lo = -inf, hi = inf;
    if (result_.opset < 11) {
      lo = r.get_float("min", -std::numeric_limits<float>::max());
      hi = r.get_float("max", std::numeric_limits<float>::max());
    } else {
      lo = scalar_input(r, 1, -inf);
      hi = scalar_input(r, 2, inf);
    }
    if (lo == 0.0 && hi == 6.0) return activation(r, memfmt::activation::relu6);
    if (lo == 0.0 && hi >= static_cast<double>(std::numeric_limits<float>::max()))
      return activation(r, memfmt::activation::relu);
    if (std::isnan(lo) || std::isnan(hi) || lo > hi)
      throw not_expressible{"Clip to [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (needs min <= max)"};
    activation(r, activation_params::clip(lo, hi));
  }

  // Two network values of one rank, or a network value and a constant (x * 0.5, (x - mean) / std):
  // the constant becomes a constant node.
  void binary(const node_reader& r, memfmt::binary_op op) {
    const value& a = input_value(r, 0);
    const value& b = input_value(r, 1);
    if (!a.node && !b.node) throw not_expressible{"both operands are constants"};
    const value& x = a.node ? a : b;
    if (a.node && b.constant && gelu(r, a, r.input(0), r.input(1), op)) return;
    if (op == memfmt::binary_op::mul && a.node && r.input(0) == r.input(1) && gelu_tanh(r, a, r.input(0))) return;
    if (a.node && b.node && a.shape.size() != b.shape.size())
      throw not_expressible{"operands of ranks " + std::to_string(a.shape.size()) + " and " +
                            std::to_string(b.shape.size())};
    if (a.node && b.node && a.channels_last != b.channels_last)
      throw not_expressible{"one operand is transposed to channels-last and the other is not"};
    const graph::node_id ia = a.node ? *a.node : constant_node(r, r.input(0), a, x);
    const graph::node_id ib = b.node ? *b.node : constant_node(r, r.input(1), b, x);
    const graph::node_id id = net().binary(layer_name(r, nullptr), ia, ib, op);
    set_like(r, id, x);
  }

  // Constant c, an operand of an elementwise op whose other operand is network value x, as a
  // constant node of x's rank: c's shape right-aligned with leading 1s (ONNX's numpy broadcasting),
  // moved back to [N, C, spatial...] where x is a channels-last view (only where that keeps the
  // element order: a per-channel [C] or a scalar) and lifted as x is. One node per constant and
  // shape, however many ops read it.
  graph::node_id constant_node(const node_reader& r, const std::string& name, const value& c, const value& x) {
    if (c.shape.size() > x.shape.size())
      throw not_expressible{"constant '" + name + "' " + memfmt::detail::dims_to_string(c.shape) + " has a higher rank than " +
                            memfmt::detail::dims_to_string(x.shape)};
    if (std::find(c.shape.begin(), c.shape.end(), 0) != c.shape.end())
      throw not_expressible{"constant '" + name + "' " + memfmt::detail::dims_to_string(c.shape) + " is empty"};
    if (c.type != x.type || !memfmt::is_floating(c.type))
      throw not_expressible{"constant '" + name + "' is " + std::string(memfmt::to_string(c.type)) + ", its operand " +
                            std::string(memfmt::to_string(x.type))};
    shape_t s(x.shape.size() - c.shape.size(), 1);
    s.insert(s.end(), c.shape.begin(), c.shape.end());
    if (x.channels_last) {
      const std::vector<std::int64_t> perm = channels_first_perm(s.size());
      std::int64_t last = -1;
      for (std::int64_t from : perm) {
        if (s[static_cast<std::size_t>(from)] == 1) continue;
        if (from < last)
          throw not_expressible{"constant '" + name + "' " + memfmt::detail::dims_to_string(c.shape) +
                                " would need its elements reordered to broadcast over a channels-last transpose"};
        last = from;
      }
      s = permuted(s, perm);
    }
    if (x.lifted()) s = lift(s);
    const auto key = std::make_pair(name, s);
    if (const auto it = constant_nodes_.find(key); it != constant_nodes_.end()) return it->second;
    const graph::node_id id = net().constant(unique_name(name), s, c.type);
    bind_parameters(r, id, {named(c)});
    constant_nodes_.emplace(key, id);
    return id;
  }

  void pool(const node_reader& r, memfmt::pool_kind kind) {
    const value& x = tensor_input(r, 0);
    require_spatial_input(x);
    require_single_output(r);
    const shape_t kernel = r.get_ints("kernel_shape");
    if (kernel.empty()) r.fail(errc::invalid_argument, "kernel_shape is required");
    window w = read_window(r, kernel, spatial_of(x.shape));
    for (std::int64_t d : w.dilation)
      if (d != 1) throw not_expressible{"pooling with dilations " + memfmt::detail::dims_to_string(w.dilation)};
    for (std::size_t d = 0; d < kernel.size(); ++d)
      if (w.begin[d] >= kernel[d] || w.end[d] >= kernel[d])
        throw not_expressible{"padding of a whole window (a window would see only padding)"};
    if (r.get_int("storage_order", 0) != 0) throw not_expressible{"storage_order 1"};
    const bool lifted = x.lifted();
    memfmt::pool_params p;
    p.kind = kind;
    p.kernel = to_spatial(kernel, lifted, 1);
    p.stride = to_spatial(w.stride, lifted, 1);
    p.padding = to_spatial(w.begin, lifted, 0);
    p.padding_end = to_spatial(w.end, lifted, 0);
    p.ceil_mode = r.get_int("ceil_mode", 0) != 0;
    p.count_include_pad = r.get_int("count_include_pad", 0) != 0;
    set_tensor(r, net().pool(layer_name(r, nullptr), *x.node, p), lifted);
  }

  void global_pool(const node_reader& r, memfmt::pool_kind kind, bool flatten_after) {
    const value& x = tensor_input(r, 0);
    require_spatial_input(x);
    graph::node_id id = net().global_pool(layer_name(r, nullptr), *x.node, kind);
    if (flatten_after) {
      id = net().flatten(unique_name(net().at(id).name + ".flatten"), id);
      return set_tensor(r, r.proto().output(0), id, net().at(id).extents);
    }
    set_tensor(r, id, x.lifted());
  }

  // A reduction over C and / or spatial axes is a reduce layer; ReduceMean / ReduceMax over every
  // spatial axis of a channels-first value are global pooling, and ReduceMean over C may instead
  // start a layer norm written out (decomposed_layer_norm). keepdims 0 drops the reduced axes: a
  // flatten follows where [N, F] remains, nothing where the network's extents already read as the
  // ONNX shape (a rank-4 value reduced over H is a rank-3 [N, C, W]); other drops, and reductions
  // over N, are barriers.
  void reduce(const node_reader& r, memfmt::reduce_op op) {
    const value& x = tensor_input(r, 0);
    if (op == memfmt::reduce_op::mean && decomposed_layer_norm(r, x)) return;
    require_spatial_input(x);
    const std::size_t rank = x.shape.size();
    shape_t axes = reduce_axes(r);
    if (axes.empty()) return alias(r.proto().output(0), x);
    for (auto& a : axes) a = normalize_axis(r, a, rank);
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    const bool keepdims = r.get_int("keepdims", 1) != 0;
    if (axes.front() == 0)
      throw not_expressible{"reduction over axes " + memfmt::detail::dims_to_string(axes) + ", N among them"};
    shape_t spatial;
    for (std::size_t d = 2; d < rank; ++d) spatial.push_back(static_cast<std::int64_t>(d));
    if (!x.channels_last && axes == spatial && (op == memfmt::reduce_op::mean || op == memfmt::reduce_op::max))
      return global_pool(r, op == memfmt::reduce_op::mean ? memfmt::pool_kind::average : memfmt::pool_kind::max,
                         !keepdims);
    memfmt::reduce_params p{op, 0};
    shape_t dropped = x.shape;  // the ONNX output with keepdims 0
    for (auto a = axes.rbegin(); a != axes.rend(); ++a) {
      std::int64_t d = x.channels_last ? channels_last_perm(rank)[static_cast<std::size_t>(*a)] : *a;
      if (x.lifted() && d >= 2) ++d;
      p.axes |= memfmt::axis_bit(static_cast<int>(d));
      dropped.erase(dropped.begin() + *a);
    }
    const auto describe = [&] {
      return "reduction over axes " + memfmt::detail::dims_to_string(axes) + " of " +
             (x.channels_last ? "a channels-last view " : "") + memfmt::detail::dims_to_string(x.shape) +
             " with keepdims 0";
    };
    if (!keepdims && dropped.size() < 2) throw not_expressible{describe() + " (leaves [N] alone)"};
    if (!keepdims && dropped.size() > 2) {
      shape_t kept = net().at(*x.node).extents;
      for (std::size_t d = 1; d < kept.size(); ++d)
        if (p.axes & memfmt::axis_bit(static_cast<int>(d))) kept[d] = 1;
      if (x.channels_last || lift(dropped) != kept)
        throw not_expressible{describe() + " (the network value would keep axes where ONNX drops them)"};
    }
    const graph::node_id id = net().reduce(layer_name(r, nullptr), *x.node, p);
    if (keepdims) return set_like(r, id, x);
    if (dropped.size() > 2) return set_tensor(r, r.proto().output(0), id, dropped);
    const graph::node_id f = net().flatten(unique_name(net().at(id).name + ".flatten"), id);
    set_tensor(r, r.proto().output(0), f, net().at(f).extents);
  }

    // Pow by the constant 2 is x * x (SimAM's and a variance's squares), unless a sum over C reads it
  // (squares_summed_over_channels: one sum_square reduction). Other exponents are barriers.
  void power(const node_reader& r) {
    if (squares_summed_over_channels(r)) return;
    const value& x = tensor_input(r, 0);
    if (r.inputs() != 2 || scalar_constant(r.input(1)) != 2.0)
      throw not_expressible{"Pow by another exponent than the constant 2"};
    set_like(r, net().mul(layer_name(r, nullptr), *x.node, *x.node), x);
  }

  // x.pow(2).sum(1, keepdim=True), optionally .sqrt() (SSD's L2Norm as its authors wrote it): Pow by
  // 2 read only by a ReduceSum over C with keepdims is one sum_square reduction, l2 when a Sqrt is
  // the sum's only reader. Called at the Pow; false where it is no such pattern.
  bool squares_summed_over_channels(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    if (!x.node || x.channels_last || x.shape.size() < 3 || x.shape.size() > 5 || r.inputs() != 2 ||
        scalar_constant(r.input(1)) != 2.0)
      return false;
    const ::onnx::NodeProto* sum = only_reader(r.proto().output(0));
    if (!sum || sum->op_type() != "ReduceSum" || sum->output_size() != 1 || sum->input(0) != r.proto().output(0))
      return false;
    const node_reader sr(*sum, "ONNX node '" + sum->name() + "' (ReduceSum)");
    if (sr.get_int("keepdims", 1) == 0) return false;
    shape_t axes = sr.get_ints("axes");
    if (axes.empty() && sum->input_size() > 1)
      if (const std::optional<value> a = constant_named(sum->input(1)); a && a->type == memfmt::dtype::int64)
        axes = int64_values(*a->constant);
    if (axes.size() != 1 || normalize_axis(sr, axes[0], x.shape.size()) != 1) return false;
    const ::onnx::NodeProto* sqrt = only_reader(sum->output(0));
    const bool root = is_node(sqrt, "Sqrt", 1);
    const graph::node_id id = net().channel_reduce(layer_name(r, nullptr), *x.node,
                                                   root ? memfmt::reduce_op::l2 : memfmt::reduce_op::sum_square);
    fused_.insert(sum);
    if (root) fused_.insert(sqrt);
    set_like(r, (root ? sqrt : sum)->output(0), id, x);
    return true;
  }

  // A reduction's axes: the attribute, or (ReduceSum from opset 13, the others from 18) the
  // constant second input. None means all axes, N among them, which no layer expresses, unless
  // noop_with_empty_axes makes it an identity (empty axes returned).
  shape_t reduce_axes(const node_reader& r) {
    shape_t axes = r.get_ints("axes");
    if (axes.empty() && r.inputs() > 1 && !r.proto().input(1).empty())
      if (const value* a = constant_input(r, 1, true)) axes = int64_values(*a->constant);
    if (axes.empty() && r.get_int("noop_with_empty_axes", 0) == 0) throw not_expressible{"reduction over all axes"};
    return axes;
  }

  // Along C (F of rank-2 values; the last axis of channels-last views).
  void concat(const node_reader& r) {
    const value& first = tensor_input(r, 0);
    const auto a = static_cast<std::size_t>(normalize_axis(r, r.get_int("axis", 1), first.shape.size()));
    const int axis = sliced_axis(first, a, "concatenation along");
    std::vector<graph::node_id> ins;
    for (int i = 0; i < r.inputs(); ++i) {
      const value& v = tensor_input(r, i);
      if (v.shape.size() != first.shape.size())
        r.fail(errc::shape_mismatch, "inputs of ranks " + std::to_string(first.shape.size()) + " and " +
                                         std::to_string(v.shape.size()));
      if (v.channels_last != first.channels_last)
        throw not_expressible{"inputs that are channels-last views and inputs that are not"};
      ins.push_back(*v.node);
    }
    set_like(r, net().concat(layer_name(r, nullptr), ins, memfmt::concat_params{axis}), first);
  }

  // The network axis of ONNX axis a of network value x: a channels-last view's last axis is C, and
  // a rank-3 value's L is the network's W (lift).
  static int network_axis(const value& x, std::size_t a) {
    const std::size_t rank = x.shape.size();
    if (x.channels_last) return a == 0 ? 0 : a + 1 == rank ? 1 : static_cast<int>(a) + 1;
    if (x.lifted() && a == 2) return 3;
    return static_cast<int>(a);
  }
  // The network axis that ONNX axis a of x slices (F of a rank-2 value, C or a spatial axis), or
  // why the network cannot.
  static int sliced_axis(const value& x, std::size_t a, const char* what) {
    const int axis = network_axis(x, a);
    if (axis == 0 || x.shape.size() < 2)
      throw not_expressible{std::string(what) + " axis " + std::to_string(a) + " of " +
                            memfmt::detail::dims_to_string(x.shape) + " (C, F or a spatial axis only)"};
    return axis;
  }

  void split(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    const auto a = static_cast<std::size_t>(normalize_axis(r, r.get_int("axis", 0), x.shape.size()));
    const int axis = sliced_axis(x, a, "split along");
    shape_t sizes;
    if (result_.opset < 13) {
      sizes = r.get_ints("split");
    } else if (const value* s = constant_input(r, 1, false)) {
      sizes = int64_values(*s->constant);
    }
    const auto outs = static_cast<std::int64_t>(r.proto().output_size());
    const std::int64_t extent = x.shape[a];
    // From opset 18 num_outputs may stand for the sizes: parts of ceil(extent / n), the last smaller.
    if (sizes.empty() && r.has("num_outputs")) {
      const std::int64_t n = r.get_int("num_outputs", 0);
      if (n != outs || n < 1 || n > extent)
        r.fail(errc::invalid_argument, "num_outputs " + std::to_string(n) + " for " + std::to_string(outs) +
                                           " outputs and axis " + std::to_string(a) + " of " + std::to_string(extent));
      const std::int64_t part = (extent + n - 1) / n;
      for (std::int64_t o = 0; o < n; ++o) sizes.push_back(std::min(part, extent - o * part));
    }
    if (sizes.empty()) {
      if (outs < 1 || extent % outs != 0)
        r.fail(errc::invalid_argument, "axis " + std::to_string(a) + " of " + std::to_string(extent) +
                                           " does not split into " + std::to_string(outs) + " equal parts");
      sizes.assign(static_cast<std::size_t>(outs), extent / outs);
    }
    if (static_cast<std::int64_t>(sizes.size()) != outs)
      r.fail(errc::invalid_argument, "split " + memfmt::detail::dims_to_string(sizes) + " for " + std::to_string(outs) +
                                         " outputs");
    const std::string base = layer_name(r, nullptr);
    std::int64_t begin = 0;
    for (std::size_t o = 0; o < sizes.size(); ++o) {
      if (sizes[o] < 1 || sizes[o] > extent - begin)
        r.fail(errc::invalid_argument, "split " + memfmt::detail::dims_to_string(sizes) + " of axis " +
                                           std::to_string(a) + " of " + std::to_string(extent));
      const memfmt::slice_params p{axis, begin, begin + sizes[o], 1};
      set_like(r, r.proto().output(static_cast<int>(o)),
               net().slice(unique_name(base + "." + std::to_string(o)), *x.node, p), x);
      begin += sizes[o];
    }
  }

  // One network slice per sliced axis, chained; the last carries the node's name.
  void slice(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    std::vector<const parameter*> in{nullptr};
    for (int i = 1; i < r.inputs(); ++i) {
      const value* c = constant_input(r, i, false);
      in.push_back(c ? &*c->constant : nullptr);
    }
    const slice_spec s = read_slice(r, in, x.shape.size(), static_cast<int>(result_.opset));
    std::vector<memfmt::slice_params> cuts;
    for (std::size_t i = 0; i < s.axes.size(); ++i) {
      const auto a = static_cast<std::size_t>(s.axes[i]);
      const auto idx = slice_indices(x.shape[a], s.starts[i], s.ends[i], s.steps[i]);
      const bool whole = static_cast<std::int64_t>(idx.size()) == x.shape[a] && (idx.empty() || idx[0] == 0) &&
                         s.steps[i] == 1;
      if (whole) continue;
      const int axis = sliced_axis(x, a, "slicing");
      if (s.steps[i] < 0) throw not_expressible{"a negative step on axis " + std::to_string(a) + " (a reversal)"};
      if (idx.empty()) throw not_expressible{"an empty slice of axis " + std::to_string(a)};
      cuts.push_back(memfmt::slice_params{axis, idx.front(), idx.back() + 1, s.steps[i]});
    }
    if (cuts.empty()) return alias(r.proto().output(0), x);
    const std::string base = layer_name(r, nullptr);
    graph::node_id id = *x.node;
    for (std::size_t k = 0; k < cuts.size(); ++k)
      id = net().slice(k + 1 == cuts.size() ? base : unique_name(base + ".axis" + std::to_string(cuts[k].axis)), id,
                       cuts[k]);
    set_like(r, id, x);
  }

  void resize(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    require_spatial_input(x);
    const bool upsample = r.op() == "Upsample";
    const std::size_t rank = x.shape.size();
    std::vector<double> scales;
    shape_t sizes;
    if (upsample && result_.opset < 9) {
      for (float f : r.get_floats("scales")) scales.push_back(f);
    } else {
      const int scales_at = upsample || result_.opset < 11 ? 1 : 2;
      if (const value* s = constant_input(r, scales_at, false)) scales = double_values(*s->constant);
      if (!upsample && result_.opset >= 11)
        if (const value* z = constant_input(r, 3, false)) sizes = int64_values(*z->constant);
    }
    // From opset 18 an axes attribute names the axes the scales or sizes are for; the others keep
    // their extent.
    if (!upsample && result_.opset >= 18 && r.has("axes")) {
      const shape_t axes = r.get_ints("axes");
      const std::size_t given = !sizes.empty() ? sizes.size() : scales.size();
      if (given != axes.size())
        r.fail(errc::invalid_argument, std::to_string(given) + (!sizes.empty() ? " sizes" : " scales") + " for axes " +
                                           memfmt::detail::dims_to_string(axes));
      std::vector<double> full_scales(rank, 1.0);
      shape_t full_sizes = x.shape;
      const std::vector<std::size_t> dims = distinct_axes(r, axes, rank);
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const std::size_t d = dims[i];
        if (!sizes.empty()) full_sizes[d] = sizes[i];
        else full_scales[d] = scales[i];
      }
      if (!sizes.empty()) sizes = full_sizes;
      else scales = full_scales;
    }
    if (!sizes.empty() && result_.opset >= 18) {
      const std::string policy = r.get_choice("keep_aspect_ratio_policy", "stretch", {"stretch", "not_larger", "not_smaller"});
      if (policy != "stretch") throw not_expressible{"keep_aspect_ratio_policy " + policy};
    }
    if (!sizes.empty() && sizes.size() != rank)
      r.fail(errc::invalid_argument, "sizes " + memfmt::detail::dims_to_string(sizes) + " for a rank " + std::to_string(rank) +
                                         " input");
    if (sizes.empty() && scales.size() != rank)
      r.fail(errc::invalid_argument, "needs " + std::to_string(rank) + " scales or sizes, has " +
                                         std::to_string(scales.size()) + " scales");
    if (sizes.empty())
      for (std::size_t d = 0; d < rank; ++d) {
        if (!(scales[d] > 0.0)) r.fail(errc::invalid_argument, "scale " + std::to_string(scales[d]) + " must be positive");
        const double size = std::floor(static_cast<double>(x.shape[d]) * scales[d]);
        if (!(size < 0x1p62))
          r.fail(errc::overflow, "scale " + std::to_string(scales[d]) + " of dim " + std::to_string(d) + " (extent " +
                                     std::to_string(x.shape[d]) + ") gives an extent past 2^62");
        sizes.push_back(static_cast<std::int64_t>(size));
      }
    if (sizes[0] != x.shape[0] || sizes[1] != x.shape[1]) throw not_expressible{"resizing N or C"};
    // Opset 18's antialias filters only linear and cubic downscaling.
    if (r.get_int("antialias", 0) != 0 && r.get_string("mode", "nearest") != "nearest")
      for (std::size_t d = 2; d < rank; ++d)
        if (sizes[d] < x.shape[d]) throw not_expressible{"antialiased downscaling"};
    std::string mode = r.get_choice("mode", "nearest", {"nearest", "linear", "bilinear", "cubic"});
    if (mode == "bilinear") mode = "linear";
    const std::string coord = upsample || result_.opset < 11
                                  ? std::string("asymmetric")
                                  : r.get_choice("coordinate_transformation_mode", "half_pixel",
                                                 {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                                  "tf_half_pixel_for_nn", "tf_crop_and_resize", "half_pixel_symmetric"});
    const std::string rounding = upsample || result_.opset < 11
                                     ? std::string("floor")
                                     : r.get_choice("nearest_mode", "round_prefer_floor",
                                                    {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
    if (mode == "cubic") throw not_expressible{"cubic resizing"};
    if (coord == "tf_crop_and_resize" || coord == "half_pixel_symmetric") throw not_expressible{coord};
    if (r.get_int("exclude_outside", 0) != 0) throw not_expressible{"exclude_outside 1"};
    static const std::map<std::string, memfmt::resample_coordinates> coordinates = {
        {"half_pixel", memfmt::resample_coordinates::half_pixel},
        {"pytorch_half_pixel", memfmt::resample_coordinates::pytorch_half_pixel},
        {"align_corners", memfmt::resample_coordinates::align_corners},
        {"asymmetric", memfmt::resample_coordinates::asymmetric},
        {"tf_half_pixel_for_nn", memfmt::resample_coordinates::tf_half_pixel_for_nn}};
    static const std::map<std::string, memfmt::nearest_rounding> roundings = {
        {"round_prefer_floor", memfmt::nearest_rounding::round_prefer_floor},
        {"round_prefer_ceil", memfmt::nearest_rounding::round_prefer_ceil},
        {"floor", memfmt::nearest_rounding::floor},
        {"ceil", memfmt::nearest_rounding::ceil}};
    const memfmt::resample_coordinates c = coordinates.at(coord);
    const memfmt::nearest_rounding round = roundings.at(rounding);
    memfmt::upsample_params p;
    p.mode = mode == "nearest" ? memfmt::resample_mode::nearest : memfmt::resample_mode::linear;
    const bool lifted = x.lifted();
    // PyTorch's rule where it samples where ONNX's does (backends run it natively), else ONNX's
    // coordinates with the scales as given.
    bool pytorch_rule = true;
    std::array<double, 3> given{0.0, 0.0, 0.0};
    for (std::size_t d = 2; d < rank; ++d) {
      const std::int64_t in = x.shape[d], out = sizes[d];
      if (out <= 0) r.fail(errc::invalid_argument, "output size " + memfmt::detail::dims_to_string(sizes) + " is not positive");
      const double scale = scales.empty() ? 0.0 : scales[d];
      given[d - 2 + (lifted ? 1 : 0)] = scale;
      const double last = static_cast<double>(in - 1);
      // The comparison visits every output position; past a million (no image has such a side, a
      // mutated scale does) ONNX's rule is kept, which is exact either way.
      if (out > (std::int64_t{1} << 20)) pytorch_rule = false;
      for (std::int64_t o = 0; o < out && pytorch_rule; ++o) {
        const double at = memfmt::resample_source(c, o, in, out, scale);
        if (p.mode == memfmt::resample_mode::nearest) {
          pytorch_rule = memfmt::nearest_source(round, at, in) == o * in / out;
        } else {
          const double torch = (static_cast<double>(o) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
          pytorch_rule = std::fabs(std::clamp(at, 0.0, last) - std::clamp(torch, 0.0, last)) <= 1e-12 * static_cast<double>(in);
        }
      }
    }
    if (!pytorch_rule) {
      p.coordinates = c;
      p.rounding = round;
      p.scale = given;
    }
    p.output = to_spatial(spatial_of(sizes), lifted, 1);
    set_tensor(r, net().upsample(layer_name(r, nullptr), *x.node, p), lifted);
  }

  // The opset-18 `axes` of Pad and Resize as dims of a rank-`rank` value (negative ones from the
  // end), each named once.
  static std::vector<std::size_t> distinct_axes(const node_reader& r, const shape_t& axes, std::size_t rank) {
    std::vector<std::size_t> dims;
    std::vector<bool> seen(rank, false);
    for (std::int64_t a : axes) {
      const auto d = static_cast<std::size_t>(normalize_axis(r, a, rank));
      if (seen[d]) r.fail(errc::invalid_argument, "axes " + memfmt::detail::dims_to_string(axes) + " repeat an axis");
      seen[d] = true;
      dims.push_back(d);
    }
    return dims;
  }

  void pad(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    require_spatial_input(x);
    const std::size_t rank = x.shape.size();
    const std::string mode = r.get_choice("mode", "constant", {"constant", "reflect", "edge", "wrap"});
    shape_t pads;
    double fill = 0.0;
    if (result_.opset < 11) {
      pads = r.get_ints("pads");
      fill = r.get_float("value", 0.f);
    } else {
      pads = int64_values(*constant_input(r, 1, true)->constant);
      fill = scalar_input(r, 2, 0.0);
      // From opset 18 an axes input names the axes that pads (2 entries per axis) are for.
      if (r.inputs() > 3 && !r.proto().input(3).empty()) {
        const shape_t axes = int64_values(*constant_input(r, 3, true)->constant);
        if (pads.size() != 2 * axes.size())
          r.fail(errc::invalid_argument, "pads " + memfmt::detail::dims_to_string(pads) + " need " +
                                             std::to_string(2 * axes.size()) + " entries for axes " +
                                             memfmt::detail::dims_to_string(axes));
        shape_t full(2 * rank, 0);
        const std::vector<std::size_t> dims = distinct_axes(r, axes, rank);
        for (std::size_t i = 0; i < axes.size(); ++i) {
          const std::size_t d = dims[i];
          full[d] = pads[i];
          full[d + rank] = pads[i + axes.size()];
        }
        pads = full;
      }
    }
    if (pads.size() != 2 * rank)
      r.fail(errc::invalid_argument, "pads " + memfmt::detail::dims_to_string(pads) + " need " + std::to_string(2 * rank) +
                                         " entries for input " + memfmt::detail::dims_to_string(x.shape));
    if (mode == "wrap") throw not_expressible{"wrap padding"};
    if (pads[0] || pads[1] || pads[rank] || pads[rank + 1]) throw not_expressible{"padding N or C"};
    for (std::int64_t v : pads)
      if (v < 0) throw not_expressible{"negative pads (cropping)"};
    memfmt::pad_params p;
    p.mode = mode == "constant" ? memfmt::pad_mode::constant
                                : mode == "reflect" ? memfmt::pad_mode::reflect : memfmt::pad_mode::replicate;
    p.value = fill;
    const bool lifted = x.lifted();
    p.begin = to_spatial(shape_t(pads.begin() + 2, pads.begin() + static_cast<std::ptrdiff_t>(rank)), lifted, 0);
    p.end = to_spatial(shape_t(pads.begin() + static_cast<std::ptrdiff_t>(rank) + 2, pads.end()), lifted, 0);
    set_tensor(r, net().pad(layer_name(r, nullptr), *x.node, p), lifted);
  }

  void flatten_to_matrix(const node_reader& r, const value& x) {
    if (x.shape.size() == 2) return alias(r.proto().output(0), x);
    if (x.shape.size() < 3) throw not_expressible{"flattening rank " + std::to_string(x.shape.size())};
    const graph::node_id id = net().flatten(layer_name(r, nullptr), *x.node);
    set_tensor(r, r.proto().output(0), id, net().at(id).extents);
  }

  // Flatten at any axis whose leading dims multiply to N (the dims between N and it are 1) is the
  // [N, features] flatten at axis 1.
  void flatten(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    const std::int64_t axis = normalize_axis(r, r.get_int("axis", 1), x.shape.size(), true);
    // Axis 0 of a batch of 1, or the dims between N and the axis all 1.
    bool same = axis > 0 || x.shape[0] == 1;
    for (std::int64_t d = 1; d < axis; ++d) same = same && x.shape[static_cast<std::size_t>(d)] == 1;
    if (!same)
      throw not_expressible{"Flatten at axis " + std::to_string(axis) + " of " + memfmt::detail::dims_to_string(x.shape) +
                            " (the leading dims are not [N, 1...])"};
    flatten_to_matrix(r, x);
  }

  // Reshape to [N, rest] is flatten; to the same shape, nothing.
  void reshape(const node_reader& r) {
    const value& in = input_value(r, 0);
    const shape_t target = reshape_target(r, in.shape, int64_values(*constant_input(r, 1, true)->constant),
                                          r.get_int("allowzero", 0) != 0);
    if (in.chain) return finish_chain(r, *in.chain, target);
    const value& x = tensor_input(r, 0);
    if (target == x.shape) return alias(r.proto().output(0), x);
    if (decomposed_group_norm(r, x, target)) return;
    if (gathered_transpose(r, x, target)) return;
    if (target.size() == 2 && target[0] == x.shape[0]) return flatten_to_matrix(r, x);
    if (target.size() > x.shape.size() && target.size() <= 6 && chain_follows(r.proto().output(0))) {
      value v;
      v.chain = reshape_chain{*x.node, x.shape, target, {}};
      v.shape = target;
      v.type = x.type;
      values_[r.proto().output(0)] = std::move(v);
      return;
    }
    throw not_expressible{"reshape " + memfmt::detail::dims_to_string(x.shape) + " -> " +
                          memfmt::detail::dims_to_string(target)};
  }

  // The only reader of `name` is a Transpose whose only reader is a Reshape, and neither value is a
  // graph output: a chain finish_chain may turn into one layer.
  bool chain_follows(const std::string& name) const {
    const ::onnx::NodeProto* t = only_reader(name);
    if (!t || t->op_type() != "Transpose" || t->output_size() != 1) return false;
    const ::onnx::NodeProto* s = only_reader(t->output(0));
    return s && s->op_type() == "Reshape";
  }

  // A Transpose of a network value that keeps N first and puts C second or last is the value, or a
  // channels-last view of it ([N, spatial..., C]: value::channels_last), with its spatial dims
  // permuted: no copy when they keep their order, a transpose layer when they do not (coordinate
  // attention's pooled W). Of a split reshape, it is the middle of a chain. Any other is a barrier.
  void transpose(const node_reader& r) {
    const value& in = input_value(r, 0);
    if (in.node) return transpose_value(r, in, transpose_perm(r, in.shape.size()), r.proto().output(0));
    if (!in.chain || !in.chain->perm.empty()) throw not_expressible{"a transpose of a network value"};
    value v = in;
    v.chain->perm = transpose_perm(r, in.shape.size());
    for (std::size_t d = 0; d < in.shape.size(); ++d) v.shape[d] = in.shape[static_cast<std::size_t>(v.chain->perm[d])];
    values_[r.proto().output(0)] = std::move(v);
  }

  // Network value `in` transposed by `perm` as value `out` (transpose() says how).
  void transpose_value(const node_reader& r, const value& in, const std::vector<std::int64_t>& perm,
                       const std::string& out) {
    {
      const std::size_t rank = in.shape.size();
      // The network dim each output dim reads.
      std::vector<int> from(rank);
      for (std::size_t d = 0; d < rank; ++d) from[d] = network_axis(in, static_cast<std::size_t>(perm[d]));
      const bool c_last = rank >= 4 && from[rank - 1] == 1;
      if ((rank == 4 || rank == 5) && from[0] == 0 && (from[1] == 1 || c_last)) {
        std::vector<int> spatial_perm{0, 1};
        for (std::size_t d = c_last ? 1 : 2; d < (c_last ? rank - 1 : rank); ++d) spatial_perm.push_back(from[d]);
        if (std::is_sorted(spatial_perm.begin(), spatial_perm.end())) {
          value v = in;
          v.channels_last = c_last;
          v.shape = permuted(in.shape, perm);
          values_[out] = std::move(v);
          return;
        }
        value like;
        like.channels_last = c_last;
        return set_like(r, out, net().transpose(layer_name(r, nullptr), *in.node, spatial_perm), like);
      }
      throw not_expressible{"transpose " + memfmt::detail::dims_to_string(perm) + " of " +
                            (in.channels_last ? "a channels-last view " : "a network value ") +
                            memfmt::detail::dims_to_string(in.shape) + " (N must stay first, C second or last)"};
    }
  }

  // A transpose as PyTorch 2's dynamo exporter writes an as_strided view (ConvNeXt's LayerNorm2d
  // after its 1x1 pooling): x reshaped to one dim, then a Gather (axis 0) of constant indices, the
  // flat offsets of x's elements in the order of some transpose of x. Called at the Reshape: the
  // transpose as transpose() imports it, the Gather skipped; false where it is no such pair.
  bool gathered_transpose(const node_reader& r, const value& x, const shape_t& target) {
    const std::size_t rank = x.shape.size();
    if (!x.node || target.size() != 1 || rank < 2 || rank > 5) return false;
    const std::int64_t numel = memfmt::detail::checked_numel(x.shape, "reshape input");
    // The comparison below reads every index once per candidate order (at most 120).
    if (target[0] != numel || numel > (std::int64_t{1} << 20)) return false;
    const ::onnx::NodeProto* gather = only_reader(r.proto().output(0));
    if (!is_node(gather, "Gather", 2) || gather->input(0) != r.proto().output(0) || gather->output_size() != 1 ||
        node_reader(*gather, "ONNX node '" + gather->name() + "'").get_int("axis", 0) != 0)
      return false;
    const std::optional<value> indices = constant_named(gather->input(1));
    if (!indices || (indices->type != memfmt::dtype::int64 && indices->type != memfmt::dtype::int32) ||
        indices->shape.size() != rank)
      return false;
    const shape_t at = int64_values(*indices->constant);
    const shape_t strides = row_major_strides(x.shape);
    std::vector<std::int64_t> perm(rank);
    for (std::size_t d = 0; d < rank; ++d) perm[d] = static_cast<std::int64_t>(d);
    do {
      if (permuted(x.shape, perm) != indices->shape) continue;
      // Element i of the transposed tensor (row-major over its dims) and its offset in x.
      shape_t pos(rank, 0);
      bool same = true;
      for (std::int64_t i = 0; i < numel && same; ++i) {
        std::int64_t offset = 0;
        for (std::size_t d = 0; d < rank; ++d) offset += pos[d] * strides[static_cast<std::size_t>(perm[d])];
        same = at[static_cast<std::size_t>(i)] == offset;
        for (std::size_t d = rank; d-- > 0;) {
          if (++pos[d] < indices->shape[d]) break;
          pos[d] = 0;
        }
      }
      if (!same) continue;
      transpose_value(r, x, perm, gather->output(0));
      fused_.insert(gather);
      return true;
    } while (std::next_permutation(perm.begin(), perm.end()));
    return false;
  }

  // The chain's last Reshape: the layer that moves every element as the chain does (a channel
  // shuffle, depth to space or space to depth, in either block order), or a barrier.
  void finish_chain(const node_reader& r, const reshape_chain& c, const shape_t& target) {
    const auto barrier = [&] {
      throw not_expressible{"reshape " + memfmt::detail::dims_to_string(c.source_shape) + " -> " +
                            memfmt::detail::dims_to_string(c.split) + ", transpose " +
                            memfmt::detail::dims_to_string(c.perm) + ", reshape -> " +
                            memfmt::detail::dims_to_string(target) +
                            " is not a channel shuffle, depth to space or space to depth"};
    };
    if (c.perm.empty() || target.size() != c.source_shape.size()) barrier();
    // The chain as a permuted copy of the logical (row-major) tensors: over the transposed dims, the
    // source's strides permuted and the destination's own.
    permuted_copy chain;
    chain.rank = static_cast<int>(c.split.size());
    const shape_t split_strides = row_major_strides(c.split);
    shape_t moved(c.split.size());
    for (std::size_t d = 0; d < c.split.size(); ++d) moved[d] = c.split[static_cast<std::size_t>(c.perm[d])];
    const shape_t moved_strides = row_major_strides(moved);
    for (std::size_t d = 0; d < c.split.size(); ++d) {
      chain.extents[d] = moved[d];
      chain.from[d] = split_strides[static_cast<std::size_t>(c.perm[d])];
      chain.to[d] = moved_strides[d];
    }
    const shape_t x = lift(c.source_shape), y = lift(target);
    std::vector<memfmt::rearrange_params> candidates;
    if (x == y)
      for (std::size_t d = 1; d < c.split.size(); ++d)
        candidates.push_back({memfmt::rearrange_kind::channel_shuffle, c.split[d], memfmt::block_order::crd});
    if (x.size() == 4 && y.size() == 4 && x[2] > 0 && y[2] > 0)
      for (const auto order : {memfmt::block_order::crd, memfmt::block_order::dcr}) {
        if (y[2] % x[2] == 0) candidates.push_back({memfmt::rearrange_kind::depth_to_space, y[2] / x[2], order});
        if (x[2] % y[2] == 0) candidates.push_back({memfmt::rearrange_kind::space_to_depth, x[2] / y[2], order});
      }
    for (const memfmt::rearrange_params& p : candidates) {
      if (p.factor < 2) continue;
      try {
        if (memfmt::rearrange_output_extents(x, p) != y) continue;
      } catch (const memfmt::error&) {
        continue;
      }
      if (!same_copy(rearrange_copy(p, x, row_major_strides(x), y, row_major_strides(y)), chain)) continue;
      const graph::node_id id = net().rearrange(layer_name(r, nullptr), c.source, p);
      return set_tensor(r, r.proto().output(0), id, target);
    }
    barrier();
  }

  // DepthToSpace (mode DCR, the default, or CRD) and SpaceToDepth (DCR).
  void depth_space(const node_reader& r, bool to_space) {
    const value& x = tensor_input(r, 0);
    if (x.shape.size() != 4)
      throw not_expressible{"an input of rank " + std::to_string(x.shape.size()) + " (rank 4 only)"};
    if (!r.has("blocksize")) r.fail(errc::invalid_argument, "has no blocksize");
    const std::string mode = to_space ? r.get_string("mode", "DCR") : "DCR";
    if (mode != "DCR" && mode != "CRD") r.fail(errc::invalid_argument, "mode '" + mode + "' (DCR or CRD)");
    const memfmt::rearrange_params p{to_space ? memfmt::rearrange_kind::depth_to_space : memfmt::rearrange_kind::space_to_depth,
                                     r.get_int("blocksize", 0),
                                     mode == "CRD" ? memfmt::block_order::crd : memfmt::block_order::dcr};
    set_tensor(r, net().rearrange(layer_name(r, nullptr), *x.node, p), false);
  }

  // A linear layer from a [in, out] or [out, in] constant, alpha folded into the weight and beta
  // into the bias.
  void linear(const node_reader& r, const value& a, const value& b, bool b_is_out_in, double alpha,
              const value* c, double beta) {
    if (a.shape.size() != 2) throw not_expressible{"a matrix product of a rank " + std::to_string(a.shape.size()) + " input"};
    if (b.shape.size() != 2) throw not_expressible{"a matrix product with a rank " + std::to_string(b.shape.size()) + " weight"};
    const std::int64_t in = b_is_out_in ? b.shape[1] : b.shape[0], out = b_is_out_in ? b.shape[0] : b.shape[1];
    if (in != a.shape[1])
      r.fail(errc::shape_mismatch, "input " + memfmt::detail::dims_to_string(a.shape) + " and weight " +
                                       memfmt::detail::dims_to_string(b.shape) + " do not multiply");
    parameter w = make_parameter(b.type, {out, in}, r.label());
    for (std::int64_t i = 0; i < out; ++i)
      for (std::int64_t j = 0; j < in; ++j) {
        const auto src = static_cast<std::size_t>(b_is_out_in ? i * in + j : j * out + i);
        store_element(w, static_cast<std::size_t>(i * in + j), alpha * element_as_double(*b.constant, src), 0);
      }
    std::optional<parameter> bias;
    if (c) {
      const std::int64_t n = memfmt::detail::checked_numel(c->shape, "Gemm C");
      const bool per_output = n == out && (c->shape.size() == 1 || (c->shape.size() == 2 && c->shape[0] == 1));
      if (n != 1 && !per_output)
        throw not_expressible{"Gemm C " + memfmt::detail::dims_to_string(c->shape) + " is not a per-output bias"};
      bias = make_parameter(c->type, {out}, r.label());
      for (std::int64_t i = 0; i < out; ++i)
        store_element(*bias, static_cast<std::size_t>(i),
                      beta * element_as_double(*c->constant, n == 1 ? 0 : static_cast<std::size_t>(i)), 0);
    }
    const graph::node_id id = net().linear(layer_name(r, &b), *a.node, out, bias.has_value());
    std::vector<std::pair<parameter, std::string>> params{{w, b.initializer}};
    if (bias) params.emplace_back(*bias, c->initializer);
    bind_parameters(r, id, params);
    set_tensor(r, r.proto().output(0), id, {a.shape[0], out});
  }

  void gemm(const node_reader& r) {
    // ONNX's Gemm multiplies matrices; other ranks are a malformed model, not an op to plan around.
    for (int i = 0; i < 2; ++i) {
      const value& v = input_value(r, i);
      if (v.shape.size() != 2 && !(v.barrier && v.barrier->shape_unknown))
        r.fail(errc::invalid_argument, std::string(i == 0 ? "A " : "B ") + memfmt::detail::dims_to_string(v.shape) +
                                           " has rank " + std::to_string(v.shape.size()) + ", not 2 (Gemm multiplies matrices)");
    }
    const value& a = tensor_input(r, 0);
    const value* b = constant_input(r, 1, true);
    const value* c = constant_input(r, 2, false);
    if (r.get_int("transA", 0) != 0) throw not_expressible{"Gemm with transA"};
    linear(r, a, *b, r.get_int("transB", 0) != 0, r.get_float("alpha", 1.f), c, r.get_float("beta", 1.f));
  }

  void matmul(const node_reader& r) {
    const value& a = tensor_input(r, 0);
    if (a.channels_last) return pointwise_conv(r, a, *constant_input(r, 1, true));
    linear(r, a, *constant_input(r, 1, true), false, 1.0, nullptr, 0.0);
  }

  // MatMul of a channels-last view [N, spatial..., C] by a [C, K] constant is a 1x1 conv of the
  // logical value to K channels (nn.Linear over a permuted tensor, as ConvNeXt's blocks write it).
  // An Add of a [K] constant that is the product's only reader becomes the conv's bias (nn.Linear
  // exports as MatMul + Add), and the layer takes the bias's module name.
  void pointwise_conv(const node_reader& r, const value& x, const value& w) {
    const std::int64_t c = x.shape.back();
    if (w.shape.size() != 2 || w.shape[0] != c)
      throw not_expressible{"a product of channels-last " + memfmt::detail::dims_to_string(x.shape) + " and " +
                            memfmt::detail::dims_to_string(w.shape) + " (needs a [C, K] constant)"};
    if (w.type != x.type) r.fail(errc::unsupported_dtype, "weight is " + std::string(to_string(w.type)) + ", input " +
                                                              std::string(to_string(x.type)));
    const std::int64_t k = w.shape[1];
    const value* bias = nullptr;
    const ::onnx::NodeProto* add = only_reader(r.proto().output(0));
    if (add && add->op_type() == "Add" && add->input_size() == 2) {
      const auto it = values_.find(other_input(*add, r.proto().output(0)));
      if (it != values_.end() && it->second.constant && it->second.type == x.type && !it->second.shape.empty() &&
          it->second.shape.back() == k && memfmt::detail::checked_numel(it->second.shape, "bias") == k &&
          it->second.shape.size() <= x.shape.size())
        bias = &it->second;
    }
    parameter weight = make_parameter(w.type, {k, c}, r.label());
    for (std::int64_t o = 0; o < k; ++o)
      for (std::int64_t i = 0; i < c; ++i)
        store_element(weight, static_cast<std::size_t>(o * c + i), element_as_double(*w.constant, static_cast<std::size_t>(i * k + o)), 0);
    const std::optional<std::string> module = free_module(bias, ".bias");
    const std::string name = module ? unique_name(*module) : layer_name(r, &w);
    const graph::node_id id = net().conv(name, *x.node, graph::conv_spec(k, 1, 1, 0, 1, bias != nullptr));
    std::vector<std::pair<parameter, std::string>> params{{weight, w.initializer}};
    if (bias) {
      parameter b = *bias->constant;
      b.shape = {k};
      params.emplace_back(std::move(b), bias->initializer);
    }
    bind_parameters(r, id, params);
    if (bias) fused_.insert(add);
    set_like(r, bias ? add->output(0) : r.proto().output(0), id, x);
  }

  // n is an `op` node of `inputs` inputs and one output (what a pattern reads; a mutated file's
  // nodes may have none).
  static bool is_node(const ::onnx::NodeProto* n, const char* op, int inputs) {
    return n && n->op_type() == op && n->input_size() == inputs && n->output_size() == 1;
  }
  // The constant other operand of `op` node n (which reads `from`), if it holds one value per
  // channel of x placed at C when broadcast against x (C on axis c_axis: [C] for a channels-last
  // view, [C, 1, 1] or [1, C, 1, 1] for a 2-D network value); its shape is then [C].
  std::optional<value> channel_constant(const ::onnx::NodeProto* n, const std::string& from, const char* op,
                                        const value& x, std::size_t c_axis) const {
    std::optional<value> v;
    if (is_node(n, op, 2)) v = constant_named(other_input(*n, from));
    const std::size_t rank = x.shape.size(), trailing = rank - c_axis;  // dims from C to the end
    const std::int64_t c = x.shape[c_axis];
    if (v && (v->type != x.type || v->shape.size() < trailing || v->shape.size() > rank ||
              v->shape[v->shape.size() - trailing] != c ||
              memfmt::detail::checked_numel(v->shape, "per-channel operand") != c))
      v.reset();
    if (v) v->constant->shape = {c};
    return v;
  }

  // The per-channel affine transform that may follow a written-out normalisation of x whose result
  // is `out`: * weight, then (only after a weight) + bias, each a channel_constant. The matched
  // nodes join `nodes` and `out` moves past them.
  struct channel_affine_t {
    std::optional<value> weight, bias;
  };
  channel_affine_t channel_affine(std::string& out, std::set<const ::onnx::NodeProto*>& nodes, const value& x,
                                  std::size_t c_axis) const {
    channel_affine_t t;
    const ::onnx::NodeProto* mul = only_reader(out);
    t.weight = channel_constant(mul, out, "Mul", x, c_axis);
    if (!t.weight) return t;
    nodes.insert(mul);
    out = mul->output(0);
    const ::onnx::NodeProto* add = only_reader(out);
    t.bias = channel_constant(add, out, "Add", x, c_axis);
    if (t.bias) nodes.insert(add), out = add->output(0);
    return t;
  }

  // Layer norm written out over C, of x that is a channels-last view (as exporters before opset 17
  // write nn.LayerNorm after a permute; the reduced axis is the last) or a network value (the
  // LayerNorm2d of detectron2, SAM and the original ConvNeXt: x.mean(1, keepdim=True); axis 1):
  //   mean = ReduceMean(x), d = x - mean, var = ReduceMean(Pow(d, 2)), y = d / Sqrt(var + eps),
  //   then optionally y * weight and + bias (constants of C values that broadcast along C: [C] for
  //   a view, [C, 1, 1] or [1, C, 1, 1] for axis 1; either operand order).
  // Called at the first ReduceMean; every intermediate value must be read only within the pattern
  // (d by the Pow and the Div), whose later nodes are then skipped. false where it is no layer norm.
  bool decomposed_layer_norm(const node_reader& r, const value& x) {
    const std::size_t rank = x.shape.size();
    if (!x.node || rank < 3 || rank > 5) return false;
    const std::size_t c_axis = x.channels_last ? rank - 1 : 1;
    const std::int64_t c = x.shape[c_axis];
    const auto over_c = [&](const ::onnx::NodeProto& n) {
      const node_reader nr(n, "ONNX node '" + n.name() + "'");
      const shape_t axes = nr.get_ints("axes");
      return n.op_type() == "ReduceMean" && n.input_size() == 1 && nr.get_int("keepdims", 1) == 1 && axes.size() == 1 &&
             (axes[0] == static_cast<std::int64_t>(c_axis) ||
              axes[0] == static_cast<std::int64_t>(c_axis) - static_cast<std::int64_t>(rank));
    };
    const std::string& x_name = r.input(0);
    const std::string& mean = r.proto().output(0);
    if (!over_c(r.proto())) return false;
    const ::onnx::NodeProto* sub = only_reader(mean);
    if (!is_node(sub, "Sub", 2) || sub->input(0) != x_name || sub->input(1) != mean) return false;
    const std::string& d = sub->output(0);
    const auto readers = readers_.find(d);
    if (readers == readers_.end() || readers->second.size() != 2) return false;
    const ::onnx::NodeProto* pow = readers->second[0]->op_type() == "Pow" ? readers->second[0] : readers->second[1];
    const ::onnx::NodeProto* div = pow == readers->second[0] ? readers->second[1] : readers->second[0];
    if (!is_node(pow, "Pow", 2) || pow->input(0) != d || scalar_constant(pow->input(1)) != 2.0) return false;
    const ::onnx::NodeProto* var = only_reader(pow->output(0));
    if (!var || var->output_size() != 1 || !over_c(*var)) return false;
    const ::onnx::NodeProto* add_eps = only_reader(var->output(0));
    if (!is_node(add_eps, "Add", 2)) return false;
    const std::optional<double> eps = scalar_constant(other_input(*add_eps, var->output(0)));
    if (!eps || !(*eps > 0.0)) return false;
    const ::onnx::NodeProto* sqrt = only_reader(add_eps->output(0));
    if (!is_node(sqrt, "Sqrt", 1) || only_reader(sqrt->output(0)) != div) return false;
    if (!is_node(div, "Div", 2) || div->input(0) != d || div->input(1) != sqrt->output(0)) return false;
    std::set<const ::onnx::NodeProto*> nodes{sub, pow, var, add_eps, sqrt, div};
    std::string out = div->output(0);
    const auto [weight, bias] = channel_affine(out, nodes, x, c_axis);
    parameter w = weight ? *weight->constant : make_parameter(x.type, {c}, r.label());
    if (!weight)
      for (std::int64_t i = 0; i < c; ++i) store_element(w, static_cast<std::size_t>(i), 1.0, 0);
    const parameter b = bias ? *bias->constant : make_parameter(x.type, {c}, r.label());
    const graph::node_id id = net().layer_norm(layer_name(r, weight ? &*weight : nullptr), *x.node, *eps, true);
    bind_parameters(r, id, {{w, weight ? weight->initializer : ""}, {b, bias ? bias->initializer : ""}});
    fused_.insert(nodes.begin(), nodes.end());
    set_like(r, out, id, x);
    return true;
  }

  // GroupNorm as exporters write it (PyTorch's F.group_norm): x [N, C, ...] reshaped to [N, G, -1],
  // InstanceNormalization of that (scale and bias of G values), reshaped back to x's shape (by
  // Shape(x) or a constant), then optionally * weight and + bias of C values along C. Called at the
  // first Reshape: one group norm, its affine weights folding the instance norm's (w_c gamma_g,
  // w_c beta_g + b_c). false where it is no group norm.
  bool decomposed_group_norm(const node_reader& r, const value& x, const shape_t& target) {
    const std::size_t rank = x.shape.size();
    if (!x.node || x.channels_last || rank < 3 || rank > 5 || target.size() != 3 || target[0] != x.shape[0])
      return false;
    const std::int64_t c = x.shape[1], g = target[1];
    if (g <= 0 || c % g != 0) return false;
    const std::string& grouped = r.proto().output(0);
    const ::onnx::NodeProto* in = only_reader(grouped);
    if (!is_node(in, "InstanceNormalization", 3) || in->input(0) != grouped) return false;
    const std::optional<value> gamma = constant_named(in->input(1)), beta = constant_named(in->input(2));
    for (const std::optional<value>* v : {&gamma, &beta})
      if (!*v || (*v)->type != x.type || memfmt::detail::checked_numel((*v)->shape, "instance norm operand") != g)
        return false;
    const ::onnx::NodeProto* back = only_reader(in->output(0));
    if (!is_node(back, "Reshape", 2) || back->input(0) != in->output(0)) return false;
    const auto shape_node = producers_.find(back->input(1));
    const bool to_x_shape =
        shape_node != producers_.end() && shape_node->second->op_type() == "Shape"
            ? shape_node->second->input_size() == 1 && shape_node->second->input(0) == r.input(0) &&
                  shape_node->second->attribute_size() == 0
            : [&] {
                const std::optional<value> s = constant_named(back->input(1));
                return s && s->type == memfmt::dtype::int64 && int64_values(*s->constant) == x.shape;
              }();
    if (!to_x_shape) return false;
    std::set<const ::onnx::NodeProto*> nodes{in, back};
    std::string out = back->output(0);
    const auto [weight, bias] = channel_affine(out, nodes, x, 1);
    parameter w = make_parameter(x.type, {c}, r.label()), b = make_parameter(x.type, {c}, r.label());
    bool plain = true;  // the instance norm's scale 1 and bias 0 (PyTorch's): the weights are the initializers
    for (std::int64_t i = 0; i < c; ++i) {
      const auto at = static_cast<std::size_t>(i), group = static_cast<std::size_t>(i / (c / g));
      const double wc = weight ? element_as_double(*weight->constant, at) : 1.0;
      const double bc = bias ? element_as_double(*bias->constant, at) : 0.0;
      const double gs = element_as_double(*gamma->constant, group), gb = element_as_double(*beta->constant, group);
      plain = plain && gs == 1.0 && gb == 0.0;
      store_element(w, at, wc * gs, 0);
      store_element(b, at, wc * gb + bc, 0);
    }
    const double eps = node_reader(*in, "ONNX node '" + in->name() + "'").get_float("epsilon", 1e-5f);
    const graph::node_id id = net().group_norm(layer_name(r, weight ? &*weight : nullptr), *x.node, g, eps, true);
    bind_parameters(r, id, {{w, weight && plain ? weight->initializer : ""}, {b, bias && plain ? bias->initializer : ""}});
    fused_.insert(nodes.begin(), nodes.end());
    set_like(r, out, id, x);
    return true;
  }

  // LayerNormalization over the last axis of a channels-last view: layer norm over C. Over any
  // other axes it is a barrier.
  void layer_norm(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    const std::size_t rank = x.shape.size();
    const std::int64_t axis = normalize_axis(r, r.get_int("axis", -1), rank);
    if (!x.channels_last || axis != static_cast<std::int64_t>(rank) - 1)
      throw not_expressible{"normalisation from axis " + std::to_string(axis) + " of " +
                            (x.channels_last ? "channels-last view " : "") + memfmt::detail::dims_to_string(x.shape) +
                            " (only over C: the last axis of a channels-last transpose)"};
    require_single_output(r);
    const value* scale = constant_input(r, 1, true);
    const value* bias = constant_input(r, 2, false);
    const std::int64_t c = x.shape.back();
    for (const value* v : {scale, bias})
      if (v && (v->shape.empty() || v->shape.back() != c || memfmt::detail::checked_numel(v->shape, "scale") != c))
        r.fail(errc::shape_mismatch, "scale or bias " + memfmt::detail::dims_to_string(v->shape) + " must be [" +
                                         std::to_string(c) + "] for input " + memfmt::detail::dims_to_string(x.shape));
    const graph::node_id id =
        net().layer_norm(layer_name(r, scale), *x.node, static_cast<double>(r.get_float("epsilon", 1e-5f)), true);
    std::vector<std::pair<parameter, std::string>> params{named(*scale)};
    if (bias) params.push_back(named(*bias));
    else params.emplace_back(make_parameter(scale->type, {c}, r.label()), "");  // no bias: zeros
    bind_parameters(r, id, params);
    set_like(r, id, x);
  }

  // Softmax over C (rank >= 3) or the features (rank 2). Before opset 13 the axis splits the input
  // into [outer, inner] and normalises over inner: the same where the dims after C are 1.
  void softmax(const node_reader& r, bool log) {
    const value& x = tensor_input(r, 0);
    const std::size_t rank = x.shape.size();
    const std::int64_t axis = normalize_axis(r, r.get_int("axis", result_.opset < 13 ? 1 : -1), rank);
    bool ok = axis == 1;
    if (result_.opset < 13)
      for (std::size_t d = 2; d < rank; ++d) ok = ok && x.shape[d] == 1;
    if (rank == 2 && axis == 1) ok = true;
    if (!ok) throw not_expressible{"softmax over axis " + std::to_string(axis) + " of rank " + std::to_string(rank)};
    memfmt::softmax_params p;
    p.log = log;
    set_tensor(r, net().softmax(layer_name(r, nullptr), *x.node, p), x.lifted());
  }

  void dropout(const node_reader& r) {
    const value& x = tensor_input(r, 0);
    require_single_output(r);
    double ratio = r.get_float("ratio", 0.5f);
    if (result_.opset >= 12) {
      ratio = scalar_input(r, 1, 0.5);
      if (scalar_input(r, 2, 0.0) != 0.0) throw not_expressible{"Dropout in training mode"};
    }
    set_tensor(r, net().dropout(layer_name(r, nullptr), *x.node, ratio), x.lifted());
  }

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
    shape_t shape;     // what the network infers
  };
  std::vector<shape_check> shape_checks_;  // every translated output, checked by check_onnx_shapes()
  std::map<std::string, std::vector<const ::onnx::NodeProto*>> readers_;  // by value name
  std::map<std::string, const ::onnx::NodeProto*> producers_;
  std::set<const ::onnx::NodeProto*> fused_;  // skipped: an earlier node's pattern covered them
  std::set<std::string> reserved_;
  std::string current_onnx_name_;
};

}  // namespace detail

inline imported_model import_model(const ::onnx::ModelProto& model, const import_options& options) {
  return detail::importer(model, options).run();
}

// A serialized ModelProto; `what` names it in messages.
inline imported_model import_bytes(std::string_view bytes, const import_options& options = {},
                                   const std::string& what = "ONNX model") {
  ::onnx::ModelProto model;
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    memfmt::detail::fail(errc::invalid_argument, what + ": not a serialized ONNX ModelProto (" +
                                                     std::to_string(bytes.size()) + " bytes)");
  if (!model.has_graph()) memfmt::detail::fail(errc::invalid_argument, what + ": the model has no graph");
  return import_model(model, options);
}

// Reads `path` (a regular file: a directory or device is refused by name) straight into the
// ModelProto, one copy of its bytes, then imports it.
inline imported_model import_file(const std::string& path, const import_options& options = {}) {
  io::input_file f(path, "ONNX model");
  // protobuf reads at most 2 GiB; larger models keep their weights in external data files.
  if (f.size() > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    memfmt::detail::fail(errc::unsupported, f.label() + " is " + std::to_string(f.size()) +
                                                " bytes, past protobuf's 2 GiB (external data is not supported)");
  std::ifstream in(path, std::ios::binary);
  ::onnx::ModelProto model;
  if (!model.ParseFromIstream(&in))
    memfmt::detail::fail(errc::invalid_argument, f.label() + ": not a serialized ONNX ModelProto (" +
                                                     std::to_string(f.size()) + " bytes)");
  if (!model.has_graph()) memfmt::detail::fail(errc::invalid_argument, f.label() + ": the model has no graph");
  return import_model(model, options);
}

}  // namespace memfmt::onnx
