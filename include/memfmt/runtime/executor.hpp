// memfmt/runtime/executor.hpp - runs a planned network, each layer in the format its plan gives it.
//
// Built once from (network, plan, backend, parameters); everything that can be wrong is found then,
// before any work: a plan of another network, a layer kind or dtype the executor cannot run on the
// backend (errc::unsupported naming the node), parameters that do not fit (check_parameters.hpp).
// At build time the executor
//   - copies each weight once into the layout its layer runs in (a channels_last conv gets KRSC);
//   - lays out every activation in one arena by liveness (memory_plan.hpp): one step per node in
//     node order, a value live from its producer's step to its last reader's;
//   - binds the plan's conversions: one converted copy per plan.conversions entry, made right after
//     its producer and read by all its consumers; an ambiguous shape (relabel) shares the bytes.
// Layers that only rename bytes (output, flatten, dropout in inference) alias what they read.
//
// The executor keeps copies of the network and plan and a reference to the backend, which must
// outlive it; the parameter store need not.
//
// forward() checks every input and output against the network (name, dtype, extents, format)
// before it writes anything, copies the inputs in, runs the steps and copies the outputs out.
// In poison mode every value's bytes are overwritten with NaN when its liveness ends, so a reader
// scheduled after the end of a value's liveness reads garbage and the results change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../convert/convert.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../format/dispatch.hpp"
#include "../graph/network.hpp"
#include "../graph/plan.hpp"
#include "../tensor/host_tensor.hpp"
#include "../tensor/relabel.hpp"
#include "check_parameters.hpp"
#include "memory_plan.hpp"
#include "parameter_store.hpp"
#include "tensor_ref.hpp"

namespace memfmt::runtime {

struct executor_options {
  bool poison = false;  // overwrite each value with NaN when its liveness ends
};

// What a build decided and a forward pass ran.
struct executor_report {
  std::int64_t arena_bytes = 0;            // activations with reuse by liveness
  std::int64_t allocate_all_bytes = 0;     // one buffer per value
  std::int64_t conversions = 0;            // copies per forward pass (plan.conversions less relabels)
  std::int64_t relabels = 0;               // conversions that share bytes
  std::vector<std::string> fusions;        // "<node> + <node>" per fused group (none on the reference backend)
};

namespace detail {

// Calls fn(T{}) for the element types the reference kernels take.
template <class Fn>
decltype(auto) dispatch_float_dtype(memfmt::dtype t, const std::string& who, Fn&& fn) {
  switch (t) {
    case memfmt::dtype::float32: return fn(float{});
    case memfmt::dtype::float64: return fn(double{});
    case memfmt::dtype::float16: return fn(memfmt::half{});
    case memfmt::dtype::bfloat16: return fn(memfmt::bfloat16{});
    default: break;
  }
  memfmt::detail::fail(errc::unsupported_dtype, who + ": dtype " + std::string(to_string(t)) +
                                                    " (the executor runs float32, float64, float16 and bfloat16)");
}

template <class F, class T>
tensor_view<T, F> view_of(T* data, const std::vector<std::int64_t>& e) {
  typename tensor_view<T, F>::extents_type x{};
  for (std::size_t d = 0; d < x.size(); ++d) x[d] = e[d];
  return tensor_view<T, F>(data, layout<F>::packed(x));
}

struct free_bytes {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};

}  // namespace detail

template <class Backend>
class executor {
 public:
  executor(const graph::network& net, const graph::plan& plan, const Backend& backend, const parameter_store& params,
           executor_options options = {})
      : net_(net), plan_(plan), backend_(backend), options_(options) {
    if (plan.nodes.size() != net.size())
      memfmt::detail::fail(errc::shape_mismatch, "executor: the plan has " + std::to_string(plan.nodes.size()) +
                                                     " nodes, the network " + std::to_string(net.size()));
    for (const graph::node& n : net.nodes()) check_supported(n);
    check_parameters(net, params);
    assign_storage();
    plan_arena();
    for (const graph::node& n : net.nodes()) bind(n, params);
  }

  executor(const executor&) = delete;  // steps point into this object
  executor& operator=(const executor&) = delete;

  const executor_report& report() const noexcept { return report_; }
  const memory_plan& memory() const noexcept { return memory_; }

  // One inference pass. `inputs` names every graph input, `outputs` every graph output; each must
  // have the node's dtype and extents and, for rank 4/5 values, the node's planned format. All are
  // checked before anything is written.
  void forward(const std::map<std::string, tensor_ref>& inputs, const std::map<std::string, tensor_ref>& outputs) {
    check_io(inputs, graph::node_kind::input, "input");
    check_io(outputs, graph::node_kind::output, "output");
    for (const auto& [name, t] : inputs) {
      const graph::node_id id = *net_.find(name);
      if (t.bytes()) std::memcpy(buffer(id), t.data, t.bytes());
    }
    for (std::size_t s = 0; s < steps_.size(); ++s) {
      for (auto& step : steps_[s]) step();
      if (options_.poison)
        for (std::size_t v : memory_.ending_at(static_cast<std::int64_t>(s))) memory_.poison(arena_.get(), v);
    }
    for (const auto& [name, t] : outputs) {
      const graph::node_id id = *net_.find(name);
      if (t.bytes()) std::memcpy(t.data, buffer(id), t.bytes());
    }
  }

 private:
  // Where a value's bytes live: a storage slot of the arena, shared by aliases.
  struct storage {
    std::string name;
    std::int64_t bytes = 0;
    std::int64_t first = 0, last = 0;
  };

  static bool aliases_input(graph::node_kind k) {
    return k == graph::node_kind::output || k == graph::node_kind::flatten || k == graph::node_kind::dropout;
  }

  std::string who(const graph::node& n) const {
    return std::string("executor (") + Backend::name + " backend): node '" + n.name + "' (" + graph::to_string(n.kind) + ")";
  }

  void check_supported(const graph::node& n) const {
    detail::dispatch_float_dtype(n.type, who(n), [](auto) {});
    switch (n.kind) {
      case graph::node_kind::input:
      case graph::node_kind::output:
      case graph::node_kind::flatten:
      case graph::node_kind::dropout:
      case graph::node_kind::conv:
      case graph::node_kind::batch_norm: break;
      default:
        memfmt::detail::fail(errc::unsupported, who(n) + ": no implementation of this layer kind on the " +
                                                    std::string(Backend::name) + " backend");
    }
    if (net_.has_format(n.id) && !plan_.format(n.id))
      memfmt::detail::fail(errc::invalid_argument, who(n) + " has no format in the plan (a plan of another network?)");
    // Aliasing a channels_last buffer as [N, features] orders the features (spatial, C), which only
    // a linear with permuted weights reads correctly; the executor has no linear yet.
    if (n.kind == graph::node_kind::flatten && format_of(n.id) == graph::family::channels_last &&
        !is_ambiguous_shape(net_.at(n.inputs[0]).extents))
      memfmt::detail::fail(errc::unsupported, who(n) + ": a channels_last flatten of " +
                                                  memfmt::detail::dims_to_string(net_.at(n.inputs[0]).extents) +
                                                  " needs a linear with permuted weights after it, which the " +
                                                  std::string(Backend::name) + " executor does not run yet");
  }

  graph::family format_of(graph::node_id id) const { return plan_.format(id).value_or(graph::family::channels_first); }

  // The conversion of value v to `to`, if the plan has one.
  const graph::conversion* conversion_to(graph::node_id v, graph::family to) const {
    for (const auto& c : plan_.conversions)
      if (c.value == v && c.to == to) return &c;
    return nullptr;
  }

  // The storage a consumer running in `f` reads value v from.
  std::size_t read_slot(const graph::node& consumer, graph::node_id v, graph::family f) const {
    const graph::node& x = net_.at(v);
    if (!x.spatial() || format_of(v) == f) return slot_[v];
    const graph::conversion* c = conversion_to(v, f);
    if (!c)
      memfmt::detail::fail(errc::invalid_argument, who(consumer) + " reads '" + x.name + "' in " +
                                                       std::string(graph::to_string(f)) + " but '" + x.name + "' is " +
                                                       std::string(graph::to_string(format_of(v))) +
                                                       " and the plan converts it nowhere (a plan of another network?)");
    return converted_slot_.at(v);
  }

  void assign_storage() {
    slot_.assign(net_.size(), 0);
    for (const graph::node& n : net_.nodes()) {
      const auto step = static_cast<std::int64_t>(n.id);
      if (aliases_input(n.kind)) {
        slot_[n.id] = read_slot(n, n.inputs[0], format_of(n.id));
      } else {
        slot_[n.id] = storage_.size();
        // Inputs are copied in before the first step, so their bytes are live from step 0.
        const std::int64_t first = n.kind == graph::node_kind::input ? 0 : step;
        storage_.push_back({n.name, static_cast<std::int64_t>(memfmt::detail::checked_bytes(
                                        n.numel(), size_of(n.type), n.name.c_str())),
                            first, step});
      }
      for (const auto& c : plan_.conversions) {
        if (c.value != n.id) continue;
        if (c.relabel) {
          converted_slot_[n.id] = slot_[n.id];
          ++report_.relabels;
        } else {
          converted_slot_[n.id] = storage_.size();
          storage_.push_back({n.name + " (" + graph::to_string(c.to) + ")", storage_[slot_[n.id]].bytes, step, step});
          ++report_.conversions;
        }
      }
      for (graph::node_id in : n.inputs) {
        storage& s = storage_[read_slot(n, in, format_of(n.id))];
        s.last = std::max(s.last, step);
      }
      if (n.kind == graph::node_kind::output) storage_[slot_[n.id]].last = static_cast<std::int64_t>(net_.size());
    }
  }

  void plan_arena() {
    std::vector<value_lifetime> v;
    for (const storage& s : storage_) v.push_back({s.name, s.bytes, s.first, s.last});
    memory_ = plan_memory(std::move(v), 64);
    report_.arena_bytes = memory_.arena_bytes;
    report_.allocate_all_bytes = memory_.total_bytes;
    if (memory_.arena_bytes > 0) {
      void* p = std::aligned_alloc(64, static_cast<std::size_t>(memory_.arena_bytes));
      if (!p) throw std::bad_alloc();
      arena_.reset(static_cast<std::byte*>(p));
    }
    steps_.resize(net_.size());
  }

  std::byte* slot_data(std::size_t s) { return arena_.get() + memory_.offsets[s]; }
  std::byte* buffer(graph::node_id id) { return slot_data(slot_[id]); }

  // The step of node n (and the conversions of its value right after it).
  void bind(const graph::node& n, const parameter_store& params) {
    auto& step = steps_[n.id];
    detail::dispatch_float_dtype(n.type, who(n), [&](auto tag) {
      using T = decltype(tag);
      if (n.kind == graph::node_kind::conv) bind_conv<T>(n, params, step);
      if (n.kind == graph::node_kind::batch_norm) bind_batch_norm<T>(n, params, step);
    });
    for (const auto& c : plan_.conversions) {
      if (c.value != n.id || c.relabel) continue;
      const int rank = static_cast<int>(n.extents.size());
      std::byte* src = buffer(n.id);
      std::byte* dst = slot_data(converted_slot_.at(n.id));
      detail::dispatch_float_dtype(n.type, who(n), [&](auto tag) {
        using T = decltype(tag);
        dispatch_format(c.from, rank, [&](auto from) {
          using From = decltype(from);
          const auto s = detail::view_of<From>(reinterpret_cast<const T*>(src), n.extents);
          // The other format of the same rank (nchw <-> nhwc, ncdhw <-> ndhwc).
          using To = std::conditional_t<From::channels_last, typename From::channels_first_t, typename From::channels_last_t>;
          const auto d = detail::view_of<To>(reinterpret_cast<T*>(dst), n.extents);
          step.push_back([s, d] { memfmt::convert(s, d); });
        });
      });
    }
  }

  // The parameter's values as U (the store holds them in the node's dtype T).
  template <class T, class U>
  static std::vector<U> values_as(const parameter_store& params, const std::string& name) {
    const std::vector<T> v = params.at(name).template values<T>(name);
    if constexpr (std::is_same_v<T, U>) {
      return v;
    } else {
      std::vector<U> r(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) r[i] = static_cast<U>(static_cast<float>(v[i]));
      return r;
    }
  }

  template <class T>
  void bind_conv(const graph::node& n, const parameter_store& params, std::vector<std::function<void()>>& step) {
    const auto& a = n.get<graph::conv_attrs>();
    const graph::family f = format_of(n.id);
    const int rank = static_cast<int>(n.extents.size());
    const graph::node& x = net_.at(n.inputs[0]);
    const T* xd = reinterpret_cast<const T*>(slot_data(read_slot(n, x.id, f)));
    T* yd = reinterpret_cast<T*>(buffer(n.id));
    const parameter& w = params.at(n.name + ".weight");
    const T* bias = nullptr;
    if (a.bias) {
      bias_.push_back(params.at(n.name + ".bias").bytes);
      bias = reinterpret_cast<const T*>(bias_.back().data());
    }
    dispatch_format(f, rank, [&](auto tag) {
      using F = decltype(tag);
      // The weight, once, in the layout of the layer's format (KCRS or KRSC).
      auto owned = std::make_shared<host_tensor<T, F>>(detail::view_of<F>(static_cast<T*>(nullptr), w.shape).extents());
      using CF = typename F::channels_first_t;
      memfmt::convert(detail::view_of<CF>(reinterpret_cast<const T*>(w.bytes.data()), w.shape), owned->view());
      weights_.push_back(owned);
      const auto xv = detail::view_of<F>(xd, x.extents);
      const auto yv = detail::view_of<F>(yd, n.extents);
      const tensor_view<const T, F> wv = owned->const_view();
      const conv_params p = a.params;
      const Backend& b = backend_;
      step.push_back([&b, xv, wv, bias, yv, p] { b.conv_forward(xv, wv, bias, yv, p); });
    });
  }

  template <class T>
  void bind_batch_norm(const graph::node& n, const parameter_store& params, std::vector<std::function<void()>>& step) {
    using P = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const auto& p = n.get<batch_norm_params>();
    const graph::family f = format_of(n.id);
    const int rank = static_cast<int>(n.extents.size());
    auto stats = std::make_shared<std::vector<std::vector<P>>>();
    for (const char* s : {"weight", "bias", "running_mean", "running_var"})
      stats->push_back(values_as<T, P>(params, n.name + "." + s));
    bn_stats_.push_back(stats);
    const T* xd = reinterpret_cast<const T*>(slot_data(read_slot(n, n.inputs[0], f)));
    T* yd = reinterpret_cast<T*>(buffer(n.id));
    dispatch_format(f, rank, [&](auto tag) {
      using F = decltype(tag);
      const auto xv = detail::view_of<F>(xd, n.extents);
      const auto yv = detail::view_of<F>(yd, n.extents);
      const Backend& b = backend_;
      const auto& s = *stats;
      step.push_back([&b, xv, yv, &s, p] {
        b.batch_norm_forward_inference(xv, yv, s[0].data(), s[1].data(), s[2].data(), s[3].data(), p);
      });
    });
  }

  void check_io(const std::map<std::string, tensor_ref>& given, graph::node_kind kind, const char* what) const {
    std::size_t expected = 0;
    for (const graph::node& n : net_.nodes()) {
      if (n.kind != kind) continue;
      ++expected;
      const auto it = given.find(n.name);
      if (it == given.end())
        memfmt::detail::fail(errc::invalid_argument, std::string("executor: no ") + what + " '" + n.name + "' given (" +
                                                         describe(n.type, n.extents) + ")");
      const tensor_ref& t = it->second;
      const std::string expect = describe(n.type, n.extents) +
                                 (n.spatial() ? " " + std::string(graph::to_string(format_of(n.id))) : std::string());
      const std::string found = describe(t.type, t.extents) +
                                (n.spatial() ? " " + std::string(graph::to_string(t.format)) : std::string());
      if (t.type != n.type || t.extents != n.extents || (n.spatial() && t.format != format_of(n.id)))
        memfmt::detail::fail(t.type != n.type ? errc::unsupported_dtype : t.extents != n.extents ? errc::shape_mismatch
                                                                                                : errc::format_mismatch,
                             std::string("executor: ") + what + " '" + n.name + "' expected " + expect + ", given " + found);
      if (t.data == nullptr && t.numel() > 0)
        memfmt::detail::fail(errc::null_pointer, std::string("executor: ") + what + " '" + n.name + "' has no data");
    }
    for (const auto& [name, t] : given) {
      const auto id = net_.find(name);
      if (!id || net_.at(*id).kind != kind)
        memfmt::detail::fail(errc::invalid_argument, std::string("executor: '") + name + "' " +
                                                         describe(t.type, t.extents) + " is no " + what + " of the network (" +
                                                         std::to_string(expected) + " " + what + "s)");
    }
  }

  graph::network net_;  // copies: small, and a temporary plan must not dangle
  graph::plan plan_;
  const Backend& backend_;
  executor_options options_;
  executor_report report_;
  std::vector<storage> storage_;
  std::vector<std::size_t> slot_;                      // per node: its value's storage
  std::map<graph::node_id, std::size_t> converted_slot_;  // per converted value: the copy's storage
  memory_plan memory_;
  std::unique_ptr<std::byte, detail::free_bytes> arena_;
  std::vector<std::vector<std::function<void()>>> steps_;  // per node
  std::vector<std::shared_ptr<void>> weights_;
  std::vector<std::shared_ptr<void>> bn_stats_;
  std::vector<std::vector<std::byte>> bias_;
};

}  // namespace memfmt::runtime
