// memfmt/onnx/detail/translate_shape.hpp - Concat, Split, Slice, Resize, Pad, Flatten, Reshape,
// Transpose, DepthToSpace and SpaceToDepth.
// Members of detail::importer, declared in importer.hpp; users include onnx/import.hpp.
#pragma once

#include "importer.hpp"

namespace memfmt::onnx::detail {

// Along C (F of rank-2 values; the last axis of channels-last views).
inline void importer::concat(const node_reader& r) {
  const value& first = tensor_input(r, 0);
  const auto a = static_cast<std::size_t>(normalize_axis(r, r.get_int("axis", 1), first.shape.size()));
  const int axis = sliced_axis(first, a, "concatenation along");
  std::vector<graph::node_id> ins;
  for (int i = 0; i < r.inputs(); ++i) {
    const value& v = tensor_input(r, i);
    if (v.shape.size() != first.shape.size())
      r.fail(errc::shape_mismatch,
             "inputs of ranks " + std::to_string(first.shape.size()) + " and " + std::to_string(v.shape.size()));
    if (v.channels_last != first.channels_last)
      throw not_expressible{"inputs that are channels-last views and inputs that are not"};
    ins.push_back(*v.node);
  }
  set_like(r, net().concat(layer_name(r, nullptr), ins, memfmt::concat_params{axis}), first);
}

// The network axis of ONNX axis a of network value x: a channels-last view's last axis is C, and
// a rank-3 value's L is the network's W (lift).
inline int importer::network_axis(const value& x, std::size_t a) {
  const std::size_t rank = x.shape.size();
  if (x.channels_last) return a == 0 ? 0 : a + 1 == rank ? 1 : static_cast<int>(a) + 1;
  if (x.lifted() && a == 2) return 3;
  return static_cast<int>(a);
}

// The network axis that ONNX axis a of x slices (F of a rank-2 value, C or a spatial axis), or
// why the network cannot.
inline int importer::sliced_axis(const value& x, std::size_t a, const char* what) {
  const int axis = network_axis(x, a);
  if (axis == 0 || x.shape.size() < 2)
    throw not_expressible{std::string(what) + " axis " + std::to_string(a) + " of " +
                          memfmt::detail::dims_to_string(x.shape) + " (C, F or a spatial axis only)"};
  return axis;
}

inline void importer::split(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  const auto a = static_cast<std::size_t>(normalize_axis(r, r.get_int("axis", 0), x.shape.size()));
  const int axis = sliced_axis(x, a, "split along");
  shape_t sizes;
  if (result_.opset < 13) {
    sizes = r.get_ints("split");
  } else if (const value* s = constant_input(r, 1, false)) {
    sizes = int64_values(*s->constant);
  }
  const auto outs = static_cast<std::int64_t>(r.proto().output_size());
  const std::int64_t extent = x.shape[a];
  // From opset 18 num_outputs may stand for the sizes: parts of ceil(extent / n), the last smaller.
  if (sizes.empty() && r.has("num_outputs")) {
    const std::int64_t n = r.get_int("num_outputs", 0);
    if (n != outs || n < 1 || n > extent)
      r.fail(errc::invalid_argument, "num_outputs " + std::to_string(n) + " for " + std::to_string(outs) +
                                         " outputs and axis " + std::to_string(a) + " of " + std::to_string(extent));
    const std::int64_t part = (extent + n - 1) / n;
    for (std::int64_t o = 0; o < n; ++o) sizes.push_back(std::min(part, extent - o * part));
  }
  if (sizes.empty()) {
    if (outs < 1 || extent % outs != 0)
      r.fail(errc::invalid_argument, "axis " + std::to_string(a) + " of " + std::to_string(extent) +
                                         " does not split into " + std::to_string(outs) + " equal parts");
    sizes.assign(static_cast<std::size_t>(outs), extent / outs);
  }
  if (static_cast<std::int64_t>(sizes.size()) != outs)
    r.fail(errc::invalid_argument,
           "split " + memfmt::detail::dims_to_string(sizes) + " for " + std::to_string(outs) + " outputs");
  const std::string base = layer_name(r, nullptr);
  std::int64_t begin = 0;
  for (std::size_t o = 0; o < sizes.size(); ++o) {
    if (sizes[o] < 1 || sizes[o] > extent - begin)
      r.fail(errc::invalid_argument, "split " + memfmt::detail::dims_to_string(sizes) + " of axis " +
                                         std::to_string(a) + " of " + std::to_string(extent));
    const memfmt::slice_params p{axis, begin, begin + sizes[o], 1};
    set_like(r, r.proto().output(static_cast<int>(o)),
             net().slice(unique_name(base + "." + std::to_string(o)), *x.node, p), x);
    begin += sizes[o];
  }
}

// One network slice per sliced axis, chained; the last carries the node's name.
inline void importer::slice(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  std::vector<const parameter*> in{nullptr};
  for (int i = 1; i < r.inputs(); ++i) {
    const value* c = constant_input(r, i, false);
    in.push_back(c ? &*c->constant : nullptr);
  }
  const slice_spec s = read_slice(r, in, x.shape.size(), static_cast<int>(result_.opset));
  std::vector<memfmt::slice_params> cuts;
  for (std::size_t i = 0; i < s.axes.size(); ++i) {
    const auto a = static_cast<std::size_t>(s.axes[i]);
    const auto idx = slice_indices(x.shape[a], s.starts[i], s.ends[i], s.steps[i]);
    const bool whole =
        static_cast<std::int64_t>(idx.size()) == x.shape[a] && (idx.empty() || idx[0] == 0) && s.steps[i] == 1;
    if (whole) continue;
    const int axis = sliced_axis(x, a, "slicing");
    if (s.steps[i] < 0) throw not_expressible{"a negative step on axis " + std::to_string(a) + " (a reversal)"};
    if (idx.empty()) throw not_expressible{"an empty slice of axis " + std::to_string(a)};
    cuts.push_back(memfmt::slice_params{axis, idx.front(), idx.back() + 1, s.steps[i]});
  }
  if (cuts.empty()) return alias(r.proto().output(0), x);
  const std::string base = layer_name(r, nullptr);
  graph::node_id id = *x.node;
  for (std::size_t k = 0; k < cuts.size(); ++k)
    id = net().slice(k + 1 == cuts.size() ? base : unique_name(base + ".axis" + std::to_string(cuts[k].axis)), id,
                     cuts[k]);
  set_like(r, id, x);
}

inline void importer::resize(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  require_spatial_input(x);
  const bool upsample = r.op() == "Upsample";
  const std::size_t rank = x.shape.size();
  std::vector<double> scales;
  shape_t sizes;
  if (upsample && result_.opset < 9) {
    for (float f : r.get_floats("scales")) scales.push_back(f);
  } else {
    const int scales_at = upsample || result_.opset < 11 ? 1 : 2;
    if (const value* s = constant_input(r, scales_at, false)) scales = double_values(*s->constant);
    if (!upsample && result_.opset >= 11)
      if (const value* z = constant_input(r, 3, false)) sizes = int64_values(*z->constant);
  }
  // From opset 18 an axes attribute names the axes the scales or sizes are for; the others keep
  // their extent.
  if (!upsample && result_.opset >= 18 && r.has("axes")) {
    const shape_t axes = r.get_ints("axes");
    const std::size_t given = !sizes.empty() ? sizes.size() : scales.size();
    if (given != axes.size())
      r.fail(errc::invalid_argument, std::to_string(given) + (!sizes.empty() ? " sizes" : " scales") + " for axes " +
                                         memfmt::detail::dims_to_string(axes));
    std::vector<double> full_scales(rank, 1.0);
    shape_t full_sizes = x.shape;
    const std::vector<std::size_t> dims = distinct_axes(r, axes, rank);
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const std::size_t d = dims[i];
      if (!sizes.empty()) full_sizes[d] = sizes[i];
      else full_scales[d] = scales[i];
    }
    if (!sizes.empty()) sizes = full_sizes;
    else scales = full_scales;
  }
  if (!sizes.empty() && result_.opset >= 18) {
    const std::string policy =
        r.get_choice("keep_aspect_ratio_policy", "stretch", {"stretch", "not_larger", "not_smaller"});
    if (policy != "stretch") throw not_expressible{"keep_aspect_ratio_policy " + policy};
  }
  if (!sizes.empty() && sizes.size() != rank)
    r.fail(errc::invalid_argument,
           "sizes " + memfmt::detail::dims_to_string(sizes) + " for a rank " + std::to_string(rank) + " input");
  if (sizes.empty() && scales.size() != rank)
    r.fail(errc::invalid_argument,
           "needs " + std::to_string(rank) + " scales or sizes, has " + std::to_string(scales.size()) + " scales");
  if (sizes.empty())
    for (std::size_t d = 0; d < rank; ++d) {
      if (!(scales[d] > 0.0))
        r.fail(errc::invalid_argument, "scale " + std::to_string(scales[d]) + " must be positive");
      const double size = std::floor(static_cast<double>(x.shape[d]) * scales[d]);
      if (!(size < 0x1p62))
        r.fail(errc::overflow, "scale " + std::to_string(scales[d]) + " of dim " + std::to_string(d) + " (extent " +
                                   std::to_string(x.shape[d]) + ") gives an extent past 2^62");
      sizes.push_back(static_cast<std::int64_t>(size));
    }
  if (sizes[0] != x.shape[0] || sizes[1] != x.shape[1]) throw not_expressible{"resizing N or C"};
  // Opset 18's antialias filters only linear and cubic downscaling.
  if (r.get_int("antialias", 0) != 0 && r.get_string("mode", "nearest") != "nearest")
    for (std::size_t d = 2; d < rank; ++d)
      if (sizes[d] < x.shape[d]) throw not_expressible{"antialiased downscaling"};
  std::string mode = r.get_choice("mode", "nearest", {"nearest", "linear", "bilinear", "cubic"});
  if (mode == "bilinear") mode = "linear";
  const std::string coord = upsample || result_.opset < 11
                                ? std::string("asymmetric")
                                : r.get_choice("coordinate_transformation_mode", "half_pixel",
                                               {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                                "tf_half_pixel_for_nn", "tf_crop_and_resize", "half_pixel_symmetric"});
  const std::string rounding = upsample || result_.opset < 11
                                   ? std::string("floor")
                                   : r.get_choice("nearest_mode", "round_prefer_floor",
                                                  {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  if (mode == "cubic") throw not_expressible{"cubic resizing"};
  if (coord == "tf_crop_and_resize" || coord == "half_pixel_symmetric") throw not_expressible{coord};
  if (r.get_int("exclude_outside", 0) != 0) throw not_expressible{"exclude_outside 1"};
  static const std::map<std::string, memfmt::resample_coordinates> coordinates = {
      {"half_pixel", memfmt::resample_coordinates::half_pixel},
      {"pytorch_half_pixel", memfmt::resample_coordinates::pytorch_half_pixel},
      {"align_corners", memfmt::resample_coordinates::align_corners},
      {"asymmetric", memfmt::resample_coordinates::asymmetric},
      {"tf_half_pixel_for_nn", memfmt::resample_coordinates::tf_half_pixel_for_nn}};
  static const std::map<std::string, memfmt::nearest_rounding> roundings = {
      {"round_prefer_floor", memfmt::nearest_rounding::round_prefer_floor},
      {"round_prefer_ceil", memfmt::nearest_rounding::round_prefer_ceil},
      {"floor", memfmt::nearest_rounding::floor},
      {"ceil", memfmt::nearest_rounding::ceil}};
  const memfmt::resample_coordinates c = coordinates.at(coord);
  const memfmt::nearest_rounding round = roundings.at(rounding);
  memfmt::upsample_params p;
  p.mode = mode == "nearest" ? memfmt::resample_mode::nearest : memfmt::resample_mode::linear;
  const bool lifted = x.lifted();
  // PyTorch's rule where it samples where ONNX's does (backends run it natively), else ONNX's
  // coordinates with the scales as given.
  bool pytorch_rule = true;
  std::array<double, 3> given{0.0, 0.0, 0.0};
  for (std::size_t d = 2; d < rank; ++d) {
    const std::int64_t in = x.shape[d], out = sizes[d];
    if (out <= 0)
      r.fail(errc::invalid_argument, "output size " + memfmt::detail::dims_to_string(sizes) + " is not positive");
    const double scale = scales.empty() ? 0.0 : scales[d];
    given[d - 2 + (lifted ? 1 : 0)] = scale;
    const double last = static_cast<double>(in - 1);
    // The comparison visits every output position; past a million (no image has such a side, a
    // mutated scale does) ONNX's rule is kept, which is exact either way.
    if (out > (std::int64_t{1} << 20)) pytorch_rule = false;
    for (std::int64_t o = 0; o < out && pytorch_rule; ++o) {
      const double at = memfmt::resample_source(c, o, in, out, scale);
      if (p.mode == memfmt::resample_mode::nearest) {
        pytorch_rule = memfmt::nearest_source(round, at, in) == o * in / out;
      } else {
        const double torch = (static_cast<double>(o) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
        pytorch_rule =
            std::fabs(std::clamp(at, 0.0, last) - std::clamp(torch, 0.0, last)) <= 1e-12 * static_cast<double>(in);
      }
    }
  }
  if (!pytorch_rule) {
    p.coordinates = c;
    p.rounding = round;
    p.scale = given;
  }
  p.output = to_spatial(spatial_of(sizes), lifted, 1);
  set_tensor(r, net().upsample(layer_name(r, nullptr), *x.node, p), lifted);
}

// The opset-18 `axes` of Pad and Resize as dims of a rank-`rank` value (negative ones from the
// end), each named once.
inline std::vector<std::size_t> importer::distinct_axes(const node_reader& r, const shape_t& axes, std::size_t rank) {
  std::vector<std::size_t> dims;
  std::vector<bool> seen(rank, false);
  for (std::int64_t a : axes) {
    const auto d = static_cast<std::size_t>(normalize_axis(r, a, rank));
    if (seen[d]) r.fail(errc::invalid_argument, "axes " + memfmt::detail::dims_to_string(axes) + " repeat an axis");
    seen[d] = true;
    dims.push_back(d);
  }
  return dims;
}

inline void importer::pad(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  require_spatial_input(x);
  const std::size_t rank = x.shape.size();
  const std::string mode = r.get_choice("mode", "constant", {"constant", "reflect", "edge", "wrap"});
  shape_t pads;
  double fill = 0.0;
  if (result_.opset < 11) {
    pads = r.get_ints("pads");
    fill = r.get_float("value", 0.f);
  } else {
    pads = int64_values(*constant_input(r, 1, true)->constant);
    fill = scalar_input(r, 2, 0.0);
    // From opset 18 an axes input names the axes that pads (2 entries per axis) are for.
    if (r.inputs() > 3 && !r.proto().input(3).empty()) {
      const shape_t axes = int64_values(*constant_input(r, 3, true)->constant);
      if (pads.size() != 2 * axes.size())
        r.fail(errc::invalid_argument, "pads " + memfmt::detail::dims_to_string(pads) + " need " +
                                           std::to_string(2 * axes.size()) + " entries for axes " +
                                           memfmt::detail::dims_to_string(axes));
      shape_t full(2 * rank, 0);
      const std::vector<std::size_t> dims = distinct_axes(r, axes, rank);
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const std::size_t d = dims[i];
        full[d] = pads[i];
        full[d + rank] = pads[i + axes.size()];
      }
      pads = full;
    }
  }
  if (pads.size() != 2 * rank)
    r.fail(errc::invalid_argument, "pads " + memfmt::detail::dims_to_string(pads) + " need " +
                                       std::to_string(2 * rank) + " entries for input " +
                                       memfmt::detail::dims_to_string(x.shape));
  if (mode == "wrap") throw not_expressible{"wrap padding"};
  if (pads[0] || pads[1] || pads[rank] || pads[rank + 1]) throw not_expressible{"padding N or C"};
  for (std::int64_t v : pads)
    if (v < 0) throw not_expressible{"negative pads (cropping)"};
  memfmt::pad_params p;
  p.mode = mode == "constant"  ? memfmt::pad_mode::constant
           : mode == "reflect" ? memfmt::pad_mode::reflect
                               : memfmt::pad_mode::replicate;
  p.value = fill;
  const bool lifted = x.lifted();
  p.begin = to_spatial(shape_t(pads.begin() + 2, pads.begin() + static_cast<std::ptrdiff_t>(rank)), lifted, 0);
  p.end = to_spatial(shape_t(pads.begin() + static_cast<std::ptrdiff_t>(rank) + 2, pads.end()), lifted, 0);
  set_tensor(r, net().pad(layer_name(r, nullptr), *x.node, p), lifted);
}

inline void importer::flatten_to_matrix(const node_reader& r, const value& x) {
  if (x.shape.size() == 2) return alias(r.proto().output(0), x);
  if (x.shape.size() < 3) throw not_expressible{"flattening rank " + std::to_string(x.shape.size())};
  const graph::node_id id = net().flatten(layer_name(r, nullptr), *x.node);
  set_tensor(r, r.proto().output(0), id, net().at(id).extents);
}

// Flatten at any axis whose leading dims multiply to N (the dims between N and it are 1) is the
// [N, features] flatten at axis 1.
inline void importer::flatten(const node_reader& r) {
  const value& x = tensor_input(r, 0);
  const std::int64_t axis = normalize_axis(r, r.get_int("axis", 1), x.shape.size(), true);
  // Axis 0 of a batch of 1, or the dims between N and the axis all 1.
  bool same = axis > 0 || x.shape[0] == 1;
  for (std::int64_t d = 1; d < axis; ++d) same = same && x.shape[static_cast<std::size_t>(d)] == 1;
  if (!same)
    throw not_expressible{"Flatten at axis " + std::to_string(axis) + " of " + memfmt::detail::dims_to_string(x.shape) +
                          " (the leading dims are not [N, 1...])"};
  flatten_to_matrix(r, x);
}

// Reshape to [N, rest] is flatten; to the same shape, nothing.
inline void importer::reshape(const node_reader& r) {
  const value& in = input_value(r, 0);
  const shape_t target =
      reshape_target(r, in.shape, int64_values(*constant_input(r, 1, true)->constant), r.get_int("allowzero", 0) != 0);
  if (in.chain) return finish_chain(r, *in.chain, target);
  const value& x = tensor_input(r, 0);
  if (target == x.shape) return alias(r.proto().output(0), x);
  if (decomposed_group_norm(r, x, target)) return;
  if (gathered_transpose(r, x, target)) return;
  if (target.size() == 2 && target[0] == x.shape[0]) return flatten_to_matrix(r, x);
  if (target.size() > x.shape.size() && target.size() <= 6 && chain_follows(r.proto().output(0))) {
    value v;
    v.chain = reshape_chain{*x.node, x.shape, target, {}};
    v.shape = target;
    v.type = x.type;
    values_[r.proto().output(0)] = std::move(v);
    return;
  }
  throw not_expressible{"reshape " + memfmt::detail::dims_to_string(x.shape) + " -> " +
                        memfmt::detail::dims_to_string(target)};
}

// A Transpose of a network value that keeps N first and puts C second or last is the value, or a
// channels-last view of it ([N, spatial..., C]: value::channels_last), with its spatial dims
// permuted: no copy when they keep their order, a transpose layer when they do not (coordinate
// attention's pooled W). Of a split reshape, it is the middle of a chain. Any other is a barrier.
inline void importer::transpose(const node_reader& r) {
  const value& in = input_value(r, 0);
  if (in.node) return transpose_value(r, in, transpose_perm(r, in.shape.size()), r.proto().output(0));
  if (!in.chain || !in.chain->perm.empty()) throw not_expressible{"a transpose of a network value"};
  value v = in;
  v.chain->perm = transpose_perm(r, in.shape.size());
  for (std::size_t d = 0; d < in.shape.size(); ++d) v.shape[d] = in.shape[static_cast<std::size_t>(v.chain->perm[d])];
  values_[r.proto().output(0)] = std::move(v);
}

// Network value `in` transposed by `perm` as value `out` (transpose() says how).
inline void importer::transpose_value(const node_reader& r, const value& in, const std::vector<std::int64_t>& perm,
                                      const std::string& out) {
  {
    const std::size_t rank = in.shape.size();
    // The network dim each output dim reads.
    std::vector<int> from(rank);
    for (std::size_t d = 0; d < rank; ++d) from[d] = network_axis(in, static_cast<std::size_t>(perm[d]));
    const bool c_last = rank >= 4 && from[rank - 1] == 1;
    if ((rank == 4 || rank == 5) && from[0] == 0 && (from[1] == 1 || c_last)) {
      std::vector<int> spatial_perm{0, 1};
      for (std::size_t d = c_last ? 1 : 2; d < (c_last ? rank - 1 : rank); ++d) spatial_perm.push_back(from[d]);
      if (std::is_sorted(spatial_perm.begin(), spatial_perm.end())) {
        value v = in;
        v.channels_last = c_last;
        v.shape = permuted(in.shape, perm);
        values_[out] = std::move(v);
        return;
      }
      value like;
      like.channels_last = c_last;
      return set_like(r, out, net().transpose(layer_name(r, nullptr), *in.node, spatial_perm), like);
    }
    throw not_expressible{"transpose " + memfmt::detail::dims_to_string(perm) + " of " +
                          (in.channels_last ? "a channels-last view " : "a network value ") +
                          memfmt::detail::dims_to_string(in.shape) + " (N must stay first, C second or last)"};
  }
}

// The chain's last Reshape: the layer that moves every element as the chain does (a channel
// shuffle, depth to space or space to depth, in either block order), or a barrier.
inline void importer::finish_chain(const node_reader& r, const reshape_chain& c, const shape_t& target) {
  const auto barrier = [&] {
    throw not_expressible{
        "reshape " + memfmt::detail::dims_to_string(c.source_shape) + " -> " + memfmt::detail::dims_to_string(c.split) +
        ", transpose " + memfmt::detail::dims_to_string(c.perm) + ", reshape -> " +
        memfmt::detail::dims_to_string(target) + " is not a channel shuffle, depth to space or space to depth"};
  };
  if (c.perm.empty() || target.size() != c.source_shape.size()) barrier();
  // The chain as a permuted copy of the logical (row-major) tensors: over the transposed dims, the
  // source's strides permuted and the destination's own.
  permuted_copy chain;
  chain.rank = static_cast<int>(c.split.size());
  const shape_t split_strides = row_major_strides(c.split);
  shape_t moved(c.split.size());
  for (std::size_t d = 0; d < c.split.size(); ++d) moved[d] = c.split[static_cast<std::size_t>(c.perm[d])];
  const shape_t moved_strides = row_major_strides(moved);
  for (std::size_t d = 0; d < c.split.size(); ++d) {
    chain.extents[d] = moved[d];
    chain.from[d] = split_strides[static_cast<std::size_t>(c.perm[d])];
    chain.to[d] = moved_strides[d];
  }
  const shape_t x = lift(c.source_shape), y = lift(target);
  std::vector<memfmt::rearrange_params> candidates;
  if (x == y)
    for (std::size_t d = 1; d < c.split.size(); ++d)
      candidates.push_back({memfmt::rearrange_kind::channel_shuffle, c.split[d], memfmt::block_order::crd});
  if (x.size() == 4 && y.size() == 4 && x[2] > 0 && y[2] > 0)
    for (const auto order : {memfmt::block_order::crd, memfmt::block_order::dcr}) {
      if (y[2] % x[2] == 0) candidates.push_back({memfmt::rearrange_kind::depth_to_space, y[2] / x[2], order});
      if (x[2] % y[2] == 0) candidates.push_back({memfmt::rearrange_kind::space_to_depth, x[2] / y[2], order});
    }
  for (const memfmt::rearrange_params& p : candidates) {
    if (p.factor < 2) continue;
    try {
      if (memfmt::rearrange_output_extents(x, p) != y) continue;
    } catch (const memfmt::error&) {
      continue;
    }
    if (!same_copy(rearrange_copy(p, x, row_major_strides(x), y, row_major_strides(y)), chain)) continue;
    const graph::node_id id = net().rearrange(layer_name(r, nullptr), c.source, p);
    return set_tensor(r, r.proto().output(0), id, target);
  }
  barrier();
}

// DepthToSpace (mode DCR, the default, or CRD) and SpaceToDepth (DCR).
inline void importer::depth_space(const node_reader& r, bool to_space) {
  const value& x = tensor_input(r, 0);
  if (x.shape.size() != 4)
    throw not_expressible{"an input of rank " + std::to_string(x.shape.size()) + " (rank 4 only)"};
  if (!r.has("blocksize")) r.fail(errc::invalid_argument, "has no blocksize");
  const std::string mode = to_space ? r.get_string("mode", "DCR") : "DCR";
  if (mode != "DCR" && mode != "CRD") r.fail(errc::invalid_argument, "mode '" + mode + "' (DCR or CRD)");
  const memfmt::rearrange_params p{
      to_space ? memfmt::rearrange_kind::depth_to_space : memfmt::rearrange_kind::space_to_depth,
      r.get_int("blocksize", 0), mode == "CRD" ? memfmt::block_order::crd : memfmt::block_order::dcr};
  set_tensor(r, net().rearrange(layer_name(r, nullptr), *x.node, p), false);
}

}  // namespace memfmt::onnx::detail
