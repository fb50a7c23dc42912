// memfmt/layers/layer_kind.hpp - the layer kinds: what a network node computes and what a backend
// is asked it can run, one vocabulary for the graph, the planner, the backends and the files.
//
// Each kind has one row in kind_infos, in the enum's order: its name (network JSON, the CLI,
// reports, timing-cache signatures, support answers), whether a layer of the kind inherits its
// producer's format and whether it runs on a backend. Adding a kind is docs/adding_a_layer.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>

#include "../error.hpp"

namespace memfmt {

// What a network node computes (graph::node::kind) and what a backend is asked it can run
// (op_query::op).
enum class layer_kind : std::uint8_t {
  input,
  output,
  conv,
  conv_transpose,
  batch_norm,
  instance_norm,
  group_norm,
  pad,
  activation,
  binary,
  pool,
  global_pool,
  upsample,
  concat,
  slice,
  flatten,
  linear,
  softmax,
  dropout,
  opaque,
  constant,
  rearrange,
  layer_norm,
  reduce,
  lrn,
};

// What memfmt knows of each kind, one row per kind in layer_kind's order.
struct kind_info {
  layer_kind kind;
  // The kind's name in network JSON, the CLI, reports, timing-cache signatures and support answers.
  const char* name;
  // A memory-bound layer costs the same in either format and so inherits its producer's
  // (solve.hpp's second criterion; oneDNN and cudnn-frontend: compute layers choose, memory-bound
  // layers inherit); not opaque (a barrier declares its format), flatten (a view with its own
  // constraint), the graph boundaries (pinned) nor conv / linear (they choose).
  bool inherits_format;
  // Runs as an operation on a backend, which is asked first (layers/op_query.hpp); not the graph
  // boundaries, constants, user ops, nor flatten and dropout (renamings when a network runs).
  bool runs_on_backend;
};
inline constexpr kind_info kind_infos[] = {
    {layer_kind::input, "input", false, false},
    {layer_kind::output, "output", false, false},
    {layer_kind::conv, "conv", false, true},
    {layer_kind::conv_transpose, "conv_transpose", false, true},
    {layer_kind::batch_norm, "batch_norm", true, true},
    {layer_kind::instance_norm, "instance_norm", true, true},
    {layer_kind::group_norm, "group_norm", true, true},
    {layer_kind::pad, "pad", true, true},
    {layer_kind::activation, "activation", true, true},
    {layer_kind::binary, "binary", true, true},
    {layer_kind::pool, "pool", true, true},
    {layer_kind::global_pool, "global_pool", true, true},
    {layer_kind::upsample, "upsample", true, true},
    {layer_kind::concat, "concat", true, true},
    {layer_kind::slice, "slice", true, true},
    {layer_kind::flatten, "flatten", false, false},
    {layer_kind::linear, "linear", false, true},
    {layer_kind::softmax, "softmax", true, true},
    {layer_kind::dropout, "dropout", true, false},
    {layer_kind::opaque, "opaque", false, false},
    {layer_kind::constant, "constant", false, false},
    {layer_kind::rearrange, "rearrange", true, true},
    {layer_kind::layer_norm, "layer_norm", true, true},
    {layer_kind::reduce, "reduce", true, true},
    {layer_kind::lrn, "lrn", true, true},
};
inline constexpr std::size_t layer_kind_count = std::size(kind_infos);

namespace detail {
constexpr bool kind_rows_in_order() {
  for (std::size_t i = 0; i < layer_kind_count; ++i)
    if (static_cast<std::size_t>(kind_infos[i].kind) != i) return false;
  return true;
}
static_assert(kind_rows_in_order(), "kind_infos: one row per layer_kind, in the enum's order");
}  // namespace detail

constexpr const kind_info& kind_info_of(layer_kind k) noexcept { return kind_infos[static_cast<std::size_t>(k)]; }
constexpr const char* to_string(layer_kind k) noexcept {
  return static_cast<std::size_t>(k) < layer_kind_count ? kind_info_of(k).name : "?";
}
constexpr bool inherits_format(layer_kind k) noexcept {
  return static_cast<std::size_t>(k) < layer_kind_count && kind_info_of(k).inherits_format;
}
constexpr bool runs_on_backend(layer_kind k) noexcept {
  return static_cast<std::size_t>(k) < layer_kind_count && kind_info_of(k).runs_on_backend;
}

namespace detail {
template <class F, std::size_t... I>
decltype(auto) visit_layer_kind(layer_kind k, F& f, std::index_sequence<I...>) {
  using result = decltype(f(std::integral_constant<layer_kind, layer_kind{}>{}));
  using call = result (*)(F&);
  static constexpr call table[] = {
      [](F& g) -> result { return g(std::integral_constant<layer_kind, static_cast<layer_kind>(I)>{}); }...};
  return table[static_cast<std::size_t>(k)](f);
}
}  // namespace detail

// f(std::integral_constant<layer_kind, k>{}): a kind known at run time as a compile-time constant,
// for the per-kind homes (graph/kinds.hpp, runtime/kinds.hpp). f returns one type for every kind; a
// value outside layer_kind is an error naming it.
template <class F>
decltype(auto) visit_layer_kind(layer_kind k, F&& f) {
  if (static_cast<std::size_t>(k) >= layer_kind_count)
    memfmt::detail::fail(errc::invalid_argument, "layer kind " + std::to_string(static_cast<int>(k)) +
                                                     " is not one of memfmt's " + std::to_string(layer_kind_count));
  return detail::visit_layer_kind(k, f, std::make_index_sequence<layer_kind_count>{});
}

}  // namespace memfmt
