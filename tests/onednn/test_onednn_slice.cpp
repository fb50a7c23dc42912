// oneDNN backend slices (memfmt's strided-copy kernel, backends/cpu/permuted_copy.hpp) vs the
// reference backend: every axis, steps 1 to 3, 2-D and 3-D, both formats and mixed ones, float and
// bfloat16, padded (strided) views, the kernel's element sizes against brute force, the same bits
// for any thread count, and errors; concatenation along every axis and transposes of spatial dims.
#include <memfmt/backends/cpu/permuted_copy.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <memfmt/backends/onednn/backend.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/backends/slice.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "../common/coords.hpp"
#include "../common/expect_error.hpp"
#include "onednn_test_util.hpp"

namespace {

using namespace memfmt;
using memfmt_test::for_each_coord;
using onednn_test::fill;

template <class F>
using ext = typename layout<F>::extents_type;

std::string describe(const slice_params& p) {
  return "axis " + std::to_string(p.axis) + " [" + std::to_string(p.begin) + ", " + std::to_string(p.end) + ") step " +
         std::to_string(p.step);
}

template <class T, class F>
bool same_bits(tensor_view<const T, F> a, tensor_view<const T, F> b) {
  bool same = a.extents() == b.extents();
  for_each_coord(a.extents(), [&](const auto& c) { same = same && std::memcmp(&a(c), &b(c), sizeof(T)) == 0; });
  return same;
}

// A copy moves bits: forward and backward equal the reference's exactly.
template <class T, class XF, class YF>
void check_slice(onednn::backend& b, const ext<XF>& e, const slice_params& p) {
  SCOPED_TRACE(std::string(XF::name) + " -> " + YF::name + " " + std::string(to_string(dtype_of_v<T>)) + " " +
               describe(p) + " of " + memfmt::detail::dims_to_string(e));
  const auto ye = slice_output_extents(e, p);
  host_tensor<T, XF> x(e), dx(e), dx_ref(e);
  host_tensor<T, YF> y(ye), y_ref(ye), dy(ye);
  fill(x, 31);
  fill(dy, 32);
  fill(dx, 33);  // to be overwritten everywhere
  reference::slice_forward<T, XF, YF>(x.const_view(), p, y_ref.view());
  b.slice_forward(x.const_view(), p, y.view());
  EXPECT_TRUE(same_bits(y.const_view(), y_ref.const_view())) << "y";
  reference::slice_backward<T, YF, XF>(dy.const_view(), p, dx_ref.view());
  b.slice_backward(dy.const_view(), p, dx.view());
  EXPECT_TRUE(same_bits(dx.const_view(), dx_ref.const_view())) << "dx";
}

template <class T>
void run_grid() {
  onednn::backend b;
  for (const slice_params& p :
       {slice_params{1, 2, 7, 1}, slice_params{1, 0, 9, 2}, slice_params{2, 1, 10, 2}, slice_params{2, 1, 9, 1},
        slice_params{3, 0, 13, 2}, slice_params{3, 1, 12, 3}, slice_params{3, 4, 5, 1}}) {
    check_slice<T, nchw, nchw>(b, {2, 9, 11, 13}, p);
    check_slice<T, nhwc, nhwc>(b, {2, 9, 11, 13}, p);
    check_slice<T, nchw, nhwc>(b, {2, 9, 11, 13}, p);
    check_slice<T, nhwc, nchw>(b, {2, 9, 11, 13}, p);
  }
  for (const slice_params& p : {slice_params{2, 0, 5, 2}, slice_params{4, 1, 7, 3}, slice_params{1, 1, 4, 1}}) {
    check_slice<T, ncdhw, ncdhw>(b, {2, 4, 5, 3, 7}, p);
    check_slice<T, ndhwc, ndhwc>(b, {2, 4, 5, 3, 7}, p);
  }
  // Large enough for the thread team: YOLOv5's Focus phase of a 3-channel image, a 64-channel crop.
  check_slice<T, nchw, nchw>(b, {2, 3, 96, 128}, slice_params{3, 1, 128, 2});
  check_slice<T, nhwc, nhwc>(b, {2, 3, 96, 128}, slice_params{3, 1, 128, 2});
  check_slice<T, nhwc, nhwc>(b, {2, 64, 40, 40}, slice_params{2, 1, 39, 1});
}

TEST(OnednnSlice, GridFloat) { run_grid<float>(); }

// The oneDNN backend takes bfloat16 only where oneDNN computes in it (AVX-512 BF16 or AMX).
TEST(OnednnSlice, GridBfloat16) {
  onednn::backend b;
  host_tensor<bfloat16, nhwc> x({2, 4, 2, 2}), y({2, 2, 2, 2});
  const std::string unsupported = onednn_test::refused_on_this_cpu<bfloat16>("onednn::slice_forward", [&] {
    b.slice_forward(x.const_view(), slice_params{1, 0, 2, 1}, y.view());
  });
  if (!unsupported.empty()) GTEST_SKIP() << unsupported;
  run_grid<bfloat16>();
}

// Concatenation along an axis (oneDNN's concat primitive, its backward a reorder per part) moves
// bits: forward and backward equal the reference's exactly.
template <class T, class XF, class YF>
void check_concat(onednn::backend& b, ext<YF> whole, int axis, const std::vector<std::int64_t>& sizes) {
  SCOPED_TRACE(std::string(XF::name) + " -> " + YF::name + " " + std::string(to_string(dtype_of_v<T>)) + " axis " +
               std::to_string(axis) + " of " + memfmt::detail::dims_to_string(whole));
  const auto a = static_cast<std::size_t>(axis);
  std::vector<host_tensor<T, XF>> xs, dxs, dxs_ref;
  std::vector<tensor_view<const T, XF>> views;
  std::vector<tensor_view<T, XF>> dviews, dviews_ref;
  whole[a] = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    ext<XF> e = whole;
    e[a] = sizes[i];
    whole[a] += sizes[i];
    xs.emplace_back(e);
    dxs.emplace_back(e);
    dxs_ref.emplace_back(e);
    fill(xs.back(), 50 + i);
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    views.push_back(xs[i].const_view());
    dviews.push_back(dxs[i].view());
    dviews_ref.push_back(dxs_ref[i].view());
  }
  host_tensor<T, YF> y(whole), y_ref(whole), dy(whole);
  fill(dy, 60);
  const concat_params p{axis};
  reference::concat_forward<T>(views, y_ref.view(), p);
  b.concat_forward(views, y.view(), p);
  EXPECT_TRUE(same_bits(y.const_view(), y_ref.const_view())) << "y";
  reference::concat_backward<T>(dy.const_view(), dviews_ref, p);
  b.concat_backward(dy.const_view(), dviews, p);
  for (std::size_t i = 0; i < sizes.size(); ++i)
    EXPECT_TRUE(same_bits(dxs[i].const_view(), dxs_ref[i].const_view())) << "dx " << i;
}

// A transpose of spatial dims (one reorder over the permuted index space) equals the reference's.
template <class T, class XF, class YF>
void check_transpose(onednn::backend& b, const ext<XF>& e, const std::array<int, 5>& perm) {
  rearrange_params p{rearrange_kind::transpose, 1, block_order::crd};
  p.perm = perm;
  SCOPED_TRACE(std::string(XF::name) + " -> " + YF::name + " transpose " + perm_to_string(perm, e.size()));
  const auto ye = rearrange_output_extents(e, p);
  host_tensor<T, XF> x(e), dx(e), dx_ref(e);
  host_tensor<T, YF> y(ye), y_ref(ye), dy(ye);
  fill(x, 70);
  fill(dy, 71);
  reference::rearrange_forward<T, XF, YF>(x.const_view(), p, y_ref.view());
  b.rearrange_forward(x.const_view(), p, y.view());
  EXPECT_TRUE(same_bits(y.const_view(), y_ref.const_view())) << "y";
  reference::rearrange_backward<T, YF, XF>(dy.const_view(), p, dx_ref.view());
  b.rearrange_backward(dy.const_view(), p, dx.view());
  EXPECT_TRUE(same_bits(dx.const_view(), dx_ref.const_view())) << "dx";
}

TEST(OnednnConcat, EveryAxisAndFormatPairMatchesReference) {
  onednn::backend b;
  for (int axis = 1; axis < 4; ++axis) {
    check_concat<float, nchw, nchw>(b, {2, 3, 5, 4}, axis, {2, 1, 3});
    check_concat<float, nhwc, nhwc>(b, {2, 3, 5, 4}, axis, {2, 1, 3});
    check_concat<float, nchw, nhwc>(b, {2, 3, 5, 4}, axis, {3, 4});
    check_concat<float, nhwc, nchw>(b, {2, 3, 5, 4}, axis, {1, 1});
  }
  for (int axis = 1; axis < 5; ++axis) {
    check_concat<float, ncdhw, ncdhw>(b, {2, 3, 2, 3, 4}, axis, {2, 3});
    check_concat<float, ndhwc, ndhwc>(b, {2, 3, 2, 3, 4}, axis, {1, 2});
  }
  // Coordinate attention's pooled maps: [N, C, H, 1] and [N, C, W, 1] along H.
  check_concat<float, nhwc, nhwc>(b, {2, 32, 0, 1}, 2, {24, 20});
  check_concat<float, nchw, nchw>(b, {2, 32, 0, 1}, 2, {24, 20});
  // A part with nothing along the axis and an empty batch.
  check_concat<float, nhwc, nhwc>(b, {2, 3, 4, 5}, 3, {2, 0, 3});
  check_concat<float, nchw, nchw>(b, {0, 3, 4, 5}, 2, {2, 3});
}

TEST(OnednnRearrange, TransposesMatchReference) {
  onednn::backend b;
  check_transpose<float, nchw, nchw>(b, {2, 3, 5, 7}, {0, 1, 3, 2, 4});
  check_transpose<float, nhwc, nhwc>(b, {2, 3, 5, 7}, {0, 1, 3, 2, 4});
  check_transpose<float, nhwc, nchw>(b, {2, 3, 5, 7}, {0, 1, 3, 2, 4});
  check_transpose<float, nhwc, nhwc>(b, {2, 16, 1, 9}, {0, 1, 3, 2, 4});
  check_transpose<float, ncdhw, ncdhw>(b, {1, 2, 3, 4, 5}, {0, 1, 4, 2, 3});
  check_transpose<float, ndhwc, ndhwc>(b, {1, 2, 3, 4, 5}, {0, 1, 3, 4, 2});
  check_transpose<float, ndhwc, ncdhw>(b, {1, 2, 3, 4, 5}, {0, 1, 4, 3, 2});
}

// Padded (sliced) views on both sides; a padded gradient is written by the reference kernel, which
// leaves the padding alone.
template <class XF, class YF>
void check_strided(const ext<XF>& e, const slice_params& p) {
  SCOPED_TRACE(std::string(XF::name) + " -> " + YF::name + " strided " + describe(p));
  onednn::backend b;
  const auto ye = slice_output_extents(e, p);
  const auto xl = memfmt_test::padded_layout<XF>(e, 3);
  const auto yl = memfmt_test::padded_layout<YF>(ye, 2);
  std::vector<float> xb(static_cast<std::size_t>(xl.required_span_size())), dxb(xb.size(), 7.f),
      yb(static_cast<std::size_t>(yl.required_span_size())), dyb(yb.size());
  fill(xb.data(), static_cast<std::int64_t>(xb.size()), 41);
  fill(dyb.data(), static_cast<std::int64_t>(dyb.size()), 42);
  const tensor_view<float, XF> x(xb.data(), xl), dx(dxb.data(), xl);
  const tensor_view<float, YF> y(yb.data(), yl), dy(dyb.data(), yl);
  host_tensor<float, YF> y_ref(ye);
  host_tensor<float, XF> dx_ref(e);
  b.slice_forward(tensor_view<const float, XF>(x), p, y);
  reference::slice_forward<float, XF, YF>(x, p, y_ref.view());
  EXPECT_TRUE(same_bits(tensor_view<const float, YF>(y), y_ref.const_view())) << "forward";
  b.slice_backward(tensor_view<const float, YF>(dy), p, dx);
  reference::slice_backward<float, YF, XF>(dy, p, dx_ref.view());
  EXPECT_TRUE(same_bits(tensor_view<const float, XF>(dx), dx_ref.const_view())) << "backward";
  std::vector<bool> element(dxb.size(), false);  // the padding between dx's elements keeps its 7s
  for_each_coord(e, [&](const auto& c) { element[static_cast<std::size_t>(xl(c))] = true; });
  for (std::size_t i = 0; i < dxb.size(); ++i) {
    if (!element[i]) {
      ASSERT_EQ(dxb[i], 7.f) << "padding at " << i;
    }
  }
}

TEST(OnednnSlice, StridedViewsMatchReference) {
  check_strided<nchw, nchw>({2, 5, 6, 7}, slice_params{3, 1, 7, 2});
  check_strided<nhwc, nhwc>({2, 5, 6, 7}, slice_params{2, 0, 5, 2});
  check_strided<nhwc, nchw>({2, 5, 6, 7}, slice_params{1, 1, 5, 3});
}

// The kernel for every element size against brute force over the copy's index space, with the
// compacting that merges dims and the row kinds (contiguous, step 2, any stride).
template <class E>
void check_element_size() {
  SCOPED_TRACE(std::to_string(sizeof(E)) + "-byte elements");
  const std::int64_t n = 3, h = 17, w = 40;
  std::vector<E> src(static_cast<std::size_t>(n * h * w));
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<E>(i * 2654435761u + 1);
  for (const std::int64_t step : {1, 2, 3}) {
    // [n, h, w / step] from a [n, h, w] block, every step-th column.
    const std::int64_t wo = (w - 1) / step + 1;
    permuted_copy m;
    m.rank = 3;
    m.extents = {n, h, wo};
    m.from = {h * w, w, step};
    m.to = {h * wo, wo, 1};
    std::vector<E> dst(static_cast<std::size_t>(n * h * wo), E{0});
    cpu::run_permuted_copy(m, sizeof(E), src.data(), dst.data());
    for (std::int64_t a = 0; a < n; ++a)
      for (std::int64_t r = 0; r < h; ++r)
        for (std::int64_t c = 0; c < wo; ++c)
          ASSERT_EQ(dst[static_cast<std::size_t>((a * h + r) * wo + c)],
                    src[static_cast<std::size_t>((a * h + r) * w + c * step)])
              << "step " << step << " at " << a << ", " << r << ", " << c;
  }
  // Batches of whole-matrix transposes (memfmt::convert's path): [n, h, w] -> [n, w, h], with and
  // without a batch dim, against brute force.
  for (const std::int64_t batch : {n, std::int64_t{1}}) {
    permuted_copy t;
    t.rank = 3;
    t.extents = {batch, w, h};
    t.from = {h * w, 1, w};
    t.to = {w * h, h, 1};
    std::vector<E> dst(static_cast<std::size_t>(batch * w * h), E{0});
    cpu::run_permuted_copy(t, sizeof(E), src.data(), dst.data());
    for (std::int64_t a = 0; a < batch; ++a)
      for (std::int64_t c = 0; c < w; ++c)
        for (std::int64_t r = 0; r < h; ++r)
          ASSERT_EQ(dst[static_cast<std::size_t>((a * w + c) * h + r)],
                    src[static_cast<std::size_t>((a * h + r) * w + c)])
              << "transpose of batch " << batch << " at " << a << ", " << c << ", " << r;
  }
}

TEST(OnednnSlice, KernelMovesEveryElementSize) {
  check_element_size<std::uint8_t>();
  check_element_size<std::uint16_t>();
  check_element_size<std::uint32_t>();
  check_element_size<std::uint64_t>();
  permuted_copy one;  // rank 0: one element
  const std::uint16_t from = 42;
  std::uint16_t to = 0;
  cpu::run_permuted_copy(one, 2, &from, &to);
  EXPECT_EQ(to, 42);
  memfmt_test::expect_error([&] { cpu::run_permuted_copy(one, 3, &from, &to); }, errc::unsupported_dtype,
                            {"run_permuted_copy: elements of 3 bytes"});
}

// Every element moves once, whatever the share of rows: 1, 2 and 7 threads give the same bits.
template <class F>
std::vector<float> slice_results() {
  host_tensor<float, F> x({3, 12, 48, 80}), dx({3, 12, 48, 80});
  host_tensor<float, F> y({3, 12, 48, 40}), dy({3, 12, 48, 40});
  fill(x, 51);
  fill(dy, 52);
  onednn::backend b;
  const slice_params p{3, 1, 80, 2};
  b.slice_forward(x.const_view(), p, y.view());
  b.slice_backward(dy.const_view(), p, dx.view());
  std::vector<float> out(y.data(), y.data() + y.numel());
  out.insert(out.end(), dx.data(), dx.data() + dx.numel());
  return out;
}

TEST(OnednnSlice, SameBitsForAnyThreadCount) {
  onednn_test::expect_same_bits_for_any_thread_count(slice_results<nchw>, "nchw");
  onednn_test::expect_same_bits_for_any_thread_count(slice_results<nhwc>, "nhwc");
}

TEST(OnednnSlice, EmptyBatchAndErrors) {
  onednn::backend b;
  const host_tensor<float, nhwc> x0({0, 4, 6, 6}), dy0({0, 4, 3, 6});
  host_tensor<float, nhwc> y0({0, 4, 3, 6}), dx0({0, 4, 6, 6});
  EXPECT_NO_THROW(b.slice_forward(x0.const_view(), slice_params{2, 0, 6, 2}, y0.view()));
  EXPECT_NO_THROW(b.slice_backward(dy0.const_view(), slice_params{2, 0, 6, 2}, dx0.view()));
  host_tensor<float, nhwc> x({2, 4, 6, 6}), y({2, 4, 3, 6}), y_bad({2, 4, 2, 6});
  fill(x, 61);
  fill(y, 62);
  const std::vector<float> y_before(y.data(), y.data() + y.numel());
  memfmt_test::expect_error(
      [&] {
        b.slice_forward(x.const_view(), slice_params{2, 0, 6, 2}, y_bad.view());
      },
      errc::shape_mismatch, {"onednn::slice_forward", "output y has sizes [2, 4, 2, 6]", "expected [2, 4, 3, 6]"});
  memfmt_test::expect_error(
      [&] {
        b.slice_forward(x.const_view(), slice_params{2, 2, 7, 2}, y.view());
      },
      errc::invalid_argument, {"need 0 <= begin < end <= 6"});
  memfmt_test::expect_error(
      [&] {
        b.slice_forward(x.const_view(), slice_params{2, 0, 6, -2}, y.view());
      },
      errc::invalid_argument, {"step -2", "step >= 1"});
  memfmt_test::expect_error(
      [&] {
        b.slice_forward(tensor_view<const float, nhwc>(nullptr, x.view().mapping()), slice_params{2, 0, 6, 2},
                        y.view());
      },
      errc::null_pointer, {"onednn::slice_forward", "input x"});
  EXPECT_EQ(std::vector<float>(y.data(), y.data() + y.numel()), y_before) << "a refused call wrote y";
}

}  // namespace
