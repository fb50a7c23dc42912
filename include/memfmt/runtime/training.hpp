// memfmt/runtime/training.hpp - one training step of a planned network: forward, then backward.
//
// A trainer is built once from (network, plan, backend, parameters), like the executor, and checks
// the same things then, the backend's support() for every layer included (asked with
// op_query::backward set, so a backend refuses a layer whose backward it lacks); it also refuses
// what has no backward here (an opaque layer: a user_op has no backward function; a dropout with p > 0: its random mask
// is not reproduced) with errc::unsupported naming the node. train_step() runs
//   - the forward pass in training mode: batch norm normalises with the batch statistics and updates
//     running_mean and running_var as PyTorch does (momentum, the unbiased batch variance for
//     running_var, num_batches_tracked counted); nothing folded;
//   - the backward pass from the gradient of every graph output, in reverse node order.
// Training fusions (trainer_options::fuse), where the plan keeps the layers in one format and the
// intermediate value has no other reader: a relu after a batch norm, or a residual add (whose other
// operand exists by then) and a relu after it, run in the batch norm's forward and backward calls
// (batch_norm_params::fuse_relu and the residual arguments: on oneDNN the fused ReLU and its
// workspace, or one binary add with a ReLU post-op); report().fusions lists each group.
// It returns the gradient of every trainable parameter as a parameter_store, named and shaped as
// the store the trainer was built from (PyTorch's logical layout: a conv that ran channels_last
// computes its weight gradient in KRSC, handed back as KCRS). running_stats() gives the batch norm
// buffers as they stand.
//
// Formats: each layer's backward runs in the format the plan gives the layer, so an activation's
// gradient has its activation's format; a value the plan converts from A to B gets the gradient of
// its B copy converted back from B to A. The gradients of a value read by several layers (or twice
// by one) are summed: the first contribution is written in place, each later one into a scratch
// value added right after.
//
// Memory: forward values, gradients and scratch share one arena planned by liveness over 2N steps
// (node i's forward at step i, its backward at 2N - 1 - i). A forward value lives until the last
// backward step that reads it (a conv's input until the conv's weight gradient, a softmax's output
// until its backward), a gradient from its first contribution to its producer's backward.
// report() gives those bytes beside the bytes of one buffer per value. A backend with its own
// memory (detail::owns_memory, as for the executor) holds the arena, the parameters, statistics and
// gradients: inputs, outputs and output gradients cross copy_in / copy_out, conversions run through
// Backend::convert and gradient sums through its binary add; gradients and running statistics are
// copied out when asked for.
//
// The parameters are copied at build time (weights into the layouts their layers run in); the
// trainer does not update them: it computes gradients, and the caller's optimiser decides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../graph/network.hpp"
#include "../graph/plan.hpp"
#include "binding.hpp"
#include "check_io.hpp"
#include "check_parameters.hpp"
#include "kinds.hpp"
#include "parameter_store.hpp"
#include "tensor_ref.hpp"

namespace memfmt::runtime {

struct trainer_options {
  bool fuse = true;  // training fusions: batch norm + relu, batch norm + residual add + relu
};

template <class Backend>
class trainer : private detail::binding<Backend> {
  using base = detail::binding<Backend>;

 public:
  // Checks everything and binds the forward and backward steps (defined below the class, not
  // inline: see there).
  trainer(const graph::network& net, const graph::plan& plan, Backend& backend, const parameter_store& params,
          trainer_options options = {});

  trainer(const trainer&) = delete;  // steps point into this object
  trainer& operator=(const trainer&) = delete;

  const executor_report& report() const noexcept { return report_; }
  const memory_plan& memory() const noexcept { return memory_; }

  // One step. `inputs` names every graph input, `outputs` every graph output (the forward results
  // are written there), `output_grads` the gradient of the loss for every graph output, with the
  // output's dtype, extents and format. Everything is checked before any work.
  parameter_store train_step(const std::map<std::string, tensor_ref>& inputs,
                             const std::map<std::string, tensor_ref>& outputs,
                             const std::map<std::string, tensor_ref>& output_grads) {
    check_io(inputs, layer_kind::input, "input");
    check_io(outputs, layer_kind::output, "output");
    check_io(output_grads, layer_kind::output, "output gradient");
    for (const auto& [name, t] : inputs)
      if (t.bytes()) detail::copy_in(backend_, data<std::byte>(slot_[*net_.find(name)]), t.data, t.bytes());
    const std::size_t n = net_.size();
    for (std::size_t s = 0; s < n; ++s)
      for (auto& step : steps_[s]) step();
    for (const auto& [name, t] : outputs)
      if (t.bytes()) detail::copy_out(backend_, t.data, data<std::byte>(slot_[*net_.find(name)]), t.bytes());
    output_grads_.assign(n, nullptr);
    for (const auto& [name, t] : output_grads) output_grads_[*net_.find(name)] = t.data;
    for (std::size_t s = n; s < 2 * n; ++s)
      for (auto& step : steps_[s]) step();
    ++batches_;
    parameter_store grads;
    for (const auto& [name, get] : gradients_) grads.insert(name, get());
    return grads;
  }

  // running_mean, running_var and num_batches_tracked of every batch norm, in the dtypes
  // network::parameters declares (float32 in a bfloat16 or float16 network).
  parameter_store running_stats() const {
    parameter_store s;
    for (const auto& [name, get] : running_) s.insert(name, get());
    for (const auto& [name, start] : batches_tracked_)
      s.insert<std::int64_t>(name, {}, {memfmt::detail::checked_add(start, batches_, name.c_str())});
    return s;
  }

 private:
  using base::backend_, base::base_, base::constants_, base::converted_slot_, base::format_of, base::memory_,
      base::net_, base::owned_, base::plan_, base::read_slot, base::report_, base::slot_, base::sole_consumer,
      base::weights_, base::who;
  using step_list = std::vector<std::function<void()>>;
  using computed_types = memfmt::detail::backend_element_types_t<Backend>;  // as the executor's
  static constexpr std::int64_t unused = std::numeric_limits<std::int64_t>::max();

  // A buffer of the arena: a forward value, a converted copy, a gradient or a scratch value.
  struct storage {
    std::string name;
    memfmt::dtype type;
    std::vector<std::int64_t> extents;  // as the kernels see it: rank 2 [N, F] is [N, F, 1, 1]
    format_family format;
    std::int64_t bytes = 0;
    std::int64_t first = unused, last = -1;
    std::optional<graph::node_id> producer;  // none: a graph input, a buffer constant or a copy (no gradient)
    std::size_t contributions = 0;           // gradients: contributions bound so far
  };

  std::int64_t backward_step(graph::node_id id) const { return static_cast<std::int64_t>(2 * net_.size() - 1 - id); }

  void check_supported(const graph::node& n) const {
    this->check_in_plan(n);
    if (n.kind == layer_kind::opaque)
      memfmt::detail::fail(errc::unsupported,
                           who(n) + ": a user_op has no backward function, so the network cannot be trained");
    if (n.kind == layer_kind::dropout && n.get<graph::dropout_attrs>().p > 0.0)
      memfmt::detail::fail(errc::unsupported,
                           who(n) + ": p " + std::to_string(n.get<graph::dropout_attrs>().p) +
                               " in training draws a random mask, which the trainer does not (p 0 only)");
    this->check_backend(n, true);
  }

  bool is_relu(std::optional<graph::node_id> id) const {
    return id && net_.at(*id).kind == layer_kind::activation &&
           net_.at(*id).template get<memfmt::activation_params>().kind == memfmt::activation::relu;
  }

  // Training fusions where the plan keeps the layers in one format: a batch norm whose only reader
  // is a relu, or a residual add of two values of one shape whose other operand is computed before
  // the batch norm and whose only reader is a relu. The fused layers share the batch norm's value.
  void find_fusions() {
    if (!options_.fuse) return;
    for (const graph::node& n : net_.nodes()) {
      if (n.kind != layer_kind::batch_norm || n.get<batch_norm_params>().fuse_relu) continue;
      const auto next = sole_consumer(n.id);
      std::vector<graph::node_id> tail;
      if (is_relu(next)) {
        tail = {*next};
      } else if (next) {
        const graph::node& a = net_.at(*next);
        if (a.kind != layer_kind::binary || a.template get<memfmt::binary_op>() != memfmt::binary_op::add ||
            a.inputs.size() != 2 || a.inputs[0] == a.inputs[1])
          continue;
        const graph::node_id other = a.inputs[0] == n.id ? a.inputs[1] : a.inputs[0];
        const auto r = sole_consumer(a.id);
        // The sum is written over the batch norm's value: a broadcasting add stays a layer of its own.
        if (other >= n.id || net_.at(other).extents != a.extents || n.extents != a.extents || !is_relu(r)) continue;
        tail = {a.id, *r};
        residual_[n.id] = other;
      }
      if (tail.empty()) continue;
      std::string group = n.name;
      for (graph::node_id t : tail) {
        fused_into_[t] = n.id;
        group += " + " + net_.at(t).name;
      }
      fused_tail_[n.id] = tail;
      report_.fusions.push_back(group);
    }
  }

  // ---- storage ----

  std::size_t add_storage(std::string name, memfmt::dtype type, const std::vector<std::int64_t>& extents,
                          format_family f, std::optional<graph::node_id> producer) {
    const std::int64_t n = memfmt::detail::checked_numel(extents, name.c_str());
    const auto bytes = static_cast<std::int64_t>(memfmt::detail::checked_bytes(n, size_of(type), name.c_str()));
    storage_.push_back({std::move(name), type, detail::kernel_extents(extents), f, bytes, unused, -1, producer, 0});
    return storage_.size() - 1;
  }

  // A value like s (dtype, extents, format) under another name.
  std::size_t like(std::size_t s, std::string name) {
    const storage& x = storage_[s];
    const std::string n = std::move(name);
    storage_.push_back({n, x.type, x.extents, x.format, x.bytes, unused, -1, x.producer, 0});
    return storage_.size() - 1;
  }

  void use(std::size_t s, std::int64_t step) {
    storage_[s].first = std::min(storage_[s].first, step);
    storage_[s].last = std::max(storage_[s].last, step);
  }

  template <class T>
  T* data(std::size_t s) {
    return reinterpret_cast<T*>(address_[s]);
  }
  template <class T, class F>
  tensor_view<T, F> out(std::size_t s) {
    return detail::view_of<F>(data<T>(s), storage_[s].extents);
  }
  template <class T, class F>
  tensor_view<const T, F> in(std::size_t s) {
    return detail::view_of<F>(static_cast<const T*>(data<T>(s)), storage_[s].extents);
  }

  // The gradient of storage s (made on first request); none for graph inputs and their copies.
  std::optional<std::size_t> grad_of(std::size_t s) {
    if (!storage_[s].producer) return std::nullopt;
    if (const auto it = grad_.find(s); it != grad_.end()) return it->second;
    const std::size_t g = like(s, "grad " + storage_[s].name);
    grad_[s] = g;
    if (const auto c = trainable_constants_.find(s); c != trainable_constants_.end())
      constant_gradient(g, net_.at(c->second));
    return g;
  }

  // A trainable constant's gradient g lives outside the arena, in the buffer the step reports as
  // "<name>.value" (in logical order): its readers' backward kernels write it there.
  void constant_gradient(std::size_t g, const graph::node& n) {
    detail::dispatch_float_dtype<computed_types>(n.type, who(n), [&](auto tag) {
      using T = decltype(tag);
      const std::string name = n.name + ".value";
      if (!n.spatial()) {
        constants_[g] = reinterpret_cast<std::byte*>(gradient<T, T>(name, n.extents));
        return;
      }
      in_format(n, [&](auto f) {
        constants_[g] = reinterpret_cast<std::byte*>(weight_gradient<T, decltype(f)>(name, n.extents).data());
      });
    });
  }

  // Where a backward kernel at `step` writes its contribution to gradient g: g itself the first
  // time, a scratch value (added into g by finish()) after that.
  std::size_t contribute(std::size_t g, std::int64_t step) {
    use(g, step);
    if (storage_[g].contributions++ == 0) return g;
    const std::size_t s = like(g, storage_[g].name + " (partial)");
    use(s, step);
    return s;
  }

  // The contribution target for gradient of storage s, or a scratch value when s has no gradient
  // and the kernel writes one anyway.
  std::size_t contribute_or_scratch(std::size_t s, std::int64_t step) {
    if (const auto g = grad_of(s)) return contribute(*g, step);
    const std::size_t t = like(s, storage_[s].name + " (unused gradient)");
    use(t, step);
    return t;
  }

  void finish(std::size_t g, std::size_t dst, step_list& step) {
    if (g == dst) return;
    detail::dispatch_float_dtype<computed_types>(storage_[g].type, storage_[g].name, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (detail::owns_memory<Backend>::value) {
        // The backend's add, in place: a float sum rounded once, as the host loop's double sum is.
        dispatch_format(storage_[g].format, static_cast<int>(storage_[g].extents.size()), [&](auto f) {
          using F = decltype(f);
          step.push_back([this, g, dst] {
            backend_.binary_forward(memfmt::binary_op::add, in<T, F>(g), in<T, F>(dst), out<T, F>(g));
          });
        });
      } else {
        step.push_back([this, g, dst, n = storage_[g].bytes / static_cast<std::int64_t>(sizeof(T))] {
          T* a = data<T>(g);
          const T* b = data<T>(dst);
          for (std::int64_t i = 0; i < n; ++i) a[i] = static_cast<T>(detail::as_double(a[i]) + detail::as_double(b[i]));
        });
      }
    });
  }

  // Runs kernel(dst) into the contribution to the gradient of storage s when s has one.
  template <class Kernel>
  void into_grad(std::size_t s, std::int64_t t, step_list& step, Kernel&& kernel) {
    const auto g = grad_of(s);
    if (!g) return;
    const std::size_t dst = contribute(*g, t);
    kernel(dst);
    finish(*g, dst, step);
  }

  void plan_arena() {
    std::vector<value_lifetime> v;
    for (std::size_t i = 0; i < storage_.size(); ++i) {
      const storage& s = storage_[i];
      v.push_back(
          {s.name, constants_.count(i) ? 0 : s.bytes, s.first == unused ? 0 : s.first, s.first == unused ? 0 : s.last});
    }
    this->allocate_arena(std::move(v));
    address_.resize(storage_.size());
    for (std::size_t i = 0; i < storage_.size(); ++i) {
      const auto c = constants_.find(i);
      address_[i] = c != constants_.end() ? c->second : base_ + memory_.offsets[i];
    }
  }

  // ---- parameters ----

  // n elements at p (of type U) as a parameter of dtype T and the given shape.
  template <class T, class U>
  static parameter as_parameter(const U* p, std::size_t n, const std::vector<std::int64_t>& shape) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(detail::as_double(p[i]));
    parameter r;
    r.type = dtype_of_v<T>;
    r.shape = shape;
    r.bytes.resize(n * sizeof(T));
    if (n) std::memcpy(r.bytes.data(), v.data(), r.bytes.size());
    return r;
  }

  // A gradient buffer of n elements of U, reported as parameter `name` of dtype T.
  template <class T, class U>
  U* gradient(const std::string& name, const std::vector<std::int64_t>& shape) {
    const auto n = static_cast<std::size_t>(memfmt::detail::checked_numel(shape, name.c_str()));
    U* p = detail::backend_param(backend_, owned_, std::vector<U>(n));
    gradients_.emplace_back(name, [this, p, n, shape] { return as_parameter<T>(host_copy(p, n).data(), n, shape); });
    return p;
  }

  // A conv weight gradient computed in the layout of F and reported in PyTorch's [K, C, kernel...].
  template <class T, class F>
  tensor_view<T, F> weight_gradient(const std::string& name, const std::vector<std::int64_t>& shape) {
    auto owned = std::make_shared<host_tensor<T, F>>(detail::view_of<F>(static_cast<T*>(nullptr), shape).extents());
    owned_.push_back(owned);
    const auto n = static_cast<std::size_t>(owned->numel());
    T* p = owned->data();
    if constexpr (detail::owns_memory<Backend>::value)
      if (n) p = static_cast<T*>(detail::backend_allocate(backend_, owned_, n * sizeof(T)));
    gradients_.emplace_back(name, [this, owned, p, n, shape] {
      using CF = typename F::channels_first_t;
      if (p != owned->data() && n) detail::copy_out(backend_, owned->data(), p, n * sizeof(T));
      host_tensor<T, CF> logical(owned->extents());
      memfmt::convert(owned->const_view(), logical.view());
      return as_parameter<T>(logical.data(), static_cast<std::size_t>(logical.numel()), shape);
    });
    return tensor_view<T, F>(p, owned->view().mapping());
  }

  // n elements at p, where the backend keeps them, copied to the host.
  template <class U>
  std::vector<U> host_copy(const U* p, std::size_t n) const {
    std::vector<U> h(n);
    if (n) detail::copy_out(backend_, h.data(), p, n * sizeof(U));
    return h;
  }

  // ---- forward ----

  void bind_forward(const graph::node& n, const parameter_store& params) {
    const std::int64_t t = static_cast<std::int64_t>(n.id);
    const bool alias = n.kind == layer_kind::output || n.kind == layer_kind::flatten || n.kind == layer_kind::dropout ||
                       fused_into_.count(n.id);
    if (const auto f = fused_into_.find(n.id); f != fused_into_.end()) {
      slot_[n.id] = slot_[f->second];
    } else if (alias) {
      slot_[n.id] = read_slot(n, n.inputs[0]);
    } else {
      // Graph inputs (copied in before step 0) and buffer constants have no gradient.
      const bool input = n.kind == layer_kind::input;
      const bool trainable = n.kind == layer_kind::constant && n.get<graph::constant_attrs>().trainable;
      const bool source = input || (n.kind == layer_kind::constant && !trainable);
      slot_[n.id] = add_storage(n.name, n.type, n.extents, format_of(n.id),
                                source ? std::nullopt : std::optional<graph::node_id>(n.id));
      use(slot_[n.id], input ? 0 : t);
      if (trainable) {
        trainable_constants_[slot_[n.id]] = n.id;
        backward_.emplace(n.id, [](std::size_t, step_list&) {});  // its readers wrote the gradient in place
      }
    }
    sharing_[slot_[n.id]].push_back(n.id);
    if (n.kind == layer_kind::output) use(slot_[n.id], static_cast<std::int64_t>(net_.size()) - 1);
    auto& step = steps_[n.id];
    for (graph::node_id i : n.inputs) use(read_slot(n, i), t);
    if (!alias && n.kind != layer_kind::input) {
      detail::dispatch_float_dtype<computed_types>(n.type, who(n), [&](auto tag) {
        using T = decltype(tag);
        switch (n.kind) {
          case layer_kind::conv: bind_conv<T>(n, params, false); break;
          case layer_kind::conv_transpose: bind_conv<T>(n, params, true); break;
          case layer_kind::batch_norm: bind_batch_norm<T>(n, params); break;
          case layer_kind::instance_norm:
          case layer_kind::group_norm:
          case layer_kind::layer_norm: bind_norm<T>(n, params); break;
          case layer_kind::linear: bind_linear<T>(n, params); break;
          case layer_kind::concat: bind_concat<T>(n); break;
          case layer_kind::constant:  // laid out once, outside the arena; no step
            constants_[slot_[n.id]] = detail::backend_constant<T>(backend_, owned_, n, format_of(n.id), params);
            break;
          default: bind_elementwise<T>(n); break;
        }
      });
    }
    for (const auto& c : plan_.conversions) {
      if (c.value != n.id) continue;
      if (c.relabel) {
        converted_slot_[n.id] = slot_[n.id];
        continue;
      }
      const std::size_t src = slot_[n.id];
      const std::size_t dst =
          add_storage(n.name + " (" + graph::to_string(c.to) + ")", n.type, n.extents, c.to, storage_[src].producer);
      converted_slot_[n.id] = dst;
      use(src, t);
      use(dst, t);
      ++report_.conversions;
      bind_convert(src, dst, step);
    }
  }

  // dst = src in dst's format (the two formats of one rank).
  void bind_convert(std::size_t src, std::size_t dst, step_list& step) {
    const storage& s = storage_[src];
    detail::dispatch_float_dtype<computed_types>(s.type, s.name, [&](auto tag) {
      using T = decltype(tag);
      dispatch_format(s.format, static_cast<int>(s.extents.size()), [&](auto from) {
        using From = decltype(from);
        using To =
            std::conditional_t<From::channels_last, typename From::channels_first_t, typename From::channels_last_t>;
        if constexpr (detail::owns_memory<Backend>::value)
          step.push_back([this, src, dst] { backend_.convert(in<T, From>(src), out<T, To>(dst)); });
        else step.push_back([this, src, dst] { memfmt::convert(in<T, From>(src), out<T, To>(dst)); });
      });
    });
  }

  // Calls fn(F{}) for the node's format at its kernel rank.
  template <class Fn>
  void in_format(const graph::node& n, Fn&& fn) {
    dispatch_format(format_of(n.id), static_cast<int>(detail::kernel_extents(n.extents).size()), std::forward<Fn>(fn));
  }

  // A conv, or a transposed conv (transposed: its weight [C_in, C_out / groups, kernel...] is the
  // [K, C, kernel...] of the conv it transposes). A transposed conv is that conv's backward-data
  // pass, so its own backward is that conv's forward (for dx) and that conv's weight gradient with
  // the roles of input and output gradient swapped.
  template <class T>
  void bind_conv(const graph::node& n, const parameter_store& params, bool transposed) {
    const bool has_bias = transposed ? n.get<graph::conv_transpose_attrs>().bias : n.get<graph::conv_attrs>().bias;
    const conv_params p = transposed ? n.get<graph::conv_transpose_attrs>().params : n.get<graph::conv_attrs>().params;
    const std::size_t x = read_slot(n, n.inputs[0]), y = slot_[n.id];
    const std::string wn = n.name + ".weight", bn = n.name + ".bias";
    const std::vector<std::int64_t> shape = params.at(wn).shape;
    const std::vector<T> w = params.at(wn).template values<T>(wn);
    const T* bias = has_bias ? detail::backend_param(backend_, owned_, params.at(bn).template values<T>(bn)) : nullptr;
    T* dbias = has_bias ? gradient<T, T>(bn, params.at(bn).shape) : nullptr;
    const std::int64_t tb = backward_step(n.id);
    use(x, tb);
    in_format(n, [&](auto tag) {
      using F = decltype(tag);
      const auto wv = detail::backend_weight<T, F>(backend_, owned_, w, shape);
      weights_.push_back(wv.data());
      const auto dw = weight_gradient<T, F>(wn, shape);
      if (!transposed) {
        steps_[n.id].push_back(
            [this, x, y, wv, bias, p] { backend_.conv_forward(in<T, F>(x), wv, bias, out<T, F>(y), p); });
        backward_.emplace(n.id, [this, x, wv, dw, dbias, p, tb](std::size_t dy, step_list& step) {
          step.push_back(
              [this, x, dy, dw, dbias, p] { backend_.conv_backward_weights(in<T, F>(x), in<T, F>(dy), dw, dbias, p); });
          into_grad(x, tb, step, [&](std::size_t dx) {
            step.push_back([this, dy, dx, wv, p] { backend_.conv_backward_data(in<T, F>(dy), wv, out<T, F>(dx), p); });
          });
        });
        return;
      }
      std::vector<std::int64_t> be(n.extents.size(), 1);
      be[1] = n.extents[1];
      const auto bias_view = bias ? detail::view_of<F>(bias, be) : tensor_view<const T, F>{};
      steps_[n.id].push_back([this, x, y, wv, bias_view, p] {
        backend_.conv_backward_data(in<T, F>(x), wv, out<T, F>(y), p);
        if (bias_view.data()) backend_.binary_forward(memfmt::binary_op::add, in<T, F>(y), bias_view, out<T, F>(y));
      });
      backward_.emplace(n.id, [this, x, wv, dw, dbias, p, tb](std::size_t dy, step_list& step) {
        step.push_back([this, x, dy, dw, dbias, p] {
          backend_.conv_backward_weights(in<T, F>(dy), in<T, F>(x), dw, static_cast<T*>(nullptr), p);
          if (dbias) bias_gradient(in<T, F>(dy), dbias);
        });
        into_grad(x, tb, step, [&](std::size_t dx) {
          step.push_back([this, dy, dx, wv, p] {
            backend_.conv_forward(in<T, F>(dy), wv, static_cast<const T*>(nullptr), out<T, F>(dx), p);
          });
        });
      });
    });
  }

  // A transposed conv's bias gradient: channel sums of dy, summed on the host.
  template <class T, class F>
  void bias_gradient(tensor_view<const T, F> dy, T* dbias) {
    if constexpr (detail::owns_memory<Backend>::value) {
      const std::vector<T> h = host_copy(dy.data(), static_cast<std::size_t>(dy.numel()));
      const auto c = static_cast<std::size_t>(dy.extents()[1]);
      std::vector<T> sums(c);
      channel_sums(tensor_view<const T, F>(h.data(), dy.mapping()), sums.data());
      detail::copy_in(backend_, dbias, sums.data(), c * sizeof(T));
    } else {
      channel_sums(dy, dbias);
    }
  }

  // sums[c] = the sum of v over every element of channel c (a bias gradient), in double.
  template <class T, class F>
  static void channel_sums(tensor_view<const T, F> v, T* sums) {
    const auto e = v.extents();
    const std::int64_t c = e[1];
    std::int64_t spatial = 1;
    for (std::size_t d = 2; d < e.size(); ++d) spatial *= e[d];
    std::vector<double> acc(static_cast<std::size_t>(c), 0.0);
    const std::int64_t total = e[0] * c * spatial;
    for (std::int64_t i = 0; i < total; ++i) {
      const std::int64_t ch = F::channels_last ? i % c : (i / spatial) % c;
      acc[static_cast<std::size_t>(ch)] += detail::as_double(v.data()[i]);
    }
    for (std::int64_t k = 0; k < c; ++k) sums[k] = static_cast<T>(acc[static_cast<std::size_t>(k)]);
  }

  // A batch norm, with the relu (and the residual add before it) of its fusion group if it has one.
  template <class T>
  void bind_batch_norm(const graph::node& n, const parameter_store& params) {
    using P = detail::stats_t<T>;
    batch_norm_params p = n.get<batch_norm_params>();
    p.fuse_relu = p.fuse_relu || fused_tail_.count(n.id);
    const std::size_t x = read_slot(n, n.inputs[0]), y = slot_[n.id];
    const auto res = residual_.find(n.id);
    const std::optional<std::size_t> r =
        res == residual_.end() ? std::nullopt
                               : std::optional<std::size_t>(read_slot(net_.at(fused_tail_.at(n.id)[0]), res->second));
    if (r) use(*r, static_cast<std::int64_t>(n.id));
    const std::string b = n.name + ".";
    const std::vector<std::int64_t> shape = params.at(b + "weight").shape;
    const std::size_t c = static_cast<std::size_t>(n.extents[1]);
    const P* gamma = detail::backend_param(backend_, owned_, detail::values_as<P, P>(params, b + "weight"));
    const P* beta = detail::backend_param(backend_, owned_, detail::values_as<P, P>(params, b + "bias"));
    P* mean = detail::backend_param(backend_, owned_, detail::values_as<P, P>(params, b + "running_mean"));
    P* var = detail::backend_param(backend_, owned_, detail::values_as<P, P>(params, b + "running_var"));
    P* saved_mean = detail::backend_param(backend_, owned_, std::vector<P>(c));
    P* saved_invstd = detail::backend_param(backend_, owned_, std::vector<P>(c));
    P* dgamma = gradient<P, P>(b + "weight", shape);
    P* dbeta = gradient<P, P>(b + "bias", shape);
    running_.emplace_back(b + "running_mean",
                          [this, mean, c, shape] { return as_parameter<P>(host_copy(mean, c).data(), c, shape); });
    running_.emplace_back(b + "running_var",
                          [this, var, c, shape] { return as_parameter<P>(host_copy(var, c).data(), c, shape); });
    if (const parameter* t = params.find(b + "num_batches_tracked"))
      batches_tracked_.emplace_back(b + "num_batches_tracked",
                                    t->template values<std::int64_t>(b + "num_batches_tracked").at(0));
    const std::int64_t tb = backward_step(n.id);
    use(x, tb);
    if (p.fuse_relu) use(y, tb);
    in_format(n, [&](auto tag) {
      using F = decltype(tag);
      steps_[n.id].push_back([this, x, y, r, gamma, beta, mean, var, saved_mean, saved_invstd, p] {
        backend_.batch_norm_forward_training(in<T, F>(x), out<T, F>(y), gamma, beta, mean, var, saved_mean,
                                             saved_invstd, p, r ? in<T, F>(*r) : tensor_view<const T, F>{});
      });
      backward_.emplace(n.id, [this, x, y, r, gamma, saved_mean, saved_invstd, dgamma, dbeta, p, tb](std::size_t dy,
                                                                                                     step_list& step) {
        const auto g = grad_of(x);
        const std::size_t dx = contribute_or_scratch(x, tb);
        const auto gr = r ? grad_of(*r) : std::nullopt;
        const std::optional<std::size_t> dr = gr ? std::optional<std::size_t>(contribute(*gr, tb)) : std::nullopt;
        step.push_back([this, x, y, dy, dx, dr, gamma, saved_mean, saved_invstd, dgamma, dbeta, p] {
          backend_.batch_norm_backward(in<T, F>(x), in<T, F>(dy), out<T, F>(dx), gamma, saved_mean, saved_invstd,
                                       dgamma, dbeta, p, p.fuse_relu ? in<T, F>(y) : tensor_view<const T, F>{},
                                       dr ? out<T, F>(*dr) : tensor_view<T, F>{});
        });
        if (g) finish(*g, dx, step);
        if (gr) finish(*gr, *dr, step);
      });
    });
  }

  // Group, instance and layer norm: the forward keeps its statistics for the backward.
  template <class T>
  void bind_norm(const graph::node& n, const parameter_store& params) {
    if (n.kind == layer_kind::layer_norm) {
      if constexpr (detail::runs_layer_norm<Backend>::value)
        bind_norm<T>(n, params, n.get<graph::layer_norm_attrs>().params);
      else
        memfmt::detail::fail(errc::unsupported,
                             "node '" + n.name + "': the " + std::string(Backend::name) + " backend has no layer norm");
    } else {
      bind_norm<T>(n, params, n.get<graph::norm_attrs>().params);
    }
  }
  // Params: group_norm_params or layer_norm_params, which pick the backend's methods.
  template <class T, class Params>
  void bind_norm(const graph::node& n, const parameter_store& params, const Params& p) {
    using P = detail::stats_t<T>;
    const detail::norm_shape s = detail::norm_shape_of(n);
    const std::size_t x = read_slot(n, n.inputs[0]), y = slot_[n.id];
    const std::string b = n.name + ".";
    const P* gamma =
        s.affine ? detail::backend_param(backend_, owned_, detail::values_as<P, P>(params, b + "weight")) : nullptr;
    const P* beta =
        s.affine ? detail::backend_param(backend_, owned_, detail::values_as<P, P>(params, b + "bias")) : nullptr;
    P* dgamma = s.affine ? gradient<P, P>(b + "weight", params.at(b + "weight").shape) : nullptr;
    P* dbeta = s.affine ? gradient<P, P>(b + "bias", params.at(b + "bias").shape) : nullptr;
    P* mean = detail::backend_param(backend_, owned_, std::vector<P>(s.stats));
    P* invstd = detail::backend_param(backend_, owned_, std::vector<P>(s.stats));
    const std::int64_t tb = backward_step(n.id);
    use(x, tb);
    in_format(n, [&](auto tag) {
      using F = decltype(tag);
      steps_[n.id].push_back([this, x, y, gamma, beta, mean, invstd, p] {
        if constexpr (std::is_same_v<Params, layer_norm_params>)
          backend_.layer_norm_forward(in<T, F>(x), out<T, F>(y), gamma, beta, mean, invstd, p);
        else backend_.group_norm_forward(in<T, F>(x), out<T, F>(y), gamma, beta, mean, invstd, p);
      });
      backward_.emplace(n.id, [this, x, gamma, mean, invstd, dgamma, dbeta, p, tb](std::size_t dy, step_list& step) {
        const auto g = grad_of(x);
        const std::size_t dx = contribute_or_scratch(x, tb);
        step.push_back([this, x, dy, dx, gamma, mean, invstd, dgamma, dbeta, p] {
          if constexpr (std::is_same_v<Params, layer_norm_params>)
            backend_.layer_norm_backward(in<T, F>(x), in<T, F>(dy), out<T, F>(dx), gamma, mean, invstd, dgamma, dbeta,
                                         p);
          else
            backend_.group_norm_backward(in<T, F>(x), in<T, F>(dy), out<T, F>(dx), gamma, mean, invstd, dgamma, dbeta,
                                         p);
        });
        if (g) finish(*g, dx, step);
      });
    });
  }

  // A linear reads [N, F] in flatten order; after a flatten it reads the 4-D/5-D value by its
  // strides in the format that value is stored in (so a channels_last flatten needs no conversion,
  // and the weight and its gradient stay in PyTorch's order).
  template <class T>
  void bind_linear(const graph::node& n, const parameter_store& params) {
    const auto& a = n.get<graph::linear_attrs>();
    const std::size_t x = read_slot(n, n.inputs[0]), y = slot_[n.id];
    const std::string wn = n.name + ".weight", bn = n.name + ".bias";
    const T* w = detail::backend_param(backend_, owned_, params.at(wn).template values<T>(wn));
    weights_.push_back(w);
    const T* bias = a.bias ? detail::backend_param(backend_, owned_, params.at(bn).template values<T>(bn)) : nullptr;
    T* dw = gradient<T, T>(wn, params.at(wn).shape);
    T* dbias = a.bias ? gradient<T, T>(bn, params.at(bn).shape) : nullptr;
    const std::int64_t tb = backward_step(n.id);
    use(x, tb);
    dispatch_format(storage_[x].format, static_cast<int>(storage_[x].extents.size()), [&](auto tag) {
      using F = decltype(tag);
      steps_[n.id].push_back([this, x, y, w, bias] { backend_.linear_forward(in<T, F>(x), w, bias, out<T, nchw>(y)); });
      backward_.emplace(n.id, [this, x, w, dw, dbias, tb](std::size_t dy, step_list& step) {
        step.push_back(
            [this, x, dy, dw, dbias] { backend_.linear_backward_weights(in<T, F>(x), in<T, nchw>(dy), dw, dbias); });
        into_grad(x, tb, step, [&](std::size_t dx) {
          step.push_back([this, dy, dx, w] { backend_.linear_backward_data(in<T, nchw>(dy), w, out<T, F>(dx)); });
        });
      });
    });
  }

  template <class T>
  void bind_concat(const graph::node& n) {
    std::vector<std::size_t> xs;
    for (graph::node_id i : n.inputs) xs.push_back(read_slot(n, i));
    const std::size_t y = slot_[n.id];
    const std::int64_t tb = backward_step(n.id);
    const auto p = n.get<memfmt::concat_params>();
    in_format(n, [&](auto tag) {
      using F = decltype(tag);
      steps_[n.id].push_back([this, xs, y, p] {
        std::vector<tensor_view<const T, F>> v;
        for (std::size_t s : xs) v.push_back(in<T, F>(s));
        backend_.concat_forward(v, out<T, F>(y), p);
      });
      backward_.emplace(n.id, [this, xs, tb, p](std::size_t dy, step_list& step) {
        std::vector<std::size_t> dxs;
        for (std::size_t s : xs) dxs.push_back(contribute_or_scratch(s, tb));
        step.push_back([this, dy, dxs, p] {
          std::vector<tensor_view<T, F>> v;
          for (std::size_t s : dxs) v.push_back(out<T, F>(s));
          backend_.concat_backward(in<T, F>(dy), v, p);
        });
        for (std::size_t i = 0; i < xs.size(); ++i)
          if (const auto g = grad_of(xs[i])) finish(*g, dxs[i], step);
      });
    });
  }

  // Layers of one input (two for binary), forward and backward in the node's format; a one-input
  // layer runs its layer_run's calls (runtime/kinds/) and keeps what its backward reads alive.
  template <class T>
  void bind_elementwise(const graph::node& n) {
    const std::size_t x = read_slot(n, n.inputs[0]), y = slot_[n.id];
    const std::int64_t tb = backward_step(n.id);
    auto& step = steps_[n.id];
    in_format(n, [&](auto tag) {
      using F = decltype(tag);
      if (n.kind == layer_kind::binary) {
        const auto k = n.get<memfmt::binary_op>();
        const std::size_t x2 = read_slot(n, n.inputs[1]);
        use(x, tb);
        use(x2, tb);
        step.push_back([this, x, x2, y, k] { backend_.binary_forward(k, in<T, F>(x), in<T, F>(x2), out<T, F>(y)); });
        backward_.emplace(n.id, [this, x, x2, k, tb](std::size_t dy, step_list& s) {
          const auto g1 = grad_of(x), g2 = grad_of(x2);
          const std::optional<std::size_t> d1 = g1 ? std::optional<std::size_t>(contribute(*g1, tb)) : std::nullopt;
          const std::optional<std::size_t> d2 = g2 ? std::optional<std::size_t>(contribute(*g2, tb)) : std::nullopt;
          s.push_back([this, x, x2, dy, d1, d2, k] {
            backend_.binary_backward(k, in<T, F>(x), in<T, F>(x2), in<T, F>(dy),
                                     d1 ? out<T, F>(*d1) : tensor_view<T, F>{},
                                     d2 ? out<T, F>(*d2) : tensor_view<T, F>{});
          });
          if (g1) finish(*g1, *d1, s);
          if (g2) finish(*g2, *d2, s);
        });
        return;
      }
      visit_layer_kind(n.kind, [&](auto kind) {
        using run = layer_run<decltype(kind)::value>;
        if constexpr (!run::unary || !runs_forward<run, Backend>::value || !runs_backward<run, Backend>::value) {
          memfmt::detail::fail(errc::unsupported, this->who(n) +
                                                      ": no training implementation of this layer kind on the " +
                                                      std::string(Backend::name) + " backend");
        } else {
          const auto p = run::params(this->net_, n);
          if (saves_x(run::saves(p))) use(x, tb);
          if (saves_y(run::saves(p))) use(y, tb);
          step.push_back([this, x, y, p] { run::forward(this->backend_, p, in<T, F>(x), out<T, F>(y)); });
          backward_.emplace(n.id, [this, x, y, p, tb](std::size_t dy, step_list& s) {
            into_grad(x, tb, s, [&](std::size_t dx) {
              s.push_back([this, p, x, y, dy, dx] {
                run::backward(this->backend_, p, in<T, F>(x), in<T, F>(y), in<T, F>(dy), out<T, F>(dx));
              });
            });
          });
        }
      });
    });
  }

  // ---- backward ----

  // Node n's backward step: the gradient of its value gathered (its converted copies' gradients
  // converted back, zeros when nothing reads it), then its layer's backward kernels; an output
  // copies the caller's gradient in.
  void bind_backward(const graph::node& n) {
    const std::int64_t t = backward_step(n.id);
    auto& step = steps_[static_cast<std::size_t>(t)];
    if (n.kind == layer_kind::output) {
      into_grad(slot_[n.id], t, step, [&](std::size_t dst) {
        step.push_back([this, dst, id = n.id] {
          detail::copy_in(backend_, data<std::byte>(dst), output_grads_[id],
                          static_cast<std::size_t>(storage_[dst].bytes));
        });
      });
      return;
    }
    const auto it = backward_.find(n.id);
    if (it == backward_.end()) return;  // inputs and renamings
    const std::size_t s = slot_[n.id];
    const std::size_t g = *grad_of(s);
    // The converted copies of every value these bytes hold: the node's, the fused layers', and
    // those of renamings (a dropout or flatten whose reader converts it).
    for (graph::node_id v : sharing_.at(s)) {
      const auto c = converted_slot_.find(v);
      if (c == converted_slot_.end() || c->second == s) continue;
      const auto gc = grad_.find(c->second);
      if (gc != grad_.end() && storage_[gc->second].contributions > 0) {
        use(gc->second, t);
        const std::size_t dst = contribute(g, t);
        bind_convert(gc->second, dst, step);
        finish(g, dst, step);
      }
    }
    use(g, t);
    if (storage_[g].contributions == 0) {
      ++storage_[g].contributions;
      if constexpr (detail::owns_memory<Backend>::value)
        step.push_back(
            [this, g, zeros = std::make_shared<std::vector<std::byte>>(static_cast<std::size_t>(storage_[g].bytes))] {
              detail::copy_in(backend_, data<std::byte>(g), zeros->data(), zeros->size());
            });
      else
        step.push_back([this, g] {
          // An empty gradient has no storage (a null pointer) to zero.
          if (const auto bytes = static_cast<std::size_t>(storage_[g].bytes)) std::memset(data<std::byte>(g), 0, bytes);
        });
    }
    it->second(g, step);
  }

  void check_io(const std::map<std::string, tensor_ref>& given, layer_kind kind, const char* what) const {
    runtime::check_io(net_, plan_, given, kind, what, "trainer");
  }

  trainer_options options_;
  std::map<graph::node_id, graph::node_id> fused_into_;               // fused add / relu -> its batch norm
  std::map<graph::node_id, std::vector<graph::node_id>> fused_tail_;  // batch norm -> its fused add?, relu
  std::map<std::size_t, std::vector<graph::node_id>> sharing_;        // storage -> the values it holds
  std::map<graph::node_id, graph::node_id> residual_;                 // batch norm -> its fused add's other operand
  std::vector<storage> storage_;
  std::map<std::size_t, std::size_t> grad_;                    // storage -> its gradient's storage
  std::map<std::size_t, graph::node_id> trainable_constants_;  // storage -> its trainable constant node
  std::vector<std::byte*> address_;                            // per storage: where its bytes are
  std::map<graph::node_id, std::function<void(std::size_t, step_list&)>>
      backward_;                  // binds a layer's backward given dy
  std::vector<step_list> steps_;  // 2N: forward per node, then backward in reverse
  std::vector<std::pair<std::string, std::function<parameter()>>> gradients_;
  std::vector<std::pair<std::string, std::function<parameter()>>> running_;
  std::vector<std::pair<std::string, std::int64_t>> batches_tracked_;
  std::int64_t batches_ = 0;
  std::vector<const void*> output_grads_;
};

// Out of the class body, so not implicitly inline: where `extern template class trainer<B>;` is
// declared, a translation unit that builds a trainer calls the explicit instantiation and does not
// instantiate the binding of every layer's forward and backward again.
template <class Backend>
trainer<Backend>::trainer(const graph::network& net, const graph::plan& plan, Backend& backend,
                          const parameter_store& params, trainer_options options)
    : base("trainer", net, plan, backend), options_(options) {
  for (const graph::node& n : net.nodes()) check_supported(n);
  this->check_element_types();
  find_fusions();
  check_parameters(net, params);
  steps_.resize(2 * net.size());
  slot_.assign(net.size(), 0);
  for (const graph::node& n : net.nodes()) bind_forward(n, params);
  for (std::size_t i = net.size(); i-- > 0;) bind_backward(net.at(i));
  plan_arena();
}

}  // namespace memfmt::runtime
