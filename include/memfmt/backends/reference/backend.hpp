// memfmt/backends/reference/backend.hpp - the reference operations as a backend object.
//
// Every backend (reference, oneDNN, cuDNN) exposes the same methods with the same arguments, so
// tests and user code can be written once against "a backend" and run on each. The reference
// backend is stateless; its methods forward to the free functions of the headers beside this one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../../tensor/tensor_view.hpp"
#include "../../layers/conv_params.hpp"
#include "../../layers/layer_params.hpp"
#include "../../layers/op_query.hpp"
#include "activation.hpp"
#include "batch_norm.hpp"
#include "binary.hpp"
#include "concat.hpp"
#include "conv.hpp"
#include "group_norm.hpp"
#include "layer_norm.hpp"
#include "linear.hpp"
#include "lrn.hpp"
#include "numeric.hpp"
#include "pad.hpp"
#include "pooling.hpp"
#include "rearrange.hpp"
#include "reduce.hpp"
#include "softmax.hpp"
#include "upsample.hpp"

namespace memfmt::reference {

struct backend {
  static constexpr const char* name = "reference";

  // Every operation below, in every format of rank 4 or 5, in float32, float64, float16 and bfloat16.
  op_support support(const op_query& q) const {
    const bool typed =
        q.type == dtype::float32 || q.type == dtype::float64 || q.type == dtype::float16 || q.type == dtype::bfloat16;
    if (!typed)
      return op_support::no(errc::unsupported_dtype, std::string(to_string(q.op)) +
                                                         ": the reference backend computes in "
                                                         "float32, float64, float16 and bfloat16, not " +
                                                         std::string(memfmt::to_string(q.type)));
    if (q.rank != 4 && q.rank != 5)
      return op_support::no(errc::unsupported, std::string(to_string(q.op)) + ": activations of rank " +
                                                   std::to_string(q.rank) + " (the backends take rank 4 or 5)");
    return op_support::yes();
  }

  template <class T, class XF, class WF, class YF>
  void conv_forward(tensor_view<const T, XF> x, tensor_view<const T, WF> w, const T* bias, tensor_view<T, YF> y,
                    const conv_params& p) const {
    reference::conv_forward<T, XF, WF, YF>(x, w, bias, y, p);
  }

  template <class T, class YF, class WF, class XF>
  void conv_backward_data(tensor_view<const T, YF> dy, tensor_view<const T, WF> w, tensor_view<T, XF> dx,
                          const conv_params& p) const {
    reference::conv_backward_data<T, YF, WF, XF>(dy, w, dx, p);
  }

  template <class T, class XF, class YF, class WF>
  void conv_backward_weights(tensor_view<const T, XF> x, tensor_view<const T, YF> dy, tensor_view<T, WF> dw, T* dbias,
                             const conv_params& p) const {
    reference::conv_backward_weights<T, XF, YF, WF>(x, dy, dw, dbias, p);
  }

  template <class T, class F>
  void batch_norm_forward_training(tensor_view<const T, F> x, tensor_view<T, F> y, const param_t<T>* gamma,
                                   const param_t<T>* beta, param_t<T>* running_mean, param_t<T>* running_var,
                                   param_t<T>* saved_mean, param_t<T>* saved_invstd, const batch_norm_params& p,
                                   tensor_view<const T, F> residual = {}) const {
    reference::batch_norm_forward_training<T, F>(x, y, gamma, beta, running_mean, running_var, saved_mean, saved_invstd,
                                                 p, residual);
  }

  template <class T, class F>
  void batch_norm_forward_inference(tensor_view<const T, F> x, tensor_view<T, F> y, const param_t<T>* gamma,
                                    const param_t<T>* beta, const param_t<T>* running_mean,
                                    const param_t<T>* running_var, const batch_norm_params& p,
                                    tensor_view<const T, F> residual = {}) const {
    reference::batch_norm_forward_inference<T, F>(x, y, gamma, beta, running_mean, running_var, p, residual);
  }

  template <class T, class F>
  void batch_norm_backward(tensor_view<const T, F> x, tensor_view<const T, F> dy, tensor_view<T, F> dx,
                           const param_t<T>* gamma, const param_t<T>* saved_mean, const param_t<T>* saved_invstd,
                           param_t<T>* dgamma, param_t<T>* dbeta, const batch_norm_params& p,
                           tensor_view<const T, F> y = {}, tensor_view<T, F> dresidual = {}) const {
    reference::batch_norm_backward<T, F>(x, dy, dx, gamma, saved_mean, saved_invstd, dgamma, dbeta, p, y, dresidual);
  }
  // ---- layers other than conv and batch norm (activation.hpp ... concat.hpp)

  template <class T, class XF, class YF>
  void activation_forward(const activation_params& f, tensor_view<const T, XF> x, tensor_view<T, YF> y) const {
    reference::activation_forward<T, XF, YF>(f, x, y);
  }

  template <class T, class XF, class DYF, class DXF>
  void activation_backward(const activation_params& f, tensor_view<const T, XF> x, tensor_view<const T, DYF> dy,
                           tensor_view<T, DXF> dx) const {
    reference::activation_backward<T, XF, DYF, DXF>(f, x, dy, dx);
  }

  template <class T, class AF, class BF, class YF>
  void binary_forward(binary_op kind, tensor_view<const T, AF> a, tensor_view<const T, BF> b,
                      tensor_view<T, YF> y) const {
    reference::binary_forward<T, AF, BF, YF>(kind, a, b, y);
  }

  template <class T, class AF, class BF, class DYF, class DAF, class DBF>
  void binary_backward(binary_op kind, tensor_view<const T, AF> a, tensor_view<const T, BF> b,
                       tensor_view<const T, DYF> dy, tensor_view<T, DAF> da, tensor_view<T, DBF> db) const {
    reference::binary_backward<T, AF, BF, DYF, DAF, DBF>(kind, a, b, dy, da, db);
  }

  template <class T, class XF, class YF>
  void pool_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const pool_params& p) const {
    reference::pool_forward<T, XF, YF>(x, y, p);
  }

  template <class T, class XF, class DYF, class DXF>
  void pool_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                     const pool_params& p) const {
    reference::pool_backward<T, XF, DYF, DXF>(x, dy, dx, p);
  }

  template <class T, class XF, class YF>
  void global_average_pool_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y) const {
    reference::global_average_pool_forward<T, XF, YF>(x, y);
  }

  template <class T, class DYF, class DXF>
  void global_average_pool_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx) const {
    reference::global_average_pool_backward<T, DYF, DXF>(dy, dx);
  }

  template <class T, class XF, class YF>
  void reduce_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const reduce_params& p) const {
    reference::reduce_forward<T, XF, YF>(x, y, p);
  }

  template <class T, class XF, class YF, class DYF, class DXF>
  void reduce_backward(tensor_view<const T, XF> x, tensor_view<const T, YF> y, tensor_view<const T, DYF> dy,
                       tensor_view<T, DXF> dx, const reduce_params& p) const {
    reference::reduce_backward<T, XF, YF, DYF, DXF>(x, y, dy, dx, p);
  }

  template <class T, class XF, class YF>
  void upsample_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const upsample_params& p) const {
    reference::upsample_forward<T, XF, YF>(x, y, p);
  }

  template <class T, class DYF, class DXF>
  void upsample_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx, const upsample_params& p) const {
    reference::upsample_backward<T, DYF, DXF>(dy, dx, p);
  }

  template <class T, class XF, class YF>
  void pad_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const pad_params& p) const {
    reference::pad_forward<T, XF, YF>(x, y, p);
  }

  template <class T, class DYF, class DXF>
  void pad_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx, const pad_params& p) const {
    reference::pad_backward<T, DYF, DXF>(dy, dx, p);
  }

  template <class T, class XF, class YF>
  void group_norm_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const param_t<T>* gamma,
                          const param_t<T>* beta, param_t<T>* saved_mean, param_t<T>* saved_invstd,
                          const group_norm_params& p) const {
    reference::group_norm_forward<T, XF, YF>(x, y, gamma, beta, saved_mean, saved_invstd, p);
  }

  template <class T, class XF, class DYF, class DXF>
  void group_norm_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                           const param_t<T>* gamma, const param_t<T>* saved_mean, const param_t<T>* saved_invstd,
                           param_t<T>* dgamma, param_t<T>* dbeta, const group_norm_params& p) const {
    reference::group_norm_backward<T, XF, DYF, DXF>(x, dy, dx, gamma, saved_mean, saved_invstd, dgamma, dbeta, p);
  }

  template <class T, class XF, class YF>
  void layer_norm_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const param_t<T>* gamma,
                          const param_t<T>* beta, param_t<T>* saved_mean, param_t<T>* saved_invstd,
                          const layer_norm_params& p) const {
    reference::layer_norm_forward<T, XF, YF>(x, y, gamma, beta, saved_mean, saved_invstd, p);
  }

  template <class T, class XF, class DYF, class DXF>
  void layer_norm_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                           const param_t<T>* gamma, const param_t<T>* saved_mean, const param_t<T>* saved_invstd,
                           param_t<T>* dgamma, param_t<T>* dbeta, const layer_norm_params& p) const {
    reference::layer_norm_backward<T, XF, DYF, DXF>(x, dy, dx, gamma, saved_mean, saved_invstd, dgamma, dbeta, p);
  }

  template <class T, class XF, class YF>
  void lrn_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const lrn_params& p) const {
    reference::lrn_forward<T, XF, YF>(x, y, p);
  }

  template <class T, class XF, class DYF, class DXF>
  void lrn_backward(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                    const lrn_params& p) const {
    reference::lrn_backward<T, XF, DYF, DXF>(x, dy, dx, p);
  }

  template <class T, class XF, class YF>
  void softmax_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const softmax_params& p) const {
    reference::softmax_forward<T, XF, YF>(x, y, p);
  }

  template <class T, class YF, class DYF, class DXF>
  void softmax_backward(tensor_view<const T, YF> y, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx,
                        const softmax_params& p) const {
    reference::softmax_backward<T, YF, DYF, DXF>(y, dy, dx, p);
  }

  template <class T, class XF, class YF>
  void linear_forward(tensor_view<const T, XF> x, const T* w, const T* bias, tensor_view<T, YF> y) const {
    reference::linear_forward<T, XF, YF>(x, w, bias, y);
  }

  template <class T, class DYF, class DXF>
  void linear_backward_data(tensor_view<const T, DYF> dy, const T* w, tensor_view<T, DXF> dx) const {
    reference::linear_backward_data<T, DYF, DXF>(dy, w, dx);
  }

  template <class T, class XF, class DYF>
  void linear_backward_weights(tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, T* dw, T* dbias) const {
    reference::linear_backward_weights<T, XF, DYF>(x, dy, dw, dbias);
  }

  template <class T, class XF, class YF>
  void concat_forward(const std::vector<tensor_view<const T, XF>>& xs, tensor_view<T, YF> y,
                      const concat_params& p = {}) const {
    reference::concat_forward<T, XF, YF>(xs, y, p);
  }

  template <class T, class DYF, class DXF>
  void concat_backward(tensor_view<const T, DYF> dy, const std::vector<tensor_view<T, DXF>>& dxs,
                       const concat_params& p = {}) const {
    reference::concat_backward<T, DYF, DXF>(dy, dxs, p);
  }

  template <class T, class XF, class YF>
  void rearrange_forward(tensor_view<const T, XF> x, const rearrange_params& p, tensor_view<T, YF> y) const {
    reference::rearrange_forward<T, XF, YF>(x, p, y);
  }

  template <class T, class DYF, class DXF>
  void rearrange_backward(tensor_view<const T, DYF> dy, const rearrange_params& p, tensor_view<T, DXF> dx) const {
    reference::rearrange_backward<T, DYF, DXF>(dy, p, dx);
  }

  template <class T, class XF, class YF>
  void slice_forward(tensor_view<const T, XF> x, const slice_params& p, tensor_view<T, YF> y) const {
    reference::slice_forward<T, XF, YF>(x, p, y);
  }

  template <class T, class DYF, class DXF>
  void slice_backward(tensor_view<const T, DYF> dy, const slice_params& p, tensor_view<T, DXF> dx) const {
    reference::slice_backward<T, DYF, DXF>(dy, p, dx);
  }
};

}  // namespace memfmt::reference
