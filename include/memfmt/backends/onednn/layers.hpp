// memfmt/backends/onednn/layers.hpp - the layers other than convolution and batch norm on oneDNN.
//
// Activation (eltwise), binary, pooling, global average pooling, upsampling (resampling), concat
// (along any axis) and softmax, and slices and rearrangements (memfmt's CPU copy kernel,
// cpu/permuted_copy.hpp), with the reference backend's arguments and semantics. onednn::backend owns one
// layer_primitives and forwards to it with its engine and stream; primitives are cached by operation, descriptors and
// attributes.
//
// Where oneDNN 2.6 computes something else than PyTorch, the call runs the reference kernel
// instead (same result, no speed): a binary op whose first operand is broadcast, unless the op
// commutes and the second is not (oneDNN broadcasts only its second source), an average pool counting padding whose
// ceil-mode window runs past the end padding (oneDNN divides by the whole kernel), a nearest
// upsample by a non-integer factor (oneDNN rounds the source index, PyTorch floors it) and an
// upsample with ONNX coordinates (oneDNN has PyTorch's only).
// hardsigmoid has no oneDNN 2.6 eltwise algorithm: it runs as two, x / 6 + 1/2 (eltwise_linear)
// then a clip to [0, 1] in place (given the clip as a post-op, 2.6 runs its slow ref:any kernel).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "../../error.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../cpu/permuted_copy.hpp"
#include "../../layers/layer_params.hpp"
#include "../rearrange.hpp"
#include "../reference/binary.hpp"
#include "../reference/pooling.hpp"
#include "../reference/upsample.hpp"
#include "../slice.hpp"
#include "../validate.hpp"
#include "descriptors.hpp"
#include "status.hpp"

namespace memfmt::onednn::detail {

struct eltwise_alg {
  dnnl::algorithm alg;
  float alpha, beta;
};

// Appends an eltwise algorithm with its alpha and beta to a cache key.
inline void append_key(std::string& key, const eltwise_alg& a) {
  append_key(key, static_cast<std::int64_t>(a.alg));
  key.append(reinterpret_cast<const char*>(&a.alpha), sizeof a.alpha);
  key.append(reinterpret_cast<const char*>(&a.beta), sizeof a.beta);
}

// The oneDNN 2.6 eltwise algorithms an activation runs as, applied in order: one for each but
// hardsigmoid, which 2.6 has none for: alpha x + beta, then clipped to [0, 1].
struct eltwise_steps {
  std::array<eltwise_alg, 2> step;
  int count = 1;
};

inline eltwise_steps eltwise_of(const activation_params& f) noexcept {
  const auto one = [](dnnl::algorithm alg, double alpha, double beta) {
    return eltwise_steps{{eltwise_alg{alg, static_cast<float>(alpha), static_cast<float>(beta)}, eltwise_alg{}}, 1};
  };
  switch (f.kind) {
    case activation::identity: return one(dnnl::algorithm::eltwise_linear, 1.0, 0.0);
    case activation::relu: return one(dnnl::algorithm::eltwise_relu, 0.0, 0.0);
    case activation::relu6: return one(dnnl::algorithm::eltwise_clip, 0.0, 6.0);
    case activation::silu: return one(dnnl::algorithm::eltwise_swish, 1.0, 0.0);
    case activation::sigmoid: return one(dnnl::algorithm::eltwise_logistic, 0.0, 0.0);
    case activation::hardswish: return one(dnnl::algorithm::eltwise_hardswish, 0.0, 0.0);
    case activation::tanh: return one(dnnl::algorithm::eltwise_tanh, 0.0, 0.0);
    case activation::leaky_relu: return one(dnnl::algorithm::eltwise_relu, f.alpha, 0.0);  // alpha: negative slope
    case activation::clip: return one(dnnl::algorithm::eltwise_clip, f.alpha, f.beta);
    case activation::elu: return one(dnnl::algorithm::eltwise_elu, f.alpha, 0.0);
    case activation::gelu: return one(dnnl::algorithm::eltwise_gelu_erf, 0.0, 0.0);
    case activation::gelu_tanh: return one(dnnl::algorithm::eltwise_gelu_tanh, 0.0, 0.0);
    case activation::softplus: return one(dnnl::algorithm::eltwise_soft_relu, 0.0, 0.0);  // 2.6: ln(1 + e^x)
    case activation::mish: return one(dnnl::algorithm::eltwise_mish, 0.0, 0.0);
    case activation::hardsigmoid: break;
  }
  const eltwise_alg affine{dnnl::algorithm::eltwise_linear, static_cast<float>(f.alpha), static_cast<float>(f.beta)};
  return eltwise_steps{{affine, eltwise_alg{dnnl::algorithm::eltwise_clip, 0.f, 1.f}}, 2};
}

inline dnnl::algorithm binary_alg(binary_op k) noexcept {
  switch (k) {
    case binary_op::add: return dnnl::algorithm::binary_add;
    case binary_op::sub: return dnnl::algorithm::binary_sub;
    case binary_op::mul: return dnnl::algorithm::binary_mul;
    case binary_op::div: return dnnl::algorithm::binary_div;
  }
  return dnnl::algorithm::binary_add;
}

// oneDNN's pooling of x into y: algorithm, window, strides and paddings; by_reference where oneDNN
// computes something else than PyTorch (an average pool counting padding whose ceil-mode window
// runs past the end padding).
struct pool_geometry {
  dnnl::algorithm alg;
  dnnl::memory::dims kernel, strides, pad_l, pad_r;
  bool by_reference = false;
};

template <class XV, class YV>
pool_geometry pool_geometry_of(const XV& x, const YV& y, const pool_params& p) {
  pool_geometry g;
  bool overhang = false;
  for (int i = 0; i < static_cast<int>(x.extents().size()) - 2; ++i) {
    g.kernel.push_back(p.kernel[i]);
    g.strides.push_back(p.stride[i]);
    g.pad_l.push_back(p.padding[i]);
    // The end padding that makes the output size exact: past padding_end only in ceil mode.
    g.pad_r.push_back((y.extent(2 + i) - 1) * p.stride[i] + p.kernel[i] - x.extent(2 + i) - p.padding[i]);
    overhang = overhang || g.pad_r.back() > p.padding_end[i];
  }
  const bool average = p.kind == pool_kind::average;
  g.by_reference = average && p.count_include_pad && overhang;
  g.alg = !average              ? dnnl::algorithm::pooling_max
          : p.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                : dnnl::algorithm::pooling_avg_exclude_padding;
  return g;
}

template <class T, class F>
bool empty(const tensor_view<T, F>& v) noexcept {
  for (int d = 0; d < F::rank; ++d)
    if (v.extent(d) == 0) return true;
  return false;
}

class layer_primitives {
 public:
  std::size_t size() const noexcept { return prims_.size(); }

  template <class T, class XF, class YF>
  void activation_forward(const dnnl::engine& eng, dnnl::stream& s, const activation_params& f,
                          tensor_view<const T, XF> x, tensor_view<T, YF> y) {
    validate_activation_forward(f, x, y);
    const auto dt = data_type_of<T>("onednn::activation_forward");
    if (empty(y)) return;
    const eltwise_steps steps = eltwise_of(f);
    const auto x_md = activation_md(x, dt), y_md = activation_md(y, dt);
    guarded("activation_forward", [&] {
      // oneDNN's eltwise keeps its source's layout: a format change is a reorder, then in place.
      void* src = mut(x.data());
      if (x_md != y_md) {
        reorder(eng, s, x_md, src, y_md, y.data());
        src = y.data();
      }
      for (int i = 0; i < steps.count; ++i)
        eltwise(eng, s, steps.step[static_cast<std::size_t>(i)], y_md, i == 0 ? src : y.data(), y.data());
      s.wait();
    });
  }

  template <class T, class AF, class BF, class YF>
  void binary_forward(const dnnl::engine& eng, dnnl::stream& s, binary_op kind, tensor_view<const T, AF> a,
                      tensor_view<const T, BF> b, tensor_view<T, YF> y) {
    validate_binary_forward(a, b, y);
    const auto dt = data_type_of<T>("onednn::binary_forward");
    if (empty(y)) return;
    const auto full = [&](const auto& v) {
      for (int d = 0; d < YF::rank; ++d)
        if (v.extent(d) != y.extent(d)) return false;
      return true;
    };
    auto a_md = activation_md(a, dt), b_md = activation_md(b, dt);
    const void* ad = a.data();
    const void* bd = b.data();
    if (!full(a)) {
      if (!full(b) || kind == binary_op::sub || kind == binary_op::div) {
        if constexpr (supported_v<T>) reference::binary_forward<T, AF, BF, YF>(kind, a, b, y);
        return;
      }
      std::swap(a_md, b_md);
      std::swap(ad, bd);
    }
    const auto y_md = activation_md(y, dt);
    guarded("binary_forward", [&] {
      std::string key("b");
      append_key(key, a_md);
      append_key(key, b_md);
      append_key(key, y_md);
      append_key(key, static_cast<std::int64_t>(kind));
      auto& p = cached(key, [&] {
        dnnl::binary::desc d(binary_alg(kind), a_md, b_md, y_md);
        return dnnl::primitive(dnnl::binary(dnnl::binary::primitive_desc(d, eng)));
      });
      p.execute(s, {{DNNL_ARG_SRC_0, dnnl::memory(a_md, eng, mut(ad))},
                    {DNNL_ARG_SRC_1, dnnl::memory(b_md, eng, mut(bd))},
                    {DNNL_ARG_DST, dnnl::memory(y_md, eng, y.data())}});
      s.wait();
    });
  }

  template <class T, class XF, class YF>
  void pool_forward(const dnnl::engine& eng, dnnl::stream& s, tensor_view<const T, XF> x, tensor_view<T, YF> y,
                    const pool_params& p) {
    validate_pool_forward(x, y, p);
    const auto dt = data_type_of<T>("onednn::pool_forward");
    if (empty(y)) return;
    const pool_geometry g = pool_geometry_of(x, y, p);
    if (g.by_reference) {
      if constexpr (supported_v<T>) reference::pool_forward<T, XF, YF>(x, y, p);
      return;
    }
    run_pooling(eng, s, "pool_forward", g.alg, activation_md(x, dt), x.data(), activation_md(y, dt), y.data(), g.kernel,
                g.strides, g.pad_l, g.pad_r);
  }

  // The average over each channel's whole map: a pooling whose kernel is the map.
  template <class T, class XF, class YF>
  void global_average_pool_forward(const dnnl::engine& eng, dnnl::stream& s, tensor_view<const T, XF> x,
                                   tensor_view<T, YF> y) {
    validate_global_pool_forward(x, y);
    const auto dt = data_type_of<T>("onednn::global_average_pool_forward");
    if (empty(y)) return;
    dnnl::memory::dims kernel, ones, zeros;
    for (int i = 2; i < XF::rank; ++i) {
      kernel.push_back(x.extent(i));
      ones.push_back(1);
      zeros.push_back(0);
    }
    run_pooling(eng, s, "global_average_pool_forward", dnnl::algorithm::pooling_avg_exclude_padding,
                activation_md(x, dt), x.data(), activation_md(y, dt), y.data(), kernel, ones, zeros, zeros);
  }

  template <class T, class XF, class YF>
  void upsample_forward(const dnnl::engine& eng, dnnl::stream& s, tensor_view<const T, XF> x, tensor_view<T, YF> y,
                        const upsample_params& p) {
    validate_upsample_forward(x, y, p);
    const auto dt = data_type_of<T>("onednn::upsample_forward");
    if (empty(y)) return;
    bool by_reference = p.coordinates != resample_coordinates::pytorch;
    if (p.mode == resample_mode::nearest)
      for (int d = 2; d < XF::rank; ++d) by_reference = by_reference || y.extent(d) % x.extent(d) != 0;
    if (by_reference) {
      if constexpr (supported_v<T>) reference::upsample_forward<T, XF, YF>(x, y, p);
      return;
    }
    const auto x_md = activation_md(x, dt), y_md = activation_md(y, dt);
    guarded("upsample_forward", [&] {
      std::string key("u");
      append_key(key, x_md);
      append_key(key, y_md);
      append_key(key, static_cast<std::int64_t>(p.mode));
      auto& prim = cached(key, [&] {
        const auto alg =
            p.mode == resample_mode::nearest ? dnnl::algorithm::resampling_nearest : dnnl::algorithm::resampling_linear;
        dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference, alg, x_md, y_md);
        return dnnl::primitive(dnnl::resampling_forward(dnnl::resampling_forward::primitive_desc(d, eng)));
      });
      prim.execute(s, {{DNNL_ARG_SRC, dnnl::memory(x_md, eng, mut(x.data()))},
                       {DNNL_ARG_DST, dnnl::memory(y_md, eng, y.data())}});
      s.wait();
    });
  }

  template <class T, class XF, class YF>
  void concat_forward(const dnnl::engine& eng, dnnl::stream& s, const std::vector<tensor_view<const T, XF>>& xs,
                      tensor_view<T, YF> y, const concat_params& cp) {
    validate_concat("onednn::concat_forward", xs, "output y", y, cp);
    const auto dt = data_type_of<T>("onednn::concat_forward");
    if (empty(y)) return;
    std::vector<dnnl::memory::desc> mds;
    std::vector<const void*> data;
    for (const auto& x : xs)
      if (x.extent(cp.axis) > 0) {  // oneDNN takes no empty source
        mds.push_back(activation_md(x, dt));
        data.push_back(x.data());
      }
    const auto y_md = activation_md(y, dt);
    guarded("concat_forward", [&] {
      std::string key("c");
      append_key(key, static_cast<std::int64_t>(cp.axis));
      append_key(key, y_md);
      for (const auto& md : mds) append_key(key, md);
      auto& p = cached(
          key, [&] { return dnnl::primitive(dnnl::concat(dnnl::concat::primitive_desc(y_md, cp.axis, mds, eng))); });
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DST, dnnl::memory(y_md, eng, y.data())}};
      for (std::size_t i = 0; i < mds.size(); ++i)
        args.emplace(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), dnnl::memory(mds[i], eng, mut(data[i])));
      p.execute(s, args);
      s.wait();
    });
  }

  template <class T, class XF, class YF>
  void softmax_forward(const dnnl::engine& eng, dnnl::stream& s, tensor_view<const T, XF> x, tensor_view<T, YF> y,
                       const softmax_params& p) {
    validate_softmax_forward(x, y);
    const auto dt = data_type_of<T>("onednn::softmax_forward");
    if (empty(y)) return;
    const auto x_md = activation_md(x, dt), y_md = activation_md(y, dt);
    guarded("softmax_forward", [&] {
      std::string key("s");
      append_key(key, x_md);
      append_key(key, y_md);
      append_key(key, static_cast<std::int64_t>(p.log));
      auto& prim = cached(key, [&] {
        dnnl::softmax_v2_forward::desc d(dnnl::prop_kind::forward_inference,
                                         p.log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate, x_md,
                                         y_md, 1);
        return dnnl::primitive(dnnl::softmax_v2_forward(dnnl::softmax_v2_forward::primitive_desc(d, eng)));
      });
      prim.execute(s, {{DNNL_ARG_SRC, dnnl::memory(x_md, eng, mut(x.data()))},
                       {DNNL_ARG_DST, dnnl::memory(y_md, eng, y.data())}});
      s.wait();
    });
  }

  // y = the slice p of x: one strided copy (slice.hpp) by memfmt's CPU kernel; oneDNN's reorder
  // moves a step-2 slice element by element.
  template <class T, class XF, class YF>
  void slice_forward(tensor_view<const T, XF> x, const slice_params& p, tensor_view<T, YF> y) {
    const slice_copy m = slice_copy_of("onednn::slice_forward", p, x, y);
    (void)data_type_of<T>("onednn::slice_forward");
    if (empty(y)) return;
    cpu::run_permuted_copy(m.copy, sizeof(T), x.data() + m.offset, y.data());
  }

  // A rearrangement is one permuted copy between x and y (rearrange.hpp) by memfmt's CPU kernel,
  // whose batched transposes run as format conversions; its backward pass is the same copy the
  // other way.
  template <class T, class XF, class YF>
  void rearrange_forward(tensor_view<const T, XF> x, const rearrange_params& p, tensor_view<T, YF> y) {
    const permuted_copy m = rearrange_copy("onednn::rearrange_forward", p, x, y);
    (void)data_type_of<T>("onednn::rearrange_forward");
    cpu::run_permuted_copy(m, sizeof(T), x.data(), y.data());
  }

  template <class T, class DYF, class DXF>
  void rearrange_backward(tensor_view<const T, DYF> dy, const rearrange_params& p, tensor_view<T, DXF> dx) {
    const permuted_copy m = rearrange_backward_copy("onednn::rearrange_backward", p, dy, dx);
    (void)data_type_of<T>("onednn::rearrange_backward");
    cpu::run_permuted_copy(m, sizeof(T), dy.data(), dx.data());
  }

  // dst = a(src), both in layout md (dst may be src): one eltwise primitive, not waited for.
  void eltwise(const dnnl::engine& eng, dnnl::stream& s, const eltwise_alg& a, const dnnl::memory::desc& md, void* src,
               void* dst) {
    std::string key("e");
    append_key(key, md);
    append_key(key, a);
    auto& p = cached(key, [&] {
      dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, a.alg, md, a.alpha, a.beta);
      return dnnl::primitive(dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, eng)));
    });
    p.execute(s, {{DNNL_ARG_SRC, dnnl::memory(md, eng, src)}, {DNNL_ARG_DST, dnnl::memory(md, eng, dst)}});
  }

  void reorder(const dnnl::engine& eng, dnnl::stream& s, const dnnl::memory::desc& from, void* src,
               const dnnl::memory::desc& to, void* dst) {
    std::string key("r");
    append_key(key, from);
    append_key(key, to);
    auto& p =
        cached(key, [&] { return dnnl::primitive(dnnl::reorder(dnnl::reorder::primitive_desc(eng, from, eng, to))); });
    p.execute(s, {{DNNL_ARG_FROM, dnnl::memory(from, eng, src)}, {DNNL_ARG_TO, dnnl::memory(to, eng, dst)}});
  }

  // The primitive cached under `key`, made by make() on first use (the backward passes,
  // backward.hpp, share this cache under their own key prefixes).
  template <class Make>
  dnnl::primitive& cached(std::string& key, Make&& make) {
    auto it = prims_.find(key);
    if (it == prims_.end()) it = prims_.emplace(std::move(key), make()).first;
    return it->second;
  }

 private:
  void run_pooling(const dnnl::engine& eng, dnnl::stream& s, const char* op, dnnl::algorithm alg,
                   const dnnl::memory::desc& x_md, const void* x, const dnnl::memory::desc& y_md, void* y,
                   const dnnl::memory::dims& kernel, const dnnl::memory::dims& strides, const dnnl::memory::dims& pad_l,
                   const dnnl::memory::dims& pad_r) {
    guarded(op, [&] {
      std::string key("p");
      append_key(key, x_md);
      append_key(key, y_md);
      append_key(key, static_cast<std::int64_t>(alg));
      for (const auto* v : {&kernel, &strides, &pad_l, &pad_r})
        for (const auto e : *v) append_key(key, e);
      auto& p = cached(key, [&] {
        dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, alg, x_md, y_md, strides, kernel, pad_l,
                                      pad_r);
        return dnnl::primitive(dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(d, eng)));
      });
      p.execute(s, {{DNNL_ARG_SRC, dnnl::memory(x_md, eng, mut(x))}, {DNNL_ARG_DST, dnnl::memory(y_md, eng, y)}});
      s.wait();
    });
  }

  std::unordered_map<std::string, dnnl::primitive> prims_;
};

}  // namespace memfmt::onednn::detail
