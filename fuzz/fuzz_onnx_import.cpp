// Fuzz target: the ONNX importer (onnx/import.hpp) on arbitrary bytes, mutated from small models,
// and the executor on what it imports. Properties, besides "no crash, no sanitizer report, only
// memfmt::error":
// - an imported model is complete: its graph inputs and outputs are nodes of the network, and
//   every parameter the network lists is in the store with the extents and dtype it expects;
// - the planner plans it, and the plan passes verify();
// - a runnable float32 model small enough to run in milliseconds runs forward on the reference
//   backend (buffers poisoned when their liveness ends) in the all-channels-first and the
//   all-channels-last plan, and the two give the same outputs: a format moves values, it does not
//   change them (the all-channels-last plan converts at the pinned graph boundaries).
// Inputs are mutated two ways: libFuzzer's byte mutations (the protobuf parser), and, most of the
// time, a structure-aware mutator (LLVMFuzzerCustomMutator below) that parses the ModelProto and
// changes its fields: ops, ranks, attributes, value names, opsets. Those reach the importer's
// rules and the ranks libonnx's shape inference is asked about, which byte flips rarely do.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/graph/verify.hpp"
#include "memfmt/onnx/import.hpp"
#include "memfmt/session/onnx.hpp"
#include "run_check.hpp"

namespace {

namespace graph = memfmt::graph;
namespace runtime = memfmt::runtime;
namespace mo = memfmt::onnx;
using memfmt::dtype;
using memfmt::graph::parameter;
using memfmt_fuzz::accepted;
using memfmt_fuzz::must;
using memfmt_fuzz::require;

// Outputs of two plans: the same shapes, and values that agree (run_check.hpp).
void require_same_outputs(const mo::imported_model& m, const std::map<std::string, parameter>& a,
                          const std::map<std::string, parameter>& b) {
  for (const mo::graph_value& out : m.outputs) {
    const parameter& x = a.at(out.name);
    const parameter& y = b.at(out.name);
    require(x.shape == out.shape && y.shape == out.shape && x.type == y.type,
            "output '" + out.name + "' is " + graph::describe(x.type, x.shape) + " and " +
                graph::describe(y.type, y.shape) + ", the model says " + graph::describe(out.type, out.shape));
    memfmt_fuzz::require_close(memfmt_fuzz::to_floats(x.bytes), memfmt_fuzz::to_floats(y.bytes),
                               "output '" + out.name + "'", "all channels-first", "all channels-last");
  }
}

// ---- the structure-aware mutator ----

// Ops to put in place of a node's: the importer's layers, the ops libonnx is asked to infer, and
// some it never is (subgraphs, detectors' ops).
const char* const mutation_ops[] = {"Conv",
                                    "ConvTranspose",
                                    "Gemm",
                                    "MatMul",
                                    "Relu",
                                    "Add",
                                    "Mul",
                                    "Concat",
                                    "Reshape",
                                    "Transpose",
                                    "Gather",
                                    "Slice",
                                    "Split",
                                    "Pad",
                                    "Resize",
                                    "Upsample",
                                    "MaxPool",
                                    "AveragePool",
                                    "GlobalAveragePool",
                                    "BatchNormalization",
                                    "InstanceNormalization",
                                    "LayerNormalization",
                                    "ReduceMean",
                                    "Softmax",
                                    "Flatten",
                                    "Squeeze",
                                    "Unsqueeze",
                                    "Expand",
                                    "Clip",
                                    "Shape",
                                    "Cast",
                                    "TopK",
                                    "ArgMax",
                                    "DepthToSpace",
                                    "Einsum",
                                    "NonMaxSuppression",
                                    "If",
                                    "Loop",
                                    "LRN",
                                    "Where",
                                    "ConstantOfShape",
                                    "Range",
                                    "Tile",
                                    "GroupNormalization"};
const char* const mutation_attributes[] = {"axis",        "axes",     "perm",   "kernel_shape", "strides", "pads",
                                           "dilations",   "group",    "transA", "transB",       "alpha",   "beta",
                                           "to",          "keepdims", "mode",   "blocksize",    "epsilon", "split",
                                           "num_outputs", "value",    "k"};

template <class R, class T>
const T& pick(R& rng, const T* items, std::size_t n) {
  return items[std::uniform_int_distribution<std::size_t>(0, n - 1)(rng)];
}

// A small integer, the values ranks, axes and extents take, with the edges (0, negative, large).
template <class R>
std::int64_t small_int(R& rng) {
  static const std::int64_t edges[] = {-3, -2, -1, 0, 0, 1, 1, 2, 2, 3, 4, 5, 8, 1 << 20, std::int64_t{1} << 40};
  return pick(rng, edges, std::size(edges));
}

// Every value name the graph writes or reads, to rewire inputs and outputs with.
std::vector<std::string> value_names(const ::onnx::GraphProto& g) {
  std::vector<std::string> names;
  for (const auto& i : g.input()) names.push_back(i.name());
  for (const auto& t : g.initializer()) names.push_back(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) names.push_back(o);
  return names;
}

template <class R>
void mutate_model(::onnx::ModelProto& m, R& rng) {
  auto* g = m.mutable_graph();
  const auto one_in = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const std::vector<std::string> names = value_names(*g);
  const auto any_name = [&]() -> std::string {
    if (names.empty() || one_in(8) == 0) return one_in(2) ? std::string() : "undefined_" + std::to_string(one_in(4));
    return names[static_cast<std::size_t>(one_in(static_cast<int>(names.size())))];
  };
  ::onnx::NodeProto* node = g->node_size() ? g->mutable_node(one_in(g->node_size())) : nullptr;
  switch (one_in(12)) {
    case 0:
      if (node) node->set_op_type(pick(rng, mutation_ops, std::size(mutation_ops)));
      break;
    case 1:
      if (node && node->input_size()) node->set_input(one_in(node->input_size()), any_name());
      break;
    case 2:
      if (node)
        one_in(2) ? node->add_input(any_name()) : (node->input_size() ? node->mutable_input()->RemoveLast() : void());
      break;
    case 3:
      if (node && node->output_size()) node->set_output(one_in(node->output_size()), one_in(2) ? any_name() : "fresh");
      break;
    case 4: {  // an attribute added or retyped, with small values
      if (!node) break;
      ::onnx::AttributeProto* a = node->attribute_size() && one_in(2)
                                      ? node->mutable_attribute(one_in(node->attribute_size()))
                                      : node->add_attribute();
      if (a->name().empty() || one_in(4) == 0)
        a->set_name(pick(rng, mutation_attributes, std::size(mutation_attributes)));
      a->clear_ints();
      a->clear_floats();
      switch (one_in(4)) {
        case 0:
          a->set_type(::onnx::AttributeProto::INT);
          a->set_i(small_int(rng));
          break;
        case 1: {
          a->set_type(::onnx::AttributeProto::INTS);
          for (int k = one_in(7); k > 0; --k) a->add_ints(small_int(rng));
          break;
        }
        case 2:
          a->set_type(::onnx::AttributeProto::FLOAT);
          a->set_f(static_cast<float>(small_int(rng)) / 4);
          break;
        default:
          a->set_type(::onnx::AttributeProto::STRING);
          a->set_s(one_in(2) ? "constant" : "SAME_UPPER");
          break;
      }
      break;
    }
    case 5:
      if (node && node->attribute_size()) node->mutable_attribute()->DeleteSubrange(one_in(node->attribute_size()), 1);
      break;
    case 6: {  // an initializer's dims
      if (!g->initializer_size()) break;
      auto* t = g->mutable_initializer(one_in(g->initializer_size()));
      if (t->dims_size() && one_in(2)) t->set_dims(one_in(t->dims_size()), small_int(rng));
      else if (one_in(2)) t->add_dims(small_int(rng));
      else if (t->dims_size()) t->mutable_dims()->RemoveLast();
      break;
    }
    case 7: {  // a graph input's rank or extents
      if (!g->input_size()) break;
      auto* shape = g->mutable_input(one_in(g->input_size()))->mutable_type()->mutable_tensor_type()->mutable_shape();
      if (shape->dim_size() && one_in(2)) shape->mutable_dim(one_in(shape->dim_size()))->set_dim_value(small_int(rng));
      else if (one_in(2)) shape->add_dim()->set_dim_value(std::max<std::int64_t>(small_int(rng), 1));
      else if (shape->dim_size()) shape->mutable_dim()->RemoveLast();
      break;
    }
    case 8:
      if (m.opset_import_size()) m.mutable_opset_import(0)->set_version(one_in(24) - 1);
      break;
    case 9:  // a node duplicated (two writers) or moved (out of order)
      if (node) {
        const ::onnx::NodeProto copy = *node;
        *g->add_node() = copy;
        if (one_in(2)) g->mutable_node()->SwapElements(one_in(g->node_size()), g->node_size() - 1);
      }
      break;
    case 10:
      if (g->output_size()) g->mutable_output(one_in(g->output_size()))->set_name(any_name());
      break;
    default:
      if (node && g->node_size() > 1) g->mutable_node()->DeleteSubrange(one_in(g->node_size()), 1);
      break;
  }
}

}  // namespace

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size,
                                               unsigned int seed) {
  std::minstd_rand rng(seed);
  ::onnx::ModelProto m;
  // One time in four, or where the bytes are no model, libFuzzer's own byte mutations.
  if (rng() % 4 == 0 || size > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      !m.ParseFromArray(data, static_cast<int>(size)) || !m.has_graph())
    return LLVMFuzzerMutate(data, size, max_size);
  for (unsigned k = 1 + rng() % 3; k > 0; --k) mutate_model(m, rng);
  std::string out;
  if (!m.SerializeToString(&out) || out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::copy(out.begin(), out.end(), data);
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // Large folds are legitimate but slow under the sanitizers: a smaller budget keeps inputs quick.
  mo::import_options import;
  import.max_folded_elements = std::int64_t{1} << 22;
  const auto m = accepted([&] { return mo::import_bytes(bytes, import, "fuzz input"); });
  if (!m) return 0;
  const graph::network& net = m->network;
  for (const auto* values : {&m->inputs, &m->outputs})
    for (const mo::graph_value& v : *values)
      require(net.find(v.name).has_value(), "graph value '" + v.name + "' is no node of the imported network");
  for (const graph::node& n : net.nodes())
    for (const graph::parameter_spec& spec : net.parameters(n.id)) {
      const parameter* p = m->parameters.find(spec.name);
      require(p != nullptr, "parameter '" + spec.name + "' of node '" + n.name + "' was not imported");
      require(p->type == spec.type && p->shape == spec.extents,
              "parameter '" + spec.name + "' is " + graph::describe(p->type, p->shape) + ", node '" + n.name +
                  "' expects " + graph::describe(spec.type, spec.extents));
    }

  const graph::cost_model model;
  const auto solved = accepted([&] { return graph::solve(net, model); });
  if (solved) {
    const auto bad = graph::verify(net, model, *solved);
    require(bad.empty(), "the solved plan of an imported model fails verify(): " + (bad.empty() ? "" : bad.front()));
  }

  if (!m->runnable() || memfmt_fuzz::forward_work(net) > memfmt_fuzz::max_forward_work) return 0;
  std::map<std::string, parameter> feeds;
  for (const mo::graph_value& in : m->inputs) {
    if (in.type != dtype::float32) return 0;
    const std::int64_t n = memfmt::detail::checked_numel(in.shape, "graph input");
    feeds[in.name] = parameter{in.type, in.shape, memfmt_fuzz::to_bytes(memfmt_fuzz::input_values(n))};
  }
  for (const mo::graph_value& out : m->outputs)
    if (out.type != dtype::float32) return 0;
  memfmt::reference::backend backend;
  runtime::executor_options options;
  options.poison = true;
  // A model the reference backend refuses (a dtype it does not compute) is refused at build time.
  const auto first = accepted([&] {
    return mo::run_model(*m, graph::plan_with(net, model, graph::policy::all_channels_first), backend, feeds, options);
  });
  if (!first) return 0;
  const auto last = must("running all channels-last what ran all channels-first", [&] {
    return mo::run_model(*m, graph::plan_with(net, model, graph::policy::all_channels_last), backend, feeds, options);
  });
  require_same_outputs(*m, *first, last);
  return 0;
}
