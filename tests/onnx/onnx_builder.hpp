// Builds small ONNX models in memory with the ONNX protobuf API, for the importer's per-op tests.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

namespace memfmt_test {

class onnx_builder {
 public:
  explicit onnx_builder(std::int64_t opset = 13) {
    model_.set_ir_version(8);
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  onnx_builder& input(const std::string& name, const std::vector<std::int64_t>& shape,
                      std::int32_t type = ::onnx::TensorProto::FLOAT) {
    value_info(model_.mutable_graph()->add_input(), name, shape, type);
    return *this;
  }
  onnx_builder& input_symbolic_batch(const std::string& name, const std::vector<std::int64_t>& rest) {
    auto* vi = model_.mutable_graph()->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("batch");
    for (std::int64_t d : rest) tt->mutable_shape()->add_dim()->set_dim_value(d);
    return *this;
  }
  // Outputs carry no shape: ONNX's inference and the importer give it.
  onnx_builder& output(const std::string& name) {
    auto* vi = model_.mutable_graph()->add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
    return *this;
  }

  // An initializer whose element i is start + i * step (distinct values, so a transposed or
  // misplaced weight shows).
  onnx_builder& floats(const std::string& name, const std::vector<std::int64_t>& shape, float start = 0.f,
                       float step = 1.f) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    std::int64_t n = 1;
    for (std::int64_t d : shape) {
      t->add_dims(d);
      n *= d;
    }
    for (std::int64_t i = 0; i < n; ++i) t->add_float_data(start + static_cast<float>(i) * step);
    return *this;
  }
  // Tensor t (named) as the output of a Constant node or as an initializer.
  onnx_builder& tensor(const ::onnx::TensorProto& t, bool as_constant_node) {
    if (as_constant_node) {
      node("Constant", {}, {t.name()}).attr_tensor("value", t);
    } else {
      *model_.mutable_graph()->add_initializer() = t;
    }
    return *this;
  }
  onnx_builder& ints(const std::string& name, const std::vector<std::int64_t>& values, bool as_constant_node = false) {
    ::onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(::onnx::TensorProto::INT64);
    t.add_dims(static_cast<std::int64_t>(values.size()));
    for (std::int64_t v : values) t.add_int64_data(v);
    return tensor(t, as_constant_node);
  }
  onnx_builder& float_vector(const std::string& name, const std::vector<float>& values, bool as_constant_node = false) {
    ::onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(::onnx::TensorProto::FLOAT);
    t.add_dims(static_cast<std::int64_t>(values.size()));
    for (float v : values) t.add_float_data(v);
    return tensor(t, as_constant_node);
  }
  onnx_builder& scalar(const std::string& name, float v, bool as_constant_node = true) {
    ::onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(::onnx::TensorProto::FLOAT);
    t.add_float_data(v);
    return tensor(t, as_constant_node);
  }

  onnx_builder& node(const std::string& op, const std::vector<std::string>& inputs,
                     const std::vector<std::string>& outputs, const std::string& name = "") {
    last_ = model_.mutable_graph()->add_node();
    last_->set_op_type(op);
    last_->set_name(name);
    for (const auto& i : inputs) last_->add_input(i);
    for (const auto& o : outputs) last_->add_output(o);
    return *this;
  }
  // Makes the graph's last node the one attr() adds to (after the builder was copied or moved).
  onnx_builder& select_last_node() {
    last_ = model_.mutable_graph()->mutable_node(model_.graph().node_size() - 1);
    return *this;
  }
  // Attributes of the last node.
  onnx_builder& attr(const std::string& name, std::int64_t v) {
    auto* a = add_attr(name, ::onnx::AttributeProto::INT);
    a->set_i(v);
    return *this;
  }
  onnx_builder& attr_f(const std::string& name, float v) {
    auto* a = add_attr(name, ::onnx::AttributeProto::FLOAT);
    a->set_f(v);
    return *this;
  }
  onnx_builder& attr(const std::string& name, const std::vector<std::int64_t>& v) {
    auto* a = add_attr(name, ::onnx::AttributeProto::INTS);
    for (std::int64_t x : v) a->add_ints(x);
    return *this;
  }
  onnx_builder& attr(const std::string& name, const std::string& v) {
    auto* a = add_attr(name, ::onnx::AttributeProto::STRING);
    a->set_s(v);
    return *this;
  }
  onnx_builder& attr_tensor(const std::string& name, const ::onnx::TensorProto& t) {
    auto* a = add_attr(name, ::onnx::AttributeProto::TENSOR);
    *a->mutable_t() = t;
    return *this;
  }

  const ::onnx::ModelProto& model() const { return model_; }
  ::onnx::ModelProto& model() { return model_; }

 private:
  static void value_info(::onnx::ValueInfoProto* vi, const std::string& name, const std::vector<std::int64_t>& shape,
                         std::int32_t type) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    for (std::int64_t d : shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  ::onnx::AttributeProto* add_attr(const std::string& name, ::onnx::AttributeProto::AttributeType type) {
    auto* a = last_->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  }

  ::onnx::ModelProto model_;
  ::onnx::NodeProto* last_ = nullptr;
};

}  // namespace memfmt_test
