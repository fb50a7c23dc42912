// memfmt/strided/op_rules.hpp - the output sizes and strides PyTorch 1.13 (CPU) gives pointwise
// ops, torch.cat, F.conv1d/2d/3d and F.batch_norm.
//
// A layout decision in PyTorch is usually not written down anywhere: it falls out of
// TensorIterator's dimension sort, of which convolution backend runs and what that backend asks
// for, of which input cat looks at first. These functions replay those C++ paths on sizes and
// strides alone, so a C++ caller can predict the layout PyTorch will hand it. Each rule is
// pinned by fixtures generated from PyTorch itself (tests/strided_ops/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../detail/checked.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../format/memory_format.hpp"
#include "classify.hpp"
#include "descriptor.hpp"
#include "detail/tensor_iterator_strides.hpp"
#include "detail/torch_view_ops.hpp"

namespace memfmt {
namespace detail {

// Type promotion, simplified: floating beats integral, then the wider type wins (float16 with
// bfloat16 gives float32). 0-dim operands only count when every operand is 0-dim, as PyTorch
// does for same-category operands.
inline dtype promote_types(const std::vector<strided_desc>& ops) {
  bool any_dimensioned = false;
  for (const auto& op : ops) any_dimensioned = any_dimensioned || !op.sizes.empty();
  bool have = false;
  dtype best = dtype::float32;
  for (const auto& op : ops) {
    if (any_dimensioned && op.sizes.empty()) continue;
    if (!have) {
      best = op.type;
      have = true;
      continue;
    }
    const dtype t = op.type;
    if (t == best) continue;
    if (is_floating(t) != is_floating(best)) {
      if (is_floating(t)) best = t;
    } else if ((t == dtype::float16 && best == dtype::bfloat16) || (t == dtype::bfloat16 && best == dtype::float16)) {
      best = dtype::float32;
    } else if (size_of(t) > size_of(best)) {
      best = t;
    }
  }
  return best;
}

// Every operand: consistent sizes/strides, no negative stride (PyTorch has none), dense strides of
// its sizes and a span that fit in 64 bits (errc::overflow, memfmt's limit). The replayed steps
// still check their own products, which can grow past the operands' (broadcast, cat, unsqueeze).
inline void check_operand(const strided_desc& t, const char* op) {
  t.validate();
  for (auto st : t.strides)
    if (st < 0)
      fail(errc::invalid_argument, std::string(op) + ": negative stride in strides " + dims_to_string(t.strides) +
                                       " (PyTorch tensors have none)");
  checked_dense_extent(t.sizes, op);
  checked_span(t.sizes, t.strides, op);
}

inline std::string torch_size_string(const std::vector<std::int64_t>& sizes) {
  return "torch.Size(" + dims_to_string(sizes) + ")";
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Pointwise: the output of a + b, torch.neg(a), torch.addcmul(a, b, c)... (TensorIterator with
// an output it allocates). Operands in the op's argument order; an operand with no sizes is a
// 0-dim tensor or a Python scalar. Throws shape_mismatch when the shapes do not broadcast.
inline strided_desc pointwise_result(const std::vector<strided_desc>& operands) {
  if (operands.empty()) detail::fail(errc::invalid_argument, "pointwise_result: no operands");
  for (const auto& op : operands) detail::check_operand(op, "pointwise_result");
  strided_desc out;
  out.type = detail::promote_types(operands);
  detail::tensor_iterator_output(operands, out.type, out.sizes, out.strides);
  return out;
}

namespace detail {

// cat's memory-format vote: any input suggesting contiguous, or two inputs that disagree, make
// the output contiguous; otherwise the inputs' common suggestion.
inline memory_format cat_memory_format(const std::vector<strided_desc>& inputs) {
  memory_format format = memory_format::contiguous;
  bool have = false;
  for (const auto& t : inputs) {
    const auto f = suggest_memory_format(t);
    if (f == memory_format::contiguous || (have && f != format)) return memory_format::contiguous;
    format = f;
    have = true;
  }
  return format;
}

// torch.cat of `copies` identical tensors of rank >= 1 along `dim` (the per-group outputs of a
// grouped convolution), in time independent of `copies`: every copy votes alike, and the size
// along dim is the copies' sum.
inline strided_desc cat_copies(const strided_desc& t, std::int64_t copies, std::size_t dim) {
  strided_desc out;
  out.type = t.type;
  out.sizes = t.sizes;
  out.sizes[dim] =
      checked_mul(t.sizes[dim], copies, "cat_result: the concatenated size along dimension " + std::to_string(dim));
  out.strides = dense_strides(out.sizes, cat_memory_format({t}));
  return out;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// torch.cat(inputs, dim). 1-D tensors of size [0] are the legacy "skipped" empties: they neither
// fix the shape nor need to match it, but they do take part in the memory-format vote, where any
// input suggesting contiguous (or two disagreeing inputs) makes the output contiguous.
inline strided_desc cat_result(const std::vector<strided_desc>& inputs, std::int64_t dim) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    detail::check_operand(inputs[i], "cat_result");
    if (inputs[i].sizes.empty())
      detail::fail(errc::invalid_argument,
                   "zero-dimensional tensor (at position " + std::to_string(i) + ") cannot be concatenated");
  }
  auto skipped = [](const strided_desc& t) { return t.sizes.size() == 1 && t.sizes[0] == 0; };
  // legacy_cat_wrap_dim: wrap against the first input that is not skipped.
  for (const auto& t : inputs) {
    if (skipped(t)) continue;
    const auto rank = t.dim();
    if (dim < -rank || dim >= rank)
      detail::fail(errc::invalid_argument, "Dimension out of range (expected to be in range of [" +
                                               std::to_string(-rank) + ", " + std::to_string(rank - 1) + "], but got " +
                                               std::to_string(dim) + ")");
    if (dim < 0) dim += rank;
    break;
  }
  if (inputs.empty()) detail::fail(errc::invalid_argument, "torch.cat(): expected a non-empty list of Tensors");

  const memory_format format = detail::cat_memory_format(inputs);

  std::size_t valid = inputs.size();
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (!skipped(inputs[i])) {
      valid = i;
      break;
    }
  strided_desc out;
  out.type = detail::promote_types(inputs);
  if (valid == inputs.size()) {
    out.sizes = {0};
  } else {
    const auto& first = inputs[valid];
    const auto d = static_cast<std::size_t>(dim);
    std::int64_t total = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto& t = inputs[i];
      if (skipped(t)) continue;
      if (t.dim() != first.dim())
        detail::fail(errc::shape_mismatch, "Tensors must have same number of dimensions: got " +
                                               std::to_string(first.dim()) + " and " + std::to_string(t.dim()));
      for (std::size_t k = 0; k < first.sizes.size(); ++k)
        if (k != d && first.sizes[k] != t.sizes[k])
          detail::fail(errc::shape_mismatch, "Sizes of tensors must match except in dimension " + std::to_string(dim) +
                                                 ". Expected size " + std::to_string(first.sizes[k]) +
                                                 " but got size " + std::to_string(t.sizes[k]) + " for tensor number " +
                                                 std::to_string(i) + " in the list.");
      if (detail::add_overflows(total, t.sizes[d], &total))
        detail::fail(errc::overflow,
                     "cat_result: the concatenated size along dimension " + std::to_string(dim) + " overflows 64 bits");
    }
    out.sizes = first.sizes;
    out.sizes[d] = total;
  }
  out.strides = dense_strides(out.sizes, format);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Convolution: F.conv1d / conv2d / conv3d(input, weight, bias=None, stride, padding, dilation,
// groups) on CPU. Vectors of length 1 apply to every spatial dimension.
struct torch_conv_args {
  std::vector<std::int64_t> stride{1}, padding{0}, dilation{1};
  std::int64_t groups = 1;
};

// What else decides the result: which functional is called (0: conv{weight rank - 2}d) and
// torch.get_num_threads(), which enters oneDNN's "is it worth it" heuristic for 1x1 kernels.
struct torch_conv_context {
  int spatial_dims = 0;
  int num_threads = 2;
};

namespace detail {

enum class conv_backend { empty, mkldnn, slow2d, slow_dilated2d, slow3d, slow_dilated3d };

// mkldnn_conv_use_channels_last: oneDNN goes NHWC/NDHWC when input or weight suggests it,
// never for double.
inline bool mkldnn_use_channels_last(const strided_desc& input, const strided_desc& weight) {
  if (input.type == dtype::float64 || weight.type == dtype::float64) return false;
  const auto fi = suggest_memory_format(input), fw = suggest_memory_format(weight);
  // 1.13 has no NDHWC oneDNN path: a channels_last_3d operand does not count.
  return fi == memory_format::channels_last || fw == memory_format::channels_last;
}

// thnn_conv_use_channels_last: the slow 2-D kernels go NHWC when input or weight suggests it.
inline bool thnn_use_channels_last(const strided_desc& input, const strided_desc& weight) {
  return suggest_memory_format(input) == memory_format::channels_last ||
         suggest_memory_format(weight) == memory_format::channels_last;
}

inline std::vector<std::int64_t> expand_conv_param(const std::vector<std::int64_t>& v, const char* name,
                                                   std::size_t dims) {
  if (v.size() != 1 && v.size() != dims)
    fail(errc::invalid_argument, std::string("expected ") + name + " to be a single integer value or a list of " +
                                     std::to_string(dims) + " values to match the convolution dimensions, but got " +
                                     name + "=" + dims_to_string(v));
  return v.size() == dims ? v : std::vector<std::int64_t>(dims, v[0]);
}

struct conv_params {
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups = 1;
  bool is_strided() const {
    for (auto s : stride)
      if (s != 1) return true;
    return false;
  }
  bool is_dilated() const {
    for (auto d : dilation)
      if (d != 1) return true;
    return false;
  }
};

inline std::vector<std::int64_t> conv_output_sizes(const strided_desc& input, const strided_desc& weight,
                                                   const conv_params& p) {
  std::vector<std::int64_t> out{input.sizes[0], weight.sizes[0]};
  const char* what = "conv_result: output size";
  for (std::size_t i = 2; i < input.sizes.size(); ++i) {
    const auto j = i - 2;
    const auto kernel = checked_add(checked_mul(p.dilation[j], weight.sizes[i] - 1, what), 1, what);
    const auto padded = checked_add(input.sizes[i], checked_mul(2, p.padding[j], what), what);
    out.push_back(checked_add(checked_sub(padded, kernel, what) / p.stride[j], 1, what));
  }
  return out;
}

// ConvParams::use_mkldnn for a CPU float tensor (not transposed, not bfloat16).
inline bool use_mkldnn(const strided_desc& input, const strided_desc& weight, const conv_params& p, int num_threads) {
  if (input.type != dtype::float32) return false;
  const auto& is = input.sizes;
  const auto& ws = weight.sizes;
  const bool worth_it = p.is_strided() || p.is_dilated() || is[0] >= 16 || ws[ws.size() - 1] != 1 ||
                        ws[ws.size() - 2] != 1 || num_threads > 1;
  const bool not_tiny = p.groups > 1 || (ws[ws.size() - 1] > 3 && ws[ws.size() - 2] > 3) || is[0] > 1 ||
                        checked_numel(std::vector<std::int64_t>(is.begin(), is.begin() + 4), "use_mkldnn") > 20480;
  return worth_it && not_tiny;
}

// The 2-D slow kernels (thnn_conv2d, slow_conv_dilated2d): their own format choice on the
// operands they are handed.
inline strided_desc slow2d_output(const strided_desc& input, const strided_desc& weight, const conv_params& p) {
  const auto f = thnn_use_channels_last(input, weight) ? memory_format::channels_last : memory_format::contiguous;
  return torch_empty(conv_output_sizes(input, weight, p), f, input.type);
}

// The batched, N-d part of at::_convolution (after the 1-D -> 2-D expansion).
inline strided_desc convolution_nd(const strided_desc& input, const strided_desc& weight, const conv_params& p,
                                   int num_threads) {
  const auto rank = input.sizes.size();
  conv_backend backend;
  if (input.sizes[0] == 0 || input.sizes[1] == 0) {
    backend = conv_backend::empty;
  } else if (input.numel() == 0) {
    fail(errc::invalid_argument,
         "Only zero batch or zero channel inputs are supported, but got input shape: " + dims_to_string(input.sizes));
  } else if (use_mkldnn(input, weight, p, num_threads)) {
    backend = conv_backend::mkldnn;
  } else if (rank == 5 && !p.is_dilated()) {
    backend = conv_backend::slow3d;
  } else if (rank == 4) {
    backend = p.is_dilated() ? conv_backend::slow_dilated2d : conv_backend::slow2d;
  } else {
    backend = conv_backend::slow_dilated3d;
  }

  auto out_sizes = conv_output_sizes(input, weight, p);
  switch (backend) {
    case conv_backend::empty: {
      // input * weight.view(-1)[0] (or input.view(-1) * weight.view(-1) with no channels), then
      // viewed as the output shape (with 0 channels when the input has none); the views can
      // fail, as they do in PyTorch.
      if (input.sizes[1] == 0) out_sizes[1] = 0;
      const auto weight_flat = torch_view(weight, {weight.numel()});
      strided_desc product;
      if (input.sizes[1] == 0) {
        product = pointwise_result({torch_view(input, {input.numel()}), weight_flat});
      } else {
        product = pointwise_result({input, strided_desc{{}, {}, weight.type}});
      }
      return torch_view(product, out_sizes);
    }
    case conv_backend::mkldnn: {
      const bool cl = mkldnn_use_channels_last(input, weight);
      const auto backend_format = cl ? memory_format::channels_last : memory_format::contiguous;
      const auto in_c = torch_contiguous(input, backend_format);
      const auto w_c = torch_contiguous(weight, backend_format);
      // mkldnn_convolution decides again, on the operands it was handed.
      const bool out_cl = mkldnn_use_channels_last(in_c, w_c);
      const auto f = out_cl ? memory_format::channels_last : memory_format::contiguous;
      return torch_empty(out_sizes, f, input.type);
    }
    case conv_backend::slow3d:
    case conv_backend::slow_dilated3d: return torch_empty(out_sizes, memory_format::contiguous, input.type);
    case conv_backend::slow2d:
    case conv_backend::slow_dilated2d: {
      const auto backend_format =
          thnn_use_channels_last(input, weight) ? memory_format::channels_last : memory_format::contiguous;
      const auto in_c = torch_contiguous(input, backend_format);
      const auto w_c = torch_contiguous(weight, backend_format);
      if (p.groups == 1) return slow2d_output(in_c, w_c, p);
      // No native groups: one convolution per group on narrowed operands, then cat along C. Every
      // group narrows the same sizes and strides, so one group's output stands for all of them.
      const auto in_format = suggest_memory_format(in_c);
      const auto w_format = suggest_memory_format(w_c);
      const auto in_per_group = in_c.sizes[1] / p.groups;
      const auto out_per_group = w_c.sizes[0] / p.groups;
      const auto in_g = torch_contiguous(torch_narrow(in_c, 1, in_per_group), in_format);
      const auto w_g = torch_contiguous(torch_narrow(w_c, 0, out_per_group), w_format);
      return cat_copies(slow2d_output(in_g, w_g, p), p.groups, 1);
    }
  }
  return {};
}

}  // namespace detail

// Throws memfmt::error with PyTorch's message for a wrong input or weight rank, a channel or
// groups mismatch, a kernel larger than the padded input, or a bad stride/padding/dilation list.
inline strided_desc conv_result(const strided_desc& input, const strided_desc& weight, const torch_conv_args& args,
                                const torch_conv_context& ctx) {
  detail::check_operand(input, "conv_result");
  detail::check_operand(weight, "conv_result");
  if (input.type != weight.type)
    detail::fail(errc::unsupported_dtype, "conv_result: input dtype " + std::string(to_string(input.type)) +
                                              " and weight dtype " + std::string(to_string(weight.type)) + " differ");
  if (input.type != dtype::float32 && input.type != dtype::float64)
    detail::fail(errc::unsupported_dtype,
                 "conv_result: PyTorch 1.13 CPU convolution is modelled for float32 and "
                 "float64 only, got " +
                     std::string(to_string(input.type)));
  const int spatial = ctx.spatial_dims > 0 ? ctx.spatial_dims : static_cast<int>(weight.dim()) - 2;
  if (spatial < 1 || spatial > 3)
    detail::fail(errc::invalid_argument, "conv_result: cannot tell conv1d/2d/3d from a weight of sizes " +
                                             detail::dims_to_string(weight.sizes));
  // batchify: an unbatched input gets a batch dimension of 1.
  const auto unbatched_rank = static_cast<std::int64_t>(spatial) + 1;
  if (input.dim() != unbatched_rank && input.dim() != unbatched_rank + 1)
    detail::fail(errc::invalid_argument, "Expected " + std::to_string(unbatched_rank) + "D (unbatched) or " +
                                             std::to_string(unbatched_rank + 1) + "D (batched) input to conv" +
                                             std::to_string(spatial) +
                                             "d, but got input of size: " + detail::dims_to_string(input.sizes));
  const bool batched = input.dim() == unbatched_rank + 1;
  strided_desc in = batched ? input : detail::torch_unsqueeze(input, 0);
  strided_desc w = weight;

  // at::_convolution: parameter checks.
  const auto k = w.sizes.size();
  if (k < 3) detail::fail(errc::invalid_argument, "weight should have at least three dimensions");
  if (args.groups <= 0) detail::fail(errc::invalid_argument, "non-positive groups is not supported");
  const auto dims = k - 2;
  detail::conv_params p;
  p.stride = detail::expand_conv_param(args.stride, "stride", dims);
  p.padding = detail::expand_conv_param(args.padding, "padding", dims);
  p.dilation = detail::expand_conv_param(args.dilation, "dilation", dims);
  detail::expand_conv_param(std::vector<std::int64_t>(static_cast<std::size_t>(spatial), 0), "output_padding", dims);
  p.groups = args.groups;

  // check_shape_forward
  for (auto v : p.padding)
    if (v < 0) detail::fail(errc::invalid_argument, "negative padding is not supported");
  for (auto v : p.stride)
    if (v <= 0) detail::fail(errc::invalid_argument, "non-positive stride is not supported");
  for (auto v : p.dilation)
    if (v <= 0) detail::fail(errc::invalid_argument, "dilation should be greater than zero");
  if (in.sizes.size() != k)
    detail::fail(errc::shape_mismatch, "Expected " + std::to_string(k) + "-dimensional input for " + std::to_string(k) +
                                           "-dimensional weight " + detail::dims_to_string(w.sizes) + ", but got " +
                                           std::to_string(in.sizes.size()) + "-dimensional input of size " +
                                           detail::dims_to_string(in.sizes) + " instead");
  const auto groups = p.groups;
  if (w.sizes[0] < groups)
    detail::fail(errc::shape_mismatch, "Given groups=" + std::to_string(groups) + ", expected weight to be at least " +
                                           std::to_string(groups) + " at dimension 0, but got weight of size " +
                                           detail::dims_to_string(w.sizes) + " instead");
  if (w.sizes[0] % groups != 0)
    detail::fail(errc::shape_mismatch, "Given groups=" + std::to_string(groups) +
                                           ", expected weight to be divisible by " + std::to_string(groups) +
                                           " at dimension 0, but got weight of size [" +
                                           detail::dims_to_string(w.sizes) + "] instead");
  const auto expected_channels = detail::checked_mul(w.sizes[1], groups, "conv_result: weight channels times groups");
  if (in.sizes[1] != expected_channels)
    detail::fail(errc::shape_mismatch, "Given groups=" + std::to_string(groups) + ", weight of size " +
                                           detail::dims_to_string(w.sizes) + ", expected input" +
                                           detail::dims_to_string(in.sizes) + " to have " +
                                           std::to_string(expected_channels) + " channels, but got " +
                                           std::to_string(in.sizes[1]) + " channels instead");
  {
    bool kernel_fits = true;
    std::string padded, kernel;
    for (std::size_t i = 2; i < k; ++i) {
      std::int64_t in_size = 0, k_size = 0;
      if (detail::mul_overflows(p.padding[i - 2], 2, &in_size) ||
          detail::add_overflows(in_size, in.sizes[i], &in_size) ||
          detail::mul_overflows(p.dilation[i - 2], w.sizes[i] - 1, &k_size) ||
          detail::add_overflows(k_size, 1, &k_size))
        detail::fail(errc::overflow, "conv_result: padding " + detail::dims_to_string(p.padding) + " or dilation " +
                                         detail::dims_to_string(p.dilation) + " overflows 64 bits");
      kernel_fits = kernel_fits && in_size >= k_size;
      padded += (i > 2 ? " x " : "") + std::to_string(in_size);
      kernel += (i > 2 ? " x " : "") + std::to_string(k_size);
    }
    if (!kernel_fits)
      detail::fail(errc::shape_mismatch, "Calculated padded input size per channel: (" + padded + "). Kernel size: (" +
                                             kernel + "). Kernel size can't be greater than actual input size");
  }

  // 1-D runs as 2-D over a contiguous input with a size-1 height.
  const bool one_d = k == 3;
  if (one_d) {
    in = detail::torch_unsqueeze(detail::torch_contiguous(in), 2);
    w = detail::torch_unsqueeze(w, 2);
    p.stride.insert(p.stride.begin(), 1);
    p.padding.insert(p.padding.begin(), 0);
    p.dilation.insert(p.dilation.begin(), 1);
  }
  auto out = detail::convolution_nd(in, w, p, ctx.num_threads);
  if (one_d) out = detail::torch_squeeze(out, 2);
  if (!batched) out = detail::torch_squeeze(out, 0);
  return out;
}

// F.conv{N}d with N = weight rank - 2, and more than one intra-op thread (any multi-core CPU).
inline strided_desc conv_result(const strided_desc& input, const strided_desc& weight, const torch_conv_args& args) {
  return conv_result(input, weight, args, torch_conv_context{});
}

// ---------------------------------------------------------------------------------------------
// F.batch_norm(input, running_mean, running_var, weight, bias, training) on CPU. Train and eval
// give the same layout:
//  - an empty input is cloned (its strides kept), then multiplied by weight[0] and added to
//    bias[0] when affine, each a pointwise op with a 0-dim operand (TensorIterator strides);
//  - a contiguous or channels-last (2-D) contiguous input keeps that format (the fast kernels);
//  - anything else, channels_last_3d contiguous included, gets dense strides in its suggested
//    memory format.
// Throws for rank < 2, and in training for one value per channel (PyTorch's Python-side check).
inline strided_desc batch_norm_result(const strided_desc& input, bool training, bool affine) {
  detail::check_operand(input, "batch_norm_result");
  if (input.dim() < 2)
    detail::fail(errc::invalid_argument, "batch_norm_result: input of sizes " + detail::dims_to_string(input.sizes) +
                                             " has no channel dimension");
  if (training) {
    // PyTorch multiplies N and the spatial sizes and compares with 1; sizes are >= 0, so the
    // product is 1 exactly when each factor is (no product, no overflow).
    bool one_value = input.sizes[0] == 1;
    for (std::size_t i = 2; i < input.sizes.size(); ++i) one_value = one_value && input.sizes[i] == 1;
    if (one_value)
      detail::fail(errc::invalid_argument, "Expected more than 1 value per channel when training, got input size " +
                                               detail::torch_size_string(input.sizes));
  }
  if (input.numel() == 0) {
    strided_desc out = input;  // clone(): an empty tensor is non-overlapping and dense, strides kept
    if (affine) {
      const strided_desc scalar{{}, {}, input.type};
      out = pointwise_result({out, scalar});
      out = pointwise_result({out, scalar});
    }
    return out;
  }
  memory_format f;
  if (is_contiguous(input)) {
    f = memory_format::contiguous;
  } else if (is_contiguous(input, memory_format::channels_last)) {
    f = memory_format::channels_last;
  } else {
    f = suggest_memory_format(input);
  }
  return detail::torch_empty(input.sizes, f, input.type);
}

// nn.BatchNorm*d's defaults (affine), in eval mode.
inline strided_desc batch_norm_result(const strided_desc& input) { return batch_norm_result(input, false, true); }

}  // namespace memfmt
