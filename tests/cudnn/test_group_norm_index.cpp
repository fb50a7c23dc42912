// The cuDNN backend's group norm kernels (cuda_group_norm.cuh) replayed on the CPU: every block
// and thread of each launch runs the kernel's body through group_norm_index.hpp's functions (the
// same partition and arithmetic the device runs), barriers as loop boundaries. Checked: every
// element is read once per reduction and written once, every partial written once, and the results
// match the reference backend in both formats, rank 4 and 5, float / double / float16 / bfloat16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <memfmt/backends/cudnn/group_norm_hook.hpp>
#include <memfmt/backends/cudnn/group_norm_index.hpp>

#include "group_norm_check.hpp"

namespace {

using namespace memfmt;
using namespace memfmt_test::group_norm;

template <class T>
param_t<T> load(const std::vector<T>& v, std::int64_t i) {
  return static_cast<param_t<T>>(v.at(static_cast<std::size_t>(i)));
}

void expect_once(const std::vector<int>& visits, const std::string& what) {
  for (std::size_t i = 0; i < visits.size(); ++i) ASSERT_EQ(visits[i], 1) << what << " at " << i;
}

cudnn::gn::shape shape_of(const std::vector<std::int64_t>& e, std::int64_t groups) {
  cudnn::gn::shape sh{e[0], e[1], 1, groups};
  for (std::size_t d = 2; d < e.size(); ++d) sh.s *= e[d];
  return sh;
}

// A reduction kernel (moments or gradient sums): per block, each thread's loop, then the tree
// steps; row 0 of each channel writes the block's partial. `body(n, c, s, value&)` accumulates one
// element, read from the reduced tensors at their own offsets.
template <class V, class Combine, class Body>
std::vector<V> replay_reduction(const cudnn::gn::reduce_plan& p, Combine combine, Body body) {
  namespace gn = cudnn::gn;
  std::vector<V> part(static_cast<std::size_t>(gn::partials(p)));
  std::vector<int> read(static_cast<std::size_t>(gn::numel(p.sh)), 0), written(part.size(), 0);
  for (std::int64_t b = 0; b < gn::blocks(p); ++b) {
    const gn::block_origin o = gn::block_at(p, b);
    std::vector<V> slots(static_cast<std::size_t>(gn::block_threads));
    for (int t = 0; t < gn::block_threads; ++t) {
      const gn::lane l = gn::lane_of(p.channels_last, t);
      const std::int64_t c = gn::channel_of(p, o, l);
      V v{};
      if (c < p.sh.c)
        gn::for_each_position(p, o, l, [&](std::int64_t s) {
          ++read.at(static_cast<std::size_t>(gn::offset(p.channels_last, p.sh, o.n, c, s)));
          body(o.n, c, s, v);
        });
      slots.at(static_cast<std::size_t>(gn::slot(p.channels_last, l))) = v;
    }
    for (int stride = gn::tiling_for(p.channels_last).lanes / 2; stride > 0; stride /= 2)
      for (int t = 0; t < gn::block_threads; ++t) gn::tree_step(slots.data(), p.channels_last, t, stride, combine);
    for (int t = 0; t < gn::block_threads; ++t) {
      const gn::lane l = gn::lane_of(p.channels_last, t);
      const std::int64_t c = gn::channel_of(p, o, l);
      if (l.row != 0 || c >= p.sh.c) continue;
      const auto i = static_cast<std::size_t>(gn::partial_index(p, o.n, o.chunk, c));
      part.at(i) = slots.at(static_cast<std::size_t>(gn::slot(p.channels_last, l)));
      ++written.at(i);
    }
  }
  expect_once(read, "reduction read");
  expect_once(written, "partial");
  return part;
}

// A one-item-per-thread kernel.
template <class Fn>
void replay_items(std::int64_t items, Fn fn) {
  namespace gn = cudnn::gn;
  for (std::int64_t b = 0; b < gn::item_blocks(items); ++b)
    for (int t = 0; t < gn::block_threads; ++t)
      if (const std::int64_t i = gn::item_of(b, t); i < items) fn(i);
}

// An elementwise kernel's grid-stride loops; every output element written once.
template <class Fn>
void replay_elements(std::int64_t total, Fn fn) {
  namespace gn = cudnn::gn;
  const std::int64_t grid = gn::elementwise_blocks(total);
  std::vector<int> written(static_cast<std::size_t>(total), 0);
  for (std::int64_t b = 0; b < grid; ++b)
    for (int t = 0; t < gn::block_threads; ++t)
      gn::for_each_element(total, grid, b, t, [&](std::int64_t j) {
        ++written.at(static_cast<std::size_t>(j));
        fn(j);
      });
  expect_once(written, "elementwise write");
}

template <class T>
void replay_forward(io<T>& a) {
  namespace gn = cudnn::gn;
  using A = param_t<T>;
  const gn::shape sh = shape_of(a.extents, a.groups);
  const gn::reduce_plan p = gn::make_reduce_plan(sh, a.x_channels_last);
  const auto part = replay_reduction<gn::moments<A>>(p, gn::merge_moments{}, [&](auto n, auto c, auto s, auto& m) {
    gn::push(m, load(a.x, gn::offset(a.x_channels_last, sh, n, c, s)));
  });
  a.mean.assign(static_cast<std::size_t>(sh.n * sh.groups), A{});
  a.invstd = a.mean;
  replay_items(sh.n * sh.groups, [&](std::int64_t i) {
    const auto st = gn::merge_group(p, part.data(), i, a.epsilon);
    a.mean.at(static_cast<std::size_t>(i)) = st.mean;
    a.invstd.at(static_cast<std::size_t>(i)) = st.invstd;
  });
  a.y.assign(a.x.size(), T{});
  replay_elements(gn::numel(sh), [&](std::int64_t j) {
    const gn::position q = gn::position_at(a.y_channels_last, sh, j);
    const auto i = static_cast<std::size_t>(gn::stat_index(sh, q.n, q.c));
    const A v = gn::normalize(load(a.x, gn::offset(a.x_channels_last, sh, q.n, q.c, q.s)),
                              gn::group_stats<A>{a.mean.at(i), a.invstd.at(i)}, data_or_null<T>(a.gamma),
                              data_or_null<T>(a.beta), q.c);
    a.y.at(static_cast<std::size_t>(j)) = static_cast<T>(v);
  });
}

template <class T>
void replay_backward(io<T>& a) {
  namespace gn = cudnn::gn;
  using A = param_t<T>;
  const gn::shape sh = shape_of(a.extents, a.groups);
  const gn::reduce_plan p = gn::make_reduce_plan(sh, a.x_channels_last);
  const bool dy_cl = a.y_channels_last;
  const auto part = replay_reduction<gn::grad_sums<A>>(p, gn::add_sums{}, [&](auto n, auto c, auto s, auto& r) {
    const auto i = static_cast<std::size_t>(gn::stat_index(sh, n, c));
    const A g = load(a.dy, gn::offset(dy_cl, sh, n, c, s));
    const A xhat = (load(a.x, gn::offset(a.x_channels_last, sh, n, c, s)) - a.mean.at(i)) * a.invstd.at(i);
    r.dy += g;
    r.dy_xhat += g * xhat;
  });
  std::vector<gn::grad_sums<A>> group(static_cast<std::size_t>(sh.n * sh.groups));
  replay_items(sh.n * sh.groups, [&](std::int64_t i) {
    group.at(static_cast<std::size_t>(i)) = gn::merge_group_grads(p, part.data(), data_or_null<T>(a.gamma), i);
  });
  if (a.params) {
    a.dgamma.assign(static_cast<std::size_t>(sh.c), A{});
    a.dbeta = a.dgamma;
    replay_items(sh.c, [&](std::int64_t c) {
      const auto r = gn::merge_channel_grads(p, part.data(), c);
      a.dgamma.at(static_cast<std::size_t>(c)) = r.dy_xhat;
      a.dbeta.at(static_cast<std::size_t>(c)) = r.dy;
    });
  }
  a.dx.assign(a.x.size(), T{});
  const A m = static_cast<A>(gn::per_group(sh) * sh.s);
  replay_elements(gn::numel(sh), [&](std::int64_t j) {
    const gn::position q = gn::position_at(a.y_channels_last, sh, j);
    const auto i = static_cast<std::size_t>(gn::stat_index(sh, q.n, q.c));
    const A v = gn::input_grad(
        load(a.x, gn::offset(a.x_channels_last, sh, q.n, q.c, q.s)), load(a.dy, gn::offset(dy_cl, sh, q.n, q.c, q.s)),
        gn::group_stats<A>{a.mean.at(i), a.invstd.at(i)}, group.at(i), data_or_null<T>(a.gamma), q.c, m);
    a.dx.at(static_cast<std::size_t>(j)) = static_cast<T>(v);
  });
}

struct replay {
  template <class T, class XF, class YF>
  void check(std::vector<std::int64_t> e, std::int64_t groups, double offset, bool params) const {
    memfmt_test::group_norm::check<T, XF, YF>(e, groups, offset, params, replay_forward<T>, replay_backward<T>);
  }
};

TEST(CudnnGroupNormIndex, PartitionCoversTheShapes) {
  namespace gn = cudnn::gn;
  for (bool cl : {false, true}) {
    const gn::tiling t = gn::tiling_for(cl);
    EXPECT_EQ(t.channels * t.lanes, gn::block_threads);
    // Every thread a distinct slot, and consecutive threads on consecutive addresses.
    std::vector<int> seen(gn::block_threads, 0);
    for (int i = 0; i < gn::block_threads; ++i) ++seen.at(static_cast<std::size_t>(gn::slot(cl, gn::lane_of(cl, i))));
    expect_once(seen, "slot");
    const gn::shape sh{2, 64, 100, 4};
    const gn::reduce_plan p = gn::make_reduce_plan(sh, cl);
    const gn::lane a = gn::lane_of(cl, 0), b = gn::lane_of(cl, 1);
    EXPECT_EQ(gn::offset(cl, sh, 0, b.channel, b.row) - gn::offset(cl, sh, 0, a.channel, a.row), 1);
    // Chunks cover the positions without an empty one.
    for (std::int64_t s : {1, 7, 64, 65, 511, 4096, 100000}) {
      const gn::reduce_plan q = gn::make_reduce_plan(gn::shape{1, 3, s, 1}, cl);
      EXPECT_GE(q.chunks, 1);
      EXPECT_EQ(gn::chunk_end(q, q.chunks - 1), s);
      EXPECT_LT(gn::chunk_begin(q, q.chunks - 1), s);
    }
    EXPECT_GE(gn::blocks(p), 1);
  }
  // Positions at memory index j of each format, against the offsets.
  const gn::shape sh{2, 3, 5, 1};
  for (bool cl : {false, true})
    for (std::int64_t j = 0; j < gn::numel(sh); ++j) {
      const gn::position q = gn::position_at(cl, sh, j);
      EXPECT_EQ(gn::offset(cl, sh, q.n, q.c, q.s), j);
    }
}

// An x with no elements launches nothing and needs no workspace; its backward writes C zeros into
// dgamma and dbeta over whatever they held, as the reference backend's backward does. A shape with
// elements gives every kernel a grid of at least one block.
TEST(CudnnGroupNormIndex, EmptyXLaunchesNothingAndZeroesTheParameterGradients) {
  namespace gn = cudnn::gn;
  namespace gnc = memfmt_test::group_norm;
  const std::vector<std::vector<std::int64_t>> empties = {{0, 4, 3, 3}, {2, 4, 0, 3}, {2, 0, 3, 3}};
  for (const std::vector<std::int64_t>& e : empties) {
    const std::int64_t groups = 2;
    const gn::shape sh = shape_of(e, groups);
    const std::string what = "x " + memfmt::detail::dims_to_string(e);
    EXPECT_FALSE(gn::launches(sh)) << what;
    for (bool cl : {false, true})
      for (bool backward : {false, true})
        EXPECT_EQ(cudnn::group_norm_workspace_bytes(sh, cl, dtype::float32, backward), 0) << what;
    const std::vector<float> none, stats(static_cast<std::size_t>(e[0] * groups), std::nanf(""));
    std::vector<float> empty_dx, want_dgamma(static_cast<std::size_t>(e[1]), 7.0f), want_dbeta = want_dgamma;
    reference::group_norm_backward(gnc::cview<float, nchw>(none, e), gnc::cview<float, nchw>(none, e),
                                   gnc::view<float, nchw>(empty_dx, e), nullptr, stats.data(), stats.data(),
                                   want_dgamma.data(), want_dbeta.data(), group_norm_params{groups, 1e-5});
    std::vector<float> got(static_cast<std::size_t>(e[1]), 7.0f);  // what the backend's cudaMemsetAsync does
    std::fill_n(got.begin(), gn::param_grad_zeros(sh), 0.0f);
    EXPECT_EQ(got, want_dgamma) << what;
    EXPECT_EQ(got, want_dbeta) << what;
  }
  for (const gn::shape& sh : {gn::shape{1, 1, 1, 1}, gn::shape{3, 40, 1, 8}, gn::shape{1, 8, 100000, 2}}) {
    EXPECT_TRUE(gn::launches(sh));
    EXPECT_EQ(gn::param_grad_zeros(sh), 0);
    for (bool cl : {false, true}) EXPECT_GE(gn::blocks(gn::make_reduce_plan(sh, cl)), 1);
    EXPECT_GE(gn::item_blocks(sh.n * sh.groups), 1);
    EXPECT_GE(gn::item_blocks(sh.c), 1);
    EXPECT_GE(gn::elementwise_blocks(gn::numel(sh)), 1);
  }
}

TEST(CudnnGroupNormIndex, ReplayedKernelsMatchTheReferenceFloat) { check_all_cases<float>(replay{}); }
TEST(CudnnGroupNormIndex, ReplayedKernelsMatchTheReferenceDouble) { check_all_cases<double>(replay{}); }
TEST(CudnnGroupNormIndex, ReplayedKernelsMatchTheReferenceHalf) { check_all_cases<half>(replay{}); }
TEST(CudnnGroupNormIndex, ReplayedKernelsMatchTheReferenceBfloat16) { check_all_cases<bfloat16>(replay{}); }

}  // namespace
