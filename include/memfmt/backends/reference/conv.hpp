// memfmt/backends/reference/conv.hpp - reference convolution (forward, backward data, backward weights).
//
// Cross-correlation as in PyTorch's conv2d/conv3d: zero padding (per side), stride, dilation and
// groups. Written for clarity, not speed: every output element is one sum, gathered in double and
// rounded once to T, so the result is the exact answer rounded (up to double's own rounding).
// Each operation validates everything (validate.hpp, shared by every backend) before writing
// anything; on error the outputs are untouched.
//
// Activations: x, y (and dx, dy) in {nchw, nhwc} (2-D) or {ncdhw, ndhwc} (3-D), any combination of
// input and output format. Weights: the same tags over logical K, C/groups, kernel... (an nchw view
// is KCRS, an nhwc view is KRSC). Inputs and outputs must not overlap.
// Template arguments are deduced when inputs are passed as const views (x.const_view()); a mutable
// view does not deduce (no conversions during deduction), so then name them all:
// conv_forward<float, nhwc, nhwc, nhwc>(x, w, bias, y, p).
#pragma once

#include <array>
#include <cstdint>

#include "../../tensor/tensor_view.hpp"
#include "../../layers/conv_params.hpp"
#include "../validate.hpp"
#include "numeric.hpp"
#include "view_access.hpp"

namespace memfmt::reference {
namespace detail {

// The convolution's sizes as 3 spatial dimensions (a 2-D convolution has D = 1, kernel 1, stride 1).
struct conv_geometry {
  std::int64_t n, c, k, groups, c_per_group, k_per_group;
  std::int64_t in[3], out[3], ker[3], stride[3], pad[3], dil[3];
};

template <int Rank>
conv_geometry make_geometry(const std::array<std::int64_t, Rank>& x, const std::array<std::int64_t, Rank>& w,
                            const std::array<std::int64_t, Rank>& y, const conv_params& p) {
  constexpr int sr = Rank - 2;  // spatial rank
  constexpr int skip = 3 - sr;  // leading unit spatial dims
  conv_geometry g{};
  g.n = x[0];
  g.c = x[1];
  g.k = w[0];
  g.groups = p.groups;
  g.c_per_group = x[1] / p.groups;
  g.k_per_group = w[0] / p.groups;
  for (int i = 0; i < 3; ++i) {
    const int j = i - skip;  // index into the caller's spatial dims, < 0 for the padding dims
    g.in[i] = j < 0 ? 1 : x[2 + j];
    g.out[i] = j < 0 ? 1 : y[2 + j];
    g.ker[i] = j < 0 ? 1 : w[2 + j];
    g.stride[i] = j < 0 ? 1 : p.stride[j];
    g.pad[i] = j < 0 ? 0 : p.padding[j];
    g.dil[i] = j < 0 ? 1 : p.dilation[j];
  }
  return g;
}

// The loops of the operations below, on views of any format (their strides).
template <class T>
void conv_forward(const conv_geometry& g, const view5<const T>& x, const view5<const T>& w, const T* bias,
                  const view5<T>& y) {
  const auto xs = strides5(x), ws = strides5(w), ys = strides5(y);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t k = 0; k < g.k; ++k) {
      const std::int64_t c0 = (k / g.k_per_group) * g.c_per_group;
      for (std::int64_t od = 0; od < g.out[0]; ++od)
        for (std::int64_t oh = 0; oh < g.out[1]; ++oh)
          for (std::int64_t ow = 0; ow < g.out[2]; ++ow) {
            double acc = bias ? to_double(bias[k]) : 0.0;
            for (std::int64_t cc = 0; cc < g.c_per_group; ++cc)
              for (std::int64_t kd = 0; kd < g.ker[0]; ++kd) {
                const std::int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
                if (id < 0 || id >= g.in[0]) continue;
                for (std::int64_t kh = 0; kh < g.ker[1]; ++kh) {
                  const std::int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
                  if (ih < 0 || ih >= g.in[1]) continue;
                  for (std::int64_t kw = 0; kw < g.ker[2]; ++kw) {
                    const std::int64_t iw = ow * g.stride[2] - g.pad[2] + kw * g.dil[2];
                    if (iw < 0 || iw >= g.in[2]) continue;
                    acc = mul_add(to_double(x.data()[offset5(xs, n, c0 + cc, id, ih, iw)]),
                                  to_double(w.data()[offset5(ws, k, cc, kd, kh, kw)]), acc);
                  }
                }
              }
            y.data()[offset5(ys, n, k, od, oh, ow)] = from_double<T>(acc);
          }
    }
}

template <class T>
void conv_backward_data(const conv_geometry& g, const view5<const T>& dy, const view5<const T>& w, const view5<T>& dx) {
  const auto ys = strides5(dy), ws = strides5(w), xs = strides5(dx);
  // Output position o sees input position i = o * stride - pad + r * dil; gather, for each i,
  // every (o, r) pair that reaches it.
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t c = 0; c < g.c; ++c) {
      const std::int64_t grp = c / g.c_per_group, cc = c % g.c_per_group;
      for (std::int64_t id = 0; id < g.in[0]; ++id)
        for (std::int64_t ih = 0; ih < g.in[1]; ++ih)
          for (std::int64_t iw = 0; iw < g.in[2]; ++iw) {
            double acc = 0.0;
            for (std::int64_t k = grp * g.k_per_group; k < (grp + 1) * g.k_per_group; ++k)
              for (std::int64_t kd = 0; kd < g.ker[0]; ++kd) {
                const std::int64_t td = id + g.pad[0] - kd * g.dil[0];
                if (td < 0 || td % g.stride[0] != 0 || td / g.stride[0] >= g.out[0]) continue;
                for (std::int64_t kh = 0; kh < g.ker[1]; ++kh) {
                  const std::int64_t th = ih + g.pad[1] - kh * g.dil[1];
                  if (th < 0 || th % g.stride[1] != 0 || th / g.stride[1] >= g.out[1]) continue;
                  for (std::int64_t kw = 0; kw < g.ker[2]; ++kw) {
                    const std::int64_t tw = iw + g.pad[2] - kw * g.dil[2];
                    if (tw < 0 || tw % g.stride[2] != 0 || tw / g.stride[2] >= g.out[2]) continue;
                    acc = mul_add(
                        to_double(dy.data()[offset5(ys, n, k, td / g.stride[0], th / g.stride[1], tw / g.stride[2])]),
                        to_double(w.data()[offset5(ws, k, cc, kd, kh, kw)]), acc);
                  }
                }
              }
            dx.data()[offset5(xs, n, c, id, ih, iw)] = from_double<T>(acc);
          }
    }
}

template <class T>
void conv_backward_weights(const conv_geometry& g, const view5<const T>& x, const view5<const T>& dy,
                           const view5<T>& dw, T* dbias) {
  const auto xs = strides5(x), ys = strides5(dy), ws = strides5(dw);
  for (std::int64_t k = 0; k < g.k; ++k) {
    const std::int64_t c0 = (k / g.k_per_group) * g.c_per_group;
    for (std::int64_t cc = 0; cc < g.c_per_group; ++cc)
      for (std::int64_t kd = 0; kd < g.ker[0]; ++kd)
        for (std::int64_t kh = 0; kh < g.ker[1]; ++kh)
          for (std::int64_t kw = 0; kw < g.ker[2]; ++kw) {
            double acc = 0.0;
            for (std::int64_t n = 0; n < g.n; ++n)
              for (std::int64_t od = 0; od < g.out[0]; ++od) {
                const std::int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
                if (id < 0 || id >= g.in[0]) continue;
                for (std::int64_t oh = 0; oh < g.out[1]; ++oh) {
                  const std::int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
                  if (ih < 0 || ih >= g.in[1]) continue;
                  for (std::int64_t ow = 0; ow < g.out[2]; ++ow) {
                    const std::int64_t iw = ow * g.stride[2] - g.pad[2] + kw * g.dil[2];
                    if (iw < 0 || iw >= g.in[2]) continue;
                    acc = mul_add(to_double(dy.data()[offset5(ys, n, k, od, oh, ow)]),
                                  to_double(x.data()[offset5(xs, n, c0 + cc, id, ih, iw)]), acc);
                  }
                }
              }
            dw.data()[offset5(ws, k, cc, kd, kh, kw)] = from_double<T>(acc);
          }
    if (dbias) {
      double acc = 0.0;
      for (std::int64_t n = 0; n < g.n; ++n)
        for (std::int64_t od = 0; od < g.out[0]; ++od)
          for (std::int64_t oh = 0; oh < g.out[1]; ++oh)
            for (std::int64_t ow = 0; ow < g.out[2]; ++ow) acc += to_double(dy.data()[offset5(ys, n, k, od, oh, ow)]);
      dbias[k] = from_double<T>(acc);
    }
  }
}

}  // namespace detail

// y = conv(x, w) + bias. bias: K values or nullptr.
template <class T, class XF, class WF, class YF>
void conv_forward(tensor_view<const T, XF> x, tensor_view<const T, WF> w, const T* bias, tensor_view<T, YF> y,
                  const conv_params& p) {
  detail::check_element_type<T>();
  static_assert(XF::rank == WF::rank && XF::rank == YF::rank,
                "conv_forward: x, w and y must have the same rank (all 2-D or all 3-D formats)");
  const auto ye = validate_conv_forward(x, w, y, p);
  const auto g = detail::make_geometry<XF::rank>(x.extents(), w.extents(), ye, p);
  detail::conv_forward<T>(g, detail::view5_of(x), detail::view5_of(w), bias, detail::view5_of(y));
}

// dx = the gradient of conv_forward w.r.t. its input: the adjoint of x -> conv(x, w).
// dx's extents pick the input size (several input sizes give the same output size when stride > 1).
template <class T, class YF, class WF, class XF>
void conv_backward_data(tensor_view<const T, YF> dy, tensor_view<const T, WF> w, tensor_view<T, XF> dx,
                        const conv_params& p) {
  detail::check_element_type<T>();
  static_assert(XF::rank == WF::rank && XF::rank == YF::rank,
                "conv_backward_data: dy, w and dx must have the same rank (all 2-D or all 3-D formats)");
  const auto ye = validate_conv_backward_data(dy, w, dx, p);
  const auto g = detail::make_geometry<XF::rank>(dx.extents(), w.extents(), ye, p);
  detail::conv_backward_data<T>(g, detail::view5_of(dy), detail::view5_of(w), detail::view5_of(dx));
}

// dw = the gradient of conv_forward w.r.t. its weight; dbias (K values, or nullptr) = sum of dy
// over N and the output positions.
template <class T, class XF, class YF, class WF>
void conv_backward_weights(tensor_view<const T, XF> x, tensor_view<const T, YF> dy, tensor_view<T, WF> dw, T* dbias,
                           const conv_params& p) {
  detail::check_element_type<T>();
  static_assert(XF::rank == WF::rank && XF::rank == YF::rank,
                "conv_backward_weights: x, dy and dw must have the same rank (all 2-D or all 3-D formats)");
  const auto ye = validate_conv_backward_weights(x, dy, dw, p);
  const auto g = detail::make_geometry<XF::rank>(x.extents(), dw.extents(), ye, p);
  detail::conv_backward_weights<T>(g, detail::view5_of(x), detail::view5_of(dy), detail::view5_of(dw), dbias);
}

}  // namespace memfmt::reference
