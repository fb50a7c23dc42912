// memfmt/onnx/detail/validate.hpp - memfmt's own rules over a whole ModelProto, checked before a
// node is translated and before libonnx's shape inference sees any of it.
//
// ONNX requires, and memfmt checks here: names that are UTF-8 (JSON plans and safetensors files
// carry them), a default-domain opset memfmt knows, single assignment (every value written once:
// by a graph input, an initializer or one node output), inputs defined before their node reads
// them (the nodes in topological order), graph outputs that exist, and per node: no attribute
// twice, and, where libonnx's schemas describe the model's opset, the schema's input and output
// counts and its attributes (known names, declared types, the required ones present). A model that
// breaks one is a memfmt::error naming the node, the value or the attribute.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <unordered_set>

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include "../../detail/utf8.hpp"
#include "../../error.hpp"

namespace memfmt::onnx::detail {

// The newest default-domain opset whose forms the importer's translators know (ReduceMean's axes
// input from 18, Split's num_outputs from 18, Gelu from 20, GroupNormalization's 21 form).
constexpr std::int64_t newest_opset = 21;

// The newest default-domain opset libonnx's schemas describe (17 for Debian's libonnx 1.12): past
// it, a schema may describe an older form of an op, so neither its counts nor its inference apply.
inline std::int64_t schema_opset() {
  const auto& map = ::onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const auto it = map.find("");
  return it == map.end() ? 0 : it->second.second;
}

// 'name', printable (utf8.hpp): how messages quote names from the model.
inline std::string quoted(const std::string& name) { return "'" + memfmt::detail::printable(name) + "'"; }

// "ONNX node 'c' (Conv)", or "ONNX node #3 (Conv)" for an unnamed one: how messages name a node.
inline std::string node_label(const ::onnx::NodeProto& n, int index) {
  return "ONNX node " + (n.name().empty() ? "'#" + std::to_string(index) + "'" : quoted(n.name())) + " (" +
         memfmt::detail::printable(n.op_type()) + ")";
}

// A name from the model must be UTF-8.
inline void require_utf8(const std::string& name, const std::string& what) {
  const std::size_t bad = memfmt::detail::first_non_utf8(name);
  if (bad != std::string::npos)
    memfmt::detail::fail(errc::invalid_argument, what + " " + quoted(name) + " is not UTF-8 (byte " +
                                                     std::to_string(bad) + " of " + std::to_string(name.size()) + ")");
}

// The model's default-domain opset, checked: present once, from 1 to newest_opset.
inline std::int64_t default_opset(const ::onnx::ModelProto& model) {
  std::int64_t opset = 0;
  std::unordered_set<std::string> domains;
  for (const auto& o : model.opset_import()) {
    require_utf8(o.domain(), "ONNX model: opset domain");
    const std::string domain = o.domain() == "ai.onnx" ? "" : o.domain();
    if (!domains.insert(domain).second)
      memfmt::detail::fail(errc::invalid_argument,
                           "ONNX model: two opset_import entries for domain " + quoted(o.domain()));
    if (domain.empty()) opset = o.version();
  }
  if (domains.count("") == 0)
    memfmt::detail::fail(errc::unsupported,
                         "ONNX model: no opset of the default domain (only " +
                             (model.opset_import_size() ? quoted(model.opset_import(0).domain()) : "none") + ")");
  if (opset < 1 || opset > newest_opset)
    memfmt::detail::fail(opset < 1 ? errc::invalid_argument : errc::unsupported,
                         "ONNX model: default-domain opset " + std::to_string(opset) +
                             " is not one memfmt reads (1 to " + std::to_string(newest_opset) + ")");
  return opset;
}

// The schema's counts and attributes for node n (of the default domain, at `opset`).
inline void check_against_schema(const ::onnx::NodeProto& n, const std::string& label, const ::onnx::OpSchema& s) {
  const auto count = [&](int have, int lo, int hi, const char* what) {
    if (have >= lo && have <= hi) return;
    const std::string range = lo == hi ? std::to_string(lo)
                              : hi == std::numeric_limits<int>::max()
                                  ? std::to_string(lo) + " or more"
                                  : std::to_string(lo) + " to " + std::to_string(hi);
    memfmt::detail::fail(errc::invalid_argument, label + ": " + std::to_string(have) + " " + what + ", the op takes " +
                                                     range + " at opset " + std::to_string(s.SinceVersion()) +
                                                     " and later");
  };
  count(n.input_size(), s.min_input(), s.max_input(), "inputs");
  count(n.output_size(), s.min_output(), s.max_output(), "outputs");
  const auto& declared = s.attributes();
  for (const auto& a : n.attribute()) {
    const auto it = declared.find(a.name());
    if (it == declared.end())
      memfmt::detail::fail(errc::invalid_argument,
                           label + ": attribute " + quoted(a.name()) + " is not one of the op's");
    if (!a.ref_attr_name().empty()) continue;  // a function's reference, typed where the function is called
    if (a.type() != it->second.type)
      memfmt::detail::fail(errc::invalid_argument, label + ": attribute " + quoted(a.name()) + " has type " +
                                                       ::onnx::AttributeProto_AttributeType_Name(a.type()) +
                                                       ", expected " +
                                                       ::onnx::AttributeProto_AttributeType_Name(it->second.type));
  }
  for (const auto& [name, attr] : declared) {
    if (!attr.required) continue;
    bool found = false;
    for (const auto& a : n.attribute()) found = found || a.name() == name;
    if (!found)
      memfmt::detail::fail(errc::invalid_argument, label + ": required attribute " + quoted(name) + " is missing");
  }
}

// Every rule above, in one pass over the graph (linear in its size). Returns the default-domain opset.
inline std::int64_t validate_model(const ::onnx::ModelProto& model) {
  const std::int64_t opset = default_opset(model);
  const bool schemas_apply = opset <= schema_opset();
  const auto& g = model.graph();
  std::unordered_set<std::string> initializers;
  for (const auto& t : g.initializer()) {
    require_utf8(t.name(), "ONNX initializer");
    if (t.name().empty()) memfmt::detail::fail(errc::invalid_argument, "ONNX model: an initializer has no name");
    if (!initializers.insert(t.name()).second)
      memfmt::detail::fail(errc::invalid_argument, "ONNX initializer " + quoted(t.name()) + " is defined twice");
  }
  std::unordered_set<std::string> inputs;
  for (const auto& in : g.input()) {
    require_utf8(in.name(), "ONNX graph input");
    if (in.name().empty()) memfmt::detail::fail(errc::invalid_argument, "ONNX model: a graph input has no name");
    if (!inputs.insert(in.name()).second)
      memfmt::detail::fail(errc::invalid_argument, "ONNX graph input " + quoted(in.name()) + " is listed twice");
  }
  std::unordered_set<std::string> defined = initializers;  // a graph input may name an initializer (IR < 4)
  defined.insert(inputs.begin(), inputs.end());
  for (int i = 0; i < g.node_size(); ++i) {
    const ::onnx::NodeProto& n = g.node(i);
    require_utf8(n.name(), "ONNX node #" + std::to_string(i) + "'s name");
    require_utf8(n.op_type(), "ONNX node #" + std::to_string(i) + "'s op");
    require_utf8(n.domain(), "ONNX node #" + std::to_string(i) + "'s domain");
    const std::string label = node_label(n, i);
    if (n.op_type().empty()) memfmt::detail::fail(errc::invalid_argument, label + ": the node has no op_type");
    for (int k = 0; k < n.input_size(); ++k) {
      const std::string& name = n.input(k);
      require_utf8(name, label + ": input " + std::to_string(k));
      if (!name.empty() && !defined.count(name))
        memfmt::detail::fail(errc::invalid_argument, label + ": input " + std::to_string(k) + " value " + quoted(name) +
                                                         " is produced by no earlier node, graph input or initializer");
    }
    std::unordered_set<std::string> attributes;
    for (const auto& a : n.attribute()) {
      require_utf8(a.name(), label + ": attribute");
      if (!attributes.insert(a.name()).second)
        memfmt::detail::fail(errc::invalid_argument, label + ": attribute " + quoted(a.name()) + " is given twice");
    }
    for (int k = 0; k < n.output_size(); ++k) {
      const std::string& name = n.output(k);
      require_utf8(name, label + ": output " + std::to_string(k));
      if (name.empty()) continue;
      if (!defined.insert(name).second)
        memfmt::detail::fail(errc::invalid_argument, label + ": output " + std::to_string(k) + " value " +
                                                         quoted(name) + " is already " +
                                                         (inputs.count(name)         ? "a graph input"
                                                          : initializers.count(name) ? "an initializer"
                                                                                     : "written by an earlier node") +
                                                         " (ONNX values are assigned once)");
    }
    const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
    if (default_domain && schemas_apply) {
      const ::onnx::OpSchema* s = ::onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), "");
      if (s && !s->Deprecated()) check_against_schema(n, label, *s);
    }
  }
  if (g.output_size() == 0) memfmt::detail::fail(errc::invalid_argument, "ONNX model: the graph has no outputs");
  std::unordered_set<std::string> outputs;
  for (const auto& out : g.output()) {
    require_utf8(out.name(), "ONNX graph output");
    if (!defined.count(out.name()))
      memfmt::detail::fail(errc::invalid_argument, "ONNX graph output " + quoted(out.name()) +
                                                       " is produced by no node, graph input or initializer");
    if (!outputs.insert(out.name()).second)
      memfmt::detail::fail(errc::invalid_argument, "ONNX graph output " + quoted(out.name()) + " is listed twice");
  }
  return opset;
}

}  // namespace memfmt::onnx::detail
