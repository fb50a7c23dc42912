// memfmt/runtime/kinds/layer_run.hpp - how a layer kind runs on a backend: the one place the
// executor, the trainer and calibration learn a layer's backend calls (runtime/kinds.hpp lists them).
//
// layer_run<K> for a layer that reads one value x and writes y (the memory-bound kinds, mostly)
// derives from unary_layer and defines
//   static P params(const graph::network&, const graph::node&);  what the backend call takes
//   static auto forward(B&, const P&, X x, Y y) -> decltype(...);  y = layer(x)
//   static constexpr saved saves(const P&);                        what backward reads besides dy
//   static auto backward(B&, const P&, X x, Y y, DY dy, DX dx) -> decltype(...);  dx from dy
// with trailing return types, so that a backend without the method is detected (the executor and the
// trainer then refuse the layer, calibration does not time it) rather than failing to compile.
// Kinds with parameters, several inputs or fusions (conv, norms, linear, binary, concat) are bound
// by the binding layer itself (executor.hpp, training.hpp); their layer_run is the primary template.
#pragma once

#include "../../graph/network.hpp"
#include "../../layers/layer_kind.hpp"
#include "../../layers/layer_params.hpp"

namespace memfmt::runtime {

// What a layer's backward reads besides dy: the trainer keeps those values alive until then.
enum class saved : unsigned char { none, x, y, x_and_y };

constexpr bool saves_x(saved s) noexcept { return s == saved::x || s == saved::x_and_y; }
constexpr bool saves_y(saved s) noexcept { return s == saved::y || s == saved::x_and_y; }

// The base of a one-input layer's layer_run.
struct unary_layer {
  static constexpr bool unary = true;
};

// A kind that the binding layer binds itself.
template <layer_kind K>
struct layer_run {
  static constexpr bool unary = false;
};

}  // namespace memfmt::runtime
