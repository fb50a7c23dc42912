// memfmt/graph/kinds.hpp - every layer kind's home, and visit_kind, which hands a kind's traits to a
// caller (network JSON, the timing cache, the cost model's priors, the eager policy, the backends'
// support queries).
//
// Adding a kind (docs/adding_a_layer.md): its home graph/kinds/<kind>.hpp and one include below.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "kinds/activation.hpp"
#include "kinds/batch_norm.hpp"
#include "kinds/binary.hpp"
#include "kinds/concat.hpp"
#include "kinds/constant.hpp"
#include "kinds/conv.hpp"
#include "kinds/conv_transpose.hpp"
#include "kinds/dropout.hpp"
#include "kinds/flatten.hpp"
#include "kinds/global_pool.hpp"
#include "kinds/group_norm.hpp"
#include "kinds/input.hpp"
#include "kinds/instance_norm.hpp"
#include "kinds/kind_traits.hpp"
#include "kinds/layer_norm.hpp"
#include "kinds/linear.hpp"
#include "kinds/lrn.hpp"
#include "kinds/opaque.hpp"
#include "kinds/output.hpp"
#include "kinds/pad.hpp"
#include "kinds/pool.hpp"
#include "kinds/rearrange.hpp"
#include "kinds/reduce.hpp"
#include "kinds/slice.hpp"
#include "kinds/softmax.hpp"
#include "kinds/upsample.hpp"

namespace memfmt::graph {

namespace detail {

// Which of the optional members a kind's home defines.
template <class T, class = void>
struct has_signature : std::false_type {};
template <class T>
struct has_signature<
    T, std::void_t<decltype(T::signature(std::declval<const node&>(), std::size_t{}, std::declval<std::string&>()))>>
    : std::true_type {};
template <class T, class = void>
struct has_eager : std::false_type {};
template <class T>
struct has_eager<T, std::void_t<decltype(T::eager(std::declval<const eager_context&>()))>> : std::true_type {};
template <class T, class Cost, class = void>
struct has_prior : std::false_type {};
template <class T, class Cost>
struct has_prior<T, Cost, std::void_t<decltype(T::prior(std::declval<const Cost&>()))>> : std::true_type {};
template <class T, class = void>
struct has_query : std::false_type {};
template <class T>
struct has_query<T, std::void_t<decltype(T::query(std::declval<const node&>(), std::declval<op_query&>()))>>
    : std::true_type {};

}  // namespace detail

// f(kind_traits<k>{}); f returns one type for every kind (visit_layer_kind).
template <class F>
decltype(auto) visit_kind(layer_kind k, F&& f) {
  return visit_layer_kind(k, [&f](auto c) -> decltype(auto) { return f(kind_traits<decltype(c)::value>{}); });
}

}  // namespace memfmt::graph
