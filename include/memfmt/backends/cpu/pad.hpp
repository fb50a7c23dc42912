// memfmt/backends/cpu/pad.hpp - fast spatial padding on the CPU (constant, reflect, replicate).
//
// The reference backend's pad (reference/pad.hpp: same arguments, validation and index rule, whose
// helpers it reuses) for float and bfloat16, written for speed: work goes row by row, an output row
// being the W positions of one (n, d, h) in a channels-last format, each a run of C contiguous
// channels, or of one (n, c, d, h) in a channels-first one, each a single element. The interior of a row is one
// block copy (when both layouts are dense along the row), border positions copy their source run
// or fill the constant. Inputs and outputs may differ in format (then elements are gathered one by
// one). Rows are shared out with OpenMP when the target is built with it.
//
// The backward of constant mode is a crop (each input position reads the output gradient at
// position + begin). Reflect and replicate read some input positions several times, so their
// backward sums: each input-gradient row gathers, in float, every output-gradient row whose source
// it is (per dim at most 3 for reflect, up to begin + end + 1 at a replicated edge) and rounds once.
// A row is written by one thread only: deterministic, no atomics.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../../dtype.hpp"
#include "../../tensor/tensor_view.hpp"
#include "../../layers/layer_params.hpp"
#include "../reference/pad.hpp"
#include "../validate.hpp"
#include "float_io.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace memfmt::cpu {

template <class T>
inline constexpr bool is_pad_type_v = std::is_same_v<T, float> || std::is_same_v<T, bfloat16>;

namespace pad_detail {

using reference::detail::dims5;

// Rows shorter than this many elements in all are not worth a thread team.
inline constexpr std::int64_t parallel_min_elements = std::int64_t{1} << 15;

// One spatial dim of a row copy: the source index of each destination index (-1: the constant),
// and the destination range [lo, hi) whose sources are consecutive, starting at `first`.
struct axis {
  std::vector<std::int64_t> src;
  std::int64_t lo = 0, hi = 0, first = 0;
};

// The padded dim: output o reads o - begin inside, the reference's rule outside.
inline axis padded_axis(pad_mode mode, std::int64_t in, std::int64_t begin, std::int64_t out) {
  return {reference::detail::pad_sources(mode, in, begin, out), begin, begin + in, 0};
}

// The cropped dim of the constant backward: input-gradient index i reads output-gradient i + begin.
inline axis cropped_axis(std::int64_t in, std::int64_t begin) {
  axis a{std::vector<std::int64_t>(static_cast<std::size_t>(in)), 0, in, begin};
  for (std::int64_t i = 0; i < in; ++i) a.src[static_cast<std::size_t>(i)] = i + begin;
  return a;
}

// The three spatial dims of a row copy.
struct axes {
  axis d, h, w;
};

// What the forward and the backward start from: the extents and strides (element units) of the
// unpadded tensor (x or dx) and of the padded one (y or dy), and the padding before D, H and W
// (none before the D of a 2-D tensor).
struct problem {
  dims5 in, out, in_stride, out_stride;
  std::array<std::int64_t, 3> begin;

  // The padded dims: the forward's gather and the sources the reflect and replicate backward sums.
  axes padded(pad_mode mode) const {
    return {padded_axis(mode, in.d, begin[0], out.d), padded_axis(mode, in.h, begin[1], out.h),
            padded_axis(mode, in.w, begin[2], out.w)};
  }
  // The cropped dims of the constant backward.
  axes cropped() const {
    return {cropped_axis(in.d, begin[0]), cropped_axis(in.h, begin[1]), cropped_axis(in.w, begin[2])};
  }
};

template <class IT, class IF, class OT, class OF>
problem problem_of(const tensor_view<IT, IF>& in, const tensor_view<OT, OF>& out, const pad_params& p) {
  namespace rd = reference::detail;
  return {rd::extents5(in), rd::extents5(out), rd::strides5(in), rd::strides5(out),
          rd::params_dhw<IF::rank - 2>(p.begin, 0)};
}

// How rows are laid out: a row holds `positions` positions of `run` elements each. A channels-last
// destination has rows (n, d, h) of runs of C channels; a channels-first one rows (n, c, d, h) of
// single elements. Strides are those of the source and destination views (element units).
struct row_geometry {
  std::int64_t rows = 0, run = 1;
  bool channels_last = false;
  dims5 src_stride{}, dst_stride{};
  std::int64_t src_run_stride = 1, dst_run_stride = 1;  // between the elements of one run
  std::int64_t src_pos_stride = 1, dst_pos_stride = 1;  // between positions along W
};

template <bool DstChannelsLast>
row_geometry geometry(const dims5& dst_ext, const dims5& src_stride, const dims5& dst_stride) {
  row_geometry g;
  g.channels_last = DstChannelsLast;
  g.src_stride = src_stride;
  g.dst_stride = dst_stride;
  g.src_pos_stride = src_stride.w;
  g.dst_pos_stride = dst_stride.w;
  if constexpr (DstChannelsLast) {
    g.rows = dst_ext.n * dst_ext.d * dst_ext.h;
    g.run = dst_ext.c;
    g.src_run_stride = src_stride.c;
    g.dst_run_stride = dst_stride.c;
  } else {
    g.rows = dst_ext.n * dst_ext.c * dst_ext.d * dst_ext.h;
  }
  return g;
}

// The (n, c, d, h) of destination row r (c = 0 for channels-last rows, whose runs span C).
struct row_index {
  std::int64_t n, c, d, h;
};
inline row_index row_of(const row_geometry& g, const dims5& e, std::int64_t r) noexcept {
  const std::int64_t h = r % e.h, rest = r / e.h, d = rest % e.d, nc = rest / e.d;
  return g.channels_last ? row_index{nc, 0, d, h} : row_index{nc / e.c, nc % e.c, d, h};
}

// Calls body(r) for every row, on a thread team when there is enough work.
template <class Body>
void for_rows(std::int64_t rows, std::int64_t elements, const Body& body) {
#if defined(_OPENMP)
  if (elements >= parallel_min_elements && rows > 1) {
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) body(r);
    return;
  }
#endif
  (void)elements;
  for (std::int64_t r = 0; r < rows; ++r) body(r);
}

// Copies run elements from src to dst (strided runs when the formats differ).
template <class T>
void copy_run(const T* src, T* dst, const row_geometry& g) noexcept {
  if (g.run == 1) {  // channels-first rows: no call for one element
    *dst = *src;
  } else if (g.src_run_stride == 1 && g.dst_run_stride == 1) {
    std::memcpy(dst, src, static_cast<std::size_t>(g.run) * sizeof(T));
  } else {
    for (std::int64_t k = 0; k < g.run; ++k) dst[k * g.dst_run_stride] = src[k * g.src_run_stride];
  }
}

template <class T>
void fill_run(T* dst, const row_geometry& g, T value) noexcept {
  for (std::int64_t k = 0; k < g.run; ++k) dst[k * g.dst_run_stride] = value;
}

// dst[n, c, d, h, w] = src[n, c, sd[d], sh[h], sw[w]], or `fill` where a source is -1: the forward
// of every mode and the backward of constant mode.
template <class T, bool DstChannelsLast>
void gather(const T* src, const dims5& src_stride, T* dst, const dims5& dst_ext, const dims5& dst_stride,
            const axes& ax, T fill) {
  if (dst_ext.n * dst_ext.c == 0) return;  // no elements (and maybe null pointers)
  const row_geometry g = geometry<DstChannelsLast>(dst_ext, src_stride, dst_stride);
  const std::int64_t width = dst_ext.w;
  const axis& aw = ax.w;
  // The interior is one block when both rows are dense runs placed end to end.
  const bool block =
      g.src_run_stride == 1 && g.dst_run_stride == 1 && g.src_pos_stride == g.run && g.dst_pos_stride == g.run;
  for_rows(g.rows, dst_ext.n * dst_ext.c * dst_ext.d * dst_ext.h * width, [&](std::int64_t r) {
    const row_index i = row_of(g, dst_ext, r);
    T* out = dst + i.n * dst_stride.n + i.c * dst_stride.c + i.d * dst_stride.d + i.h * dst_stride.h;
    const std::int64_t sd = ax.d.src[static_cast<std::size_t>(i.d)], sh = ax.h.src[static_cast<std::size_t>(i.h)];
    if (sd < 0 || sh < 0) {
      if (g.dst_run_stride == 1 && g.dst_pos_stride == g.run) std::fill_n(out, width * g.run, fill);
      else
        for (std::int64_t w = 0; w < width; ++w) fill_run(out + w * g.dst_pos_stride, g, fill);
      return;
    }
    const T* in = src + i.n * src_stride.n + i.c * src_stride.c + sd * src_stride.d + sh * src_stride.h;
    auto border = [&](std::int64_t w) {
      const std::int64_t s = aw.src[static_cast<std::size_t>(w)];
      if (s < 0) fill_run(out + w * g.dst_pos_stride, g, fill);
      else copy_run(in + s * g.src_pos_stride, out + w * g.dst_pos_stride, g);
    };
    for (std::int64_t w = 0; w < aw.lo; ++w) border(w);
    if (block) {
      std::memcpy(out + aw.lo * g.run, in + aw.first * g.run,
                  static_cast<std::size_t>((aw.hi - aw.lo) * g.run) * sizeof(T));
    } else {
      for (std::int64_t w = aw.lo; w < aw.hi; ++w)
        copy_run(in + (aw.first + w - aw.lo) * g.src_pos_stride, out + w * g.dst_pos_stride, g);
    }
    for (std::int64_t w = aw.hi; w < width; ++w) border(w);
  });
}

// For each index of the source dim, the destination indices that read it (the inverse of src).
struct inverse_axis {
  std::vector<std::int64_t> start, items;  // readers of i: items[start[i] .. start[i + 1])
};
inline inverse_axis invert(const std::vector<std::int64_t>& src, std::int64_t extent) {
  inverse_axis inv;
  inv.start.assign(static_cast<std::size_t>(extent) + 1, 0);
  for (const std::int64_t s : src)
    if (s >= 0) ++inv.start[static_cast<std::size_t>(s) + 1];
  for (std::size_t i = 1; i < inv.start.size(); ++i) inv.start[i] += inv.start[i - 1];
  inv.items.resize(static_cast<std::size_t>(inv.start.back()));
  std::vector<std::int64_t> next(inv.start.begin(), inv.start.end() - 1);
  for (std::size_t o = 0; o < src.size(); ++o)
    if (src[o] >= 0)
      inv.items[static_cast<std::size_t>(next[static_cast<std::size_t>(src[o])]++)] = static_cast<std::int64_t>(o);
  return inv;
}

// dx[n, c, i, j, k] = the sum of dy over every position whose sources are (i, j, k): the backward
// of reflect and replicate. dx rows are the destination rows; each sums into a float row.
template <class T, bool DstChannelsLast>
void scatter_sum(const T* dy, const dims5& dy_ext, const dims5& dy_stride, T* dx, const dims5& dx_ext,
                 const dims5& dx_stride, const axes& ax) {
  if (dx_ext.n * dx_ext.c == 0) return;  // no elements (and maybe null pointers)
  const row_geometry g = geometry<DstChannelsLast>(dx_ext, dy_stride, dx_stride);
  const inverse_axis id = invert(ax.d.src, dx_ext.d), ih = invert(ax.h.src, dx_ext.h);
  const axis& aw = ax.w;
  const std::int64_t row_len = dx_ext.w * g.run;
  int threads = 1;
#if defined(_OPENMP)
  threads = omp_get_max_threads();
#endif
  std::vector<float> scratch(static_cast<std::size_t>(threads) * static_cast<std::size_t>(row_len));
  const bool dense_src = g.src_run_stride == 1 && g.src_pos_stride == g.run;
  for_rows(g.rows, dy_ext.n * dy_ext.c * dy_ext.d * dy_ext.h * dy_ext.w, [&](std::int64_t r) {
    int t = 0;
#if defined(_OPENMP)
    t = omp_get_thread_num();
#endif
    float* acc = scratch.data() + static_cast<std::size_t>(t) * static_cast<std::size_t>(row_len);
    std::fill_n(acc, row_len, 0.0f);
    const row_index i = row_of(g, dx_ext, r);
    for (std::int64_t a = id.start[static_cast<std::size_t>(i.d)]; a < id.start[static_cast<std::size_t>(i.d) + 1]; ++a)
      for (std::int64_t b = ih.start[static_cast<std::size_t>(i.h)]; b < ih.start[static_cast<std::size_t>(i.h) + 1];
           ++b) {
        const T* in = dy + i.n * dy_stride.n + i.c * dy_stride.c + id.items[static_cast<std::size_t>(a)] * dy_stride.d +
                      ih.items[static_cast<std::size_t>(b)] * dy_stride.h;
        auto add_run = [&](std::int64_t w, std::int64_t s) {
          float* to = acc + s * g.run;
          const T* from = in + w * g.src_pos_stride;
          if (g.run == 1) *to += to_float(*from);
          else
            for (std::int64_t k = 0; k < g.run; ++k) to[k] += to_float(from[k * g.src_run_stride]);
        };
        if (dense_src) {  // the interior: one contiguous sum
          const T* from = in + aw.lo * g.run;
          for (std::int64_t k = 0; k < row_len; ++k) acc[k] += to_float(from[k]);
        } else {
          for (std::int64_t w = aw.lo; w < aw.hi; ++w) add_run(w, w - aw.lo);
        }
        for (std::int64_t w = 0; w < aw.lo; ++w) add_run(w, aw.src[static_cast<std::size_t>(w)]);
        for (std::int64_t w = aw.hi; w < dy_ext.w; ++w) add_run(w, aw.src[static_cast<std::size_t>(w)]);
      }
    T* out = dx + i.n * dx_stride.n + i.c * dx_stride.c + i.d * dx_stride.d + i.h * dx_stride.h;
    if (g.dst_run_stride == 1 && g.dst_pos_stride == g.run) {
      for (std::int64_t k = 0; k < row_len; ++k) out[k] = from_float<T>(acc[k]);
      return;
    }
    for (std::int64_t w = 0; w < dx_ext.w; ++w)
      for (std::int64_t k = 0; k < g.run; ++k)
        out[w * g.dst_pos_stride + k * g.dst_run_stride] = from_float<T>(acc[w * g.run + k]);
  });
}

}  // namespace pad_detail

// y = x padded by p (torch.nn.functional.pad over the spatial dims), x and y of any formats of one
// rank; they must not overlap.
template <class T, class XF, class YF>
void pad_forward(tensor_view<const T, XF> x, tensor_view<T, YF> y, const pad_params& p) {
  static_assert(is_pad_type_v<T>, "memfmt::cpu::pad_forward: T must be float or bfloat16");
  validate_pad_forward(x, y, p);
  const pad_detail::problem q = pad_detail::problem_of(x, y, p);
  pad_detail::gather<T, YF::channels_last>(x.data(), q.in_stride, y.data(), q.out, q.out_stride, q.padded(p.mode),
                                           reference::detail::from_double<T>(p.value));
}

// dx (its extents are the input's) = the gradient of pad_forward.
template <class T, class DYF, class DXF>
void pad_backward(tensor_view<const T, DYF> dy, tensor_view<T, DXF> dx, const pad_params& p) {
  static_assert(is_pad_type_v<T>, "memfmt::cpu::pad_backward: T must be float or bfloat16");
  validate_pad_backward(dy, dx, p);
  const pad_detail::problem q = pad_detail::problem_of(dx, dy, p);
  if (p.mode == pad_mode::constant)
    pad_detail::gather<T, DXF::channels_last>(dy.data(), q.out_stride, dx.data(), q.in, q.in_stride, q.cropped(), T{});
  else
    pad_detail::scatter_sum<T, DXF::channels_last>(dy.data(), q.out, q.out_stride, dx.data(), q.in, q.in_stride,
                                                   q.padded(p.mode));
}

}  // namespace memfmt::cpu
