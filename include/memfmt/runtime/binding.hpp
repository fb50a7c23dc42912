// memfmt/runtime/binding.hpp - what the executor and the trainer share when they bind a planned network.
//
// detail::binding<Backend> holds the network and plan (copies), the backend (a reference: it must
// outlive the binding), the values' storage slots and converted copies, the arena and what keeps
// the parameters alive, and answers the questions both ask of every node: its format, the storage
// it reads a value from (its own bytes or the plan's converted copy), whether it is in the plan and
// what the backend says of it (support(), forward or backward), its only same-format reader (the
// fusions' test). The helpers in detail:: below lay weights, constants and parameters where the
// backend reads them, and name the backend capabilities (owns_memory, caches_weights, ...) that
// decide how the steps are bound.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
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
#include "memory_plan.hpp"
#include "parameter_store.hpp"

namespace memfmt::runtime {

// What a build decided and a forward pass ran.
struct executor_report {
  std::int64_t arena_bytes = 0;         // activations with reuse by liveness
  std::int64_t allocate_all_bytes = 0;  // one buffer per value
  std::int64_t conversions = 0;         // copies per forward pass (plan.conversions less relabels)
  std::int64_t relabels = 0;            // conversions that share bytes
  std::vector<std::string> fusions;     // "<conv> + bias + <bn> + <activation>" per fused group
};

namespace detail {

using memfmt::detail::dispatch_float_dtype;

template <class F, class T>
tensor_view<T, F> view_of(T* data, const std::vector<std::int64_t>& e) {
  typename tensor_view<T, F>::extents_type x{};
  for (std::size_t d = 0; d < x.size(); ++d) x[d] = e[d];
  return tensor_view<T, F>(data, layout<F>::packed(x));
}

// The type the backends take per-channel parameters and statistics in (float, double for double).
template <class T>
using stats_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// A float element as double (half and bfloat16 convert through float).
template <class T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else return static_cast<double>(static_cast<float>(v));
}

// Extents as the kernels see a value: a rank-2 [N, F] is [N, F, 1, 1] (every format the same bytes).
inline std::vector<std::int64_t> kernel_extents(const std::vector<std::int64_t>& e) {
  return e.size() == 2 ? std::vector<std::int64_t>{e[0], e[1], 1, 1} : e;
}

// The parameter's values as U (the store holds them in T: the node's dtype, or stats_t of it for
// a norm's, as graph::network::norm_parameter_type declares them).
template <class T, class U>
std::vector<U> values_as(const parameter_store& params, const std::string& name) {
  const std::vector<T> v = params.at(name).template values<T>(name);
  if constexpr (std::is_same_v<T, U>) {
    return v;
  } else {
    std::vector<U> r(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) r[i] = static_cast<U>(as_double(v[i]));
    return r;
  }
}

// Keeps `v` alive as long as `owned` and returns where its elements are.
template <class V>
auto* keep(std::vector<std::shared_ptr<void>>& owned, V v) {
  auto p = std::make_shared<V>(std::move(v));
  owned.push_back(p);
  return p->data();
}

// A weight of PyTorch shape [K, C, kernel...] (row-major) in the layout of format F (KCRS or
// KRSC), kept alive by `owned`.
template <class T, class F>
tensor_view<const T, F> weight_in(std::vector<std::shared_ptr<void>>& owned, const std::vector<T>& w,
                                  const std::vector<std::int64_t>& shape) {
  auto t = std::make_shared<host_tensor<T, F>>(view_of<F>(static_cast<T*>(nullptr), shape).extents());
  using CF = typename F::channels_first_t;
  memfmt::convert(view_of<CF>(w.data(), shape), t->view());
  owned.push_back(t);
  return t->const_view();
}

// Every consumer of a flatten's value, through dropouts, is a linear.
inline bool feeds_only_linears(const graph::network& net, graph::node_id id) {
  for (graph::node_id c : net.consumers(id)) {
    const graph::node& u = net.at(c);
    if (u.kind == layer_kind::dropout ? !feeds_only_linears(net, c) : u.kind != layer_kind::linear) return false;
  }
  return true;
}

// Aliasing a channels_last buffer as [N, features] orders the features (spatial, C): only a
// linear reading the 4-D value by its strides (a permuted weight) gets them right.
inline void check_flatten_readers(const graph::network& net, const graph::node& n, format_family format,
                                  const std::string& who) {
  if (n.kind == layer_kind::flatten && format == format_family::channels_last &&
      !is_ambiguous_shape(net.at(n.inputs[0]).extents) && !feeds_only_linears(net, n.id))
    memfmt::detail::fail(errc::unsupported, who + ": a channels_last flatten of " +
                                                memfmt::detail::dims_to_string(net.at(n.inputs[0]).extents) +
                                                " orders its features (spatial, C); only linears may read it");
}

struct free_bytes {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};

// A host backend's arena of `bytes` (64-byte aligned) for the values of `who`'s network; one that
// cannot be allocated is errc::out_of_memory naming its size.
inline std::unique_ptr<std::byte, free_bytes> host_arena(std::int64_t bytes, const char* who) {
  void* p = std::aligned_alloc(64, static_cast<std::size_t>(bytes));
  if (!p)
    memfmt::detail::fail(errc::out_of_memory, std::string(who) + ": the arena of the network's values (" +
                                                  std::to_string(bytes) + " bytes) could not be allocated");
  return std::unique_ptr<std::byte, free_bytes>(static_cast<std::byte*>(p));
}

// Backends whose conv_forward runs the epilogue activation(conv + bias + residual) in one call: they
// name its options type Backend::conv_fusion (a struct with a memfmt::activation_params `activation`).
template <class Backend, class = void>
struct fuses_conv_epilogue : std::false_type {};
template <class Backend>
struct fuses_conv_epilogue<Backend, std::void_t<typename Backend::conv_fusion>> : std::true_type {};

// Backends whose bind_conv_forward(conv_forward's arguments) resolves a conv once and returns a
// callable Backend::conv_forward_call that only executes: the executor binds its conv steps so.
template <class Backend, class = void>
struct binds_conv_forward : std::false_type {};
template <class Backend>
struct binds_conv_forward<Backend, std::void_t<typename Backend::conv_forward_call>> : std::true_type {};

// Backends that keep a network's tensors in their own memory name these members:
//   void* allocate(std::size_t bytes);                         the arena and each parameter
//   void deallocate(void* p, std::size_t bytes) noexcept;
//   void copy_in(void* dst, const void* host, std::size_t bytes);   host bytes reusable on return
//   void copy_out(void* host, const void* src, std::size_t bytes);  after every queued step
//   template <class T, class From, class To> void convert(tensor_view<const T, From>, tensor_view<T, To>);
template <class Backend, class = void>
struct owns_memory : std::false_type {};
template <class Backend>
struct owns_memory<Backend, std::void_t<decltype(std::declval<Backend&>().allocate(std::size_t{})),
                                        decltype(std::declval<Backend&>().deallocate(nullptr, std::size_t{})),
                                        decltype(std::declval<Backend&>().copy_in(nullptr, nullptr, std::size_t{})),
                                        decltype(std::declval<Backend&>().copy_out(nullptr, nullptr, std::size_t{}))>>
    : std::true_type {};

// Waits for the backend's queued work (a GPU stream's); nothing for a backend whose calls return when
// done.
template <class B>
using synchronize_op = decltype(std::declval<B&>().synchronize());
template <class Backend, class = void>
struct queues_work : std::false_type {};
template <class Backend>
struct queues_work<Backend, std::void_t<synchronize_op<Backend>>> : std::true_type {};
template <class Backend>
void settle(Backend& b) {
  if constexpr (queues_work<Backend>::value) b.synchronize();
  else (void)b;
}

// Backends with layer norm over channels (the cuDNN backend has none: its support query refuses the
// layer before any step is bound).
template <class Backend, class = void>
struct runs_layer_norm : std::false_type {};
template <class Backend>
struct runs_layer_norm<Backend, std::void_t<decltype(std::declval<Backend&>().layer_norm_forward(
                                    tensor_view<const float, nchw>(), tensor_view<float, nchw>(), (const float*)nullptr,
                                    (const float*)nullptr, (float*)nullptr, (float*)nullptr, layer_norm_params{}))>>
    : std::true_type {};

// The per-channel affine flag and the count of saved statistics (mean and invstd each) of a group,
// instance or layer norm node: N * groups, or one per sample and position.
struct norm_shape {
  bool affine = true;
  std::size_t stats = 0;
};
inline norm_shape norm_shape_of(const graph::node& n) {
  if (n.kind == layer_kind::layer_norm)
    return {n.get<graph::layer_norm_attrs>().affine,
            static_cast<std::size_t>(n.numel() / std::max<std::int64_t>(n.extents[1], 1))};
  const auto& a = n.get<graph::norm_attrs>();
  return {a.affine, static_cast<std::size_t>(memfmt::detail::checked_mul(n.extents[0], a.params.groups, n.name))};
}

// Backends that cache prepared copies of weights by address (oneDNN's reordered weights).
template <class Backend, class = void>
struct caches_weights : std::false_type {};
template <class Backend>
struct caches_weights<
    Backend, std::void_t<decltype(std::declval<Backend&>().invalidate_weights(static_cast<const void*>(nullptr)))>>
    : std::true_type {};

// Memory shared by the executor and the trainer: with owns_memory, `bytes` of the backend's memory
// kept alive by `owned` (given back to the backend with it); copies to and from it.
template <class Backend>
void* backend_allocate(Backend& b, std::vector<std::shared_ptr<void>>& owned, std::size_t bytes) {
  void* p = b.allocate(bytes);
  Backend* bp = &b;
  owned.push_back(std::shared_ptr<void>(p, [bp, bytes](void* q) { bp->deallocate(q, bytes); }));
  return p;
}
// Empty values have no storage (null pointers): nothing to copy.
template <class Backend>
void copy_in(Backend& b, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  if constexpr (owns_memory<Backend>::value) b.copy_in(dst, src, bytes);
  else std::memcpy(dst, src, bytes);
}
template <class Backend>
void copy_out(Backend& b, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  if constexpr (owns_memory<Backend>::value) b.copy_out(dst, src, bytes);
  else std::memcpy(dst, src, bytes);
}

// A host vector kept alive by `owned` where the backend reads it: the vector itself, or a copy in
// the backend's memory.
template <class Backend, class V>
auto* backend_param(Backend& b, std::vector<std::shared_ptr<void>>& owned, V v) {
  const std::size_t count = v.size();
  auto* host = keep(owned, std::move(v));
  if constexpr (owns_memory<Backend>::value) {
    using E = std::remove_pointer_t<decltype(host)>;
    const std::size_t bytes = count * sizeof(E);
    if (bytes == 0) return host;
    auto* dev = static_cast<E*>(backend_allocate(b, owned, bytes));
    b.copy_in(dev, host, bytes);
    return dev;
  } else {
    (void)count;
    (void)b;
    return host;
  }
}

// A conv weight (see weight_in) where the backend reads it.
template <class T, class F, class Backend>
tensor_view<const T, F> backend_weight(Backend& b, std::vector<std::shared_ptr<void>>& owned, const std::vector<T>& w,
                                       const std::vector<std::int64_t>& shape) {
  tensor_view<const T, F> v = weight_in<T, F>(owned, w, shape);
  if constexpr (owns_memory<Backend>::value) {
    const std::size_t bytes = static_cast<std::size_t>(v.numel()) * sizeof(T);
    void* dev = backend_allocate(b, owned, bytes);
    b.copy_in(dev, v.data(), bytes);
    v = tensor_view<const T, F>(static_cast<const T*>(dev), v.mapping());
  } else {
    (void)b;
  }
  return v;
}

// Constant node n's values (parameter "<name>.value") laid out once in format f where the backend
// reads them, kept alive by `owned`: the bytes the executor and the trainer point its value at.
template <class T, class Backend>
std::byte* backend_constant(Backend& b, std::vector<std::shared_ptr<void>>& owned, const graph::node& n,
                            format_family f, const parameter_store& params) {
  const std::string name = n.name + ".value";
  const std::vector<T> v = params.at(name).template values<T>(name);
  const void* p = nullptr;
  if (n.spatial())
    dispatch_format(f, static_cast<int>(n.extents.size()),
                    [&](auto tag) { p = backend_weight<T, decltype(tag)>(b, owned, v, n.extents).data(); });
  else p = backend_param(b, owned, v);
  return static_cast<std::byte*>(const_cast<void*>(p));  // never written: no step has it as output
}

// The state and the questions the executor and the trainer share (see the top of this file).
// `role` ("executor", "trainer") names the owner in every message.
template <class Backend>
class binding {
 protected:
  binding(const char* role, const graph::network& net, const graph::plan& plan, Backend& backend)
      : role_(role), net_(net), plan_(plan), backend_(backend) {
    if (plan.nodes.size() != net.size())
      memfmt::detail::fail(errc::shape_mismatch, std::string(role) + ": the plan has " +
                                                     std::to_string(plan.nodes.size()) + " nodes, the network " +
                                                     std::to_string(net.size()));
  }

  // The backend's copies of these weights die with them: another executor's or trainer's weights
  // may later sit at the same addresses.
  ~binding() {
    if constexpr (caches_weights<Backend>::value)
      for (const void* w : weights_) backend_.invalidate_weights(w);
  }

  binding(const binding&) = delete;  // steps point into the object
  binding& operator=(const binding&) = delete;

  std::string who(const graph::node& n) const {
    return std::string(role_) + " (" + Backend::name + " backend): node '" + n.name + "' (" + graph::to_string(n.kind) +
           ")";
  }

  format_family format_of(graph::node_id id) const { return plan_.format(id).value_or(format_family::channels_first); }

  // The format consumer reads its spatial inputs in.
  format_family read_format(const graph::node& consumer) const {
    return net_.read_format(consumer.id, format_of(consumer.id));
  }

  // Whether `consumer` reads value v's own bytes rather than a converted copy.
  bool reads_own_bytes(const graph::node& consumer, graph::node_id v) const {
    return !net_.at(v).spatial() || format_of(v) == read_format(consumer);
  }

  // The conversion of value v to `to`, if the plan has one.
  const graph::conversion* conversion_to(graph::node_id v, format_family to) const {
    for (const auto& c : plan_.conversions)
      if (c.value == v && c.to == to) return &c;
    return nullptr;
  }

  // The storage `consumer` reads value v from: v's own, or the plan's converted copy.
  std::size_t read_slot(const graph::node& consumer, graph::node_id v) const {
    if (reads_own_bytes(consumer, v)) return slot_[v];
    const auto it = converted_slot_.find(v);
    if (it == converted_slot_.end()) {
      const graph::node& x = net_.at(v);
      memfmt::detail::fail(errc::invalid_argument,
                           who(consumer) + " reads '" + x.name + "' in " +
                               std::string(graph::to_string(read_format(consumer))) + " but '" + x.name + "' is " +
                               std::string(graph::to_string(format_of(v))) +
                               " and the plan converts it nowhere (a plan of another network?)");
    }
    return it->second;
  }

  // The single consumer of v when there is exactly one and it runs in v's format.
  std::optional<graph::node_id> sole_consumer(graph::node_id v) const {
    const auto& c = net_.consumers(v);
    if (c.size() != 1 || format_of(c[0]) != format_of(v)) return std::nullopt;
    return c[0];
  }

  // A node of another network's plan has no format where its network needs one.
  void check_in_plan(const graph::node& n) const {
    if (net_.has_format(n.id) && !plan_.format(n.id))
      memfmt::detail::fail(errc::invalid_argument, who(n) + " has no format in the plan (a plan of another network?)");
  }

  // The backend's answer for node n in its planned format (its backward too where `backward`),
  // and the readers of a channels_last flatten.
  void check_backend(const graph::node& n, bool backward) const {
    if (std::optional<op_query> q = op_query_of(n, format_of(n.id))) {
      q->backward = backward;
      if (const op_support s = backend_.support(*q); !s) memfmt::detail::fail(s.code, who(n) + ": " + s.reason);
    }
    check_flatten_readers(net_, n, format_of(n.id), who(n));
  }

  // After the backend's own answers, which say more: the element types the layers are compiled for.
  void check_element_types() const {
    for (const graph::node& n : net_.nodes())
      dispatch_float_dtype<memfmt::detail::backend_element_types_t<Backend>>(n.type, who(n), [](auto) {});
  }

  // Lays out `values` in one arena by liveness and allocates it: the backend's memory where it
  // owns memory, a host arena otherwise (base_).
  void allocate_arena(std::vector<value_lifetime> values) {
    memory_ = plan_memory(std::move(values), 64);
    report_.arena_bytes = memory_.arena_bytes;
    report_.allocate_all_bytes = memory_.total_bytes;
    if (memory_.arena_bytes <= 0) return;
    if constexpr (owns_memory<Backend>::value) {
      base_ =
          static_cast<std::byte*>(backend_allocate(backend_, owned_, static_cast<std::size_t>(memory_.arena_bytes)));
    } else {
      arena_ = host_arena(memory_.arena_bytes, role_);
      base_ = arena_.get();
    }
  }

  const char* role_;
  graph::network net_;  // copies: small, and a temporary plan must not dangle
  graph::plan plan_;
  Backend& backend_;
  executor_report report_;
  std::vector<std::size_t> slot_;                         // per node: its value's storage
  std::map<graph::node_id, std::size_t> converted_slot_;  // per converted value: the copy's storage
  std::map<std::size_t, std::byte*> constants_;           // storages outside the arena: their bytes
  memory_plan memory_;
  std::unique_ptr<std::byte, free_bytes> arena_;  // host backends' arena
  std::byte* base_ = nullptr;                     // the arena: arena_, or the backend's memory
  std::vector<std::shared_ptr<void>> owned_;      // weights in their layouts, statistics, gradients, scratch
  std::vector<const void*> weights_;              // the weights a backend may cache copies of
};

}  // namespace detail

}  // namespace memfmt::runtime
