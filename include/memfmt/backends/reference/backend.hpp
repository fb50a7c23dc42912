// memfmt/backends/reference/backend.hpp - the reference operations as a backend object.
//
// Every backend (reference, oneDNN, cuDNN) exposes the same methods with the same arguments, so
// tests and user code can be written once against "a backend" and run on each. The reference
// backend is stateless; its methods forward to the free functions in conv.hpp and batch_norm.hpp.
#pragma once

#include "../../tensor/tensor_view.hpp"
#include "../conv_params.hpp"
#include "batch_norm.hpp"
#include "conv.hpp"
#include "numeric.hpp"

namespace memfmt::reference {

struct backend {
  static constexpr const char* name = "reference";

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
  void conv_backward_weights(tensor_view<const T, XF> x, tensor_view<const T, YF> dy, tensor_view<T, WF> dw,
                             T* dbias, const conv_params& p) const {
    reference::conv_backward_weights<T, XF, YF, WF>(x, dy, dw, dbias, p);
  }

  template <class T, class F>
  void batch_norm_forward_training(tensor_view<const T, F> x, tensor_view<T, F> y, const param_t<T>* gamma,
                                   const param_t<T>* beta, param_t<T>* running_mean, param_t<T>* running_var,
                                   param_t<T>* saved_mean, param_t<T>* saved_invstd, const batch_norm_params& p,
                                   tensor_view<const T, F> residual = {}) const {
    reference::batch_norm_forward_training<T, F>(x, y, gamma, beta, running_mean, running_var, saved_mean,
                                                 saved_invstd, p, residual);
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
    reference::batch_norm_backward<T, F>(x, dy, dx, gamma, saved_mean, saved_invstd, dgamma, dbeta, p, y,
                                         dresidual);
  }
};

}  // namespace memfmt::reference
