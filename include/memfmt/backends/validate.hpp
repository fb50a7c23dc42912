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
#include <vector>

#include "../detail/checked.hpp"
#include "../error.hpp"
#include "../tensor/tensor_view.hpp"
#include "../layers/conv_params.hpp"
#include "../layers/layer_params.hpp"

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

inline void require_epsilon(const char* op, double epsilon) {
  if (!(epsilon > 0.0) || !std::isfinite(epsilon))
    detail::fail(errc::invalid_argument,
                 std::string(op) + ": epsilon = " + std::to_string(epsilon) + " must be finite and > 0");
}

inline void require_bn_params(const char* op, const batch_norm_params& p) {
  require_epsilon(op, p.epsilon);
  if (!(p.momentum >= 0.0 && p.momentum <= 1.0))
    detail::fail(errc::invalid_argument,
                 std::string(op) + ": momentum = " + std::to_string(p.momentum) + " must be in [0, 1]");
}

// Tensors of one layer may differ in format but not in rank.
template <class AF, class BF>
constexpr void static_check_same_rank() {
  static_assert(AF::rank == BF::rank, "layers: input and output must have the same rank (all 2-D or all 3-D formats)");
}

// Two tensors of the same extents (an elementwise op's input and output), both with data.
template <class AT, class AF, class BT, class BF>
void require_same_sizes(const char* op, const char* a_name, const tensor_view<AT, AF>& a, const char* b_name,
                        const tensor_view<BT, BF>& b) {
  static_check_same_rank<AF, BF>();
  if (a.extents() != b.extents())
    detail::fail(errc::shape_mismatch, std::string(op) + ": " + b_name + " has sizes " +
                                           detail::dims_to_string(b.extents()) + ", expected " +
                                           detail::dims_to_string(a.extents()) + " (the sizes of " + a_name + ")");
}

// Group norm: groups divide C, and the saved statistics (N * groups values each) exist.
template <class T, class F>
void require_groups(const char* op, const tensor_view<T, F>& x, const group_norm_params& p) {
  if (p.groups < 1 || x.channels() % p.groups != 0)
    detail::fail(errc::invalid_argument, std::string(op) + ": groups = " + std::to_string(p.groups) +
                                             " must be >= 1 and divide C = " + std::to_string(x.channels()) +
                                             " (input sizes " + detail::dims_to_string(x.extents()) + ")");
}

template <class T, class F>
void require_group_stats(const char* op, const tensor_view<T, F>& x, const void* saved_mean, const void* saved_invstd,
                         const group_norm_params& p) {
  if (x.numel() > 0 && (saved_mean == nullptr || saved_invstd == nullptr))
    detail::fail(errc::null_pointer, std::string(op) + ": saved_mean or saved_invstd is null but N * groups = " +
                                         std::to_string(x.batch() * p.groups) + " values are needed");
}

// Layer norm: the saved statistics (one per sample and position) exist.
template <class T, class F>
void require_position_stats(const char* op, const tensor_view<T, F>& x, const void* saved_mean,
                            const void* saved_invstd) {
  if (x.numel() > 0 && (saved_mean == nullptr || saved_invstd == nullptr))
    detail::fail(errc::null_pointer, std::string(op) +
                                         ": saved_mean or saved_invstd is null but one value per "
                                         "sample and position (" +
                                         std::to_string(x.numel() / x.channels()) + ") is needed");
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
  backend_detail::require_extents(op, "output gradient dy", dy.extents(), ye, "(from input gradient dx and weight w)");
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
  backend_detail::require_extents(op, "output gradient dy", dy.extents(), ye, "(from input x and weight gradient dw)");
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "weight gradient dw", dw);
  return ye;
}

// ---------------------------------------------------------------- batch norm
// Parameter and statistics arrays hold C values each (any element type: only nullness is checked).
// Optional views (residual, y, dresidual) are "not given" when their data pointer is null.

template <class XT, class YT, class RT, class F>
void validate_batch_norm_forward_training(const tensor_view<XT, F>& x, const tensor_view<YT, F>& y, const void* gamma,
                                          const void* beta, const void* running_mean, const void* running_var,
                                          const void* saved_mean, const void* saved_invstd, const batch_norm_params& p,
                                          const tensor_view<RT, F>& residual) {
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
  backend_detail::require_channel_params(op, channels,
                                         {{"gamma", gamma},
                                          {"beta", beta},
                                          {"running_mean", running_mean},
                                          {"running_var", running_var},
                                          {"saved_mean", saved_mean},
                                          {"saved_invstd", saved_invstd}});
}

template <class XT, class YT, class RT, class F>
void validate_batch_norm_forward_inference(const tensor_view<XT, F>& x, const tensor_view<YT, F>& y, const void* gamma,
                                           const void* beta, const void* running_mean, const void* running_var,
                                           const batch_norm_params& p, const tensor_view<RT, F>& residual) {
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

// ---------------------------------------------------------------- layers other than conv and batch norm
// Inputs and outputs of one call may have different formats of the same rank. Optional views are
// "not given" when their data pointer is null.

// Elementwise activation: y (dx) has the sizes of x.
template <class XT, class XF, class YT, class YF>
void validate_activation_forward(const activation_params& f, const tensor_view<XT, XF>& x,
                                 const tensor_view<YT, YF>& y) {
  constexpr const char* op = "activation_forward";
  validate_activation(f, op);
  backend_detail::require_same_sizes(op, "input x", x, "output y", y);
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output y", y);
}

template <class XT, class XF, class DYT, class DYF, class DXT, class DXF>
void validate_activation_backward(const activation_params& f, const tensor_view<XT, XF>& x,
                                  const tensor_view<DYT, DYF>& dy, const tensor_view<DXT, DXF>& dx) {
  constexpr const char* op = "activation_backward";
  validate_activation(f, op);
  backend_detail::require_same_sizes(op, "input x", x, "output gradient dy", dy);
  backend_detail::require_same_sizes(op, "input x", x, "input gradient dx", dx);
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "input gradient dx", dx);
}

// Binary op with broadcasting: y has broadcast_extents(a, b).
template <class AT, class AF, class BT, class BF, class YT, class YF>
typename layout<YF>::extents_type validate_binary_forward(const tensor_view<AT, AF>& a, const tensor_view<BT, BF>& b,
                                                          const tensor_view<YT, YF>& y) {
  backend_detail::static_check_same_rank<AF, BF>();
  backend_detail::static_check_same_rank<AF, YF>();
  constexpr const char* op = "binary_forward";
  const auto ye = broadcast_extents(a.extents(), b.extents());
  backend_detail::require_extents(op, "output y", y.extents(), ye, "(a and b broadcast)");
  backend_detail::require_data(op, "operand a", a);
  backend_detail::require_data(op, "operand b", b);
  backend_detail::require_data(op, "output y", y);
  return ye;
}

// da and db are optional (a gradient nobody needs); a's data is needed for db of mul and div,
// b's for da of mul and both gradients of div. a and b always give the sizes.
template <class AT, class AF, class BT, class BF, class DYT, class DYF, class DAT, class DAF, class DBT, class DBF>
void validate_binary_backward(binary_op kind, const tensor_view<AT, AF>& a, const tensor_view<BT, BF>& b,
                              const tensor_view<DYT, DYF>& dy, const tensor_view<DAT, DAF>& da,
                              const tensor_view<DBT, DBF>& db) {
  backend_detail::static_check_same_rank<AF, BF>();
  backend_detail::static_check_same_rank<AF, DYF>();
  backend_detail::static_check_same_rank<AF, DAF>();
  backend_detail::static_check_same_rank<AF, DBF>();
  constexpr const char* op = "binary_backward";
  const auto ye = broadcast_extents(a.extents(), b.extents());
  backend_detail::require_extents(op, "output gradient dy", dy.extents(), ye, "(a and b broadcast)");
  const bool want_da = da.data() != nullptr, want_db = db.data() != nullptr;
  if (want_da) backend_detail::require_extents(op, "gradient da", da.extents(), a.extents(), "(the sizes of a)");
  if (want_db) backend_detail::require_extents(op, "gradient db", db.extents(), b.extents(), "(the sizes of b)");
  backend_detail::require_data(op, "output gradient dy", dy);
  const bool product = kind == binary_op::mul || kind == binary_op::div;
  if ((want_da && product) || (want_db && kind == binary_op::div)) backend_detail::require_data(op, "operand b", b);
  if (want_db && product) backend_detail::require_data(op, "operand a", a);
}

// Pooling: y has pool_output_extents(x). The backward takes the input sizes from dx; max pooling
// needs x (to find each window's maximum), average pooling does not (x may be empty).
template <class XT, class XF, class YT, class YF>
typename layout<YF>::extents_type validate_pool_forward(const tensor_view<XT, XF>& x, const tensor_view<YT, YF>& y,
                                                        const pool_params& p) {
  backend_detail::static_check_same_rank<XF, YF>();
  constexpr const char* op = "pool_forward";
  const auto ye = pool_output_extents(x.extents(), p);
  backend_detail::require_extents(op, "output y", y.extents(), ye, "(from input x and the pooling parameters)");
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output y", y);
  return ye;
}

template <class XT, class XF, class DYT, class DYF, class DXT, class DXF>
typename layout<DYF>::extents_type validate_pool_backward(const tensor_view<XT, XF>& x, const tensor_view<DYT, DYF>& dy,
                                                          const tensor_view<DXT, DXF>& dx, const pool_params& p) {
  backend_detail::static_check_same_rank<DXF, DYF>();
  backend_detail::static_check_same_rank<DXF, XF>();
  constexpr const char* op = "pool_backward";
  const auto ye = pool_output_extents(dx.extents(), p);
  backend_detail::require_extents(op, "output gradient dy", dy.extents(), ye,
                                  "(from input gradient dx and the pooling parameters)");
  if (p.kind == pool_kind::max) {
    backend_detail::require_extents(op, "input x", x.extents(), dx.extents(), "(the sizes of dx; max pooling needs x)");
    backend_detail::require_data(op, "input x", x);
  }
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "input gradient dx", dx);
  return ye;
}

template <class XT, class XF, class YT, class YF>
void validate_global_pool_forward(const tensor_view<XT, XF>& x, const tensor_view<YT, YF>& y) {
  backend_detail::static_check_same_rank<XF, YF>();
  constexpr const char* op = "global_average_pool_forward";
  backend_detail::require_extents(op, "output y", y.extents(), global_pool_output_extents(x.extents()),
                                  "(N, C of x and spatial sizes 1)");
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output y", y);
}

template <class DYT, class DYF, class DXT, class DXF>
void validate_global_pool_backward(const tensor_view<DYT, DYF>& dy, const tensor_view<DXT, DXF>& dx) {
  backend_detail::static_check_same_rank<DXF, DYF>();
  constexpr const char* op = "global_average_pool_backward";
  backend_detail::require_extents(op, "output gradient dy", dy.extents(), global_pool_output_extents(dx.extents()),
                                  "(N, C of dx and spatial sizes 1)");
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "input gradient dx", dx);
}

namespace backend_detail {
inline void require_reduce_op(const char* op, const reduce_params& p) {
  if (static_cast<int>(p.op) >= reduce_op_count)
    detail::fail(errc::invalid_argument,
                 std::string(op) + ": unknown reduction " + std::to_string(static_cast<int>(p.op)));
}
}  // namespace backend_detail

// Reduction over p.axes: y is x with extent 1 on those axes. The backward reads x and the forward
// output y.
template <class XT, class XF, class YT, class YF>
void validate_reduce_forward(const tensor_view<XT, XF>& x, const tensor_view<YT, YF>& y, const reduce_params& p) {
  backend_detail::static_check_same_rank<XF, YF>();
  constexpr const char* op = "reduce_forward";
  backend_detail::require_reduce_op(op, p);
  backend_detail::require_extents(op, "output y", y.extents(), reduce_output_extents(x.extents(), p),
                                  "(x's sizes, 1 on the reduced axes)");
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output y", y);
}

template <class XT, class XF, class YT, class YF, class DYT, class DYF, class DXT, class DXF>
void validate_reduce_backward(const tensor_view<XT, XF>& x, const tensor_view<YT, YF>& y,
                              const tensor_view<DYT, DYF>& dy, const tensor_view<DXT, DXF>& dx,
                              const reduce_params& p) {
  backend_detail::static_check_same_rank<XF, YF>();
  backend_detail::static_check_same_rank<XF, DYF>();
  backend_detail::static_check_same_rank<XF, DXF>();
  constexpr const char* op = "reduce_backward";
  backend_detail::require_reduce_op(op, p);
  const auto ye = reduce_output_extents(x.extents(), p);
  backend_detail::require_extents(op, "forward output y", y.extents(), ye, "(x's sizes, 1 on the reduced axes)");
  backend_detail::require_extents(op, "output gradient dy", dy.extents(), ye, "(x's sizes, 1 on the reduced axes)");
  backend_detail::require_same_sizes(op, "input x", x, "input gradient dx", dx);
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "forward output y", y);
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "input gradient dx", dx);
}

template <class XT, class XF, class YT, class YF>
void validate_upsample_forward(const tensor_view<XT, XF>& x, const tensor_view<YT, YF>& y, const upsample_params& p) {
  backend_detail::static_check_same_rank<XF, YF>();
  constexpr const char* op = "upsample_forward";
  backend_detail::require_extents(op, "output y", y.extents(), upsample_output_extents(x.extents(), p),
                                  "(N, C of x and the output sizes of the parameters)");
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output y", y);
}

template <class DYT, class DYF, class DXT, class DXF>
void validate_upsample_backward(const tensor_view<DYT, DYF>& dy, const tensor_view<DXT, DXF>& dx,
                                const upsample_params& p) {
  backend_detail::static_check_same_rank<DXF, DYF>();
  constexpr const char* op = "upsample_backward";
  backend_detail::require_extents(op, "output gradient dy", dy.extents(), upsample_output_extents(dx.extents(), p),
                                  "(N, C of dx and the output sizes of the parameters)");
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "input gradient dx", dx);
}

template <class XT, class XF, class YT, class YF>
void validate_pad_forward(const tensor_view<XT, XF>& x, const tensor_view<YT, YF>& y, const pad_params& p) {
  backend_detail::static_check_same_rank<XF, YF>();
  constexpr const char* op = "pad_forward";
  backend_detail::require_extents(op, "output y", y.extents(), pad_output_extents(x.extents(), p),
                                  "(from input x and the padding)");
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output y", y);
}

template <class DYT, class DYF, class DXT, class DXF>
void validate_pad_backward(const tensor_view<DYT, DYF>& dy, const tensor_view<DXT, DXF>& dx, const pad_params& p) {
  backend_detail::static_check_same_rank<DXF, DYF>();
  constexpr const char* op = "pad_backward";
  backend_detail::require_extents(op, "output gradient dy", dy.extents(), pad_output_extents(dx.extents(), p),
                                  "(from input gradient dx and the padding)");
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "input gradient dx", dx);
}

// Group norm: groups divide C. gamma and beta (C values) are optional (1 and 0: no affine
// transform); saved_mean and saved_invstd hold N * groups values, (n, g) at n * groups + g.
template <class XT, class XF, class YT, class YF>
void validate_group_norm_forward(const tensor_view<XT, XF>& x, const tensor_view<YT, YF>& y, const void* saved_mean,
                                 const void* saved_invstd, const group_norm_params& p) {
  constexpr const char* op = "group_norm_forward";
  backend_detail::require_epsilon(op, p.epsilon);
  backend_detail::require_same_sizes(op, "input x", x, "output y", y);
  backend_detail::require_groups(op, x, p);
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output y", y);
  backend_detail::require_group_stats(op, x, saved_mean, saved_invstd, p);
}

// Layer norm over C: gamma and beta (C values) are optional; saved_mean and saved_invstd hold one
// value per sample and position, (n, d, h, w) at ((n D + d) H + h) W + w.
template <class XT, class XF, class YT, class YF>
void validate_layer_norm_forward(const tensor_view<XT, XF>& x, const tensor_view<YT, YF>& y, const void* saved_mean,
                                 const void* saved_invstd, const layer_norm_params& p) {
  constexpr const char* op = "layer_norm_forward";
  backend_detail::require_epsilon(op, p.epsilon);
  backend_detail::require_same_sizes(op, "input x", x, "output y", y);
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output y", y);
  backend_detail::require_position_stats(op, x, saved_mean, saved_invstd);
}

template <class XT, class XF, class DYT, class DYF, class DXT, class DXF>
void validate_layer_norm_backward(const tensor_view<XT, XF>& x, const tensor_view<DYT, DYF>& dy,
                                  const tensor_view<DXT, DXF>& dx, const void* saved_mean, const void* saved_invstd,
                                  const layer_norm_params& p) {
  constexpr const char* op = "layer_norm_backward";
  backend_detail::require_epsilon(op, p.epsilon);
  backend_detail::require_same_sizes(op, "input x", x, "output gradient dy", dy);
  backend_detail::require_same_sizes(op, "input x", x, "input gradient dx", dx);
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "input gradient dx", dx);
  backend_detail::require_position_stats(op, x, saved_mean, saved_invstd);
}

template <class XT, class XF, class DYT, class DYF, class DXT, class DXF>
void validate_group_norm_backward(const tensor_view<XT, XF>& x, const tensor_view<DYT, DYF>& dy,
                                  const tensor_view<DXT, DXF>& dx, const void* saved_mean, const void* saved_invstd,
                                  const group_norm_params& p) {
  constexpr const char* op = "group_norm_backward";
  backend_detail::require_epsilon(op, p.epsilon);
  backend_detail::require_same_sizes(op, "input x", x, "output gradient dy", dy);
  backend_detail::require_same_sizes(op, "input x", x, "input gradient dx", dx);
  backend_detail::require_groups(op, x, p);
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "input gradient dx", dx);
  backend_detail::require_group_stats(op, x, saved_mean, saved_invstd, p);
}

// Softmax over C: y has the sizes of x; the backward reads the forward output y.
template <class XT, class XF, class YT, class YF>
void validate_softmax_forward(const tensor_view<XT, XF>& x, const tensor_view<YT, YF>& y) {
  constexpr const char* op = "softmax_forward";
  backend_detail::require_same_sizes(op, "input x", x, "output y", y);
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output y", y);
}

template <class YT, class YF, class DYT, class DYF, class DXT, class DXF>
void validate_softmax_backward(const tensor_view<YT, YF>& y, const tensor_view<DYT, DYF>& dy,
                               const tensor_view<DXT, DXF>& dx) {
  constexpr const char* op = "softmax_backward";
  backend_detail::require_same_sizes(op, "forward output y", y, "output gradient dy", dy);
  backend_detail::require_same_sizes(op, "forward output y", y, "input gradient dx", dx);
  backend_detail::require_data(op, "forward output y", y);
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "input gradient dx", dx);
}

// Local response norm across C: y has the sizes of x; the backward reads x.
template <class XT, class XF, class YT, class YF>
void validate_lrn_forward(const tensor_view<XT, XF>& x, const tensor_view<YT, YF>& y, const lrn_params& p) {
  constexpr const char* op = "lrn_forward";
  backend_detail::require_same_sizes(op, "input x", x, "output y", y);
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output y", y);
  validate_lrn(p, op);
}

template <class XT, class XF, class DYT, class DYF, class DXT, class DXF>
void validate_lrn_backward(const tensor_view<XT, XF>& x, const tensor_view<DYT, DYF>& dy,
                           const tensor_view<DXT, DXF>& dx, const lrn_params& p) {
  constexpr const char* op = "lrn_backward";
  backend_detail::require_same_sizes(op, "input x", x, "output gradient dy", dy);
  backend_detail::require_same_sizes(op, "input x", x, "input gradient dx", dx);
  backend_detail::require_data(op, "input x", x);
  backend_detail::require_data(op, "output gradient dy", dy);
  backend_detail::require_data(op, "input gradient dx", dx);
  validate_lrn(p, op);
}

// Linear: x [N, C, spatial...] is read as N rows of F = C * spatial features in PyTorch's flatten
// order; y is [N, K, 1, 1(, 1)]; the weight is K x F, row-major (nn.Linear's [out, in]); bias K
// values or null. Returns F.
template <class XT, class XF, class YT, class YF>
std::int64_t validate_linear(const char* op, const char* x_name, const tensor_view<XT, XF>& x, const char* y_name,
                             const tensor_view<YT, YF>& y, const void* w, const char* w_name) {
  std::int64_t features = 1;
  for (int d = 1; d < XF::rank; ++d)
    features = detail::checked_mul(features, x.extent(d), std::string(op) + ": features");
  auto ye = y.extents();
  ye[0] = x.batch();
  for (int d = 2; d < YF::rank; ++d) ye[d] = 1;
  backend_detail::require_extents(op, y_name, y.extents(), ye, "(N of x, K outputs, spatial sizes 1)");
  backend_detail::require_data(op, x_name, x);
  backend_detail::require_data(op, y_name, y);
  std::int64_t wsize = 0;
  if (detail::mul_overflows(y.channels(), features, &wsize))
    detail::fail(errc::overflow, std::string(op) + ": weight K x F = " + std::to_string(y.channels()) + " x " +
                                     std::to_string(features) + " overflows 64 bits");
  if (wsize > 0 && w == nullptr)
    detail::fail(errc::null_pointer, std::string(op) + ": " + w_name +
                                         " is null but K x F = " + std::to_string(y.channels()) + " x " +
                                         std::to_string(features) + " values are needed");
  return features;
}

template <class XT, class XF, class YT, class YF>
std::int64_t validate_linear_forward(const tensor_view<XT, XF>& x, const void* w, const tensor_view<YT, YF>& y) {
  return validate_linear("linear_forward", "input x", x, "output y", y, w, "weight w");
}

template <class DYT, class DYF, class DXT, class DXF>
std::int64_t validate_linear_backward_data(const tensor_view<DYT, DYF>& dy, const void* w,
                                           const tensor_view<DXT, DXF>& dx) {
  return validate_linear("linear_backward_data", "input gradient dx", dx, "output gradient dy", dy, w, "weight w");
}

template <class XT, class XF, class DYT, class DYF>
std::int64_t validate_linear_backward_weights(const tensor_view<XT, XF>& x, const tensor_view<DYT, DYF>& dy,
                                              const void* dw) {
  return validate_linear("linear_backward_weights", "input x", x, "output gradient dy", dy, dw, "weight gradient dw");
}

// Slice (slice_params): part has the sizes slice_output_extents gives for whole.
template <class XT, class XF, class YT, class YF>
void validate_slice(const char* op, const char* whole_name, const tensor_view<XT, XF>& whole, const char* part_name,
                    const tensor_view<YT, YF>& part, const slice_params& p) {
  backend_detail::static_check_same_rank<XF, YF>();
  const auto want = slice_output_extents(whole.extents(), p);
  backend_detail::require_extents(op, part_name, part.extents(), want, "(the slice's part of the whole)");
  backend_detail::require_data(op, whole_name, whole);
  backend_detail::require_data(op, part_name, part);
}

// Concatenation along p.axis: the parts' extents there add up to the whole's, all others equal.
// Returns where each part lies in the whole, as the slice of the whole that it is (begin == end
// for a part empty along the axis, which has nothing to copy).
template <class PT, class PF, class WT, class WF>
std::vector<slice_params> validate_concat(const char* op, const std::vector<tensor_view<PT, PF>>& parts,
                                          const char* whole_name, const tensor_view<WT, WF>& whole,
                                          const concat_params& p) {
  backend_detail::static_check_same_rank<PF, WF>();
  if (p.axis < 1 || p.axis >= WF::rank)
    detail::fail(errc::invalid_argument, std::string(op) + ": concatenation axis " + std::to_string(p.axis) +
                                             " is not C (1) or a spatial axis (2 to " + std::to_string(WF::rank - 1) +
                                             ")");
  std::vector<slice_params> where;
  where.reserve(parts.size());
  std::int64_t begin = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string name = "part " + std::to_string(i);
    const auto& part = parts[i];
    auto want = whole.extents();
    want[static_cast<std::size_t>(p.axis)] = part.extent(p.axis);
    if (part.extents() != want) {
      const std::string why =
          "(the sizes of " + std::string(whole_name) + " outside axis " + std::to_string(p.axis) + ")";
      backend_detail::require_extents(op, name.c_str(), part.extents(), want, why.c_str());
    }
    backend_detail::require_data(op, name.c_str(), part);
    const std::int64_t end = detail::checked_add(begin, part.extent(p.axis), std::string(op) + ": concatenated extent");
    where.push_back({p.axis, begin, end, 1});
    begin = end;
  }
  if (begin != whole.extent(p.axis))
    detail::fail(errc::shape_mismatch, std::string(op) + ": the " + std::to_string(parts.size()) + " parts have " +
                                           std::to_string(begin) + " entries along axis " + std::to_string(p.axis) +
                                           " in all, " + whole_name + " has " + std::to_string(whole.extent(p.axis)));
  backend_detail::require_data(op, whole_name, whole);
  return where;
}

// Rearrangement (rearrange_params): y has the sizes rearrange_output_extents gives for x.
template <class XT, class XF, class YT, class YF>
void validate_rearrange(const char* op, const char* x_name, const tensor_view<XT, XF>& x, const char* y_name,
                        const tensor_view<YT, YF>& y, const rearrange_params& p) {
  backend_detail::static_check_same_rank<XF, YF>();
  backend_detail::require_extents(op, y_name, y.extents(), rearrange_output_extents(x.extents(), p),
                                  (std::string("(") + to_string(p.kind) + " of " + x_name + ")").c_str());
  backend_detail::require_data(op, x_name, x);
  backend_detail::require_data(op, y_name, y);
}

}  // namespace memfmt
