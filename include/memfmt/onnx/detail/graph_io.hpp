// memfmt/onnx/detail/graph_io.hpp - the graph's inputs and outputs, and ONNX's own shape inference
// as a check of every value's shape.
// Members of detail::importer, declared in importer.hpp; users include onnx/import.hpp.
#pragma once

#include "importer.hpp"

namespace memfmt::onnx::detail {

inline void importer::add_graph_input(const ::onnx::ValueInfoProto& in) {
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
  if (!in.type().has_tensor_type()) memfmt::detail::fail(errc::unsupported, where + " is not a tensor");
  const auto& tt = in.type().tensor_type();
  const memfmt::dtype type = dtype_from_onnx(tt.elem_type(), where);
  if (!tt.has_shape()) memfmt::detail::fail(errc::invalid_argument, where + " has no shape");
  const shape_t shape = *resolved_shape(tt.shape(), &where);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0)
      memfmt::detail::fail(errc::invalid_argument,
                           where + " dim " + std::to_string(d) + " is " + std::to_string(shape[d]));
    if (shape[d] == 0)
      memfmt::detail::fail(errc::unsupported,
                           where + " dim " + std::to_string(d) + " is 0 (empty values are not supported)");
  }
  if (shape.size() < 2 || shape.size() > 5)
    memfmt::detail::fail(errc::unsupported, where + " " + memfmt::detail::dims_to_string(shape) + " has rank " +
                                                std::to_string(shape.size()) +
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
inline std::optional<shape_t> importer::resolved_shape(const ::onnx::TensorShapeProto& declared,
                                                       const std::string* where) const {
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

inline void importer::add_graph_output(const ::onnx::ValueInfoProto& out) {
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
  if (net().at(*v.node).kind == layer_kind::input && net().at(*v.node).name == out.name())
    memfmt::detail::fail(errc::unsupported, "ONNX graph output '" + out.name() + "' is the graph input itself");
  net().output(out.name(), *v.node, options_.output_format);
  result_.outputs.push_back(graph_value{out.name(), v.shape, v.type});
}

// ONNX's own shape inference, one node at a time (detail/infer.hpp): the output shapes of opaque
// nodes, and the check of every translated one. libonnx sees a node only with inputs whose shapes
// the importer knows and that pass its op's rank rule; its answers are kept per node.
inline const std::map<std::string, shape_t>& importer::onnx_shapes_of(const ::onnx::NodeProto& n) {
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
inline void importer::end_barrier(const std::string& output, const value::barrier_output& b, const shape_t& shape) {
  std::int64_t elements = 1;
  const std::string what = "ONNX graph output '" + output + "'";
  if (!b.shape_unknown) elements = memfmt::detail::checked_numel(shape, what.c_str());
  reserved_.erase(output);  // kept free for the network output this is not
  const std::string name = unique_name(output);
  net().opaque(name, b.sources, {1, elements}, format_family::channels_first, format_family::channels_first);
  result_.unsupported.at(b.listed).node = name;
}

// An opaque node's output shape: ONNX's inference of its node, or else the shape a graph output
// declares.
inline std::optional<shape_t> importer::opaque_output_shape(const ::onnx::NodeProto& n, const std::string& name) {
  const auto& inferred = onnx_shapes_of(n);
  if (const auto it = inferred.find(name); it != inferred.end()) return it->second;
  for (const auto& out : model_.graph().output())
    if (out.name() == name && out.type().has_tensor_type() && out.type().tensor_type().has_shape())
      return resolved_shape(out.type().tensor_type().shape(), nullptr);
  return std::nullopt;
}

// Every translated output's shape against ONNX's inference of the node that writes it, where it
// has one.
inline void importer::check_onnx_shapes() {
  for (const shape_check& c : shape_checks_) {
    const auto p = producers_.find(c.value);
    if (p == producers_.end()) continue;
    const auto& inferred = onnx_shapes_of(*p->second);
    const auto it = inferred.find(c.value);
    if (it != inferred.end() && it->second != c.shape)
      memfmt::detail::fail(errc::shape_mismatch, c.node + ": output '" + c.value + "': the network infers " +
                                                     memfmt::detail::dims_to_string(c.shape) +
                                                     ", ONNX shape inference " +
                                                     memfmt::detail::dims_to_string(it->second));
  }
}

}  // namespace memfmt::onnx::detail
