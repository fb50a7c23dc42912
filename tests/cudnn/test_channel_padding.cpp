// Channel padding for tensor cores: the 2-D copy the backend performs on the GPU, modelled on the
// host, equals an element-wise reference; unpadding round-trips; and a convolution of the padded
// input and weight equals the unpadded one (reference backend), for every format and 16/32-bit type.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <memfmt/backends/cudnn/channel_padding.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/tensor/host_tensor.hpp>

namespace {

using namespace memfmt;
using cudnn::pad_copy;

template <class T>
T from_float(float f) {
  return T(f);
}
template <>
float from_float<float>(float f) {
  return f;
}
template <class T>
float to_float(T v) {
  return static_cast<float>(v);
}

template <class T, class F>
void fill(host_tensor<T, F>& t, std::uint32_t seed) {
  std::uint32_t s = seed;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    t.data()[i] = from_float<T>(static_cast<float>(static_cast<int>((s >> 9) % 17) - 8) / 8.0f);  // exact in bf16
  }
}

TEST(ChannelPadding, Multiples) {
  EXPECT_EQ(cudnn::tensor_core_channel_multiple(dtype::float16), 8);
  EXPECT_EQ(cudnn::tensor_core_channel_multiple(dtype::bfloat16), 8);
  EXPECT_EQ(cudnn::tensor_core_channel_multiple(dtype::float32), 4);
  EXPECT_EQ(cudnn::tensor_core_channel_multiple(dtype::float64), 1);
  EXPECT_EQ(cudnn::round_up(3, 8), 8);
  EXPECT_EQ(cudnn::round_up(8, 8), 8);
  EXPECT_EQ(cudnn::round_up(9, 8), 16);
  EXPECT_EQ(cudnn::round_up(3, 4), 4);
  EXPECT_EQ(cudnn::round_up(3, 1), 3);
}

template <class F>
void check_copy_plan_numbers() {
  using E = std::array<std::int64_t, F::rank>;
  E e{};
  for (auto& v : e) v = 1;
  e[0] = 2;
  e[1] = 3;
  e[2] = 5;
  e[F::rank - 1] = 7;
  std::int64_t spatial = 1;
  for (int d = 2; d < F::rank; ++d) spatial *= e[static_cast<std::size_t>(d)];
  const pad_copy pc = cudnn::pad_copy_for<F>(e, 8, 2);
  if (F::channels_last) {
    EXPECT_EQ(pc.rows, static_cast<std::size_t>(2 * spatial));
    EXPECT_EQ(pc.row_bytes, 3u * 2u);
    EXPECT_EQ(pc.dst_pitch, 8u * 2u);
  } else {
    EXPECT_EQ(pc.rows, 2u);
    EXPECT_EQ(pc.row_bytes, static_cast<std::size_t>(3 * spatial * 2));
    EXPECT_EQ(pc.dst_pitch, static_cast<std::size_t>(8 * spatial * 2));
  }
  EXPECT_EQ(pc.dst_bytes, static_cast<std::size_t>(2 * 8 * spatial * 2));
  EXPECT_THROW(cudnn::pad_copy_for<F>(e, 2, 2), memfmt::error);
}

TEST(ChannelPadding, CopyPlanNumbers) {
  check_copy_plan_numbers<nchw>();
  check_copy_plan_numbers<nhwc>();
  check_copy_plan_numbers<ncdhw>();
  check_copy_plan_numbers<ndhwc>();
}

// The host model of cudaMemset + cudaMemcpy2D equals the element-wise reference, and unpadding restores the input.
template <class T, class F>
void check_pad_matches_reference(std::array<std::int64_t, F::rank> e, std::int64_t cp) {
  host_tensor<T, F> src(e);
  fill(src, 7u);
  const auto pe = cudnn::with_channels(e, cp);
  host_tensor<T, F> ref(pe), got(pe), back(e);
  // Poison so that a byte the copy forgot shows up.
  std::memset(static_cast<void*>(got.data()), 0x7f, got.size_bytes());
  cudnn::pad_channels_reference<T, F>(src.const_view(), ref.view());
  const pad_copy pc = cudnn::pad_copy_for<F>(e, cp, sizeof(T));
  ASSERT_EQ(pc.dst_bytes, got.size_bytes());
  cudnn::apply_pad_copy_host(src.data(), got.data(), pc);
  EXPECT_EQ(std::memcmp(ref.data(), got.data(), ref.size_bytes()), 0) << F::name;
  // Padding channels really are zero and the original ones really are the source (independent look-up).
  for (std::int64_t n = 0; n < e[0]; ++n)
    for (std::int64_t c = 0; c < cp; ++c) {
      std::array<std::int64_t, F::rank> i{};
      i[0] = n;
      i[1] = c;
      const float v = to_float(got.view()(i));
      if (c < e[1]) EXPECT_EQ(v, to_float(src.view()(i)));
      else EXPECT_EQ(v, 0.0f);
    }
  cudnn::apply_pad_copy_host(got.data(), back.data(), cudnn::unpad_copy_of(pc), false);
  EXPECT_EQ(std::memcmp(src.data(), back.data(), src.size_bytes()), 0) << F::name;
}

TEST(ChannelPadding, HostCopyEqualsReference) {
  check_pad_matches_reference<half, nhwc>({2, 3, 4, 5}, 8);
  check_pad_matches_reference<half, nchw>({2, 3, 4, 5}, 8);
  check_pad_matches_reference<bfloat16, ndhwc>({1, 5, 2, 3, 4}, 8);
  check_pad_matches_reference<bfloat16, ncdhw>({1, 5, 2, 3, 4}, 8);
  check_pad_matches_reference<float, nhwc>({3, 3, 3, 3}, 4);
  check_pad_matches_reference<float, nchw>({3, 1, 3, 3}, 4);
}

TEST(ChannelPadding, ReferenceHandlesStridedViewsAndRejectsBadShapes) {
  // A padded-row NHWC source (stride of W larger than C): the reference reads by coordinates.
  std::vector<float> buf(2 * 3 * 4 * 8, -1.0f);
  const auto lay = layout<nhwc>::strided({2, 3, 3, 4}, {3 * 4 * 8, 1, 4 * 8, 8});
  tensor_view<float, nhwc> src(buf.data(), lay);
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t c = 0; c < 3; ++c)
      for (std::int64_t h = 0; h < 3; ++h)
        for (std::int64_t w = 0; w < 4; ++w) src(n, c, h, w) = static_cast<float>(n * 100 + c * 10 + h + w * 0.5);
  host_tensor<float, nhwc> dst({2, 4, 3, 4});
  cudnn::pad_channels_reference<float, nhwc>(src, dst.view());
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t c = 0; c < 4; ++c)
      for (std::int64_t h = 0; h < 3; ++h)
        for (std::int64_t w = 0; w < 4; ++w)
          EXPECT_EQ(dst(n, c, h, w), c < 3 ? static_cast<float>(n * 100 + c * 10 + h + w * 0.5) : 0.0f);
  host_tensor<float, nhwc> small({2, 2, 3, 4}), other({2, 4, 3, 5});
  EXPECT_THROW((cudnn::pad_channels_reference<float, nhwc>(src, small.view())), memfmt::error);
  EXPECT_THROW((cudnn::pad_channels_reference<float, nhwc>(src, other.view())), memfmt::error);
}

// The point of the option: a convolution of zero-padded input and weight is the same convolution.
template <class T, class F>
void check_conv_unchanged(std::array<std::int64_t, F::rank> xe, std::array<std::int64_t, F::rank> we, conv_params p) {
  const std::int64_t cp = cudnn::round_up(xe[1], cudnn::tensor_core_channel_multiple(dtype_of_v<T>));
  ASSERT_NE(cp, xe[1]);
  host_tensor<T, F> x(xe), w(we);
  fill(x, 3u);
  fill(w, 11u);
  const auto ye = conv_output_extents(xe, we, p);
  host_tensor<T, F> y(ye), yp(ye);
  std::vector<T> bias(static_cast<std::size_t>(we[0]));
  for (std::size_t k = 0; k < bias.size(); ++k) bias[k] = from_float<T>(0.25f * static_cast<float>(k));
  reference::backend ref;
  ref.conv_forward<T, F, F, F>(x.const_view(), w.const_view(), bias.data(), y.view(), p);

  host_tensor<T, F> xp(cudnn::with_channels(xe, cp)), wp(cudnn::with_channels(we, cp));
  cudnn::apply_pad_copy_host(x.data(), xp.data(), cudnn::pad_copy_for<F>(xe, cp, sizeof(T)));
  cudnn::apply_pad_copy_host(w.data(), wp.data(), cudnn::pad_copy_for<F>(we, cp, sizeof(T)));
  ref.conv_forward<T, F, F, F>(xp.const_view(), wp.const_view(), bias.data(), yp.view(), p);
  for (std::int64_t i = 0; i < y.numel(); ++i)
    ASSERT_EQ(to_float(y.data()[i]), to_float(yp.data()[i])) << F::name << " at " << i;
}

TEST(ChannelPadding, ConvolutionResultUnchanged) {
  conv_params stem;
  stem.stride = {2, 2, 2};
  stem.padding = {3, 3, 3};
  check_conv_unchanged<half, nhwc>({2, 3, 16, 16}, {8, 3, 7, 7}, stem);  // a ResNet-like 3-channel stem
  check_conv_unchanged<bfloat16, nhwc>({1, 3, 9, 9}, {4, 3, 3, 3}, conv_params{});
  check_conv_unchanged<float, nhwc>({2, 3, 8, 8}, {5, 3, 3, 3}, conv_params{});
  check_conv_unchanged<float, nchw>({2, 3, 8, 8}, {5, 3, 3, 3}, conv_params{});
  conv_params p3;
  p3.padding = {1, 1, 1};
  check_conv_unchanged<half, ndhwc>({1, 3, 4, 5, 5}, {4, 3, 3, 3, 3}, p3);
}

}  // namespace
