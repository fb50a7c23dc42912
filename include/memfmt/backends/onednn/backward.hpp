// memfmt/backends/onednn/backward.hpp - the backward passes of the layers of layers.hpp on oneDNN.
//
// Activation (eltwise_backward from the forward input), pooling (pooling_backward; a max pool
// recomputes its forward pass in training mode to get the argmax workspace, so nothing is kept
// between the forward and the backward call), global average pooling, upsampling
// (resampling_backward), softmax (softmax_v2_backward from the forward output), binary ops, concat
// and channel slices (reorders of submemories), with the reference backend's arguments and
// semantics. Primitives share the cache of layer_primitives under their own key prefixes.
//
// The reference kernel runs instead (same result, no speed) where the forward does (layers.hpp:
// an average pool counting padding whose ceil-mode window runs past the end padding, a nearest
// upsample by a non-integer factor, an upsample with ONNX coordinates), and for the binary gradients oneDNN 2.6 has no
// primitive for: a broadcast operand's gradient is a reduction over the broadcast dimensions, and sub and div need a
// negation or a quotient rule (models add and multiply; those run on oneDNN). The clip (relu6) gradient uses
// eltwise_clip_v2, which is 0 at both bounds as PyTorch's is; hardsigmoid's (1/6 strictly inside (-3, 3)) is clip_v2's
// over (-3, 3), then scaled by 1/6.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../cpu/permuted_copy.hpp"
#include "../../layers/layer_params.hpp"
#include "../reference/activation.hpp"
#include "../reference/binary.hpp"
#include "../reference/concat.hpp"
#include "../reference/pooling.hpp"
#include "../reference/upsample.hpp"
#include "../slice.hpp"
#include "../validate.hpp"
#include "descriptors.hpp"
#include "layers.hpp"
#include "status.hpp"

namespace memfmt::onednn::detail {

// An activation's gradient from its forward input: oneDNN's eltwise backward of `alg`, then
// dx scaled by `scale` (not 1 for hardsigmoid only, which runs as two algorithms forward).
struct eltwise_gradient {
  eltwise_alg alg;
  float scale = 1.f;
};

inline eltwise_gradient eltwise_gradient_of(const activation_params& f) noexcept {
  if (f.kind == activation::hardsigmoid) {
    // alpha where 0 < alpha x + beta < 1: clip_v2's window (strict at both ends) on x, scaled.
    double lo = 0.0, hi = 0.0;  // alpha 0: an empty window
    if (f.alpha != 0.0) {
      lo = -f.beta / f.alpha;
      hi = (1.0 - f.beta) / f.alpha;
      if (lo > hi) std::swap(lo, hi);
    }
    return {{dnnl::algorithm::eltwise_clip_v2, static_cast<float>(lo), static_cast<float>(hi)},
            static_cast<float>(f.alpha)};
  }
  eltwise_alg a = eltwise_of(f).step[0];
  if (a.alg == dnnl::algorithm::eltwise_clip) a.alg = dnnl::algorithm::eltwise_clip_v2;
  return {a, 1.f};
}

// The backward passes; `lp` holds the primitive cache and the reorders.
class layer_backward {
 public:
  template <class T, class XF, class DYF, class DXF>
  void activation_backward(layer_primitives& lp, const dnnl::engine& eng, dnnl::stream& s, const activation_params& f,
                           tensor_view<const T, XF> x, tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx) {
    validate_activation_backward(f, x, dy, dx);
    const auto dt = data_type_of<T>("onednn::activation_backward");
    if (empty(dx)) return;
    const eltwise_gradient grad = eltwise_gradient_of(f);
    const eltwise_alg& a = grad.alg;
    const auto x_md = activation_md(x, dt), dy_md = activation_md(dy, dt), dx_md = activation_md(dx, dt);
    guarded("activation_backward", [&] {
      // oneDNN's eltwise backward takes dy and dx in one layout: a format change is a reorder of
      // dy into dx, then the gradient in place.
      void* g = mut(dy.data());
      if (dy_md != dx_md) {
        lp.reorder(eng, s, dy_md, g, dx_md, dx.data());
        g = dx.data();
      }
      std::string key("E");
      append_key(key, x_md);
      append_key(key, dx_md);
      append_key(key, a);
      auto& p = lp.cached(key, [&] {
        dnnl::eltwise_forward::primitive_desc hint(
            dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, a.alg, x_md, a.alpha, a.beta), eng);
        dnnl::eltwise_backward::desc d(a.alg, dx_md, x_md, a.alpha, a.beta);
        return dnnl::primitive(dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(d, eng, hint)));
      });
      p.execute(s, {{DNNL_ARG_SRC, dnnl::memory(x_md, eng, mut(x.data()))},
                    {DNNL_ARG_DIFF_DST, dnnl::memory(dx_md, eng, g)},
                    {DNNL_ARG_DIFF_SRC, dnnl::memory(dx_md, eng, dx.data())}});
      if (grad.scale != 1.f)
        lp.eltwise(eng, s, {dnnl::algorithm::eltwise_linear, grad.scale, 0.f}, dx_md, dx.data(), dx.data());
      s.wait();
    });
  }

  // da, db (either may be empty: not wanted) of y = a op b.
  template <class T, class AF, class BF, class DYF, class DAF, class DBF>
  void binary_backward(layer_primitives& lp, const dnnl::engine& eng, dnnl::stream& s, binary_op kind,
                       tensor_view<const T, AF> a, tensor_view<const T, BF> b, tensor_view<const T, DYF> dy,
                       tensor_view<T, DAF> da, tensor_view<T, DBF> db) {
    validate_binary_backward(kind, a, b, dy, da, db);
    const auto dt = data_type_of<T>("onednn::binary_backward");
    if (empty(dy)) return;
    const auto full = [&](const auto& v) {
      for (int d = 0; d < DYF::rank; ++d)
        if (v.extent(d) != dy.extent(d)) return false;
      return true;
    };
    if (!full(a) || !full(b) || kind == binary_op::sub || kind == binary_op::div) {
      if constexpr (supported_v<T>) reference::binary_backward<T, AF, BF, DYF, DAF, DBF>(kind, a, b, dy, da, db);
      return;
    }
    const auto dy_md = activation_md(dy, dt);
    guarded("binary_backward", [&] {
      // add: each gradient is dy; mul: da = dy * b, db = dy * a.
      const auto grad = [&](auto d, const auto& other) {
        if (d.data() == nullptr) return;
        const auto d_md = activation_md(d, dt);
        if (kind == binary_op::add) {
          lp.reorder(eng, s, dy_md, mut(dy.data()), d_md, d.data());
          return;
        }
        const auto o_md = activation_md(other, dt);
        std::string key("B");
        append_key(key, dy_md);
        append_key(key, o_md);
        append_key(key, d_md);
        auto& p = lp.cached(key, [&] {
          dnnl::binary::desc bd(dnnl::algorithm::binary_mul, dy_md, o_md, d_md);
          return dnnl::primitive(dnnl::binary(dnnl::binary::primitive_desc(bd, eng)));
        });
        p.execute(s, {{DNNL_ARG_SRC_0, dnnl::memory(dy_md, eng, mut(dy.data()))},
                      {DNNL_ARG_SRC_1, dnnl::memory(o_md, eng, mut(other.data()))},
                      {DNNL_ARG_DST, dnnl::memory(d_md, eng, d.data())}});
      };
      grad(da, b);
      grad(db, a);
      s.wait();
    });
  }

  template <class T, class XF, class DYF, class DXF>
  void pool_backward(layer_primitives& lp, const dnnl::engine& eng, dnnl::stream& s, tensor_view<const T, XF> x,
                     tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx, const pool_params& p) {
    validate_pool_backward(x, dy, dx, p);
    const auto dt = data_type_of<T>("onednn::pool_backward");
    if (empty(dx)) return;
    const pool_geometry g = pool_geometry_of(x, dy, p);
    if (g.by_reference || empty(dy)) {
      if constexpr (supported_v<T>) reference::pool_backward<T, XF, DYF, DXF>(x, dy, dx, p);
      return;
    }
    run_pooling_backward(lp, eng, s, "pool_backward", g, activation_md(x, dt), x.data(), activation_md(dy, dt),
                         dy.data(), activation_md(dx, dt), dx.data());
  }

  template <class T, class DYF, class DXF>
  void global_average_pool_backward(layer_primitives& lp, const dnnl::engine& eng, dnnl::stream& s,
                                    tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx) {
    validate_global_pool_backward(dy, dx);
    const auto dt = data_type_of<T>("onednn::global_average_pool_backward");
    if (empty(dx)) return;
    pool_geometry g;
    g.alg = dnnl::algorithm::pooling_avg_exclude_padding;
    for (int i = 2; i < DXF::rank; ++i) {
      g.kernel.push_back(dx.extent(i));
      g.strides.push_back(1);
      g.pad_l.push_back(0);
      g.pad_r.push_back(0);
    }
    const auto dx_md = activation_md(dx, dt);
    run_pooling_backward(lp, eng, s, "global_average_pool_backward", g, dx_md, nullptr, activation_md(dy, dt),
                         dy.data(), dx_md, dx.data());
  }

  template <class T, class DYF, class DXF>
  void upsample_backward(layer_primitives& lp, const dnnl::engine& eng, dnnl::stream& s, tensor_view<const T, DYF> dy,
                         tensor_view<T, DXF> dx, const upsample_params& p) {
    validate_upsample_backward(dy, dx, p);
    const auto dt = data_type_of<T>("onednn::upsample_backward");
    if (empty(dx)) return;
    bool by_reference = empty(dy) || p.coordinates != resample_coordinates::pytorch;
    if (p.mode == resample_mode::nearest)
      for (int d = 2; d < DXF::rank; ++d) by_reference = by_reference || dy.extent(d) % dx.extent(d) != 0;
    if (by_reference) {
      if constexpr (supported_v<T>) reference::upsample_backward<T, DYF, DXF>(dy, dx, p);
      return;
    }
    const auto dy_md = activation_md(dy, dt), dx_md = activation_md(dx, dt);
    guarded("upsample_backward", [&] {
      std::string key("U");
      append_key(key, dy_md);
      append_key(key, dx_md);
      append_key(key, static_cast<std::int64_t>(p.mode));
      auto& prim = lp.cached(key, [&] {
        const auto alg =
            p.mode == resample_mode::nearest ? dnnl::algorithm::resampling_nearest : dnnl::algorithm::resampling_linear;
        dnnl::resampling_forward::primitive_desc hint(
            dnnl::resampling_forward::desc(dnnl::prop_kind::forward_training, alg, dx_md, dy_md), eng);
        dnnl::resampling_backward::desc d(alg, dx_md, dy_md);
        return dnnl::primitive(dnnl::resampling_backward(dnnl::resampling_backward::primitive_desc(d, eng, hint)));
      });
      prim.execute(s, {{DNNL_ARG_DIFF_DST, dnnl::memory(dy_md, eng, mut(dy.data()))},
                       {DNNL_ARG_DIFF_SRC, dnnl::memory(dx_md, eng, dx.data())}});
      s.wait();
    });
  }

  template <class T, class YF, class DYF, class DXF>
  void softmax_backward(layer_primitives& lp, const dnnl::engine& eng, dnnl::stream& s, tensor_view<const T, YF> y,
                        tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx, const softmax_params& p) {
    validate_softmax_backward(y, dy, dx);
    const auto dt = data_type_of<T>("onednn::softmax_backward");
    if (empty(dx)) return;
    const auto y_md = activation_md(y, dt), dy_md = activation_md(dy, dt), dx_md = activation_md(dx, dt);
    guarded("softmax_backward", [&] {
      std::string key("S");
      append_key(key, y_md);
      append_key(key, dy_md);
      append_key(key, dx_md);
      append_key(key, static_cast<std::int64_t>(p.log));
      auto& prim = lp.cached(key, [&] {
        const auto alg = p.log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
        dnnl::softmax_v2_forward::primitive_desc hint(
            dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_training, alg, y_md, y_md, 1), eng);
        dnnl::softmax_v2_backward::desc d(alg, dx_md, dy_md, y_md, 1);
        return dnnl::primitive(dnnl::softmax_v2_backward(dnnl::softmax_v2_backward::primitive_desc(d, eng, hint)));
      });
      prim.execute(s, {{DNNL_ARG_DST, dnnl::memory(y_md, eng, mut(y.data()))},
                       {DNNL_ARG_DIFF_DST, dnnl::memory(dy_md, eng, mut(dy.data()))},
                       {DNNL_ARG_DIFF_SRC, dnnl::memory(dx_md, eng, dx.data())}});
      s.wait();
    });
  }

  // dxs[i] = its slice of dy along the axis: one reorder from dy's submemory each.
  template <class T, class DYF, class DXF>
  void concat_backward(layer_primitives& lp, const dnnl::engine& eng, dnnl::stream& s, tensor_view<const T, DYF> dy,
                       const std::vector<tensor_view<T, DXF>>& dxs, const concat_params& p) {
    const std::vector<slice_params> where =
        validate_concat("onednn::concat_backward", dxs, "output gradient dy", dy, p);
    const auto dt = data_type_of<T>("onednn::concat_backward");
    if (empty(dy)) return;
    const auto dy_md = activation_md(dy, dt);
    guarded("concat_backward", [&] {
      for (std::size_t i = 0; i < dxs.size(); ++i) {
        if (!empty(dxs[i])) {
          const auto dx_md = activation_md(dxs[i], dt);
          dnnl::memory::dims offsets(static_cast<std::size_t>(DYF::rank), 0);
          offsets[static_cast<std::size_t>(p.axis)] = where[i].begin;
          lp.reorder(eng, s, dy_md.submemory_desc(dx_md.dims(), offsets), mut(dy.data()), dx_md, dxs[i].data());
        }
      }
      s.wait();
    });
  }

  // dx = 0 but at the slice's positions, which are dy: zeros, then the forward's copy reversed (the
  // reference kernel where dx is not dense, so has bytes the zeros must not touch).
  template <class T, class DYF, class DXF>
  void slice_backward(tensor_view<const T, DYF> dy, const slice_params& p, tensor_view<T, DXF> dx) {
    const slice_copy m = slice_copy_of("onednn::slice_backward", p, dx, dy, "input gradient dx", "output gradient dy");
    (void)data_type_of<T>("onednn::slice_backward");
    if (empty(dx)) return;
    if (!dx.mapping().is_packed()) {
      if constexpr (supported_v<T>) reference::slice_backward<T, DYF, DXF>(dy, p, dx);
      return;
    }
    std::memset(static_cast<void*>(dx.data()), 0, static_cast<std::size_t>(dx.numel()) * sizeof(T));
    if (empty(dy)) return;
    cpu::run_permuted_copy(m.copy.reversed(), sizeof(T), dy.data(), dx.data() + m.offset);
  }

 private:
  // A pooling's backward; a max pool first reruns its forward pass in training mode on x for the
  // workspace (the argmax of each window).
  void run_pooling_backward(layer_primitives& lp, const dnnl::engine& eng, dnnl::stream& s, const char* op,
                            const pool_geometry& g, const dnnl::memory::desc& x_md, const void* x,
                            const dnnl::memory::desc& dy_md, const void* dy, const dnnl::memory::desc& dx_md,
                            void* dx) {
    guarded(op, [&] {
      const auto fwd_desc = [&] {
        return dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, g.alg, x_md, dy_md, g.strides, g.kernel,
                                           g.pad_l, g.pad_r);
      };
      std::string key("P");  // the backward; "Q" + the same: the forward pass it reruns
      append_key(key, x_md);
      append_key(key, dy_md);
      append_key(key, dx_md);
      append_key(key, static_cast<std::int64_t>(g.alg));
      for (const auto* v : {&g.kernel, &g.strides, &g.pad_l, &g.pad_r})
        for (const auto e : *v) append_key(key, e);
      std::string fwd_key = key;
      fwd_key[0] = 'Q';
      auto& bwd = lp.cached(key, [&] {
        dnnl::pooling_forward::primitive_desc hint(fwd_desc(), eng);
        dnnl::pooling_backward::desc d(g.alg, dx_md, dy_md, g.strides, g.kernel, g.pad_l, g.pad_r);
        return dnnl::primitive(dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(d, eng, hint)));
      });
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, dnnl::memory(dy_md, eng, mut(dy))},
                                                 {DNNL_ARG_DIFF_SRC, dnnl::memory(dx_md, eng, dx)}};
      if (g.alg == dnnl::algorithm::pooling_max) {
        auto& fwd = lp.cached(fwd_key, [&] {
          return dnnl::primitive(dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(fwd_desc(), eng)));
        });
        const dnnl::memory::desc ws_md(
            *dnnl_primitive_desc_query_md(fwd.get_primitive_desc(), dnnl_query_workspace_md, 0));
        scratch_y_.resize(dy_md.get_size());
        workspace_.resize(ws_md.get_size());
        dnnl::memory ws(ws_md, eng, workspace_.data());
        fwd.execute(s, {{DNNL_ARG_SRC, dnnl::memory(x_md, eng, mut(x))},
                        {DNNL_ARG_DST, dnnl::memory(dy_md, eng, scratch_y_.data())},
                        {DNNL_ARG_WORKSPACE, ws}});
        args.emplace(DNNL_ARG_WORKSPACE, ws);
      }
      bwd.execute(s, args);
      s.wait();
    });
  }

  std::vector<unsigned char> scratch_y_, workspace_;
};

}  // namespace memfmt::onednn::detail
