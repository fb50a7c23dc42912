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
// Inference fusions (executor_options::fuse), where the plan keeps the layers in one format and the
// intermediate value has no other reader: a batch norm and per-channel multiplications and additions
// by constants (a layer scale, a frozen batch norm exported as Mul and Add) fold into the preceding
// conv's weights and bias, and a residual add (whose other operand exists by then) and an activation
// after it run on the conv's output in the conv's step (one call on a backend with a conv epilogue,
// such as oneDNN's post-ops); report().fusions lists each group. Opaque layers run the user_op
// attached to the node (user_op.hpp).
//
// The executor keeps copies of the network and plan and a reference to the backend, which must
// outlive it; the parameter store need not.
//
// forward() checks every input and output against the network (name, dtype, extents, format)
// before it writes anything, copies the inputs in, runs the steps and copies the outputs out. An
// input read only through its conversion is converted from the caller's tensor on entry instead,
// and a value only a graph output reads converted is converted into the caller's tensor at the end.
// In poison mode every value's bytes are overwritten with NaN when its liveness ends, so a reader
// scheduled after the end of a value's liveness reads garbage and the results change.
// forward_profiled() is forward() with a clock around each step: where the time of a pass goes,
// per layer and per conversion.
//
// Device memory: a backend that keeps tensors in its own memory (a GPU's) says so by naming the
// hooks of detail::owns_memory; the executor then takes the arena and every parameter from
// Backend::allocate, copies inputs, parameters and outputs with copy_in / copy_out and converts
// with Backend::convert, and user ops receive the backend's pointers. Poison mode writes through
// host pointers and is refused there. Other backends get the host arena, memcpy and memfmt::convert.
#pragma once

#include <algorithm>
#include <any>
#include <chrono>
#include <cmath>
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
#include "../dtype_dispatch.hpp"
#include "../error.hpp"
#include "../format/dispatch.hpp"
#include "../graph/network.hpp"
#include "../graph/plan.hpp"
#include "../tensor/host_tensor.hpp"
#include "../tensor/relabel.hpp"
#include "backend_support.hpp"
#include "binding.hpp"
#include "check_io.hpp"
#include "check_parameters.hpp"
#include "kinds.hpp"
#include "memory_plan.hpp"
#include "parameter_store.hpp"
#include "tensor_ref.hpp"
#include "user_op.hpp"

namespace memfmt::runtime {

struct executor_options {
  bool poison = false;  // overwrite each value with NaN when its liveness ends
  bool fuse = true;     // inference fusions: batch norm folded into its conv, conv + residual add + activation
};

// One node's share of a profiled forward pass, in nanoseconds of the host clock.
struct node_time {
  graph::node_id node = 0;
  std::int64_t layer_ns = 0;                 // its step; 0 where it has none (inputs, constants, aliases) or is fused
  std::int64_t conversion_ns = 0;            // the copy of its value into the other format, made right after it
  std::optional<graph::node_id> fused_into;  // the conv whose step runs this batch norm, add or activation
};

// Where a forward pass's time went (executor::forward_profiled).
struct forward_profile {
  std::vector<node_time> nodes;  // one per network node, in node order
  std::int64_t inputs_ns = 0;    // graph inputs copied in, or converted on entry
  std::int64_t outputs_ns = 0;   // graph outputs copied out
  std::int64_t total_ns = 0;     // the whole pass, the checks included
};

template <class Backend>
class executor : private detail::binding<Backend> {
  using base = detail::binding<Backend>;

 public:
  // Checks everything and binds every step (defined below the class, not inline: see there).
  executor(const graph::network& net, const graph::plan& plan, Backend& backend, const parameter_store& params,
           executor_options options = {});

  executor(const executor&) = delete;  // steps point into this object
  executor& operator=(const executor&) = delete;

  const executor_report& report() const noexcept { return report_; }
  const memory_plan& memory() const noexcept { return memory_; }

  // One inference pass. `inputs` names every graph input, `outputs` every graph output; each must
  // have the node's dtype and extents and, for rank 4/5 values, the node's planned format. All are
  // checked before anything is written; an error while running (a user op breaking its promise)
  // leaves the outputs untouched, as they are copied out only at the end.
  void forward(const std::map<std::string, tensor_ref>& inputs, const std::map<std::string, tensor_ref>& outputs) {
    run_pass(inputs, outputs, nullptr);
  }

  // forward() timing each step on the host clock, the backend's queue drained after each so that a
  // queued call is charged to its own node. A pass takes longer than forward()'s (the clock, and no
  // overlap of queued calls), so time passes with forward() and find where the time goes with this.
  forward_profile forward_profiled(const std::map<std::string, tensor_ref>& inputs,
                                   const std::map<std::string, tensor_ref>& outputs) {
    forward_profile p;
    p.nodes.resize(net_.size());
    for (const graph::node& n : net_.nodes()) {
      p.nodes[n.id].node = n.id;
      if (const auto f = fused_into_.find(n.id); f != fused_into_.end()) p.nodes[n.id].fused_into = f->second;
    }
    run_pass(inputs, outputs, &p);
    return p;
  }

 private:
  using base::backend_, base::base_, base::constants_, base::conversion_to, base::converted_slot_, base::format_of,
      base::memory_, base::net_, base::owned_, base::plan_, base::read_format, base::read_slot, base::reads_own_bytes,
      base::report_, base::slot_, base::sole_consumer, base::weights_, base::who;
  using step_list = std::vector<std::function<void()>>;
  using clock = std::chrono::steady_clock;

  static std::int64_t ns_since(clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0).count();
  }

  // forward() and forward_profiled(): with `profile`, each step's time goes to its node, the layer's
  // own entries (the first layer_steps_[node]) apart from the conversions bound after them.
  void run_pass(const std::map<std::string, tensor_ref>& inputs, const std::map<std::string, tensor_ref>& outputs,
                forward_profile* profile) {
    const clock::time_point start = clock::now();
    check_io(inputs, layer_kind::input, "input");
    check_io(outputs, layer_kind::output, "output");
    clock::time_point t0 = clock::now();
    for (const auto& [name, t] : inputs) {
      const graph::node_id id = *net_.find(name);
      if (const auto entry = converted_on_entry_.find(id); entry != converted_on_entry_.end()) entry->second(t.data);
      else if (t.bytes()) copy_in(buffer(id), t.data, t.bytes());
    }
    if (profile) {
      detail::settle(backend_);
      profile->inputs_ns = ns_since(t0);
    }
    for (std::size_t s = 0; s < steps_.size(); ++s) {
      step_list& list = steps_[s];
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (profile) t0 = clock::now();
        list[i]();
        if (profile) {
          detail::settle(backend_);
          (i < layer_steps_[s] ? profile->nodes[s].layer_ns : profile->nodes[s].conversion_ns) += ns_since(t0);
        }
      }
      if (options_.poison)
        for (std::size_t v : memory_.ending_at(static_cast<std::int64_t>(s))) memory_.poison(base_, v);
    }
    if (profile) t0 = clock::now();
    for (const auto& [name, t] : outputs) {
      const graph::node_id id = *net_.find(name);
      if (const auto exit = converted_on_exit_.find(id); exit != converted_on_exit_.end()) exit->second(t.data);
      else if (t.bytes()) copy_out(t.data, buffer(id), t.bytes());
    }
    if (profile) {
      profile->outputs_ns = ns_since(t0);
      profile->total_ns = ns_since(start);
    }
  }
  // The element types each layer is compiled for (Backend::element_types, dtype_dispatch.hpp).
  using computed_types = memfmt::detail::backend_element_types_t<Backend>;

  // Where a value's bytes live: a storage slot of the arena, shared by aliases.
  struct storage {
    std::string name;
    std::int64_t bytes = 0;
    std::int64_t first = 0, last = 0;
  };

  // Values that share the bytes of the value they read: renamings (output, flatten, dropout in
  // inference) and the layers an inference fusion runs inside their conv's step.
  bool aliases_input(const graph::node& n) const {
    return n.kind == layer_kind::output || n.kind == layer_kind::flatten || n.kind == layer_kind::dropout ||
           fused_into_.count(n.id);
  }

  void check_supported(const graph::node& n) const {
    this->check_in_plan(n);
    this->check_backend(n, false);
    if (n.kind == layer_kind::opaque) {
      const auto& a = n.get<graph::opaque_attrs>();
      const user_op* op = std::any_cast<user_op>(&a.callback);
      if (!op || !op->run)
        memfmt::detail::fail(errc::invalid_argument,
                             who(n) + ": " +
                                 (!a.callback.has_value() ? std::string("no callback attached")
                                  : !op ? std::string("the callback is not a memfmt::runtime::user_op")
                                        : std::string("the user_op has no run function")) +
                                 " (network::set_callback with a runtime::user_op)");
      if (op->input_format != a.input_format || op->output_format != a.output_format)
        memfmt::detail::fail(errc::format_mismatch, who(n) + " is declared to read " +
                                                        graph::to_string(a.input_format) + " and write " +
                                                        graph::to_string(a.output_format) + ", its user_op reads " +
                                                        graph::to_string(op->input_format) + " and writes " +
                                                        graph::to_string(op->output_format));
    }
  }

  // An input that the plan converts and that nothing reads in its own format: forward converts
  // the caller's tensor straight into the converted copy, skipping the copy into the arena. Host
  // backends only (a backend's own memory needs the copy in first).
  bool converted_on_entry(const graph::node& n) const {
    if (detail::owns_memory<Backend>::value || n.kind != layer_kind::input || n.numel() == 0) return false;
    const graph::conversion* c =
        conversion_to(n.id, format_of(n.id) == format_family::channels_first ? format_family::channels_last
                                                                             : format_family::channels_first);
    if (!c || c->relabel) return false;
    const auto& readers = net_.consumers(n.id);
    return std::none_of(readers.begin(), readers.end(),
                        [&](graph::node_id r) { return reads_own_bytes(net_.at(r), n.id); });
  }

  // A value whose converted copy only one graph output reads: forward converts it straight into the
  // caller's output tensor at the end, skipping the copy out of the arena (the mirror of an input
  // converted on entry; host backends only). The graph output, or nullopt.
  std::optional<graph::node_id> converted_on_exit(const graph::node& v) const {
    if (detail::owns_memory<Backend>::value || v.kind == layer_kind::input || v.numel() == 0) return std::nullopt;
    std::optional<graph::node_id> out;
    for (graph::node_id r : net_.consumers(v.id)) {
      if (reads_own_bytes(net_.at(r), v.id)) continue;
      if (out || net_.at(r).kind != layer_kind::output) return std::nullopt;
      out = r;
    }
    if (!out) return std::nullopt;
    const graph::conversion* c = conversion_to(v.id, read_format(net_.at(*out)));
    return c && !c->relabel ? out : std::nullopt;
  }

  // The add that is the only reader of `last` (a conv's value, or its folded batch norm's) when it
  // can run in conv's step: a residual add of two values of one shape whose other operand is
  // computed before the conv. The sum is written over `last`, so a broadcasting add (GCNet's
  // [N, C, 1, 1] context conv added to the map) stays a layer of its own.
  std::optional<graph::node_id> residual_add(const graph::node& conv, graph::node_id last) const {
    const auto add = sole_consumer(last);
    if (!add) return std::nullopt;
    const graph::node& a = net_.at(*add);
    if (a.kind != layer_kind::binary || a.template get<memfmt::binary_op>() != memfmt::binary_op::add ||
        a.inputs.size() != 2 || a.inputs[0] == a.inputs[1])
      return std::nullopt;
    const graph::node_id other = a.inputs[0] == last ? a.inputs[1] : a.inputs[0];
    if (other >= conv.id || net_.at(other).extents != a.extents || net_.at(last).extents != a.extents)
      return std::nullopt;
    return add;
  }

  // The value a fused or renaming layer shares the bytes of: the fusion chain's for a residual add.
  graph::node_id aliased_input(const graph::node& n) const {
    const auto it = chain_input_.find(n.id);
    return it != chain_input_.end() ? it->second : n.inputs[0];
  }

  // The binary layer that is the only reader of `last` (a conv's value or a layer folded into it)
  // when the conv's weights and bias can absorb it: last * k, k * last, last + k, k + last,
  // last - k or last / k with k a constant of one value per channel ([1, C, 1, 1]) of last's dtype.
  std::optional<graph::node_id> channel_affine(graph::node_id last) const {
    const auto b = sole_consumer(last);
    if (!b) return std::nullopt;
    const graph::node& a = net_.at(*b);
    if (a.kind != layer_kind::binary || a.inputs.size() != 2 || a.inputs[0] == a.inputs[1]) return std::nullopt;
    const bool chain_first = a.inputs[0] == last;
    const graph::node& k = net_.at(chain_first ? a.inputs[1] : a.inputs[0]);
    const memfmt::binary_op op = a.template get<memfmt::binary_op>();
    const bool commutes = op == memfmt::binary_op::add || op == memfmt::binary_op::mul;
    const std::vector<std::int64_t>& e = net_.at(last).extents;
    if (k.kind != layer_kind::constant || k.type != a.type || (!commutes && !chain_first) || a.extents != e ||
        k.extents.size() != e.size() || e.size() < 3 || k.extents[1] != e[1])
      return std::nullopt;
    for (std::size_t d = 0; d < e.size(); ++d)
      if (d != 1 && k.extents[d] != 1) return std::nullopt;
    return b;
  }

  // Inference fusions where the plan keeps the layers in one format: a batch norm that is the only
  // reader of a conv, and then channel_affine layers, fold into the conv's weights and bias; a
  // residual add that is the only reader of the result (residual_add) and an activation that is the
  // only reader after that run on the conv's output in the conv's step.
  void find_fusions() {
    if (!options_.fuse) return;
    for (const graph::node& n : net_.nodes()) {
      if (n.kind != layer_kind::conv) continue;
      std::string group = n.name + " + bias";
      graph::node_id last = n.id;
      if (const auto bn = sole_consumer(last); bn && net_.at(*bn).kind == layer_kind::batch_norm) {
        fused_into_[*bn] = n.id;
        folded_bn_[n.id] = *bn;
        group += " + " + net_.at(*bn).name;
        last = *bn;
      }
      while (const auto b = channel_affine(last)) {
        fused_into_[*b] = n.id;
        chain_input_[*b] = last;
        folded_affine_[n.id].push_back(*b);
        group += " + " + net_.at(*b).name;
        last = *b;
      }
      if (const auto add = residual_add(n, last)) {
        fused_into_[*add] = n.id;
        residual_[n.id] = {*add, chain_input_[*add] = last};
        group += " + " + net_.at(*add).name;
        last = *add;
      }
      if (const auto r = sole_consumer(last); r && net_.at(*r).kind == layer_kind::activation) {
        fused_into_[*r] = n.id;
        fused_activation_[n.id] = net_.at(*r).template get<memfmt::activation_params>();
        group += " + " + net_.at(*r).name;
        last = *r;
      }
      if (last != n.id) report_.fusions.push_back(group);
    }
  }

  void assign_storage() {
    slot_.assign(net_.size(), 0);
    enters_converted_.assign(net_.size(), false);
    for (const graph::node& n : net_.nodes()) {
      const auto step = static_cast<std::int64_t>(n.id);
      // Inputs are copied in (or converted on entry) before the first step, so their bytes (and
      // those of their conversions) are live from step 0.
      const std::int64_t first = n.kind == layer_kind::input ? 0 : step;
      const auto bytes =
          static_cast<std::int64_t>(memfmt::detail::checked_bytes(n.numel(), size_of(n.type), n.name.c_str()));
      if (aliases_input(n)) {
        slot_[n.id] = read_slot(n, aliased_input(n));
      } else if (n.kind == layer_kind::constant) {
        slot_[n.id] = storage_.size();  // laid out when bound, outside the arena
        constants_[slot_[n.id]] = nullptr;
        storage_.push_back({n.name, bytes, step, step});
      } else {
        slot_[n.id] = storage_.size();
        // An input converted on entry keeps no bytes of its own.
        enters_converted_[n.id] = converted_on_entry(n);
        storage_.push_back({n.name, enters_converted_[n.id] ? 0 : bytes, first, step});
      }
      for (const auto& c : plan_.conversions) {
        if (c.value != n.id) continue;
        if (c.relabel) {
          converted_slot_[n.id] = slot_[n.id];
          ++report_.relabels;
        } else {
          // Converted on exit: the copy takes no bytes, and the value stays until the end.
          const std::optional<graph::node_id> exit = converted_on_exit(n);
          if (exit) {
            exits_converted_[n.id] = *exit;
            storage_[slot_[n.id]].last = static_cast<std::int64_t>(net_.size());
          }
          converted_slot_[n.id] = storage_.size();
          storage_.push_back({n.name + " (" + graph::to_string(c.to) + ")", exit ? 0 : bytes, first, step});
          ++report_.conversions;
        }
      }
      for (graph::node_id in : n.inputs) {
        storage& s = storage_[read_slot(n, in)];
        s.last = std::max(s.last, step);
      }
      if (n.kind == layer_kind::output) storage_[slot_[n.id]].last = static_cast<std::int64_t>(net_.size());
    }
  }

  void plan_arena() {
    std::vector<value_lifetime> v;
    for (std::size_t i = 0; i < storage_.size(); ++i) {
      const storage& s = storage_[i];
      v.push_back({s.name, constants_.count(i) ? 0 : s.bytes, s.first, s.last});
    }
    this->allocate_arena(std::move(v));
    steps_.resize(net_.size());
    layer_steps_.assign(net_.size(), 0);
  }

  // `bytes` of the backend's memory, given back with this executor (backends with owns_memory only:
  // a template, so that an explicit instantiation for a host backend leaves it out).
  template <class B = Backend>
  void* backend_memory(std::size_t bytes) {
    return detail::backend_allocate<B>(backend_, owned_, bytes);
  }
  void copy_in(void* dst, const void* src, std::size_t bytes) { detail::copy_in(backend_, dst, src, bytes); }
  void copy_out(void* dst, const void* src, std::size_t bytes) { detail::copy_out(backend_, dst, src, bytes); }

  // A parameter (weights, statistics, scratch) kept for the executor's lifetime where the backend
  // reads it: the host vector itself, or a copy in the backend's memory.
  template <class V>
  auto* param(V v) {
    return detail::backend_param(backend_, owned_, std::move(v));
  }

  std::byte* slot_data(std::size_t s) {
    if (const auto c = constants_.find(s); c != constants_.end()) return c->second;
    return base_ + memory_.offsets[s];
  }
  std::byte* buffer(graph::node_id id) { return slot_data(slot_[id]); }

  static int kernel_rank(const std::vector<std::int64_t>& e) { return e.size() == 2 ? 4 : static_cast<int>(e.size()); }

  // The step of node n (and the conversions of its value right after it).
  void bind(const graph::node& n, const parameter_store& params) {
    auto& step = steps_[n.id];
    if (!aliases_input(n)) {
      detail::dispatch_float_dtype<computed_types>(n.type, who(n), [&](auto tag) {
        using T = decltype(tag);
        switch (n.kind) {
          case layer_kind::conv: bind_conv<T>(n, params, step); break;
          case layer_kind::conv_transpose: bind_conv_transpose<T>(n, params, step); break;
          case layer_kind::batch_norm: bind_batch_norm<T>(n, params, step); break;
          case layer_kind::instance_norm:
          case layer_kind::group_norm:
          case layer_kind::layer_norm: bind_norm<T>(n, params, step); break;
          case layer_kind::linear: bind_linear<T>(n, params, step); break;
          case layer_kind::concat: bind_concat<T>(n, step); break;
          case layer_kind::opaque: bind_opaque(n, step); break;
          case layer_kind::constant:  // laid out once, outside the arena; no step
            constants_[slot_[n.id]] = detail::backend_constant<T>(backend_, owned_, n, format_of(n.id), params);
            break;
          case layer_kind::input: break;
          default: bind_elementwise<T>(n, step); break;
        }
      });
    }
    layer_steps_[n.id] = step.size();
    for (const auto& c : plan_.conversions) {
      if (c.value != n.id || c.relabel) continue;
      const int rank = static_cast<int>(n.extents.size());
      std::byte* src = buffer(n.id);
      std::byte* dst = slot_data(converted_slot_.at(n.id));
      detail::dispatch_float_dtype<computed_types>(n.type, who(n), [&](auto tag) {
        using T = decltype(tag);
        dispatch_format(c.from, rank, [&](auto from) {
          using From = decltype(from);
          const auto s = detail::view_of<From>(reinterpret_cast<const T*>(src), n.extents);
          // The other format of the same rank (nchw <-> nhwc, ncdhw <-> ndhwc).
          using To =
              std::conditional_t<From::channels_last, typename From::channels_first_t, typename From::channels_last_t>;
          const auto d = detail::view_of<To>(reinterpret_cast<T*>(dst), n.extents);
          if constexpr (detail::owns_memory<Backend>::value) {
            step.push_back([&b = backend_, s, d] { b.convert(s, d); });
          } else if (enters_converted_[n.id]) {
            converted_on_entry_[n.id] = [m = s.mapping(), d](const void* given) {
              memfmt::convert(tensor_view<const T, From>(static_cast<const T*>(given), m), d);
            };
          } else if (const auto exit = exits_converted_.find(n.id); exit != exits_converted_.end()) {
            converted_on_exit_[exit->second] = [s, m = d.mapping()](void* given) {
              memfmt::convert(s, tensor_view<T, To>(static_cast<T*>(given), m));
            };
          } else {
            step.push_back([s, d] { memfmt::convert(s, d); });
          }
        });
      });
    }
  }

  // A conv weight in F's layout, registered so a weight-caching backend forgets it with this executor.
  template <class T, class F>
  tensor_view<const T, F> weight_in(const std::vector<T>& w, const std::vector<std::int64_t>& shape) {
    const tensor_view<const T, F> v = detail::backend_weight<T, F>(backend_, owned_, w, shape);
    weights_.push_back(v.data());
    return v;
  }

  template <class T>
  void bind_conv(const graph::node& n, const parameter_store& params, step_list& step) {
    const auto& a = n.get<graph::conv_attrs>();
    const format_family f = format_of(n.id);
    const graph::node& x = net_.at(n.inputs[0]);
    const T* xd = reinterpret_cast<const T*>(slot_data(read_slot(n, x.id)));
    T* yd = reinterpret_cast<T*>(buffer(n.id));
    const std::vector<std::int64_t> shape = params.at(n.name + ".weight").shape;
    std::vector<T> w = params.at(n.name + ".weight").template values<T>(n.name + ".weight");
    std::vector<T> bias = a.bias ? params.at(n.name + ".bias").template values<T>(n.name + ".bias") : std::vector<T>{};
    fold_channel_affine(n, params, w, bias);
    const T* bd = bias.empty() ? nullptr : param(std::move(bias));
    const auto fused = fused_activation_.find(n.id);
    const memfmt::activation_params act =
        fused == fused_activation_.end() ? memfmt::activation_params{} : fused->second;
    const auto res = residual_.find(n.id);
    const T* rd = res == residual_.end()
                      ? nullptr
                      : reinterpret_cast<const T*>(slot_data(
                            read_slot(net_.at(res->second.first), other_input(res->second.first, res->second.second))));
    dispatch_format(f, static_cast<int>(n.extents.size()), [&](auto tag) {
      using F = decltype(tag);
      const auto xv = detail::view_of<F>(xd, x.extents);
      const auto yv = detail::view_of<F>(yd, n.extents);
      const auto wv = weight_in<T, F>(w, shape);
      const tensor_view<const T, F> rv = rd ? detail::view_of<F>(rd, n.extents) : tensor_view<const T, F>{};
      const conv_params p = a.params;
      Backend& b = backend_;
      if constexpr (detail::binds_conv_forward<Backend>::value) {  // y = act(conv + bias + residual)
        typename Backend::conv_fusion e;
        e.activation = act;
        step.push_back(b.bind_conv_forward(xv, wv, bd, yv, p, e, rv));
      } else {
        step.push_back([&b, xv, wv, bd, yv, p, act, rv] {
          if constexpr (detail::fuses_conv_epilogue<Backend>::value) {
            typename Backend::conv_fusion e;
            e.activation = act;
            b.conv_forward(xv, wv, bd, yv, p, e, rv);
          } else {
            b.conv_forward(xv, wv, bd, yv, p);
            if (rv.data()) b.binary_forward(memfmt::binary_op::add, tensor_view<const T, F>(yv), rv, yv);
            if (act.kind != memfmt::activation::identity) b.activation_forward(act, tensor_view<const T, F>(yv), yv);
          }
        });
      }
    });
  }

  // The operand of binary node `add` that is not `chain`.
  graph::node_id other_input(graph::node_id add, graph::node_id chain) const {
    const graph::node& a = net_.at(add);
    return a.inputs[0] == chain ? a.inputs[1] : a.inputs[0];
  }

  // What folds into conv n's weights and bias is y = x * s + t per output channel: batch norm in
  // inference (s = gamma / sqrt(var + eps), t = beta - mean * s), then each channel_affine layer
  // (a product scales s and t, a sum shifts t). The conv becomes weights w * s and bias
  // bias * s + t, computed in double from the parameters and rounded once to the conv's dtype.
  template <class T>
  void fold_channel_affine(const graph::node& n, const parameter_store& params, std::vector<T>& w,
                           std::vector<T>& bias) {
    const auto bn = folded_bn_.find(n.id);
    const auto affine = folded_affine_.find(n.id);
    if (bn == folded_bn_.end() && affine == folded_affine_.end()) return;
    const auto k = static_cast<std::size_t>(n.extents[1]), per = w.size() / k;
    std::vector<double> s(k, 1.0), t(k, 0.0);
    if (bn != folded_bn_.end()) {
      using P = detail::stats_t<T>;
      const graph::node& b = net_.at(bn->second);
      const double eps = b.get<batch_norm_params>().epsilon;
      const auto gamma = detail::values_as<P, double>(params, b.name + ".weight");
      const auto beta = detail::values_as<P, double>(params, b.name + ".bias");
      const auto mean = detail::values_as<P, double>(params, b.name + ".running_mean");
      const auto var = detail::values_as<P, double>(params, b.name + ".running_var");
      for (std::size_t c = 0; c < k; ++c) {
        s[c] = gamma[c] / std::sqrt(var[c] + eps);
        t[c] = beta[c] - mean[c] * s[c];
      }
    }
    if (affine != folded_affine_.end())
      for (graph::node_id id : affine->second) {
        const graph::node& a = net_.at(id);
        const graph::node_id chain = chain_input_.at(id);
        const auto v = detail::values_as<T, double>(params, net_.at(other_input(id, chain)).name + ".value");
        for (std::size_t c = 0; c < k; ++c) switch (a.get<memfmt::binary_op>()) {
            case memfmt::binary_op::mul: s[c] *= v[c], t[c] *= v[c]; break;
            case memfmt::binary_op::div: s[c] /= v[c], t[c] /= v[c]; break;
            case memfmt::binary_op::add: t[c] += v[c]; break;
            case memfmt::binary_op::sub: t[c] -= v[c]; break;
          }
      }
    if (bias.empty()) bias.assign(k, static_cast<T>(0.0f));
    for (std::size_t c = 0; c < k; ++c) {
      for (std::size_t i = c * per; i < (c + 1) * per; ++i) w[i] = static_cast<T>(detail::as_double(w[i]) * s[c]);
      bias[c] = static_cast<T>(detail::as_double(bias[c]) * s[c] + t[c]);
    }
  }

  // A transposed conv is the backward-data pass of the conv it transposes (its weight [C_in,
  // C_out / groups, kernel...] is that conv's [K, C, kernel...]), then the bias per channel.
  template <class T>
  void bind_conv_transpose(const graph::node& n, const parameter_store& params, step_list& step) {
    const auto& a = n.get<graph::conv_transpose_attrs>();
    const graph::node& x = net_.at(n.inputs[0]);
    const T* xd = reinterpret_cast<const T*>(slot_data(read_slot(n, x.id)));
    T* yd = reinterpret_cast<T*>(buffer(n.id));
    const parameter& w = params.at(n.name + ".weight");
    const std::vector<T> wv = w.template values<T>(n.name + ".weight");
    dispatch_format(format_of(n.id), static_cast<int>(n.extents.size()), [&](auto tag) {
      using F = decltype(tag);
      const auto xv = detail::view_of<F>(xd, x.extents);
      const auto yv = detail::view_of<F>(yd, n.extents);
      const auto wt = weight_in<T, F>(wv, w.shape);
      tensor_view<const T, F> bias;
      if (a.bias) {
        std::vector<std::int64_t> be(n.extents.size(), 1);
        be[1] = a.out_channels;
        const T* bias_values = param(params.at(n.name + ".bias").template values<T>(n.name + ".bias"));
        bias = detail::view_of<F>(bias_values, be);
      }
      const conv_params p = a.params;
      Backend& b = backend_;
      step.push_back([&b, xv, wt, yv, bias, p] {
        b.conv_backward_data(xv, wt, yv, p);
        if (bias.data()) b.binary_forward(memfmt::binary_op::add, tensor_view<const T, F>(yv), bias, yv);
      });
    });
  }

  template <class T>
  void bind_batch_norm(const graph::node& n, const parameter_store& params, step_list& step) {
    using P = detail::stats_t<T>;
    const auto& p = n.get<batch_norm_params>();
    const P* s[4];
    int i = 0;
    for (const char* k : {"weight", "bias", "running_mean", "running_var"})
      s[i++] = param(detail::values_as<P, P>(params, n.name + "." + k));
    same_shape_views<T>(n, [&](auto xv, auto yv) {
      Backend& b = backend_;
      step.push_back([&b, xv, yv, s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3], p] {
        b.batch_norm_forward_inference(xv, yv, s0, s1, s2, s3, p);
      });
    });
  }

  // bind(x, y): views of n's input and output, both of n's extents, in n's format.
  template <class T, class Bind>
  void same_shape_views(const graph::node& n, Bind&& bind) {
    const T* xd = reinterpret_cast<const T*>(slot_data(read_slot(n, n.inputs[0])));
    T* yd = reinterpret_cast<T*>(buffer(n.id));
    dispatch_format(format_of(n.id), static_cast<int>(n.extents.size()), [&](auto tag) {
      using F = decltype(tag);
      bind(detail::view_of<F>(xd, n.extents), detail::view_of<F>(yd, n.extents));
    });
  }

  // Group, instance and layer norm: per-channel affine parameters and saved statistics.
  template <class T>
  void bind_norm(const graph::node& n, const parameter_store& params, step_list& step) {
    using P = detail::stats_t<T>;
    const detail::norm_shape s = detail::norm_shape_of(n);
    const P* gamma = s.affine ? param(detail::values_as<P, P>(params, n.name + ".weight")) : nullptr;
    const P* beta = s.affine ? param(detail::values_as<P, P>(params, n.name + ".bias")) : nullptr;
    P* mean = param(std::vector<P>(s.stats));
    P* invstd = param(std::vector<P>(s.stats));
    same_shape_views<T>(n, [&](auto xv, auto yv) {
      Backend& b = backend_;
      if (n.kind != layer_kind::layer_norm) {
        const group_norm_params p = n.get<graph::norm_attrs>().params;
        step.push_back(
            [&b, xv, yv, gamma, beta, mean, invstd, p] { b.group_norm_forward(xv, yv, gamma, beta, mean, invstd, p); });
      } else if constexpr (detail::runs_layer_norm<Backend>::value) {
        const layer_norm_params p = n.get<graph::layer_norm_attrs>().params;
        step.push_back(
            [&b, xv, yv, gamma, beta, mean, invstd, p] { b.layer_norm_forward(xv, yv, gamma, beta, mean, invstd, p); });
      } else {
        memfmt::detail::fail(errc::unsupported,
                             who(n) + ": the " + std::string(Backend::name) + " backend has no layer norm");
      }
    });
  }

  // A linear reads [N, F] as the backends do: N rows of the C * spatial features in flatten order.
  // After a flatten (through dropouts) it reads the 4-D/5-D value by its strides in the flatten's
  // format, so a channels_last flatten needs no conversion: it is the linear with its weight
  // permuted to (spatial, C) order.
  template <class T>
  void bind_linear(const graph::node& n, const parameter_store& params, step_list& step) {
    const auto& a = n.get<graph::linear_attrs>();
    graph::node_id src = n.inputs[0];
    while (net_.at(src).kind == layer_kind::dropout && !net_.at(src).spatial()) src = net_.at(src).inputs[0];
    const T* xd = reinterpret_cast<const T*>(slot_data(read_slot(n, n.inputs[0])));
    T* yd = reinterpret_cast<T*>(buffer(n.id));
    const T* w = param(params.at(n.name + ".weight").template values<T>(n.name + ".weight"));
    weights_.push_back(w);
    const T* bias = a.bias ? param(params.at(n.name + ".bias").template values<T>(n.name + ".bias")) : nullptr;
    const auto yv = detail::view_of<nchw>(yd, detail::kernel_extents(n.extents));
    Backend& b = backend_;
    const graph::node& s = net_.at(src);
    const bool flat = s.kind == layer_kind::flatten;
    const std::vector<std::int64_t> xe = flat ? net_.at(s.inputs[0]).extents : detail::kernel_extents(s.extents);
    dispatch_format(flat ? format_of(s.id) : format_family::channels_first, static_cast<int>(xe.size()), [&](auto tag) {
      using F = decltype(tag);
      const auto xv = detail::view_of<F>(xd, xe);
      step.push_back([&b, xv, w, bias, yv] { b.linear_forward(xv, w, bias, yv); });
    });
  }

  template <class T>
  void bind_concat(const graph::node& n, step_list& step) {
    dispatch_format(format_of(n.id), kernel_rank(n.extents), [&](auto tag) {
      using F = decltype(tag);
      std::vector<tensor_view<const T, F>> xs;
      for (graph::node_id i : n.inputs)
        xs.push_back(detail::view_of<F>(reinterpret_cast<const T*>(slot_data(read_slot(n, i))),
                                        detail::kernel_extents(net_.at(i).extents)));
      const auto yv = detail::view_of<F>(reinterpret_cast<T*>(buffer(n.id)), detail::kernel_extents(n.extents));
      Backend& b = backend_;
      const auto p = n.get<memfmt::concat_params>();
      step.push_back([&b, xs, yv, p] { b.concat_forward(xs, yv, p); });
    });
  }

  // Layers of one input (two for binary) read and written in the node's format; a one-input layer
  // runs its layer_run's forward call (runtime/kinds/).
  template <class T>
  void bind_elementwise(const graph::node& n, step_list& step) {
    dispatch_format(format_of(n.id), kernel_rank(n.extents), [&](auto tag) {
      using F = decltype(tag);
      const auto in = [&](std::size_t i) {
        return detail::view_of<F>(reinterpret_cast<const T*>(slot_data(read_slot(n, n.inputs[i]))),
                                  detail::kernel_extents(net_.at(n.inputs[i]).extents));
      };
      const auto x = in(0);
      const auto y = detail::view_of<F>(reinterpret_cast<T*>(buffer(n.id)), detail::kernel_extents(n.extents));
      Backend& b = backend_;
      if (n.kind == layer_kind::binary) {
        step.push_back([&b, x, x2 = in(1), y, k = n.get<memfmt::binary_op>()] { b.binary_forward(k, x, x2, y); });
        return;
      }
      visit_layer_kind(n.kind, [&](auto kind) {
        using run = layer_run<decltype(kind)::value>;
        if constexpr (!run::unary) {
          memfmt::detail::fail(errc::unsupported, this->who(n) + ": no implementation of this layer kind on the " +
                                                      std::string(Backend::name) + " backend");
        } else if constexpr (!runs_forward<run, Backend>::value) {
          memfmt::detail::fail(errc::unsupported, this->who(n) + ": the " + std::string(Backend::name) +
                                                      " backend has no " + to_string(n.kind) + " layer");
        } else {
          step.push_back([&b, x, y, p = run::params(this->net_, n)] { run::forward(b, p, x, y); });
        }
      });
    });
  }

  // The user's function, with the inputs in the node's input format; it must report the output
  // format the node declares (an op that "loses channels_last" is an error, not a silent relabel).
  void bind_opaque(const graph::node& n, step_list& step) {
    const user_op op = *std::any_cast<user_op>(&n.get<graph::opaque_attrs>().callback);
    std::vector<tensor_ref> ins;
    for (graph::node_id i : n.inputs) {
      const graph::node& x = net_.at(i);
      ins.push_back(tensor_ref{x.type, x.extents, x.spatial() ? read_format(n) : format_family::channels_first,
                               slot_data(read_slot(n, i))});
    }
    const tensor_ref out{n.type, n.extents, format_of(n.id), buffer(n.id)};
    step.push_back([op, ins, out, w = who(n)] {
      tensor_ref o = out;
      op.run(ins, o);
      if (o.type != out.type || o.extents != out.extents || o.data != out.data ||
          (out.extents.size() > 2 && o.format != out.format))
        memfmt::detail::fail(errc::format_mismatch, w + ": the user_op returned " + describe(o.type, o.extents) + " " +
                                                        graph::to_string(o.format) + ", declared " +
                                                        describe(out.type, out.extents) + " " +
                                                        graph::to_string(out.format) + " in the executor's buffer");
    });
  }

  void check_io(const std::map<std::string, tensor_ref>& given, layer_kind kind, const char* what) const {
    runtime::check_io(net_, plan_, given, kind, what, "executor");
  }

  executor_options options_;
  std::vector<storage> storage_;
  std::vector<std::vector<std::function<void()>>> steps_;  // per node
  std::vector<std::size_t> layer_steps_;  // per node: how many of its steps are the layer's, not conversions
  std::map<graph::node_id, std::function<void(const void*)>> converted_on_entry_;  // input -> its conversion
  std::vector<bool> enters_converted_;  // per node: an input converted on entry (assign_storage decides)
  std::map<graph::node_id, graph::node_id> exits_converted_;  // value converted on exit -> the output reading it
  std::map<graph::node_id, std::function<void(void*)>> converted_on_exit_;  // output -> the conversion into it
  std::map<graph::node_id, graph::node_id> fused_into_;  // batch norm / add / activation -> the conv whose step runs it
  std::map<graph::node_id, graph::node_id> folded_bn_;   // conv -> the batch norm folded into it
  std::map<graph::node_id, std::vector<graph::node_id>> folded_affine_;   // conv -> its channel_affine layers, in order
  std::map<graph::node_id, memfmt::activation_params> fused_activation_;  // conv -> the activation run on its output
  std::map<graph::node_id, std::pair<graph::node_id, graph::node_id>>
      residual_;  // conv -> its fused add, the chain value it adds to
  std::map<graph::node_id, graph::node_id>
      chain_input_;  // fused add or affine -> the chain value it shares the bytes of
};

// Out of the class body, so not implicitly inline: where `extern template class executor<B>;` is
// declared, a translation unit that builds an executor calls the explicit instantiation and does not
// instantiate the binding of every layer kind and dtype again.
template <class Backend>
executor<Backend>::executor(const graph::network& net, const graph::plan& plan, Backend& backend,
                            const parameter_store& params, executor_options options)
    : base("executor", net, plan, backend), options_(options) {
  if (detail::owns_memory<Backend>::value && options.poison)
    memfmt::detail::fail(errc::invalid_argument, std::string("executor (") + Backend::name +
                                                     " backend): poison mode writes NaN through host pointers, "
                                                     "and this backend keeps the arena in its own memory");
  for (const graph::node& n : net.nodes()) check_supported(n);
  this->check_element_types();
  check_parameters(net, params);
  find_fusions();
  assign_storage();
  plan_arena();
  for (const graph::node& n : net.nodes()) bind(n, params);
}

}  // namespace memfmt::runtime
