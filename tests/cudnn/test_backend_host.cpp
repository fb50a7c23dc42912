// The parts of the cuDNN backend's executor service that need no GPU: which layers it says it
// runs (support.hpp), the 2-D copy plans of concatenation, slices, rearrangements, format
// conversion (strided_copy.hpp) and padding (spatial_pad.hpp), replayed on host memory with the
// semantics of cudaMemcpy2D and compared with the reference backend and memfmt::convert, and the
// legacy tensor descriptors of softmax (legacy_tensor.hpp) read back through cuDNN.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <memfmt/backends/cudnn/legacy_tensor.hpp>
#include <memfmt/backends/cudnn/softmax.hpp>
#include <memfmt/backends/cudnn/spatial_pad.hpp>
#include <memfmt/backends/cudnn/strided_copy.hpp>
#include <memfmt/backends/cudnn/support.hpp>
#include <memfmt/backends/reference/concat.hpp>
#include <memfmt/backends/reference/pad.hpp>
#include <memfmt/backends/reference/rearrange.hpp>
#include <memfmt/backends/slice.hpp>
#include <memfmt/convert/convert.hpp>
#include <memfmt/graph/models.hpp>
#include <memfmt/graph/solve.hpp>
#include <memfmt/runtime/backend_support.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "host_util.hpp"

namespace {

using namespace memfmt;

// cudaMemcpy2D on host memory: `height` rows of `width` bytes.
void replay(const cudnn::copy_2d& k, void* dst, const void* src) {
  for (std::size_t r = 0; r < k.height; ++r)
    std::memcpy(static_cast<unsigned char*>(dst) + k.dst_offset + r * k.dst_pitch,
                static_cast<const unsigned char*>(src) + k.src_offset + r * k.src_pitch, k.width);
}

template <class T, class F>
cudnn::packed_shape shape_of(const host_tensor<T, F>& t) {
  cudnn::packed_shape s;
  s.n = t.view().extent(0);
  s.c = t.view().extent(1);
  for (int d = 2; d < F::rank; ++d) s.s *= t.view().extent(d);
  s.element_bytes = sizeof(T);
  s.channels_last = F::channels_last;
  return s;
}

template <class T, class F>
void fill_counting(host_tensor<T, F>& t, float start) {
  T* p = t.view().data();
  for (std::int64_t i = 0; i < t.view().numel(); ++i) p[i] = static_cast<T>(start + static_cast<float>(i));
}

template <class T, class F>
bool same_bytes(const host_tensor<T, F>& a, const host_tensor<T, F>& b) {
  return std::memcmp(a.view().data(), b.view().data(), static_cast<std::size_t>(a.view().numel()) * sizeof(T)) == 0;
}

// The concatenation's copies (concat_copies, as concat_forward and concat_backward run them):
// part i reversed into the whole at its offset, and back out of it, against the reference backend.
template <class F>
void check_concat_and_slice(std::array<std::int64_t, F::rank> whole_e, int axis,
                            const std::vector<std::int64_t>& parts) {
  SCOPED_TRACE(std::string(F::name) + " axis " + std::to_string(axis));
  const auto a = static_cast<std::size_t>(axis);
  std::vector<host_tensor<float, F>> xs, backs;
  std::vector<tensor_view<const float, F>> views;
  std::vector<tensor_view<float, F>> back_views;
  float start = 0;
  whole_e[a] = 0;
  for (std::int64_t c : parts) {
    auto e = whole_e;
    e[a] = c;
    whole_e[a] += c;
    xs.emplace_back(e);
    backs.emplace_back(e);
    fill_counting(xs.back(), start);
    start += 1000;
  }
  for (std::size_t i = 0; i < xs.size(); ++i) {
    views.push_back(xs[i].const_view());
    back_views.push_back(backs[i].view());
  }
  host_tensor<float, F> want(whole_e), got(whole_e);
  const concat_params p{axis};
  reference::concat_forward(views, want.view(), p);
  const std::vector<slice_copy> into = concat_copies("test", views, "whole", got.view(), p);
  const std::vector<slice_copy> out_of = concat_copies("test", back_views, "whole", want.view(), p);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    for (const auto& k : cudnn::permuted_copies(into[i].copy.reversed(), sizeof(float)))
      replay(k, got.view().data() + into[i].offset, xs[i].view().data());
    for (const auto& k : cudnn::permuted_copies(out_of[i].copy, sizeof(float)))
      replay(k, backs[i].view().data(), want.view().data() + out_of[i].offset);
    EXPECT_TRUE(same_bytes(backs[i], xs[i])) << "part " << i << " back out of the whole";
  }
  EXPECT_TRUE(same_bytes(got, want));
}

TEST(CudnnStridedCopy, ConcatAndSliceEqualTheReference) {
  for (int axis = 1; axis < 4; ++axis) {
    check_concat_and_slice<nchw>({2, 9, 3, 4}, axis, {2, 4, 3});
    check_concat_and_slice<nhwc>({2, 9, 3, 4}, axis, {2, 4, 3});
  }
  for (int axis = 1; axis < 5; ++axis) {
    check_concat_and_slice<ncdhw>({2, 5, 2, 3, 2}, axis, {1, 4});
    check_concat_and_slice<ndhwc>({2, 5, 2, 3, 2}, axis, {1, 4});
  }
  check_concat_and_slice<nhwc>({1, 3, 1, 1}, 1, {3});
  check_concat_and_slice<nhwc>({2, 3, 4, 5}, 3, {2, 0, 3});  // a part with nothing to copy
}

// A slice as the backend runs it: the 2-D copies of its permuted copy from the offset (forward),
// and reversed into a zeroed gradient (backward).
template <class XF, class YF>
void check_slice(const std::array<std::int64_t, XF::rank>& whole_e, const slice_params& p) {
  SCOPED_TRACE(std::string(XF::name) + " -> " + YF::name + " axis " + std::to_string(p.axis) + " [" +
               std::to_string(p.begin) + ", " + std::to_string(p.end) + ") step " + std::to_string(p.step));
  host_tensor<float, XF> x(whole_e);
  fill_counting(x, 1);
  const auto part_e = slice_output_extents(whole_e, p);
  host_tensor<float, YF> want(part_e), got(part_e);
  reference::slice_forward(x.const_view(), p, want.view());
  const slice_copy m = slice_copy_of("test", p, x.const_view(), got.view());
  for (const cudnn::copy_2d& k : cudnn::permuted_copies(m.copy, sizeof(float)))
    replay(k, got.view().data(), x.view().data() + m.offset);
  EXPECT_TRUE(same_bytes(got, want));
  // Backward: dx holds dy at the slice's positions and zeros elsewhere.
  host_tensor<float, XF> dx_want(whole_e), dx_got(whole_e);
  fill_counting(dx_want, -5);  // overwritten everywhere
  reference::slice_backward(want.const_view(), p, dx_want.view());
  const slice_copy b = slice_copy_of("test", p, dx_got.view(), want.const_view());
  for (const cudnn::copy_2d& k : cudnn::permuted_copies(b.copy.reversed(), sizeof(float)))
    replay(k, dx_got.view().data() + b.offset, want.view().data());
  EXPECT_TRUE(same_bytes(dx_got, dx_want));
}

TEST(CudnnStridedCopy, SlicesOfEveryAxisEqualTheReference) {
  for (const slice_params& p : {slice_params{1, 2, 7, 1}, slice_params{1, 1, 9, 3}, slice_params{2, 1, 5, 2},
                                slice_params{3, 0, 6, 2}, slice_params{3, 2, 3, 1}}) {
    check_slice<nchw, nchw>({2, 9, 5, 6}, p);
    check_slice<nhwc, nhwc>({2, 9, 5, 6}, p);
    check_slice<nchw, nhwc>({2, 9, 5, 6}, p);
  }
  for (const slice_params& p : {slice_params{2, 1, 3, 1}, slice_params{4, 0, 4, 3}, slice_params{1, 0, 5, 2}}) {
    check_slice<ncdhw, ncdhw>({2, 5, 3, 2, 4}, p);
    check_slice<ndhwc, ndhwc>({2, 5, 3, 2, 4}, p);
  }
}

template <class From, class To>
void check_conversion(const std::array<std::int64_t, From::rank>& e) {
  SCOPED_TRACE(std::string(From::name) + " -> " + To::name + " " + memfmt::detail::dims_to_string(e));
  host_tensor<half, From> src(e);
  fill_counting(src, 1);
  host_tensor<half, To> want(e), got(e);
  memfmt::convert(src.const_view(), want.view());
  const auto copies = cudnn::format_conversion_copies(shape_of(src));
  std::int64_t positions = 1;
  for (int d = 2; d < From::rank; ++d) positions *= e[static_cast<std::size_t>(d)];
  EXPECT_EQ(static_cast<std::int64_t>(copies.size()), e[0] * std::min(e[1], positions));  // N * min(C, S) copies
  for (const auto& k : copies) replay(k, got.view().data(), src.view().data());
  EXPECT_TRUE(same_bytes(got, want));
}

TEST(CudnnStridedCopy, FormatConversionEqualsConvert) {
  check_conversion<nchw, nhwc>({2, 3, 4, 5});  // fewer channels than positions
  check_conversion<nhwc, nchw>({2, 3, 4, 5});
  check_conversion<nchw, nhwc>({2, 40, 2, 3});  // more channels than positions
  check_conversion<nhwc, nchw>({2, 40, 2, 3});
  check_conversion<ncdhw, ndhwc>({1, 3, 2, 3, 2});
  check_conversion<ndhwc, ncdhw>({1, 7, 1, 2, 2});
}

// ------------------------------------------------------------------ rearrangements

// The 2-D copies of a rearrangement (forward, and backward from the same map reversed) against the
// reference backend, for x and y in formats X and Y.
template <class X, class Y>
void check_rearrange(const std::array<std::int64_t, X::rank>& xe, const rearrange_params& p,
                     std::size_t expected_copies) {
  SCOPED_TRACE(std::string(X::name) + " -> " + Y::name + " " + to_string(p.kind) + " " + std::to_string(p.factor) +
               " " + to_string(p.order));
  host_tensor<float, X> x(xe);
  fill_counting(x, 1);
  const auto ye = rearrange_output_extents(xe, p);
  host_tensor<float, Y> want(ye), got(ye);
  reference::rearrange_forward(x.const_view(), p, want.view());
  const auto m = rearrange_copy("test", p, x.const_view(), got.const_view());
  const auto copies = cudnn::permuted_copies(m, sizeof(float));
  if (expected_copies != 0) {
    EXPECT_EQ(copies.size(), expected_copies);
  }
  for (const auto& k : copies) replay(k, got.view().data(), x.view().data());
  EXPECT_TRUE(same_bytes(got, want));
  host_tensor<float, X> back(xe), back_want(xe);
  reference::rearrange_backward(want.const_view(), p, back_want.view());
  for (const auto& k : cudnn::permuted_copies(m.reversed(), sizeof(float)))
    replay(k, back.view().data(), want.view().data());
  EXPECT_TRUE(same_bytes(back, back_want));
  EXPECT_TRUE(same_bytes(back, x));  // a permutation: backward undoes forward
}

TEST(CudnnStridedCopy, RearrangementsEqualTheReference) {
  using K = rearrange_kind;
  using O = block_order;
  // Channels-first shuffle: one copy of H * W elements per sample and group (rows: the channels of
  // a group); channels-last: one column of single elements per channel.
  check_rearrange<nchw, nchw>({2, 6, 3, 4}, {K::channel_shuffle, 2, O::crd}, 2 * 2);
  check_rearrange<nhwc, nhwc>({2, 6, 3, 4}, {K::channel_shuffle, 2, O::crd}, 6);
  check_rearrange<ncdhw, ndhwc>({1, 6, 2, 2, 3}, {K::channel_shuffle, 3, O::crd}, 0);
  for (const O order : {O::crd, O::dcr}) {
    check_rearrange<nchw, nchw>({2, 8, 3, 2}, {K::depth_to_space, 2, order}, 0);
    check_rearrange<nhwc, nhwc>({2, 8, 3, 2}, {K::depth_to_space, 2, order}, 0);
    check_rearrange<nhwc, nchw>({1, 9, 2, 2}, {K::depth_to_space, 3, order}, 0);
    check_rearrange<nchw, nhwc>({2, 3, 4, 6}, {K::space_to_depth, 2, order}, 0);
    check_rearrange<nhwc, nhwc>({2, 3, 4, 6}, {K::space_to_depth, 2, order}, 0);
  }
}

// ------------------------------------------------------------------ padding

template <class T, class F>
void fill_with(host_tensor<T, F>& t, float v) {
  std::fill(t.view().data(), t.view().data() + t.view().numel(), static_cast<T>(v));
}

// The forward plan (after the fill cudaMemsetAsync / cudnnSetTensor would do) and the backward plan
// against the reference. Without a fill, y starts as a sentinel, so an element no copy writes shows.
template <class T, class F>
void check_pad(const std::array<std::int64_t, F::rank>& xe, pad_params p) {
  for (pad_mode mode : {pad_mode::constant, pad_mode::reflect, pad_mode::replicate}) {
    p.mode = mode;
    p.value = mode == pad_mode::constant ? 2.5 : 0.0;
    SCOPED_TRACE(std::string(F::name) + " " + memfmt::detail::dims_to_string(xe) + " mode " +
                 std::to_string(static_cast<int>(mode)));
    host_tensor<T, F> x(xe);
    fill_counting(x, 1);
    const auto ye = pad_output_extents(xe, p);
    host_tensor<T, F> want(ye), got(ye);
    reference::pad_forward(x.const_view(), want.view(), p);
    const cudnn::pad_geometry g = cudnn::pad_geometry_of(xe, F::channels_last, sizeof(T), p);
    const cudnn::pad_forward_plan plan = cudnn::plan_pad_forward(g, mode);
    EXPECT_EQ(plan.fill, mode == pad_mode::constant);
    fill_with(got, plan.fill ? static_cast<float>(p.value) : -999.0f);
    for (const auto& k : plan.from_x) replay(k, got.view().data(), x.view().data());
    for (const auto& k : plan.within_y) replay(k, got.view().data(), got.view().data());
    EXPECT_TRUE(same_bytes(got, want));

    host_tensor<T, F> dy(ye), want_dx(xe), got_dx(xe);
    fill_counting(dy, 3);
    fill_with(got_dx, -999.0f);
    reference::pad_backward(dy.const_view(), want_dx.view(), p);
    if (mode == pad_mode::constant) {
      for (const auto& k : cudnn::plan_pad_backward(g, mode)) replay(k, got_dx.view().data(), dy.view().data());
      EXPECT_TRUE(same_bytes(got_dx, want_dx));
    } else {  // the backward of reflect / replicate padding has no copy plan
      memfmt_test::expect_error_before_cudnn([&] { (void)cudnn::plan_pad_backward(g, mode); }, errc::unsupported,
                                             "constant padding only");
    }
  }
}

pad_params pads(std::array<std::int64_t, 3> begin, std::array<std::int64_t, 3> end) {
  pad_params p;
  p.begin = begin;
  p.end = end;
  return p;
}

TEST(CudnnPadPlan, EveryModeAndFormatEqualsTheReference) {
  const pad_params p4 = pads({1, 2, 0}, {2, 1, 0});  // H 1 / 2, W 2 / 1
  check_pad<float, nchw>({2, 3, 4, 5}, p4);
  check_pad<float, nhwc>({2, 3, 4, 5}, p4);
  check_pad<float, nhwc>({1, 2, 3, 3}, pads({0, 2, 0}, {0, 0, 0}));  // W only, one side
  check_pad<float, nchw>({2, 2, 3, 3}, pads({2, 0, 0}, {1, 0, 0}));  // H only
  const pad_params p5 = pads({1, 0, 2}, {2, 3, 1});                  // D 1 / 2, H 0 / 3, W 2 / 1
  check_pad<half, ncdhw>({2, 3, 3, 4, 5}, p5);
  check_pad<half, ndhwc>({2, 3, 3, 4, 5}, p5);
  check_pad<double, ndhwc>({1, 2, 2, 2, 3}, pads({1, 1, 1}, {0, 1, 2}));
}

// Border columns are filled last, so each is one copy over every row; rows across blocks merge
// when the box spans whole planes.
TEST(CudnnPadPlan, FewCopies) {
  pad_params p = pads({1, 2, 0}, {2, 1, 0});
  p.mode = pad_mode::reflect;
  const auto plan =
      cudnn::plan_pad_forward(cudnn::pad_geometry_of(std::array<std::int64_t, 4>{2, 3, 4, 5}, false, 4, p), p.mode);
  EXPECT_EQ(plan.from_x.size(), 6u);    // one per (n, c) plane: the rows skip the H borders
  EXPECT_EQ(plan.within_y.size(), 6u);  // 3 border rows + 3 border columns, one copy each
  for (const auto& k : plan.within_y) EXPECT_GE(k.height, 6u);
  const auto cl =
      cudnn::plan_pad_forward(cudnn::pad_geometry_of(std::array<std::int64_t, 4>{2, 3, 4, 5}, true, 4, p), p.mode);
  EXPECT_EQ(cl.from_x.size(), 2u);  // one per sample; a pixel is the 3 channels (12 bytes)
  EXPECT_EQ(cl.from_x[0].width, 5u * 12u);
}

TEST(CudnnPadPlan, ErrorsBeforeAnyDeviceWork) {
  pad_params p = pads({1, 1, 0}, {1, 1, 0});
  const tensor_view<const float, nchw> x(memfmt_test::fake_ptr<float>(1), layout<nchw>::packed({1, 2, 3, 3}));
  const tensor_view<float, nhwc> y(memfmt_test::fake_ptr<float>(2), layout<nhwc>::packed({1, 2, 5, 5}));
  memfmt_test::expect_error_before_cudnn([&] { cudnn::run_pad_forward(nullptr, nullptr, x, y, p); },
                                         errc::format_mismatch, "one format");
  const tensor_view<float, nchw> y_cf(memfmt_test::fake_ptr<float>(2), layout<nchw>::packed({1, 2, 5, 4}));
  memfmt_test::expect_error_before_cudnn([&] { cudnn::run_pad_forward(nullptr, nullptr, x, y_cf, p); },
                                         errc::shape_mismatch, "pad_forward");
  p.mode = pad_mode::replicate;
  const tensor_view<const float, nchw> dy(memfmt_test::fake_ptr<float>(3), layout<nchw>::packed({1, 2, 5, 5}));
  const tensor_view<float, nchw> dx(memfmt_test::fake_ptr<float>(4), layout<nchw>::packed({1, 2, 3, 3}));
  memfmt_test::expect_error_before_cudnn([&] { cudnn::run_pad_backward(nullptr, dy, dx, p); }, errc::unsupported,
                                         "replicate");
}

// ------------------------------------------------------------------ softmax descriptors

void expect_descriptor(const cudnn::legacy_shape& s, std::size_t which, cudnnDataType_t type) {
  const cudnn::legacy_tensor_desc d(type == CUDNN_DATA_HALF ? dtype::float16 : dtype::float32, s.dims,
                                    s.strides[which]);
  cudnnDataType_t got_type{};
  int nb = 0;
  std::vector<int> dims(8), strides(8);
  ASSERT_EQ(cudnnGetTensorNdDescriptor(d.get(), 8, &got_type, &nb, dims.data(), strides.data()), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(got_type, type);
  ASSERT_EQ(nb, static_cast<int>(s.dims.size()));
  dims.resize(static_cast<std::size_t>(nb));
  strides.resize(static_cast<std::size_t>(nb));
  EXPECT_EQ(dims, s.dims);
  EXPECT_EQ(strides, s.strides[which]);
}

TEST(CudnnSoftmaxDescriptors, EachViewsStridesMergedTo4D) {
  const tensor_view<const float, nchw> x4(memfmt_test::fake_ptr<float>(1), layout<nchw>::packed({2, 3, 4, 5}));
  const tensor_view<const float, nhwc> y4(memfmt_test::fake_ptr<float>(2), layout<nhwc>::packed({2, 3, 4, 5}));
  const cudnn::legacy_shape s4 = cudnn::legacy_shape_of("softmax", x4, y4);
  EXPECT_EQ(s4.dims, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(s4.strides[0], (std::vector<int>{60, 20, 5, 1}));
  EXPECT_EQ(s4.strides[1], (std::vector<int>{60, 1, 15, 3}));
  expect_descriptor(s4, 0, CUDNN_DATA_FLOAT);
  expect_descriptor(s4, 1, CUDNN_DATA_FLOAT);

  // 3-D: D and H merge (contiguous in both formats), leaving 4 dims.
  const tensor_view<const half, ncdhw> x5(memfmt_test::fake_ptr<half>(1), layout<ncdhw>::packed({2, 3, 2, 4, 5}));
  const tensor_view<const half, ndhwc> y5(memfmt_test::fake_ptr<half>(2), layout<ndhwc>::packed({2, 3, 2, 4, 5}));
  const cudnn::legacy_shape s5 = cudnn::legacy_shape_of("softmax", x5, y5, x5);
  EXPECT_EQ(s5.dims, (std::vector<int>{2, 3, 8, 5}));
  EXPECT_EQ(s5.strides[0], (std::vector<int>{120, 40, 5, 1}));
  EXPECT_EQ(s5.strides[1], (std::vector<int>{120, 1, 15, 3}));
  EXPECT_EQ(s5.strides[2], s5.strides[0]);
  expect_descriptor(s5, 0, CUDNN_DATA_HALF);
  expect_descriptor(s5, 1, CUDNN_DATA_HALF);

  // Spatial dims that are contiguous in one tensor only stay apart.
  const cudnn::legacy_shape kept =
      cudnn::legacy_shape_of("softmax", {1, 2, 3, 4, 5}, {{120, 60, 20, 5, 1}, {480, 240, 80, 10, 1}});
  EXPECT_EQ(kept.dims, (std::vector<int>{1, 2, 3, 4, 5}));
}

TEST(CudnnSoftmaxDescriptors, ClearErrors) {
  // An offset beyond int.
  memfmt_test::expect_error_before_cudnn(
      [] {
        (void)cudnn::legacy_shape_of("cuDNN softmax_forward", {2, 65536, 32768, 1}, {{65536LL * 32768, 32768, 1, 1}});
      },
      errc::unsupported, "int range");
  const tensor_view<const bfloat16, nhwc> x(memfmt_test::fake_ptr<bfloat16>(1), layout<nhwc>::packed({1, 4, 2, 2}));
  const tensor_view<bfloat16, nhwc> y(memfmt_test::fake_ptr<bfloat16>(2), layout<nhwc>::packed({1, 4, 2, 2}));
  memfmt_test::expect_error_before_cudnn([&] { cudnn::run_softmax_forward(nullptr, x, y, softmax_params{}); },
                                         errc::unsupported_dtype, "bfloat16");
}

// ------------------------------------------------------------------ support

op_query query(layer_kind op, dtype t, format_family f, int rank = 4) {
  op_query q;
  q.op = op;
  q.type = t;
  q.format = f;
  q.rank = rank;
  return q;
}
op_query global_average_pool(dtype t, format_family f, int rank = 4) {
  op_query q = query(layer_kind::global_pool, t, f, rank);
  q.pool = pool_kind::average;
  return q;
}

TEST(CudnnSupport, AnswersWhatTheGraphsCover) {
  const auto cl = format_family::channels_last, cf = format_family::channels_first;
  for (layer_kind op : {layer_kind::conv, layer_kind::pool, layer_kind::linear, layer_kind::concat, layer_kind::slice})
    for (format_family f : {cl, cf})
      for (dtype t : {dtype::float32, dtype::float16, dtype::bfloat16})
        EXPECT_TRUE(cudnn::layer_support(query(op, t, f))) << to_string(op) << " " << to_string(f);
  // Global average pooling and pooling backward: memfmt's layer kernels (cuda_layer_kernels()).
  for (format_family f : {cl, cf}) {
    const op_support g = cudnn::layer_support(global_average_pool(dtype::float16, f));
    EXPECT_FALSE(g);
    EXPECT_NE(g.reason.find("cuda_layer_kernels()"), std::string::npos) << g.reason;
    EXPECT_TRUE(cudnn::layer_support(global_average_pool(dtype::float16, f), false, true));
    // A global max pool is a pool whose window is the whole map: a pool's answers.
    for (layer_kind op : {layer_kind::pool, layer_kind::global_pool}) {
      op_query pb = query(op, dtype::float32, f);
      pb.backward = true;
      EXPECT_TRUE(cudnn::layer_support(query(op, dtype::float32, f))) << to_string(op);
      EXPECT_FALSE(cudnn::layer_support(pb)) << to_string(op);
      EXPECT_TRUE(cudnn::layer_support(pb, false, true)) << to_string(op);
    }
  }
  for (layer_kind op :
       {layer_kind::activation, layer_kind::binary, layer_kind::batch_norm, layer_kind::conv_transpose}) {
    EXPECT_TRUE(cudnn::layer_support(query(op, dtype::float16, cl))) << to_string(op);
    const op_support s = cudnn::layer_support(query(op, dtype::float16, cf));
    EXPECT_FALSE(s) << to_string(op);
    EXPECT_EQ(s.code, errc::unsupported);
    EXPECT_NE(s.reason.find("channels-last"), std::string::npos) << s.reason;
  }
  // Group norm: memfmt's kernels when the backend has them (cuda_group_norm()), in both formats.
  const op_support gn = cudnn::layer_support(query(layer_kind::group_norm, dtype::float32, cl));
  EXPECT_FALSE(gn);
  EXPECT_NE(gn.reason.find("group_norm"), std::string::npos) << gn.reason;
  EXPECT_NE(gn.reason.find("cuda_group_norm()"), std::string::npos) << gn.reason;
  // Instance norm runs as a group norm (one channel per group): the same answers.
  const op_support in = cudnn::layer_support(query(layer_kind::instance_norm, dtype::float32, cl));
  EXPECT_FALSE(in);
  EXPECT_NE(in.reason.find("instance_norm on the cuDNN backend"), std::string::npos) << in.reason;
  for (layer_kind op : {layer_kind::group_norm, layer_kind::instance_norm})
    for (format_family f : {cl, cf})
      for (dtype t : {dtype::float32, dtype::float64, dtype::float16, dtype::bfloat16})
        EXPECT_TRUE(cudnn::layer_support(query(op, t, f), true)) << to_string(op) << " " << to_string(t);
  EXPECT_EQ(cudnn::layer_support(query(layer_kind::group_norm, dtype::int32, cl), true).code, errc::unsupported_dtype);
  // Layer norm, reductions and local response norm: no graph or kernel, refused in both formats
  // whatever the kernels given.
  for (format_family f : {cl, cf}) {
    const op_support ln = cudnn::layer_support(query(layer_kind::layer_norm, dtype::float32, f), true, true);
    EXPECT_FALSE(ln);
    EXPECT_EQ(ln.code, errc::unsupported);
    EXPECT_NE(ln.reason.find("layer_norm on the cuDNN backend"), std::string::npos) << ln.reason;
    const op_support cr = cudnn::layer_support(query(layer_kind::reduce, dtype::float32, f), true, true);
    EXPECT_FALSE(cr);
    EXPECT_EQ(cr.code, errc::unsupported);
    EXPECT_NE(cr.reason.find("reduce on the cuDNN backend"), std::string::npos) << cr.reason;
    const op_support lrn = cudnn::layer_support(query(layer_kind::lrn, dtype::float32, f), true, true);
    EXPECT_FALSE(lrn);
    EXPECT_EQ(lrn.code, errc::unsupported);
    EXPECT_NE(lrn.reason.find("lrn on the cuDNN backend"), std::string::npos) << lrn.reason;
  }
  // Padding and softmax in both formats; padding trains in constant mode only, softmax is not bfloat16.
  for (format_family f : {cl, cf})
    for (bool backward : {false, true}) {
      for (pad_mode m : {pad_mode::constant, pad_mode::reflect, pad_mode::replicate}) {
        op_query q = query(layer_kind::pad, dtype::float16, f, 5);
        q.padding = m;
        q.backward = backward;
        const op_support s = cudnn::layer_support(q);
        EXPECT_EQ(bool(s), !backward || m == pad_mode::constant) << static_cast<int>(m) << " " << backward;
        if (!s) {
          EXPECT_NE(s.reason.find("backward"), std::string::npos) << s.reason;
        }
      }
      for (dtype t : {dtype::float32, dtype::float16, dtype::bfloat16}) {
        op_query q = query(layer_kind::softmax, t, f);
        q.backward = backward;
        const op_support s = cudnn::layer_support(q);
        EXPECT_EQ(bool(s), t != dtype::bfloat16) << to_string(t);
        if (!s) {
          EXPECT_EQ(s.code, errc::unsupported_dtype);
        }
      }
    }
  // float64: convolution and batch norm only.
  EXPECT_TRUE(cudnn::layer_support(query(layer_kind::conv, dtype::float64, cf)));
  const op_support d = cudnn::layer_support(query(layer_kind::pool, dtype::float64, cl));
  EXPECT_EQ(d.code, errc::unsupported_dtype);
  EXPECT_NE(d.reason.find("float64"), std::string::npos) << d.reason;
  EXPECT_EQ(cudnn::layer_support(query(layer_kind::conv, dtype::int32, cl)).code, errc::unsupported_dtype);
  // Up-sampling: no cuDNN engine, whatever the mode, with or without the layer kernels.
  for (resample_mode m : {resample_mode::nearest, resample_mode::linear}) {
    op_query up = query(layer_kind::upsample, dtype::float32, cl);
    up.resample = m;
    const op_support u = cudnn::layer_support(up, true, true);
    EXPECT_FALSE(u);
    EXPECT_NE(u.reason.find("up-sampling"), std::string::npos) << u.reason;
  }
  EXPECT_FALSE(cudnn::layer_support(query(layer_kind::conv, dtype::float32, cl, 3)));
}

// The trainer asks with `backward` set: every layer whose forward runs has its backward graphs
// (backward.hpp) or kernels (with the layer kernels), so the answers are the forward's, refusals
// and reasons included.
TEST(CudnnSupport, BackwardAnswersAreTheForwards) {
  int asked = 0;
  for (layer_kind op : {layer_kind::activation, layer_kind::binary, layer_kind::pool, layer_kind::global_pool,
                        layer_kind::upsample, layer_kind::linear, layer_kind::concat, layer_kind::slice})
    for (format_family f : {format_family::channels_last, format_family::channels_first})
      for (dtype t : {dtype::float32, dtype::float16, dtype::bfloat16, dtype::float64})
        for (int rank : {4, 5})
          for (int variant = 0; variant < 8; ++variant) {
            op_query q = query(op, t, f, rank);
            q.function = static_cast<activation>(variant);
            q.pool = variant % 2 ? pool_kind::average : pool_kind::max;
            q.resample = variant % 2 ? resample_mode::linear : resample_mode::nearest;
            const op_support fwd = cudnn::layer_support(q, false, true);
            q.backward = true;
            const op_support bwd = cudnn::layer_support(q, false, true);
            EXPECT_EQ(bwd.supported, fwd.supported) << to_string(op) << " " << to_string(f) << " " << to_string(t);
            EXPECT_EQ(bwd.code, fwd.code);
            EXPECT_EQ(bwd.reason, fwd.reason);
            asked += bwd.supported ? 1 : 0;
          }
  EXPECT_GT(asked, 100);
  // Each activation's backward, the compositions included, in channels-last.
  for (int k = 0; k < activation_count; ++k) {
    op_query q = query(layer_kind::activation, dtype::float16, format_family::channels_last);
    q.function = static_cast<activation>(k);
    q.backward = true;
    EXPECT_TRUE(cudnn::layer_support(q)) << to_string(q.function);
  }
}

// The planner with the cuDNN backend's answers (no backend object: that needs a GPU) keeps every
// layer with a pointwise step channels-last, as executor<cudnn::backend> requires.
struct cudnn_answers {
  op_support support(const op_query& q) const { return cudnn::layer_support(q, false, true); }
};

TEST(CudnnSupport, PlannerKeepsPointwiseLayersChannelsLast) {
  graph::models::options o;
  o.batch = 2;
  o.resolution = 32;
  o.width = 0.125;
  o.classes = 10;
  const graph::network net = graph::models::resnet18(o);
  const cudnn_answers answers;
  graph::cost_model costs;
  costs.set_support_query(runtime::support_query_for(answers));
  const graph::plan plan = graph::solve(net, costs);
  int checked = 0;
  for (const graph::node& n : net.nodes()) {
    const auto f = plan.format(n.id);
    if (!f) continue;
    const auto q = runtime::op_query_of(n, *f);
    if (!q) continue;
    EXPECT_TRUE(cudnn::layer_support(*q, false, true)) << n.name << " planned " << graph::to_string(*f);
    if (q->op == layer_kind::activation || q->op == layer_kind::binary || q->op == layer_kind::batch_norm) {
      EXPECT_EQ(*f, format_family::channels_last) << n.name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

}  // namespace
