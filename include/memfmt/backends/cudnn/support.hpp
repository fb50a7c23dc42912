// memfmt/backends/cudnn/support.hpp - which layers the cuDNN backend runs, asked before any work.
//
// The answer of memfmt::cudnn::backend::support, as a free function so it can be asked (and
// tested) without a GPU. Convolution and batch norm take float32, float64, float16 and bfloat16;
// the layer graphs (pointwise, resample, reduction, matmul) float32, float16 and bfloat16.
// Pointwise steps (activations, binary ops, batch-norm inference, a transposed conv's bias) run
// channels-last only: cuDNN 9.19 on an H100 ran no pointwise graph over a channels-first tensor
// with several channels and positions (tensor_desc.hpp, pointwise_frame), so the planner is told
// to keep those layers channels-last. Padding (2-D copies, spatial_pad.hpp) and softmax (the legacy
// softmax calls, softmax.hpp; not bfloat16) run in both formats. The backward passes the trainer
// asks for (q.backward) are graphs of the same kinds as the forwards (backward.hpp) with the
// forwards' limits, so they get the forwards' answers, except padding: it trains in constant mode
// only (reflect / replicate backward needs sums). Group norm has no cuDNN graph: it runs memfmt's
// own kernels (cuda_group_norm.cuh; float32, float64, float16, bfloat16, both formats), so it is
// supported exactly when the backend was given them (group_norm_kernels). Likewise global average
// pooling and pooling backward run memfmt's layer kernels (cuda_layer_kernels.cuh): cuDNN 9.19 on
// an H100 found no engine for the reduction graph and crashed in the resample backward graph, so
// both need the kernels (layer_kernels). Up-sampling is refused: cuDNN 9.19 on an H100 found no
// engine for an up-sampling resample graph, nearest or bilinear. Layer norm over channels has
// neither a cuDNN graph here nor a memfmt kernel yet, nor has local response norm.
#pragma once

#include <string>

#include "../../dtype.hpp"
#include "../../error.hpp"
#include "../../layers/op_query.hpp"

namespace memfmt::cudnn {

inline op_support layer_support(const op_query& q, bool group_norm_kernels = false, bool layer_kernels = false) {
  const std::string op = std::string(to_string(q.op)) + " on the cuDNN backend";
  if (q.rank != 4 && q.rank != 5)
    return op_support::no(errc::unsupported,
                          op + ": activations of rank " + std::to_string(q.rank) + " (the backends take rank 4 or 5)");
  // Instance norm runs as a group norm of one channel per group; a global max pool as a pool whose
  // window is the whole map.
  const bool group_norm = q.op == layer_kind::group_norm || q.op == layer_kind::instance_norm;
  const bool global_average = q.op == layer_kind::global_pool && q.pool == pool_kind::average;
  const bool pool = q.op == layer_kind::pool || (q.op == layer_kind::global_pool && !global_average);
  if (group_norm && !group_norm_kernels)
    return op_support::no(errc::unsupported,
                          op + ": no cuDNN graph for this layer; memfmt's kernels run it when "
                               "backend_options::group_norm = cudnn::cuda_group_norm() is set (cuda_group_norm.cuh, "
                               "from a .cu file)");
  const char* const needs_layer_kernels =
      "; memfmt's kernels run it when backend_options::layer_kernels = cudnn::cuda_layer_kernels() is set "
      "(cuda_layer_kernels.cuh, from a .cu file)";
  if (global_average && !layer_kernels)
    return op_support::no(errc::unsupported,
                          op + ": cuDNN 9.19 on an H100 found no engine for its reduction graph" + needs_layer_kernels);
  if (pool && q.backward && !layer_kernels)
    return op_support::no(
        errc::unsupported,
        op + " (backward): cuDNN 9.19 on an H100 crashed in the resample backward graph" + needs_layer_kernels);
  if (q.op == layer_kind::layer_norm)
    return op_support::no(errc::unsupported, op + ": no cuDNN graph or memfmt CUDA kernel for layer norm over "
                                                  "channels yet; the reference and oneDNN backends run it");
  if (q.op == layer_kind::reduce)
    return op_support::no(errc::unsupported, op + ": no cuDNN graph or memfmt CUDA kernel for reductions "
                                                  "yet; the reference and oneDNN backends run them");
  if (q.op == layer_kind::lrn)
    return op_support::no(errc::unsupported, op + ": no cuDNN graph or memfmt CUDA kernel for local response "
                                                  "norm yet; the reference and oneDNN backends run it");
  if (q.op == layer_kind::upsample)
    return op_support::no(errc::unsupported, op + ": cuDNN 9.19 on an H100 found no engine for an up-sampling "
                                                  "resample graph (nearest or bilinear); the reference and oneDNN "
                                                  "backends run it");
  const bool takes_double =
      q.op == layer_kind::conv || q.op == layer_kind::conv_transpose || q.op == layer_kind::batch_norm || group_norm;
  const bool typed = q.type == dtype::float32 || q.type == dtype::float16 || q.type == dtype::bfloat16 ||
                     (takes_double && q.type == dtype::float64);
  if (!typed)
    return op_support::no(errc::unsupported_dtype,
                          op + ": element type " + std::string(to_string(q.type)) + " (" +
                              (takes_double ? "float32, float64, float16, bfloat16" : "float32, float16, bfloat16") +
                              ")");
  const bool pointwise = q.op == layer_kind::activation || q.op == layer_kind::binary ||
                         q.op == layer_kind::batch_norm || q.op == layer_kind::conv_transpose;
  if (pointwise && q.format == format_family::channels_first)
    return op_support::no(errc::unsupported,
                          op + ": its pointwise step needs channels-last tensors (cuDNN 9.19 ran no pointwise graph "
                               "over a channels-first tensor with several channels and positions)");
  switch (q.op) {
    case layer_kind::pad:
      if (q.backward && q.padding != pad_mode::constant)
        return op_support::no(errc::unsupported,
                              op + ": the backward of reflect / replicate padding sums output gradients, which the "
                                   "backend's 2-D copies cannot do (constant padding trains)");
      break;
    case layer_kind::softmax:
      if (q.type == dtype::bfloat16)
        return op_support::no(errc::unsupported_dtype,
                              op + ": element type bfloat16 (cuDNN's legacy softmax is run for float32, float16)");
      break;
    default: break;
  }
  return op_support::yes();
}

}  // namespace memfmt::cudnn
