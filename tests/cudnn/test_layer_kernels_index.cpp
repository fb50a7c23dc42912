// The cuDNN backend's own layer kernels (cuda_layer_kernels.cuh) replayed on the CPU: every
// thread's work, through layer_kernels_index.hpp's functions (the code the device runs), against
// the reference backend: global average pooling forward and backward, the sums of a broadcast
// operand's gradient, binary ops with a broadcast operand and their gradients, and pooling
// backward for every rule (max with ties and a NaN, average with
// and without the padding counted, ceil mode, asymmetric padding, 3-D), in both formats.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <memfmt/backends/cudnn/layer_kernels_hook.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/tensor/host_tensor.hpp>

namespace {

using namespace memfmt;
namespace lk = memfmt::cudnn::lk;

template <class T, class F>
void fill(host_tensor<T, F>& t, std::uint32_t seed, double levels = 0.0) {
  T* p = t.view().data();
  std::uint32_t s = seed * 2654435761u + 1u;
  for (std::int64_t i = 0; i < t.view().numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    const double u = static_cast<double>(s >> 8) / static_cast<double>(1u << 24) * 2.0 - 1.0;
    p[i] = static_cast<T>(levels > 0 ? std::round(u * levels) : u);  // levels: few values, many ties
  }
}

// Every thread of a reduce_sum launch over dst.
template <class SrcV, class DstV>
void replay_reduce_sum(SrcV src, DstV dst, double scale) {
  const lk::view5 s = cudnn::view5_of(src), d = cudnn::view5_of(dst);
  for (std::int64_t i = 0; i < lk::numel(d); ++i) {
    std::int64_t at[5];
    lk::unravel(d, i, at);
    dst.data()[lk::offset(d, at)] =
        lk::reduce_sum_at<double>(s, d, i, scale, [&](std::int64_t o) { return static_cast<double>(src.data()[o]); });
  }
}

template <class T, class F>
void expect_near(const host_tensor<T, F>& got, const host_tensor<T, F>& want, const std::string& what) {
  for (std::int64_t i = 0; i < want.view().numel(); ++i) {
    const double g = got.view().data()[i], w = want.view().data()[i];
    ASSERT_NEAR(g, w, 1e-12 * (1.0 + std::abs(w))) << what << " at memory index " << i;
  }
}

template <class F>
void global_pool_case(const typename host_tensor<double, F>::extents_type& xe) {
  SCOPED_TRACE(F::name);
  reference::backend ref;
  auto ye = xe;
  std::int64_t positions = 1;
  for (std::size_t d = 2; d < xe.size(); ++d) {
    positions *= xe[d];
    ye[d] = 1;
  }
  host_tensor<double, F> x(xe), y(ye), want_y(ye), dy(ye), dx(xe), want_dx(xe);
  fill(x, 1);
  fill(dy, 2);
  replay_reduce_sum(x.const_view(), y.view(), 1.0 / static_cast<double>(positions));
  ref.global_average_pool_forward(x.const_view(), want_y.view());
  expect_near(y, want_y, "global average pool forward");
  // expand: every thread of the backward's launch.
  const lk::view5 s = cudnn::view5_of(dy.const_view()), d = cudnn::view5_of(dx.view());
  for (std::int64_t i = 0; i < lk::numel(d); ++i) {
    std::int64_t at[5];
    lk::unravel(d, i, at);
    dx.view().data()[lk::offset(d, at)] = dy.view().data()[lk::expand_source_offset(s, d, i)] / positions;
  }
  ref.global_average_pool_backward(dy.const_view(), want_dx.view());
  expect_near(dx, want_dx, "global average pool backward");
}

TEST(CudnnLayerKernelsIndex, GlobalAveragePoolForwardAndBackward) {
  global_pool_case<nchw>({2, 5, 4, 3});
  global_pool_case<nhwc>({2, 5, 4, 3});
  global_pool_case<nhwc>({3, 7, 1, 1});
  global_pool_case<ncdhw>({2, 3, 2, 4, 3});
  global_pool_case<ndhwc>({2, 3, 2, 4, 3});
}

// The gradient of a broadcast addend is dy summed over the dimensions it is broadcast along.
template <class F>
void broadcast_sum_case(const std::array<std::int64_t, 4>& be) {
  SCOPED_TRACE(std::string(F::name) + " b " + memfmt::detail::dims_to_string(be));
  reference::backend ref;
  const std::array<std::int64_t, 4> full{2, 6, 4, 3};
  host_tensor<double, F> a(full), b(be), dy(full), da(full), want_db(be), db(be);
  fill(a, 3);
  fill(b, 4);
  fill(dy, 5);
  ref.binary_backward(binary_op::add, a.const_view(), b.const_view(), dy.const_view(), da.view(), want_db.view());
  replay_reduce_sum(dy.const_view(), db.view(), 1.0);
  expect_near(db, want_db, "broadcast gradient sum");
}

TEST(CudnnLayerKernelsIndex, BroadcastGradientSums) {
  for (const auto& be : {std::array<std::int64_t, 4>{1, 6, 1, 1},
                         {2, 6, 1, 1},
                         {1, 1, 4, 3},
                         {2, 1, 4, 3},
                         {1, 6, 4, 1},
                         {1, 1, 1, 1},
                         {2, 6, 4, 3}}) {
    broadcast_sum_case<nchw>(be);
    broadcast_sum_case<nhwc>(be);
  }
}

// Binary ops with a broadcast operand: every thread of the forward launch, and of the gradient
// launch at dy's extents followed by the sum over the broadcast dims (binary_backward's two kernels).
template <class F>
void binary_case(binary_op op, bool b_broadcast, const std::array<std::int64_t, 4>& small) {
  SCOPED_TRACE(std::string(F::name) + " op " + std::to_string(static_cast<int>(op)) + " small " +
               memfmt::detail::dims_to_string(small) + (b_broadcast ? " as b" : " as a"));
  reference::backend ref;
  const std::array<std::int64_t, 4> full{2, 6, 4, 3};
  const auto ae = b_broadcast ? full : small, be = b_broadcast ? small : full;
  host_tensor<double, F> a(ae), b(be), y(full), want_y(full), dy(full), da(ae), db(be), want_da(ae), want_db(be),
      scratch(full);
  fill(a, 8);
  fill(b, 9);
  for (double* p = b.view().data(); p != b.view().data() + b.view().numel(); ++p) *p += *p >= 0 ? 0.5 : -0.5;
  fill(dy, 10);
  const lk::view5 av = cudnn::view5_of(a.const_view()), bv = cudnn::view5_of(b.const_view()),
                  yv = cudnn::view5_of(y.const_view()), dyv = cudnn::view5_of(dy.const_view());
  for (std::int64_t i = 0; i < lk::numel(yv); ++i) {
    std::int64_t at[5];
    lk::unravel(yv, i, at);
    y.view().data()[lk::offset(yv, at)] =
        lk::binary_at<double>(static_cast<int>(op), a.view().data()[lk::expand_source_offset(av, yv, i)],
                              b.view().data()[lk::expand_source_offset(bv, yv, i)]);
  }
  ref.binary_forward(op, a.const_view(), b.const_view(), want_y.view());
  expect_near(y, want_y, "binary forward");
  ref.binary_backward(op, a.const_view(), b.const_view(), dy.const_view(), want_da.view(), want_db.view());
  const auto grad = [&](bool of_b, auto& g) {
    for (std::int64_t i = 0; i < lk::numel(dyv); ++i) {
      std::int64_t at[5];
      lk::unravel(dyv, i, at);
      scratch.view().data()[lk::offset(dyv, at)] = lk::binary_grad_at<double>(
          static_cast<int>(op), of_b, dy.view().data()[lk::offset(dyv, at)],
          a.view().data()[lk::expand_source_offset(av, dyv, i)], b.view().data()[lk::expand_source_offset(bv, dyv, i)]);
    }
    replay_reduce_sum(scratch.const_view(), g.view(), 1.0);
  };
  grad(false, da);
  grad(true, db);
  expect_near(da, want_da, "binary gradient of a");
  expect_near(db, want_db, "binary gradient of b");
}

TEST(CudnnLayerKernelsIndex, BinaryWithABroadcastOperand) {
  for (binary_op op : {binary_op::add, binary_op::sub, binary_op::mul, binary_op::div})
    for (bool b_broadcast : {true, false})
      for (const auto& small : {std::array<std::int64_t, 4>{2, 6, 1, 1}, {1, 6, 1, 1}, {2, 1, 4, 3}}) {
        if (op == binary_op::div && !b_broadcast) continue;  // a full-size divisor would hold zeros
        binary_case<nchw>(op, b_broadcast, small);
        binary_case<nhwc>(op, b_broadcast, small);
      }
}

template <class F>
void pool_backward_case(const typename host_tensor<double, F>::extents_type& xe, const pool_params& p, double levels,
                        bool with_nan) {
  reference::backend ref;
  const auto ye = pool_output_extents(xe, p);
  host_tensor<double, F> x(xe), dy(ye), dx(xe), want(xe);
  fill(x, 6, levels);
  if (with_nan) x.view().data()[x.view().numel() / 3] = std::numeric_limits<double>::quiet_NaN();
  fill(dy, 7);
  ref.pool_backward(x.const_view(), dy.const_view(), want.view(), p);
  const lk::view5 xv = cudnn::view5_of(x.const_view()), dyv = cudnn::view5_of(dy.const_view()),
                  dxv = cudnn::view5_of(dx.view());
  const lk::pool_geometry g = cudnn::pool_geometry_of(dxv, dyv, static_cast<int>(xe.size()) - 2, p);
  for (std::int64_t i = 0; i < lk::numel(dxv); ++i) {
    std::int64_t at[5];
    lk::unravel(dxv, i, at);
    dx.view().data()[lk::offset(dxv, at)] = lk::pool_backward_at<double>(
        g, xv, dyv, at, [&](std::int64_t o) { return x.view().data()[o]; },
        [&](std::int64_t o) { return dy.view().data()[o]; });
  }
  expect_near(dx, want, "pool backward");
}

TEST(CudnnLayerKernelsIndex, PoolBackwardEveryRule) {
  pool_params p;
  for (pool_kind kind : {pool_kind::max, pool_kind::average})
    for (bool include : {true, false})
      for (bool ceil : {false, true})
        for (int shape = 0; shape < 3; ++shape) {
          p.kind = kind;
          p.count_include_pad = include;
          p.ceil_mode = ceil;
          if (shape == 0) {  // ResNet's stem pooling: 3 x 3, stride 2, padding 1
            p.kernel = {3, 3, 1};
            p.stride = {2, 2, 1};
            p.padding = p.padding_end = {1, 1, 0};
          } else if (shape == 1) {  // 2 x 2 stride 2, no padding
            p.kernel = {2, 2, 1};
            p.stride = {2, 2, 1};
            p.padding = p.padding_end = {0, 0, 0};
          } else {  // asymmetric padding, overlapping windows, stride 1 along W
            p.kernel = {3, 2, 1};
            p.stride = {2, 1, 1};
            p.padding = {2, 0, 0};
            p.padding_end = {0, 1, 0};
          }
          SCOPED_TRACE("kind " + std::to_string(static_cast<int>(kind)) + (include ? " incl" : " excl") +
                       (ceil ? " ceil" : "") + " shape " + std::to_string(shape));
          for (double levels : {0.0, 2.0}) {  // distinct values; three values (ties)
            pool_backward_case<nchw>({2, 3, 7, 6}, p, levels, false);
            pool_backward_case<nhwc>({2, 3, 7, 6}, p, levels, false);
          }
          pool_backward_case<nhwc>({1, 2, 5, 5}, p, 0.0, true);
        }
  // 3-D: 2 x 3 x 3, stride (1, 2, 2), padding (1, 1, 1).
  p.kernel = {2, 3, 3};
  p.stride = {1, 2, 2};
  p.padding = p.padding_end = {1, 1, 1};
  for (pool_kind kind : {pool_kind::max, pool_kind::average}) {
    p.kind = kind;
    p.ceil_mode = false;
    p.count_include_pad = false;
    pool_backward_case<ncdhw>({2, 3, 4, 5, 6}, p, 2.0, false);
    pool_backward_case<ndhwc>({2, 3, 4, 5, 6}, p, 0.0, false);
  }
}

}  // namespace
