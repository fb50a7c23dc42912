// memfmt/backends/validate.hpp - the argument checks every backend runs before any work.
//
// One implementation for the reference, oneDNN and cuDNN backends, so a bad argument gets the same
// memfmt::error (code and message) whichever backend ran. Each validate_* function checks, in a
// fixed order, everything that does not depend on the backend: sizes (through conv_output_extents),
// null data pointers of non-empty views, per-channel parameter pointers, epsilon and momentum.
// Backend limits (element types, alignment, supported strides) are checked by the backend after.
// Messages start with the operation's name ("conv_forward: ...") and name the values.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "../error.hpp"
#include "../tensor/tensor_view.hpp"
#include "conv_params.hpp"

namespace memfmt {
namespace backend_detail {

// A view that holds elements must point somewhere.
template <class T, class F>
void require_data(const char* op, const char* name, const tensor_view<T, F>& v) {
  if (v.numel() > 0 && v.data() == nullptr)
    detail::fail(errc::null_pointer, std::string(op) + ": " + name + " (" + F::name + ", sizes " +
                                         detail::dims_to_string(v.extents()) + ") has a null data pointer");
}

template <class Extents>
void require_extents(const char* op, const char* name, const Extents& got, const Extents& want, const char* why) {
  if (got != want)
    detail::fail(errc::shape_mismatch, std::string(op) + ": " + name + " has sizes " + detail::dims_to_string(got) +
                                           ", expected " + detail::dims_to_string(want) + " " + why);
}

// An optional tensor: data() == nullptr means "not given"; when given it must have the sizes `ref`.
template <class T, class F, class Extents>
bool optional_view(const char* op, const char* name, const tensor_view<T, F>& v, const Extents& ref) {
  if (v.data() == nullptr) return false;
  require_extents(op, name, v.extents(), ref, "(the sizes of x)");
  return true;
}

// Per-channel arrays (C values each): needed unless there are no channels.
inline void require_channel_params(const char* op, std::int64_t channels,
                                   std::initializer_list<std::pair<const char*, const void*>> ps) {
  if (channels == 0) return;
  for (const auto& [name, ptr] : ps)
    if (ptr == nullptr)
      detail::fail(errc::null_pointer, std::string(op) + ": " + name + " is null but C = " + std::to_string(channels) +
                                           " channel values are needed");
}

inline void require_bn_params(const char* op, const batch_norm_params& p) {
  if (!(p.epsilon > 0.0) || !std::isfinite(p.epsilon))
    detail::fail(errc::invalid_argument,
                 std::string(op) + ": epsilon = " + std::to_string(p.epsilon) + " must be finite and > 0");
  if (!(p.momentum >= 0.0 && p.momentum <= 1.0))
    detail::fail(errc::invalid_argument,
                 std::string(op) + ": momentum = " + std::to_string(p.momentum) + " must be in [0, 1]");
}

template <class XF, class WF, class YF>
constexpr void static_check_conv_ranks() {
  static_assert(XF::rank == WF::rank && XF::rank == YF::rank,
                "conv: input, weight and output must have the same rank (all 2-D or all 3-D formats)");
}

}  // namespace backend_detail

// ---------------------------------------------------------------- convolution
// Each returns the output extents (y, or dy for the backward passes) from conv_output_extents.
// bias / dbias are K raw values or null: there is nothing about them to check.

template <class XT, class XF, class WT, class WF, class YT, class YF>
typename layout<YF>::extents_type validate_conv_forward(const tensor_view<XT, XF>& x, const tensor_view<WT, WF>& w,
                                                        const tensor_view<YT, YF>& y, const conv_params& p) {
  backend_detail::static_check_conv_ranks<XF, WF, YF>();
  constexpr const char* op = "conv_forward";
  const auto ye = conv_output_extents(x.extents(), w.extents(), p);
  backend_detail::require_extents(op, "output y", y.extents(), ye, "(from input x and weight w)");
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "weight w", w);
  backend_detail::require_data(op, "output y", y);
  return ye;
}

template <class YT, class YF, class WT, class WF, class XT, class XF>
typename layout<YF>::extents_type validate_conv_backward_data(const tensor_view<YT, YF>& dy,
                                                              const tensor_view<WT, WF>& w,
                                                              const tensor_view<XT, XF>& dx, const conv_params& p) {
  backend_detail::static_check_conv_ranks<XF, WF, YF>();
  constexpr const char* op = "conv_backward_data";
  const auto ye = conv_output_extents(dx.extents(), w.extents(), p);
  backend_detail::require_extents(op, "output gradient dy", dy.extents(), ye,
                                  "(from input gradient dx and weight w)");
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "weight w", w);
  backend_detail::require_data(op, "input gradient dx", dx);
  return ye;
}

template <class XT, class XF, class YT, class YF, class WT, class WF>
typename layout<YF>::extents_type validate_conv_backward_weights(const tensor_view<XT, XF>& x,
                                                                 const tensor_view<YT, YF>& dy,
                                                                 const tensor_view<WT, WF>& dw, const conv_params& p) {
  backend_detail::static_check_conv_ranks<XF, WF, YF>();
  constexpr const char* op = "conv_backward_weights";
  const auto ye = conv_output_extents(x.extents(), dw.extents(), p);
  backend_detail::require_extents(op, "output gradient dy", dy.extents(), ye,
                                  "(from input x and weight gradient dw)");
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "weight gradient dw", dw);
  return ye;
}

// ---------------------------------------------------------------- batch norm
// Parameter and statistics arrays hold C values each (any element type: only nullness is checked).
// Optional views (residual, y, dresidual) are "not given" when their data pointer is null.

template <class XT, class YT, class RT, class F>
void validate_batch_norm_forward_training(const tensor_view<XT, F>& x, const tensor_view<YT, F>& y,
                                          const void* gamma, const void* beta, const void* running_mean,
                                          const void* running_var, const void* saved_mean, const void* saved_invstd,
                                          const batch_norm_params& p, const tensor_view<RT, F>& residual) {
  constexpr const char* op = "batch_norm_forward_training";
  backend_detail::require_bn_params(op, p);
  backend_detail::require_extents(op, "output y", y.extents(), x.extents(), "(the sizes of x)");
  backend_detail::optional_view(op, "residual", residual, x.extents());
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output y", y);
  const std::int64_t channels = x.channels();
  const std::int64_t m = channels > 0 ? x.numel() / channels : 0;  // values per channel
  if (channels > 0 && m < 2)
    detail::fail(errc::invalid_argument, std::string(op) + ": input sizes " + detail::dims_to_string(x.extents()) +
                                             " give " + std::to_string(m) +
                                             " value(s) per channel; training needs at least 2");
  backend_detail::require_channel_params(op, channels, {{"gamma", gamma},
                                                        {"beta", beta},
                                                        {"running_mean", running_mean},
                                                        {"running_var", running_var},
                                                        {"saved_mean", saved_mean},
                                                        {"saved_invstd", saved_invstd}});
}

template <class XT, class YT, class RT, class F>
void validate_batch_norm_forward_inference(const tensor_view<XT, F>& x, const tensor_view<YT, F>& y,
                                           const void* gamma, const void* beta, const void* running_mean,
                                           const void* running_var, const batch_norm_params& p,
                                           const tensor_view<RT, F>& residual) {
  constexpr const char* op = "batch_norm_forward_inference";
  backend_detail::require_bn_params(op, p);
  backend_detail::require_extents(op, "output y", y.extents(), x.extents(), "(the sizes of x)");
  backend_detail::optional_view(op, "residual", residual, x.extents());
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output y", y);
  backend_detail::require_channel_params(
      op, x.channels(),
      {{"gamma", gamma}, {"beta", beta}, {"running_mean", running_mean}, {"running_var", running_var}});
}

// With p.fuse_relu the forward output y is required (the gradient passes where y > 0).
template <class XT, class DYT, class DXT, class YT, class DRT, class F>
void validate_batch_norm_backward(const tensor_view<XT, F>& x, const tensor_view<DYT, F>& dy,
                                  const tensor_view<DXT, F>& dx, const void* gamma, const void* saved_mean,
                                  const void* saved_invstd, const void* dgamma, const void* dbeta,
                                  const batch_norm_params& p, const tensor_view<YT, F>& y,
                                  const tensor_view<DRT, F>& dresidual) {
  constexpr const char* op = "batch_norm_backward";
  backend_detail::require_bn_params(op, p);
  backend_detail::require_extents(op, "output gradient dy", dy.extents(), x.extents(), "(the sizes of x)");
  backend_detail::require_extents(op, "input gradient dx", dx.extents(), x.extents(), "(the sizes of x)");
  const bool has_y = backend_detail::optional_view(op, "forward output y", y, x.extents());
  backend_detail::optional_view(op, "residual gradient dresidual", dresidual, x.extents());
  if (p.fuse_relu && !has_y && x.numel() > 0)
    detail::fail(errc::null_pointer,
                 std::string(op) + ": fuse_relu needs the forward output y (its data pointer is null)");
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "input gradient dx", dx);
  backend_detail::require_channel_params(op, x.channels(),
                                         {{"gamma", gamma},
                                          {"saved_mean", saved_mean},
                                          {"saved_invstd", saved_invstd},
                                          {"dgamma", dgamma},
                                          {"dbeta", dbeta}});
}

}  // namespace memfmt
