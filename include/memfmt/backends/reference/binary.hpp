// memfmt/backends/reference/binary.hpp - reference add, sub, mul and div with broadcasting.
//
// y = a op b with PyTorch broadcasting (an operand's size-1 dim repeats along y's), in double,
// rounded once to T. The backward sums each operand's gradient over the positions its elements
// were repeated to (the broadcast dims), in double, and rounds once:
//   add: da = dy, db = dy; sub: da = dy, db = -dy; mul: da = dy * b, db = dy * a;
//   div: da = dy / b, db = -dy * a / b^2.
// da and db are optional (a null data pointer: not computed). Formats may differ between all
// tensors of one rank. y may be a or b when it has their sizes and format.
#pragma once

#include <cstdint>
#include <vector>

#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

// Strides that read a broadcast operand at a position of the result: 0 along its size-1 dims.
inline dims5 broadcast_strides(const dims5& e, dims5 s) noexcept {
  if (e.n == 1) s.n = 0;
  if (e.c == 1) s.c = 0;
  if (e.d == 1) s.d = 0;
  if (e.h == 1) s.h = 0;
  if (e.w == 1) s.w = 0;
  return s;
}

// Dense strides of extents e with broadcasting: the scratch index of a result position.
inline dims5 broadcast_dense_strides(const dims5& e) noexcept {
  const dims5 dense{e.c * e.d * e.h * e.w, e.d * e.h * e.w, e.h * e.w, e.w, 1};
  return broadcast_strides(e, dense);
}

inline double binary_value(binary_op kind, double a, double b) noexcept {
  switch (kind) {
    case binary_op::add: return a + b;
    case binary_op::sub: return a - b;
    case binary_op::mul: return a * b;
    case binary_op::div: return a / b;
  }
  return a + b;
}

template <class T>
void binary_forward(binary_op kind, const view5<const T>& a, const view5<const T>& b, const view5<T>& y) {
  const auto as = broadcast_strides(extents5(a), strides5(a));
  const auto bs = broadcast_strides(extents5(b), strides5(b));
  const auto ys = strides5(y);
  for_each5(extents5(y), [&](auto n, auto c, auto d, auto h, auto w) {
    const double av = to_double(a.data()[offset5(as, n, c, d, h, w)]);
    const double bv = to_double(b.data()[offset5(bs, n, c, d, h, w)]);
    y.data()[offset5(ys, n, c, d, h, w)] = from_double<T>(binary_value(kind, av, bv));
  });
}

template <class T>
void binary_backward(binary_op kind, const view5<const T>& a, const view5<const T>& b, const view5<const T>& dy,
                     const view5<T>& da, const view5<T>& db) {
  const bool want_a = da.data() != nullptr, want_b = db.data() != nullptr;
  const auto ae = extents5(a), be = extents5(b);
  const auto as = broadcast_strides(ae, strides5(a));
  const auto bs = broadcast_strides(be, strides5(b));
  const auto ai = broadcast_dense_strides(ae), bi = broadcast_dense_strides(be);
  const auto dys = strides5(dy);
  std::vector<double> ga(want_a ? static_cast<std::size_t>(numel5(ae)) : 0, 0.0);
  std::vector<double> gb(want_b ? static_cast<std::size_t>(numel5(be)) : 0, 0.0);
  for_each5(extents5(dy), [&](auto n, auto c, auto d, auto h, auto w) {
    const double g = to_double(dy.data()[offset5(dys, n, c, d, h, w)]);
    auto a_at = [&] { return to_double(a.data()[offset5(as, n, c, d, h, w)]); };
    auto b_at = [&] { return to_double(b.data()[offset5(bs, n, c, d, h, w)]); };
    if (want_a) {
      auto& acc = ga[static_cast<std::size_t>(offset5(ai, n, c, d, h, w))];
      if (kind == binary_op::mul) acc = mul_add(g, b_at(), acc);
      else acc += kind == binary_op::div ? g / b_at() : g;
    }
    if (want_b) {
      auto& acc = gb[static_cast<std::size_t>(offset5(bi, n, c, d, h, w))];
      if (kind == binary_op::mul) acc = mul_add(g, a_at(), acc);
      else if (kind == binary_op::div) {
        const double bv = b_at();
        acc -= g * a_at() / (bv * bv);
      } else {
        acc += kind == binary_op::sub ? -g : g;
      }
    }
  });
  if (want_a) store_dense(ga, da);
  if (want_b) store_dense(gb, db);
}

}  // namespace detail

template <class T, class AF, class BF, class YF>
void binary_forward(binary_op kind, tensor_view<const T, AF> a, tensor_view<const T, BF> b, tensor_view<T, YF> y) {
  detail::check_element_type<T>();
  validate_binary_forward(a, b, y);
  detail::binary_forward<T>(kind, detail::view5_of(a), detail::view5_of(b), detail::view5_of(y));
}

template <class T, class AF, class BF, class DYF, class DAF, class DBF>
void binary_backward(binary_op kind, tensor_view<const T, AF> a, tensor_view<const T, BF> b,
                     tensor_view<const T, DYF> dy, tensor_view<T, DAF> da, tensor_view<T, DBF> db) {
  detail::check_element_type<T>();
  validate_binary_backward(kind, a, b, dy, da, db);
  detail::binary_backward<T>(kind, detail::view5_of(a), detail::view5_of(b), detail::view5_of(dy), detail::view5_of(da),
                             detail::view5_of(db));
}

}  // namespace memfmt::reference
