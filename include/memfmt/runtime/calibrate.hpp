// memfmt/runtime/calibrate.hpp - measures what a network's layers and conversions cost on a backend.
//
// calibrate(net, backend, options) times every distinct layer signature (graph::layer_signature:
// op, attributes, extents, dtype) in both formats and every conversion the network could need
// (each spatial value with a reader, both directions), on random data: warm-up runs, then several
// timed repetitions, the median kept. Identical layers share a signature and are timed once;
// signatures already in options.known are not timed again. The result is a graph::timing_cache
// keyed by the backend's calibration_key (device, backend name and version), which
// cost_model::set_timing_cache turns into the planner's costs.
//
// Layers are run by calling the backend's forward methods directly. A backend without a method
// for a kind (oneDNN has conv and batch norm only) leaves that kind's prior in place; a format or
// dtype the backend refuses (errc::unsupported / unsupported_dtype) is recorded as unsupported in
// that family, and a signature refused in both is skipped. Conversions are timed with
// memfmt::convert, the executor's conversion. Timings are the machine's: tests check the cache's
// structure, benchmarks the plans it produces.
//
// A backend that keeps tensors in its own memory (the executor's hooks, detail::owns_memory: cuDNN)
// gets every buffer from its allocate, filled through copy_in, and converts with its own convert,
// as the executor runs it. A backend whose calls are queued names synchronize(): each timed call is
// bracketed by it, so the time is the work's and not the launch's.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backends/reference/backend.hpp"
#include "../config.hpp"
#include "../convert/convert.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../format/dispatch.hpp"
#include "../graph/network.hpp"
#include "../graph/timing_cache.hpp"
#include "../tensor/relabel.hpp"
#include "binding.hpp"
#include "kinds.hpp"

namespace memfmt::runtime {

struct calibrate_options {
  int warmup = 1;       // untimed runs first (caches, oneDNN's primitive creation and weight reorder)
  int repetitions = 5;  // timed runs; the median is kept
  std::uint64_t seed = 1;
  // Measurements already made on this device and backend (same key, or an error): their
  // signatures are copied into the result, not timed again.
  const graph::timing_cache* known = nullptr;
  // Whose measurements these are; default: calibration_key(backend).
  std::optional<graph::cache_key> key;
  // Receives one line per layer signature left to its prior (no method on this backend, or
  // refused in both formats); may be null.
  std::vector<std::string>* skipped = nullptr;
};

// A field of /proc/cpuinfo's first processor ("model name", "flags"); empty where there is none.
inline std::string cpuinfo_field(const std::string& name) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string field = line.substr(0, colon);
    while (!field.empty() && (field.back() == ' ' || field.back() == '\t')) field.pop_back();
    if (field == name) return colon + 2 <= line.size() ? line.substr(colon + 2) : std::string();
  }
  return {};
}

// The CPU's model name, "unknown CPU" where /proc/cpuinfo has none.
inline std::string host_cpu_model() {
  const std::string m = cpuinfo_field("model name");
  return m.empty() ? "unknown CPU" : m;
}

// The model name and the x86 vector extensions that change which kernels run (avx2, avx512f,
// avx512_bf16, amx_bf16), e.g. "AMD EPYC 7B13 (avx2)".
inline std::string host_cpu_name() {
  const std::string flags = " " + cpuinfo_field("flags") + " ";
  std::string isa;
  for (const char* f : {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    if (flags.find(std::string(" ") + f + " ") != std::string::npos) isa += (isa.empty() ? "" : " ") + std::string(f);
  return isa.empty() ? host_cpu_model() : host_cpu_model() + " (" + isa + ")";
}

inline std::string memfmt_version() {
  return std::to_string(MEMFMT_VERSION_MAJOR) + "." + std::to_string(MEMFMT_VERSION_MINOR) + "." +
         std::to_string(MEMFMT_VERSION_PATCH);
}

}  // namespace memfmt::runtime

namespace memfmt::reference {
// The reference backend runs memfmt's own loops on this CPU: the device is the CPU, the version
// memfmt's. Found by argument-dependent lookup, as every backend's calibration_key is.
inline graph::cache_key calibration_key(const backend&) {
  return {runtime::host_cpu_name(), backend::name, runtime::memfmt_version()};
}
}  // namespace memfmt::reference

namespace memfmt::runtime {
namespace detail {

// Whether Backend has a forward method for a layer kind, asked with float NCHW views.
template <class Void, template <class...> class Op, class... Args>
struct detected : std::false_type {};
template <template <class...> class Op, class... Args>
struct detected<std::void_t<Op<Args...>>, Op, Args...> : std::true_type {};
template <template <class...> class Op, class... Args>
constexpr bool has_v = detected<void, Op, Args...>::value;

template <class T>
using cview = tensor_view<const T, nchw>;
template <class T>
using mview = tensor_view<T, nchw>;
template <class B>
using conv_op = decltype(std::declval<B&>().conv_forward(cview<float>(), cview<float>(), (const float*)nullptr,
                                                         mview<float>(), conv_params{}));
template <class B>
using conv_transpose_op =
    decltype(std::declval<B&>().conv_backward_data(cview<float>(), cview<float>(), mview<float>(), conv_params{}));
template <class B>
using batch_norm_op = decltype(std::declval<B&>().batch_norm_forward_inference(
    cview<float>(), mview<float>(), (const float*)nullptr, (const float*)nullptr, (const float*)nullptr,
    (const float*)nullptr, batch_norm_params{}));
template <class B>
using group_norm_op = decltype(std::declval<B&>().group_norm_forward(
    cview<float>(), mview<float>(), (const float*)nullptr, (const float*)nullptr, (float*)nullptr, (float*)nullptr,
    group_norm_params{}));
template <class B>
using binary_op_t =
    decltype(std::declval<B&>().binary_forward(binary_op::add, cview<float>(), cview<float>(), mview<float>()));
template <class B>
using concat_op =
    decltype(std::declval<B&>().concat_forward(std::vector<cview<float>>{}, mview<float>(), concat_params{}));

// Whether the backend has the forward method that runs `kind`: a one-input layer's layer_run, the
// binding layer's methods for the others.
template <class B>
bool runs_kind(layer_kind kind) {
  using k = layer_kind;
  const bool unary = visit_layer_kind(kind, [](auto c) {
    using run = layer_run<decltype(c)::value>;
    if constexpr (run::unary) {
      return runs_forward<run, B>::value;
    } else {
      return false;
    }
  });
  if (unary) return true;
  switch (kind) {
    case k::conv: return has_v<conv_op, B>;
    case k::conv_transpose: return has_v<conv_transpose_op, B>;
    case k::batch_norm: return has_v<batch_norm_op, B>;
    case k::instance_norm:
    case k::group_norm: return has_v<group_norm_op, B>;
    case k::layer_norm: return runs_layer_norm<B>::value;
    case k::binary: return has_v<binary_op_t, B>;
    case k::concat: return has_v<concat_op, B>;
    default: return false;
  }
}

// Deterministic values in [lo, hi): timing needs finite, non-degenerate data, not statistics.
class filler {
 public:
  explicit filler(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  template <class T>
  std::vector<T> values(std::int64_t n, double lo = -1.0, double hi = 1.0) {
    std::vector<T> v(static_cast<std::size_t>(n));
    for (T& x : v) {
      state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
      const double u = static_cast<double>(state_ >> 11) / 9007199254740992.0;
      x = static_cast<T>(static_cast<float>(lo + (hi - lo) * u));
    }
    return v;
  }

 private:
  std::uint64_t state_;
};

// The data a timed call reads and writes: the host vectors themselves, or copies in the memory of
// a backend that owns its tensors, given back when this goes.
template <class Backend>
class staging {
 public:
  explicit staging(Backend& b) : backend_(b) {}
  staging(const staging&) = delete;
  staging& operator=(const staging&) = delete;
  ~staging() {
    if constexpr (owns_memory<Backend>::value)
      for (const auto& [p, bytes] : owned_) backend_.deallocate(p, bytes);
  }

  // Where the backend finds v's values (a const vector gives a pointer to const).
  template <class V>
  auto* place(V& v) {
    using E = std::remove_pointer_t<decltype(v.data())>;
    if constexpr (owns_memory<Backend>::value) {
      const std::size_t bytes = v.size() * sizeof(E);
      if (bytes == 0) return static_cast<E*>(nullptr);
      void* p = backend_.allocate(bytes);
      owned_.emplace_back(p, bytes);
      backend_.copy_in(p, v.data(), bytes);
      return static_cast<E*>(p);
    } else {
      return v.data();
    }
  }

 private:
  Backend& backend_;
  std::vector<std::pair<void*, std::size_t>> owned_;
};

// The median of timings (the upper one of an even count); `ns` is reordered, must not be empty.
inline std::int64_t median_of(std::vector<std::int64_t>& ns) {
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(ns.size() / 2), ns.end());
  return ns[ns.size() / 2];
}

template <class Backend, class Fn>
graph::cost_t median_ns(const calibrate_options& o, Backend& b, Fn&& run) {
  for (int i = 0; i < o.warmup; ++i) run();
  settle(b);
  std::vector<std::int64_t> ns;
  for (int i = 0; i < o.repetitions; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    settle(b);
    const auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  }
  return std::max<std::int64_t>(1, median_of(ns));  // a measured layer is never free
}

// The extents of a weight [K, C/groups, kernel...] at the node's rank.
inline std::vector<std::int64_t> weight_extents(std::int64_t k, std::int64_t c, const spatial3& kernel,
                                                std::size_t rank) {
  std::vector<std::int64_t> e{k, c};
  for (std::size_t d = 0; d + 2 < rank; ++d) e.push_back(kernel[d]);
  return e;
}

// Times node n in layout F with element type T; the backend must have the kind's method.
template <class T, class F, class Backend>
graph::cost_t time_layer(const graph::network& net, const graph::node& n, Backend& b, filler& fill,
                         const calibrate_options& o) {
  using P = stats_t<T>;
  staging<Backend> at(b);
  std::vector<std::vector<T>> in_data;
  std::vector<tensor_view<const T, F>> ins;
  for (graph::node_id i : n.inputs) {
    in_data.push_back(fill.values<T>(net.at(i).numel()));
    ins.push_back(view_of<F>(static_cast<const T*>(at.place(in_data.back())), net.at(i).extents));
  }
  std::vector<T> out(static_cast<std::size_t>(n.numel()));
  const auto y = view_of<F>(at.place(out), n.extents);
  const std::int64_t c = net.at(n.inputs[0]).extents[1];
  using k = layer_kind;
  if constexpr (has_v<conv_op, Backend> && has_v<conv_transpose_op, Backend>) {
    if (n.kind == k::conv || n.kind == k::conv_transpose) {
      const bool fwd = n.kind == k::conv;
      const spatial3 kernel = fwd ? n.get<graph::conv_attrs>().kernel : n.get<graph::conv_transpose_attrs>().kernel;
      const conv_params p = fwd ? n.get<graph::conv_attrs>().params : n.get<graph::conv_transpose_attrs>().params;
      const std::int64_t out_c = n.extents[1];
      const std::vector<std::int64_t> we = fwd ? weight_extents(out_c, c / p.groups, kernel, n.extents.size())
                                               : weight_extents(c, out_c / p.groups, kernel, n.extents.size());
      const std::vector<T> w = fill.values<T>(memfmt::detail::checked_numel(we, "calibrate: weight"));
      const std::vector<T> bias = fill.values<T>(out_c);
      const bool has_bias = fwd && n.get<graph::conv_attrs>().bias;
      const auto wv = view_of<F>(at.place(w), we);
      const T* bias_at = has_bias ? at.place(bias) : nullptr;
      if (fwd) return median_ns(o, b, [&] { b.conv_forward(ins[0], wv, bias_at, y, p); });
      return median_ns(o, b, [&] { b.conv_backward_data(ins[0], wv, y, p); });
    }
  } else if constexpr (has_v<conv_op, Backend>) {
    if (n.kind == k::conv) {
      const auto& a = n.get<graph::conv_attrs>();
      const std::vector<std::int64_t> we =
          weight_extents(n.extents[1], c / a.params.groups, a.kernel, n.extents.size());
      const std::vector<T> w = fill.values<T>(memfmt::detail::checked_numel(we, "calibrate: weight"));
      const std::vector<T> bias = fill.values<T>(n.extents[1]);
      const auto wv = view_of<F>(at.place(w), we);
      const T* bias_at = a.bias ? at.place(bias) : nullptr;
      return median_ns(o, b, [&] { b.conv_forward(ins[0], wv, bias_at, y, a.params); });
    }
  }
  if constexpr (has_v<batch_norm_op, Backend>) {
    if (n.kind == k::batch_norm) {
      const std::vector<P> gamma = fill.values<P>(c), beta = fill.values<P>(c), mean = fill.values<P>(c),
                           var = fill.values<P>(c, 0.5, 1.5);
      const auto& p = n.get<batch_norm_params>();
      const P *g = at.place(gamma), *bt = at.place(beta), *m = at.place(mean), *v = at.place(var);
      return median_ns(o, b, [&] { b.batch_norm_forward_inference(ins[0], y, g, bt, m, v, p); });
    }
  }
  if (n.kind == k::group_norm || n.kind == k::instance_norm || n.kind == k::layer_norm) {
    const norm_shape s = norm_shape_of(n);
    const std::vector<P> gamma = fill.values<P>(c), beta = fill.values<P>(c);
    std::vector<P> mean(s.stats), invstd(s.stats);
    const P* g = s.affine ? at.place(gamma) : nullptr;
    const P* bt = s.affine ? at.place(beta) : nullptr;
    P *m = at.place(mean), *is = at.place(invstd);
    if (n.kind == k::layer_norm) {
      if constexpr (runs_layer_norm<Backend>::value) {
        const layer_norm_params p = n.get<graph::layer_norm_attrs>().params;
        return median_ns(o, b, [&] { b.layer_norm_forward(ins[0], y, g, bt, m, is, p); });
      }
    } else if constexpr (has_v<group_norm_op, Backend>) {
      const group_norm_params p = n.get<graph::norm_attrs>().params;
      return median_ns(o, b, [&] { b.group_norm_forward(ins[0], y, g, bt, m, is, p); });
    }
  }
  if constexpr (has_v<binary_op_t, Backend>)
    if (n.kind == k::binary) return median_ns(o, b, [&] { b.binary_forward(n.get<binary_op>(), ins[0], ins[1], y); });
  const std::optional<graph::cost_t> unary = visit_layer_kind(n.kind, [&](auto c) -> std::optional<graph::cost_t> {
    using run = layer_run<decltype(c)::value>;
    if constexpr (run::unary && runs_forward<run, Backend>::value) {
      const auto p = run::params(net, n);
      return median_ns(o, b, [&] { run::forward(b, p, ins[0], y); });
    } else {
      return std::nullopt;
    }
  });
  if (unary) return *unary;
  if constexpr (has_v<concat_op, Backend>)
    if (n.kind == k::concat) return median_ns(o, b, [&] { b.concat_forward(ins, y, n.get<concat_params>()); });
  memfmt::detail::fail(errc::unsupported, "calibrate: no " + std::string(Backend::name) + " method runs node '" +
                                              n.name + "' (" + graph::to_string(n.kind) + ")");
}

// The layer in family f, or nullopt where the backend refuses that format or dtype.
template <class Backend>
std::optional<graph::cost_t> time_in(const graph::network& net, const graph::node& n, format_family f, Backend& b,
                                     filler& fill, const calibrate_options& o) {
  try {
    using types = memfmt::detail::backend_element_types_t<Backend>;  // what the backend's layers compile for
    return dispatch_float_dtype<types>(n.type, "calibrate: node '" + n.name + "'", [&](auto tag) {
      using T = decltype(tag);
      return dispatch_format(f, static_cast<int>(n.extents.size()),
                             [&](auto ftag) { return time_layer<T, decltype(ftag)>(net, n, b, fill, o); });
    });
  } catch (const memfmt::error& e) {
    if (e.code() == errc::unsupported || e.code() == errc::unsupported_dtype) return std::nullopt;
    throw;
  }
}

// One conversion of `extents` from `from` to the other family, elements moved as bytes, by the
// backend's convert where it owns its memory, else memfmt::convert (as the executor converts).
template <class U, int Rank, class Backend>
graph::cost_t time_conversion(Backend& b, const std::vector<std::int64_t>& extents, format_family from,
                              const calibrate_options& o) {
  const std::int64_t n = memfmt::detail::checked_numel(extents, "calibrate: conversion");
  std::vector<U> src(static_cast<std::size_t>(n), U{1}), dst(static_cast<std::size_t>(n));
  staging<Backend> at(b);
  const U* src_at = at.place(static_cast<const std::vector<U>&>(src));
  U* dst_at = at.place(dst);
  return dispatch_format<Rank>(from, [&](auto ftag) {
    return dispatch_format<Rank>(graph::other(from), [&](auto ttag) {
      const auto s = view_of<decltype(ftag)>(src_at, extents);
      const auto d = view_of<decltype(ttag)>(dst_at, extents);
      if constexpr (owns_memory<Backend>::value) return median_ns(o, b, [&] { b.convert(s, d); });
      else return median_ns(o, b, [&] { memfmt::convert(s, d); });
    });
  });
}

template <class U, class Backend>
graph::cost_t time_conversion(Backend& b, const std::vector<std::int64_t>& extents, format_family from,
                              const calibrate_options& o) {
  return extents.size() == 4 ? time_conversion<U, 4>(b, extents, from, o) : time_conversion<U, 5>(b, extents, from, o);
}

template <class B>
using key_op = decltype(calibration_key(std::declval<const B&>()));

// options.key, else the backend's calibration_key.
template <class Backend>
graph::cache_key key_of(const Backend& backend, const calibrate_options& options) {
  if (options.key) return *options.key;
  if constexpr (has_v<key_op, Backend>) return calibration_key(backend);
  memfmt::detail::fail(errc::invalid_argument, std::string("calibrate: the ") + Backend::name +
                                                   " backend has no calibration_key; pass calibrate_options::key");
}

template <class Backend>
graph::cost_t time_conversion_bytes(Backend& b, const std::vector<std::int64_t>& extents, memfmt::dtype t,
                                    format_family from, const calibrate_options& o) {
  switch (memfmt::size_of(t)) {
    case 1: return time_conversion<std::uint8_t>(b, extents, from, o);
    case 2: return time_conversion<std::uint16_t>(b, extents, from, o);
    case 4: return time_conversion<std::uint32_t>(b, extents, from, o);
    default: return time_conversion<std::uint64_t>(b, extents, from, o);
  }
}

}  // namespace detail

template <class Backend>
graph::timing_cache calibrate(const graph::network& net, Backend& backend, const calibrate_options& options = {}) {
  if (options.warmup < 0 || options.repetitions < 1)
    memfmt::detail::fail(errc::invalid_argument, "calibrate: warmup " + std::to_string(options.warmup) +
                                                     " must be >= 0 and repetitions " +
                                                     std::to_string(options.repetitions) + " >= 1");
  graph::timing_cache cache(detail::key_of(backend, options));
  if (options.known) cache.merge(*options.known);  // refuses another device's or backend's cache
  detail::filler fill(options.seed);
  std::set<std::string> skipped;
  for (const graph::node& n : net.nodes()) {
    const std::optional<std::string> sig = graph::layer_signature(net, n.id);
    if (!sig || cache.find_layer(*sig) || skipped.count(*sig)) continue;
    bool spatial_inputs = true;
    for (graph::node_id i : n.inputs) spatial_inputs = spatial_inputs && net.at(i).spatial();
    std::string why;
    if (!spatial_inputs) why = "an input without a layout";
    else if (!detail::runs_kind<Backend>(n.kind)) why = std::string("no ") + Backend::name + " method for the kind";
    graph::family_timings t;
    if (why.empty())
      for (format_family f : {format_family::channels_first, format_family::channels_last})
        t[graph::index(f)] = detail::time_in(net, n, f, backend, fill, options);
    if (why.empty() && !t[0] && !t[1]) why = std::string("refused by ") + Backend::name + " in both formats";
    if (!why.empty()) {
      skipped.insert(*sig);
      if (options.skipped) options.skipped->push_back("'" + n.name + "' (" + *sig + "): " + why + "; prior kept");
      continue;
    }
    cache.record_layer(*sig, t);
  }
  for (const graph::node& n : net.nodes()) {
    if (!n.spatial() || is_ambiguous_shape(n.extents) || net.consumers(n.id).empty()) continue;
    const std::string sig = graph::conversion_signature(n.extents, n.type);
    for (format_family f : {format_family::channels_first, format_family::channels_last})
      if (!cache.find_conversion(sig, f))
        cache.record_conversion(sig, f, detail::time_conversion_bytes(backend, n.extents, n.type, f, options));
  }
  return cache;
}

}  // namespace memfmt::runtime
