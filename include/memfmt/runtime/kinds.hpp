// memfmt/runtime/kinds.hpp - every layer kind's backend calls (runtime/kinds/<kind>.hpp), and what a
// backend can run of them.
//
// Adding a kind (docs/adding_a_layer.md): its layer_run in runtime/kinds/<kind>.hpp and one include
// below; the executor, the trainer and calibration find it through visit_layer_kind.
#pragma once

#include <type_traits>
#include <utility>

#include "../layers/layer_params.hpp"
#include "../tensor/tensor_view.hpp"
#include "kinds/activation.hpp"
#include "kinds/global_pool.hpp"
#include "kinds/layer_run.hpp"
#include "kinds/lrn.hpp"
#include "kinds/pad.hpp"
#include "kinds/pool.hpp"
#include "kinds/rearrange.hpp"
#include "kinds/reduce.hpp"
#include "kinds/slice.hpp"
#include "kinds/softmax.hpp"
#include "kinds/upsample.hpp"

namespace memfmt::runtime {

namespace detail {

template <class R>
using run_params_t = decltype(R::params(std::declval<const graph::network&>(), std::declval<const graph::node&>()));

}  // namespace detail

// Whether Backend has R's forward call (asked with float NCHW views, as the other capability
// checks are: a backend's methods are templates over the element type and layout).
template <class R, class Backend, class = void>
struct runs_forward : std::false_type {};
template <class R, class Backend>
struct runs_forward<
    R, Backend,
    std::void_t<decltype(R::forward(std::declval<Backend&>(), std::declval<const detail::run_params_t<R>&>(),
                                    tensor_view<const float, nchw>(), tensor_view<float, nchw>()))>> : std::true_type {
};

// Whether Backend has R's backward call.
template <class R, class Backend, class = void>
struct runs_backward : std::false_type {};
template <class R, class Backend>
struct runs_backward<
    R, Backend,
    std::void_t<decltype(R::backward(std::declval<Backend&>(), std::declval<const detail::run_params_t<R>&>(),
                                     tensor_view<const float, nchw>(), tensor_view<const float, nchw>(),
                                     tensor_view<const float, nchw>(), tensor_view<float, nchw>()))>> : std::true_type {
};

}  // namespace memfmt::runtime
