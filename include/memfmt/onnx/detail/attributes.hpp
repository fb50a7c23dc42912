// memfmt/onnx/detail/attributes.hpp - an ONNX node's attributes, read with errors that name the node.
//
// Every read checks the attribute's type, so a model whose Conv has `strides` as a float or whose
// Pad has an unknown `mode` fails with memfmt::error naming node, op, attribute and value instead of
// importing something else.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "../../error.hpp"

namespace memfmt::onnx::detail {

class node_reader {
 public:
  node_reader(const ::onnx::NodeProto& node, std::string label) : node_(node), label_(std::move(label)) {}

  const ::onnx::NodeProto& proto() const noexcept { return node_; }
  const std::string& op() const noexcept { return node_.op_type(); }
  // "node 'Conv_3' (Conv)": how every message starts.
  const std::string& label() const noexcept { return label_; }

  [[noreturn]] void fail(errc code, const std::string& what) const { memfmt::detail::fail(code, label_ + ": " + what); }

  const ::onnx::AttributeProto* find(const std::string& name) const {
    for (const auto& a : node_.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  bool has(const std::string& name) const { return find(name) != nullptr; }

  std::int64_t get_int(const std::string& name, std::int64_t fallback) const {
    const auto* a = typed(name, ::onnx::AttributeProto::INT);
    return a ? a->i() : fallback;
  }
  float get_float(const std::string& name, float fallback) const {
    const auto* a = typed(name, ::onnx::AttributeProto::FLOAT);
    return a ? a->f() : fallback;
  }
  std::string get_string(const std::string& name, const std::string& fallback) const {
    const auto* a = typed(name, ::onnx::AttributeProto::STRING);
    return a ? a->s() : fallback;
  }
  std::vector<std::int64_t> get_ints(const std::string& name, std::vector<std::int64_t> fallback = {}) const {
    const auto* a = typed(name, ::onnx::AttributeProto::INTS);
    return a ? std::vector<std::int64_t>(a->ints().begin(), a->ints().end()) : fallback;
  }
  std::vector<float> get_floats(const std::string& name) const {
    const auto* a = typed(name, ::onnx::AttributeProto::FLOATS);
    return a ? std::vector<float>(a->floats().begin(), a->floats().end()) : std::vector<float>{};
  }
  const ::onnx::TensorProto* get_tensor(const std::string& name) const {
    const auto* a = typed(name, ::onnx::AttributeProto::TENSOR);
    return a ? &a->t() : nullptr;
  }

  // A string attribute that must be one of `allowed` (auto_pad, mode, ...).
  std::string get_choice(const std::string& name, const std::string& fallback,
                         const std::vector<std::string>& allowed) const {
    const std::string v = get_string(name, fallback);
    for (const auto& a : allowed)
      if (v == a) return v;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    fail(errc::invalid_argument, "attribute " + name + " = '" + v + "' is not one of " + list);
  }

  // Input i's value name; "" for an absent optional input.
  std::string input(int i) const { return i < node_.input_size() ? node_.input(i) : std::string(); }
  int inputs() const noexcept { return node_.input_size(); }

 private:
  const ::onnx::AttributeProto* typed(const std::string& name, ::onnx::AttributeProto::AttributeType type) const {
    const auto* a = find(name);
    if (a && a->type() != type)
      fail(errc::invalid_argument, "attribute " + name + " has type " +
                                       ::onnx::AttributeProto_AttributeType_Name(a->type()) + ", expected " +
                                       ::onnx::AttributeProto_AttributeType_Name(type));
    return a;
  }

  const ::onnx::NodeProto& node_;
  std::string label_;
};

}  // namespace memfmt::onnx::detail
