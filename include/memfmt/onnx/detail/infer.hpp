// memfmt/onnx/detail/infer.hpp - libonnx's shape inference of one node, given only what memfmt
// has checked.
//
// Debian's libonnx 1.12 infers shapes without checking every rank it indexes: a Gemm whose B has
// rank 1 reads past a protobuf array and crashes the process. So the importer never hands it a
// graph. It asks about one node at a time, in a model of that node alone whose inputs are values
// whose shapes memfmt knows (small constants with their values, the rest as typed inputs), and only
// where the node passes `inferable`: its op is in the table below, whose rule checks the ranks and
// attributes that op's inference indexes with. A node outside the table, or whose inputs' shapes
// memfmt does not know, gets no inferred shape (the importer makes its outputs barriers).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "../../graph/parameter_store.hpp"
#include "../tensor.hpp"
#include "attributes.hpp"

namespace memfmt::onnx::detail {

using shape_t = std::vector<std::int64_t>;

// An input of the node: whether it is given (an optional input may be ""), its shape where memfmt
// knows it, and its value where it is a constant.
struct known_input {
  bool present = true;
  std::optional<shape_t> shape;
  memfmt::dtype type = memfmt::dtype::float32;
  const graph::parameter* constant = nullptr;
};

// A rule's view of a node: its attributes (typed reads) and the shapes of its inputs, every
// present one known.
struct rank_view {
  const node_reader& node;
  const std::vector<known_input>& in;
  bool has(std::size_t i) const { return i < in.size() && in[i].present; }
  std::size_t rank(std::size_t i) const { return has(i) ? in[i].shape->size() : 0; }
  std::size_t count() const { return in.size(); }
  // An axis attribute within [-rank, rank) (or [-rank, rank] where `inclusive`).
  bool axis_in(const char* name, std::int64_t fallback, std::size_t r, bool inclusive = false) const {
    const std::int64_t a = node.get_int(name, fallback), n = static_cast<std::int64_t>(r);
    return a >= -n && (inclusive ? a <= n : a < n);
  }
  bool all_axes_in(const char* name, std::size_t r) const {
    for (std::int64_t a : node.get_ints(name))
      if (a < -static_cast<std::int64_t>(r) || a >= static_cast<std::int64_t>(r)) return false;
    return true;
  }
  // Input i, where present, is a 1-D constant of `n` elements (a Pad's pads, a Resize's scales).
  bool vector_of(std::size_t i, std::size_t n) const {
    return !has(i) || (in[i].shape->size() == 1 && (*in[i].shape)[0] == static_cast<std::int64_t>(n));
  }
};

using rank_rule = std::function<bool(const rank_view&)>;

// The ops whose inference the importer asks for, each with the checks that make its libonnx 1.12
// inference safe: every dim it indexes exists, every axis is in range.
inline const std::map<std::string, rank_rule>& inference_rules() {
  static const std::map<std::string, rank_rule> rules = [] {
    std::map<std::string, rank_rule> m;
    const rank_rule any = [](const rank_view&) { return true; };
    // Elementwise, broadcasting and shape-only ops: their inference merges whatever ranks it gets.
    for (const char* op : {"Relu",      "Sigmoid",     "Tanh",
                           "Abs",       "Neg",         "Exp",
                           "Log",       "Sqrt",        "Reciprocal",
                           "Floor",     "Ceil",        "Round",
                           "Sign",      "Erf",         "Not",
                           "Cast",      "Identity",    "Softplus",
                           "Softsign",  "HardSigmoid", "HardSwish",
                           "LeakyRelu", "Elu",         "Selu",
                           "Celu",      "Mish",        "Sin",
                           "Cos",       "IsNaN",       "IsInf",
                           "Clip",      "Add",         "Sub",
                           "Mul",       "Div",         "Pow",
                           "Max",       "Min",         "Sum",
                           "Mean",      "Equal",       "Less",
                           "Greater",   "LessOrEqual", "GreaterOrEqual",
                           "And",       "Or",          "Xor",
                           "Where",     "Mod",         "PRelu",
                           "Dropout",   "Shape",       "Size",
                           "NonZero",   "LRN",         "ThresholdedRelu",
                           "Shrink",    "Tan",         "Atan",
                           "Asin",      "Acos",        "Sinh",
                           "Cosh",      "Asinh",       "Acosh",
                           "Atanh",     "BitShift"})
      m[op] = any;
    m["Softmax"] = m["LogSoftmax"] =
        m["Hardmax"] = [](const rank_view& v) { return v.rank(0) >= 1 && v.axis_in("axis", -1, v.rank(0)); };
    m["MatMul"] = [](const rank_view& v) { return v.rank(0) >= 1 && v.rank(1) >= 1; };
    m["Gemm"] = [](const rank_view& v) { return v.rank(0) == 2 && v.rank(1) == 2 && v.rank(2) <= 2; };
    m["Transpose"] = [](const rank_view& v) {
      const auto perm = v.node.get_ints("perm");
      if (perm.empty()) return true;
      if (perm.size() != v.rank(0)) return false;
      std::set<std::int64_t> seen(perm.begin(), perm.end());
      return seen.size() == perm.size() && *seen.begin() >= 0 &&
             *seen.rbegin() < static_cast<std::int64_t>(perm.size());
    };
    m["Reshape"] = [](const rank_view& v) { return v.rank(1) == 1; };
    m["Range"] = [](const rank_view& v) {
      return v.count() == 3 && v.rank(0) == 0 && v.rank(1) == 0 && v.rank(2) == 0;
    };
    m["Tile"] = [](const rank_view& v) { return v.rank(1) == 1 && v.vector_of(1, v.rank(0)); };
    m["GatherElements"] = [](const rank_view& v) {
      return v.rank(0) >= 1 && v.rank(1) == v.rank(0) && v.axis_in("axis", 0, v.rank(0));
    };
    m["CumSum"] = [](const rank_view& v) { return v.rank(0) >= 1 && v.rank(1) <= 1; };
    m["Trilu"] = [](const rank_view& v) { return v.rank(0) >= 2; };
    m["Expand"] = [](const rank_view& v) { return v.rank(1) == 1; };
    m["ConstantOfShape"] = [](const rank_view& v) { return v.rank(0) == 1; };
    m["Flatten"] = [](const rank_view& v) { return v.axis_in("axis", 1, v.rank(0), true); };
    m["Concat"] = [](const rank_view& v) {
      for (std::size_t i = 0; i < v.count(); ++i)
        if (!v.has(i) || v.rank(i) != v.rank(0)) return false;
      return v.rank(0) >= 1 && v.axis_in("axis", 0, v.rank(0));
    };
    m["Gather"] = [](const rank_view& v) { return v.rank(0) >= 1 && v.axis_in("axis", 0, v.rank(0)); };
    m["Squeeze"] = m["Unsqueeze"] = [](const rank_view& v) { return !v.has(1) || v.rank(1) == 1; };
    m["Slice"] = [](const rank_view& v) {
      for (std::size_t i = 1; i < v.count(); ++i)
        if (v.has(i) && v.rank(i) != 1) return false;
      return v.rank(0) >= 1;
    };
    m["Split"] = [](const rank_view& v) {
      return v.rank(0) >= 1 && v.axis_in("axis", 0, v.rank(0)) && (!v.has(1) || v.rank(1) == 1);
    };
    m["Pad"] = [](const rank_view& v) { return v.count() < 4 && v.vector_of(1, 2 * v.rank(0)); };
    m["Resize"] = [](const rank_view& v) {
      return v.count() < 5 && v.vector_of(2, v.rank(0)) && v.vector_of(3, v.rank(0));
    };
    m["Upsample"] = [](const rank_view& v) { return v.vector_of(1, v.rank(0)); };
    for (const char* op : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceL1", "ReduceL2",
                           "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})
      m[op] = [](const rank_view& v) { return v.all_axes_in("axes", v.rank(0)) && (!v.has(1) || v.rank(1) == 1); };
    m["ArgMax"] = m["ArgMin"] = [](const rank_view& v) { return v.rank(0) >= 1 && v.axis_in("axis", 0, v.rank(0)); };
    m["TopK"] = [](const rank_view& v) { return v.rank(0) >= 1 && v.rank(1) == 1 && v.axis_in("axis", -1, v.rank(0)); };
    m["GlobalAveragePool"] = m["GlobalMaxPool"] = [](const rank_view& v) { return v.rank(0) >= 3; };
    for (const char* op : {"MaxPool", "AveragePool", "LpPool"})
      m[op] = [](const rank_view& v) {
        const std::size_t s = v.rank(0) < 3 ? 0 : v.rank(0) - 2;
        const auto k = v.node.get_ints("kernel_shape");
        const auto lengths_fit = [&](const char* name, std::size_t n) {
          const auto x = v.node.get_ints(name);
          return x.empty() || x.size() == n;
        };
        return s >= 1 && k.size() == s && lengths_fit("strides", s) && lengths_fit("dilations", s) &&
               lengths_fit("pads", 2 * s);
      };
    m["BatchNormalization"] = m["InstanceNormalization"] = [](const rank_view& v) {
      for (std::size_t i = 1; i < v.count(); ++i)
        if (v.has(i) && v.rank(i) != 1) return false;
      return v.rank(0) >= 2;
    };
    m["LayerNormalization"] = [](const rank_view& v) { return v.rank(0) >= 1 && v.axis_in("axis", -1, v.rank(0)); };
    m["DepthToSpace"] = m["SpaceToDepth"] = [](const rank_view& v) { return v.rank(0) == 4; };
    // Conv and ConvTranspose take the kernel's extents from W's dims 2.. and index per-dim
    // attributes sized by X's rank with them: W must have X's rank, 3 or more, and every per-dim
    // attribute that many entries less 2 (pads twice).
    m["Conv"] = m["ConvTranspose"] = [](const rank_view& v) {
      const std::size_t r = v.rank(0);
      if (r < 3 || v.rank(1) != r || (v.has(2) && v.rank(2) != 1)) return false;
      for (const char* name : {"kernel_shape", "strides", "dilations", "output_padding", "output_shape"}) {
        const auto x = v.node.get_ints(name);
        if (!x.empty() && x.size() != r - 2) return false;
      }
      const auto pads = v.node.get_ints("pads");
      return pads.empty() || pads.size() == 2 * (r - 2);
    };
    return m;
  }();
  return rules;
}

// Whether libonnx may infer node `n`'s outputs from `in`: a default-domain op of the table whose
// inputs' shapes are all known and pass its rule, and libonnx's schema describes the model's opset.
inline bool inferable(const ::onnx::NodeProto& n, const std::string& label, const std::vector<known_input>& in,
                      std::int64_t opset, std::int64_t schema_opset) {
  if (!(n.domain().empty() || n.domain() == "ai.onnx") || opset > schema_opset) return false;
  for (const auto& a : n.attribute()) {
    if (a.type() == ::onnx::AttributeProto::GRAPH || a.type() == ::onnx::AttributeProto::GRAPHS) return false;
    // Divisors of every op's arithmetic (a stride of 0 is a division by zero there).
    const std::string& name = a.name();
    if (name == "strides" || name == "dilations" || name == "kernel_shape" || name == "blocksize" || name == "group") {
      if (a.i() < 0 || (a.type() == ::onnx::AttributeProto::INT && a.i() < 1)) return false;
      for (std::int64_t x : a.ints())
        if (x < 1) return false;
    }
  }
  const auto it = inference_rules().find(n.op_type());
  if (it == inference_rules().end()) return false;
  for (const known_input& k : in)
    if (k.present && !k.shape) return false;
  const node_reader r(n, label);
  return it->second(rank_view{r, in});
}

// The output shapes libonnx infers for `n` alone, its inputs as `in` says (@pre inferable(...)):
// one entry per output that has a static shape. Inference errors give no shape: they are a
// cross-check and a source for opaque shapes, not a requirement.
inline std::map<std::string, shape_t> infer_node(const ::onnx::NodeProto& n, const std::vector<known_input>& in,
                                                 std::int64_t opset) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  auto* g = m.mutable_graph();
  *g->add_node() = n;
  std::set<std::string> given;
  for (int i = 0; i < n.input_size() && static_cast<std::size_t>(i) < in.size(); ++i) {
    const std::string& name = n.input(i);
    if (name.empty() || !in[static_cast<std::size_t>(i)].present || !given.insert(name).second) continue;
    const known_input& k = in[static_cast<std::size_t>(i)];
    // Shape operands need their values; weights only their type and shape, so the copy stays small.
    if (k.constant && k.constant->bytes.size() <= 4096) {
      *g->add_initializer() = to_tensor_proto(*k.constant, name);
      continue;
    }
    auto* vi = g->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype_to_onnx(k.type));
    auto* shape = tt->mutable_shape();
    for (std::int64_t d : *k.shape) shape->add_dim()->set_dim_value(d);
  }
  try {
    ::onnx::shape_inference::InferShapes(m, ::onnx::OpSchemaRegistry::Instance(),
                                         ::onnx::ShapeInferenceOptions(false, 0, false));
  } catch (const std::exception&) {
    return {};
  }
  std::map<std::string, shape_t> shapes;
  const auto collect = [&](const ::onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
    shape_t s;
    for (const auto& d : vi.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0) return;
      s.push_back(d.dim_value());
    }
    shapes[vi.name()] = s;
  };
  for (const auto& vi : g->value_info()) collect(vi);
  return shapes;
}

}  // namespace memfmt::onnx::detail
