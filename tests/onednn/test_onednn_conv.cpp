// oneDNN convolution vs the reference backend: forward (bias, fused residual and activation), backward data,
// backward weights (+ bias), on a grid of shapes, both formats, fp32 and bf16, 2-D and 3-D.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <memfmt/backends/onednn/backend.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "../common/expect_error.hpp"
#include "onednn_test_util.hpp"

namespace {

using namespace memfmt;
using onednn_test::all_close;
using onednn_test::fill;
using onednn_test::to_d;

struct conv_case {
  const char* name;
  std::vector<std::int64_t> x;       // N, C, spatial...
  std::int64_t k;                    // output channels
  std::vector<std::int64_t> kernel;  // spatial kernel extents
  conv_params p;
  bool bias;
};

conv_params make_params(std::array<std::int64_t, 3> s, std::array<std::int64_t, 3> pad, std::array<std::int64_t, 3> d,
                        std::int64_t g) {
  conv_params p;
  p.stride = s;
  p.padding = pad;
  p.dilation = d;
  p.groups = g;
  return p;
}

const std::vector<conv_case>& cases_2d() {
  static const std::vector<conv_case> c = {
      {"1x1", {2, 8, 5, 5}, 12, {1, 1}, make_params({1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1), true},
      {"3x3_C5_batch1_odd", {1, 5, 7, 6}, 7, {3, 3}, make_params({1, 1, 1}, {1, 1, 0}, {1, 1, 1}, 1), true},
      {"7x7_stride2_stem", {2, 3, 15, 13}, 8, {7, 7}, make_params({2, 2, 1}, {3, 3, 0}, {1, 1, 1}, 1), false},
      {"3x3_dilation2", {2, 6, 9, 9}, 4, {3, 3}, make_params({1, 1, 1}, {2, 2, 0}, {2, 2, 1}, 1), true},
      {"3x3_groups2", {2, 6, 6, 7}, 10, {3, 3}, make_params({1, 1, 1}, {1, 1, 0}, {1, 1, 1}, 2), true},
      {"depthwise_stride2", {2, 8, 9, 9}, 8, {3, 3}, make_params({2, 2, 1}, {1, 1, 0}, {1, 1, 1}, 8), true},
      {"1x1_stride2_even", {1, 4, 6, 6}, 4, {1, 1}, make_params({2, 2, 1}, {0, 0, 0}, {1, 1, 1}, 1), false},
      {"1x1_stride2_batch4_downsample",
       {4, 4, 8, 8},
       8,
       {1, 1},
       make_params({2, 2, 1}, {0, 0, 0}, {1, 1, 1}, 1),
       false},
      // Odd extents: every other row of 7 is 4 rows, a view oneDNN's strided descriptors refuse.
      {"1x1_stride2_odd_downsample", {2, 4, 7, 5}, 6, {1, 1}, make_params({2, 2, 1}, {0, 0, 0}, {1, 1, 1}, 1), true},
      {"3x5_asym", {2, 3, 8, 11}, 5, {3, 5}, make_params({2, 1, 1}, {1, 2, 0}, {1, 1, 1}, 1), true},
  };
  return c;
}

const std::vector<conv_case>& cases_3d() {
  static const std::vector<conv_case> c = {
      {"3d_3x3x3", {1, 3, 5, 6, 5}, 4, {3, 3, 3}, make_params({1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1), true},
      {"3d_1x3x3_groups2_stride", {2, 4, 4, 5, 5}, 6, {1, 3, 3}, make_params({1, 2, 2}, {0, 1, 1}, {1, 1, 1}, 2), true},
  };
  return c;
}

template <class F>
typename layout<F>::extents_type to_ext(const std::vector<std::int64_t>& v) {
  typename layout<F>::extents_type e{};
  for (int d = 0; d < F::rank; ++d) e[d] = v[static_cast<std::size_t>(d)];
  return e;
}

// Forward, backward data and backward weights of one case against the reference.
template <class T, class XF, class WF, class YF>
void check_conv(onednn::backend& b, const conv_case& cc) {
  SCOPED_TRACE(std::string(cc.name) + " x:" + XF::name + " w:" + WF::name + " y:" + YF::name + " " +
               std::string(to_string(dtype_of_v<T>)));
  const auto xe = to_ext<XF>(cc.x);
  std::vector<std::int64_t> wv{cc.k, cc.x[1] / cc.p.groups};
  wv.insert(wv.end(), cc.kernel.begin(), cc.kernel.end());
  const auto we = to_ext<WF>(wv);
  const auto ye = conv_output_extents(xe, we, cc.p);
  host_tensor<T, XF> x(xe), dx(xe), dx_ref(xe);
  host_tensor<T, WF> w(we), dw(we), dw_ref(we);
  host_tensor<T, YF> y(ye), y_ref(ye), dy(ye);
  std::vector<T> bias(static_cast<std::size_t>(cc.k)), db(bias.size()), db_ref(bias.size());
  fill(x, 1);
  fill(w, 2);
  fill(dy, 3);
  fill(bias.data(), cc.k, 4);

  std::int64_t kernel = 1, out_spatial = 1;
  for (auto k : cc.kernel) kernel *= k;
  for (int d = 2; d < YF::rank; ++d) out_spatial *= ye[d];
  const T* bias_ptr = cc.bias ? bias.data() : nullptr;

  reference::conv_forward<T, XF, WF, YF>(x.view(), w.view(), bias_ptr, y_ref.view(), cc.p);
  b.conv_forward(x.view(), w.view(), bias_ptr, y.view(), cc.p);
  EXPECT_TRUE(all_close<T>(y.const_view(), y_ref.const_view(), static_cast<double>(wv[1] * kernel + 1))) << "forward";
  EXPECT_FALSE(b.last_impl_name().empty());

  reference::conv_backward_data<T, YF, WF, XF>(dy.view(), w.view(), dx_ref.view(), cc.p);
  b.conv_backward_data(dy.view(), w.view(), dx.view(), cc.p);
  EXPECT_TRUE(all_close<T>(dx.const_view(), dx_ref.const_view(), static_cast<double>(cc.k / cc.p.groups * kernel)))
      << "backward data";

  T* db_ptr = cc.bias ? db.data() : nullptr;
  reference::conv_backward_weights<T, XF, YF, WF>(x.view(), dy.view(), dw_ref.view(), cc.bias ? db_ref.data() : nullptr,
                                                  cc.p);
  b.conv_backward_weights(x.view(), dy.view(), dw.view(), db_ptr, cc.p);
  const double len = static_cast<double>(cc.x[0] * out_spatial);
  EXPECT_TRUE(all_close<T>(dw.const_view(), dw_ref.const_view(), len)) << "backward weights";
  if (cc.bias) {
    for (std::size_t i = 0; i < db.size(); ++i)
      EXPECT_NEAR(to_d(db[i]), to_d(db_ref[i]), onednn_test::tolerance<T>(to_d(db_ref[i]), len)) << "dbias " << i;
  }
}

template <class T>
void run_grid() {
  onednn::backend b;
  for (const auto& cc : cases_2d()) {
    check_conv<T, nchw, nchw, nchw>(b, cc);
    check_conv<T, nhwc, nhwc, nhwc>(b, cc);
  }
  for (const auto& cc : cases_3d()) {
    check_conv<T, ncdhw, ncdhw, ncdhw>(b, cc);
    check_conv<T, ndhwc, ndhwc, ndhwc>(b, cc);
  }
  // Mixed layouts: NCHW in, KRSC weights, NHWC out (and the reverse).
  check_conv<T, nchw, nhwc, nhwc>(b, cases_2d()[1]);
  check_conv<T, nhwc, nchw, nchw>(b, cases_2d()[4]);
}

// Where oneDNN cannot compute in T on this CPU: each convolution pass is refused with the clear
// error (checked), and the reason is returned for the skip; "" where T is supported.
template <class T>
std::string conv_refused_on_this_cpu() {
  onednn::backend b;
  host_tensor<T, nhwc> x({1, 4, 5, 5}), w({6, 4, 3, 3}), y({1, 6, 3, 3});
  const conv_params p;
  onednn_test::refused_on_this_cpu<T>("onednn::conv_backward_data",
                                      [&] { b.conv_backward_data(y.view(), w.view(), x.view(), p); });
  onednn_test::refused_on_this_cpu<T>("onednn::conv_backward_weights",
                                      [&] { b.conv_backward_weights(x.view(), y.view(), w.view(), nullptr, p); });
  onednn_test::refused_on_this_cpu<T>("onednn::conv_impl_name", [&] {
    b.conv_impl_name<T, nhwc>(onednn::conv_op::forward, x.extents(), w.extents(), p);
  });
  return onednn_test::refused_on_this_cpu<T>("onednn::conv_forward",
                                             [&] { b.conv_forward(x.view(), w.view(), nullptr, y.view(), p); });
}

TEST(OnednnConv, GridFloat) { run_grid<float>(); }
TEST(OnednnConv, GridBfloat16) {
  const std::string unsupported = conv_refused_on_this_cpu<bfloat16>();
  if (!unsupported.empty()) GTEST_SKIP() << unsupported;
  run_grid<bfloat16>();
}

// The same values in double: the truth is computed without rounding between the layers.
template <class T, class F>
host_tensor<double, F> widened(const host_tensor<T, F>& t) {
  host_tensor<double, F> d(t.extents());
  for (std::int64_t i = 0; i < t.numel(); ++i) d.data()[i] = to_d(t.data()[i]);
  return d;
}

// y = activation(conv(x, w) + bias + residual) for every activation, with a separate residual
// view, with y itself as the residual, and without a residual. The residual spans [-8, 8], so the
// sums cross every activation's kinks (0 and 6, -3 and 3) and saturated ranges. A 1x1 conv
// channels-first is oneDNN's GEMM-based one, where the backend runs the activation as its own
// eltwise pass after the conv.
template <class T, class F>
void check_fusion(std::int64_t kernel = 3) {
  SCOPED_TRACE(std::string(F::name) + " " + std::string(to_string(dtype_of_v<T>)) + " kernel " +
               std::to_string(kernel));
  onednn::backend b;
  const std::int64_t pad = kernel / 2;
  const conv_params p = make_params({1, 1, 1}, {pad, pad, 0}, {1, 1, 1}, 1);
  host_tensor<T, F> x({2, 6, 5, 7}), y({2, 9, 5, 7}), y_inplace({2, 9, 5, 7}), r({2, 9, 5, 7}), want({2, 9, 5, 7});
  host_tensor<T, F> w({9, 6, kernel, kernel});
  std::vector<T> bias(9);
  fill(x, 11);
  fill(w, 12);
  fill(r, 13, -8.f, 8.f);
  fill(bias.data(), 9, 14);
  host_tensor<double, F> conv_ref({2, 9, 5, 7});
  std::vector<double> bias_d(bias.size());
  for (std::size_t i = 0; i < bias.size(); ++i) bias_d[i] = to_d(bias[i]);
  reference::conv_forward<double, F, F, F>(widened(x).view(), widened(w).view(), bias_d.data(), conv_ref.view(), p);
  const auto expect = [&](activation kind, bool residual) {
    for (std::int64_t i = 0; i < want.numel(); ++i)
      want.data()[i] = onednn_test::from_f<T>(static_cast<float>(
          reference::detail::activation_value(kind, conv_ref.data()[i] + (residual ? to_d(r.data()[i]) : 0.0))));
  };
  for (const activation kind : {activation::identity, activation::relu, activation::relu6, activation::silu,
                                activation::sigmoid, activation::hardsigmoid, activation::hardswish, activation::tanh,
                                activation::gelu, activation::gelu_tanh, activation::softplus, activation::mish}) {
    SCOPED_TRACE("activation " + std::to_string(static_cast<int>(kind)));
    onednn::conv_fusion fusion;
    fusion.activation = kind;
    expect(kind, true);
    // The residual's 8 weighs in the tolerance: oneDNN sums it in float.
    b.conv_forward(x.view(), w.view(), bias.data(), y.view(), p, fusion, r.const_view());
    EXPECT_TRUE(all_close<T>(y.const_view(), want.const_view(), 6 * kernel * kernel + 2, 8.0)) << "separate residual";
    std::copy(r.data(), r.data() + r.numel(), y_inplace.data());
    b.conv_forward(x.view(), w.view(), bias.data(), y_inplace.view(), p, fusion, y_inplace.const_view());
    EXPECT_TRUE(all_close<T>(y_inplace.const_view(), want.const_view(), 6 * kernel * kernel + 2, 8.0))
        << "residual == y";
    expect(kind, false);
    b.conv_forward(x.view(), w.view(), bias.data(), y.view(), p, fusion);
    EXPECT_TRUE(all_close<T>(y.const_view(), want.const_view(), 6 * kernel * kernel + 1)) << "no residual";
    const bool split = b.last_impl_name().find("+ eltwise") != std::string::npos;
    EXPECT_EQ(split, kind != activation::identity && b.last_impl_name().find("gemm") != std::string::npos)
        << b.last_impl_name();
  }
}

TEST(OnednnConv, FusedActivationAndResidualFloat) {
  check_fusion<float, nchw>();
  check_fusion<float, nhwc>();
  check_fusion<float, nchw>(1);
  check_fusion<float, nhwc>(1);
}

TEST(OnednnConv, FusedActivationAndResidualBfloat16) {
  const std::string unsupported = conv_refused_on_this_cpu<bfloat16>();
  if (!unsupported.empty()) GTEST_SKIP() << unsupported;
  check_fusion<bfloat16, nchw>();
  check_fusion<bfloat16, nhwc>();
  check_fusion<bfloat16, nchw>(1);
}

// Padded views (slices of larger buffers) are described by strides, not tags.
TEST(OnednnConv, PaddedViews) {
  onednn::backend b;
  const conv_params p = make_params({1, 1, 1}, {1, 1, 0}, {1, 1, 1}, 1);
  // NHWC input with 8 channel slots per pixel of which 5 are used; NCHW output with row pitch 9.
  std::vector<float> xbuf(2 * 6 * 7 * 8), ybuf(2 * 4 * 6 * 9, -7.f);
  fill(xbuf.data(), static_cast<std::int64_t>(xbuf.size()), 21);
  const auto xl = layout<nhwc>::strided({2, 5, 6, 7}, {6 * 7 * 8, 1, 7 * 8, 8});
  const auto yl = layout<nchw>::strided({2, 4, 6, 7}, {4 * 6 * 9, 6 * 9, 9, 1});
  tensor_view<float, nhwc> x(xbuf.data(), xl);
  tensor_view<float, nchw> y(ybuf.data(), yl);
  host_tensor<float, nhwc> w({4, 5, 3, 3});
  host_tensor<float, nchw> y_ref({2, 4, 6, 7});
  fill(w, 22);
  reference::conv_forward<float, nhwc, nhwc, nchw>(x, w.view(), nullptr, y_ref.view(), p);
  b.conv_forward(x, w.view(), nullptr, y, p);
  EXPECT_TRUE(all_close<float>(tensor_view<const float, nchw>(y), y_ref.const_view(), 5 * 9));
  // The padding columns of y were not written.
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t k = 0; k < 4; ++k)
      for (std::int64_t h = 0; h < 6; ++h)
        for (std::int64_t col = 7; col < 9; ++col)
          EXPECT_EQ(ybuf[static_cast<std::size_t>(((n * 4 + k) * 6 + h) * 9 + col)], -7.f);
}

// A bound call reads x and the residual on every run, and its weights as the cache contract says:
// resolved when bound with caching on, reordered on every run with caching off.
TEST(OnednnConv, BoundCallRereadsActivationsAndHonoursTheWeightCache) {
  const conv_params p = make_params({1, 1, 1}, {1, 1, 0}, {1, 1, 1}, 1);
  host_tensor<float, nhwc> x({1, 16, 6, 6}), r({1, 16, 6, 6}), y({1, 16, 6, 6}), conv_ref({1, 16, 6, 6}),
      want({1, 16, 6, 6});
  host_tensor<float, nhwc> w({16, 16, 3, 3});
  std::vector<float> w_bound(static_cast<std::size_t>(w.numel()));
  const auto expect_conv_plus_residual = [&](const char* what) {
    reference::conv_forward<float, nhwc, nhwc, nhwc>(x.view(), w.view(), nullptr, conv_ref.view(), p);
    for (std::int64_t i = 0; i < want.numel(); ++i) want.data()[i] = conv_ref.data()[i] + r.data()[i];
    EXPECT_TRUE(all_close<float>(y.const_view(), want.const_view(), 16 * 9 + 1)) << what;
  };
  for (const bool caching : {true, false}) {
    SCOPED_TRACE(caching ? "weight caching on" : "weight caching off");
    onednn::backend b;
    b.set_weight_caching(caching);
    fill(x, 41);
    fill(r, 42);
    fill(w, 43);
    auto call = b.bind_conv_forward(x.const_view(), w.const_view(), nullptr, y.view(), p, {}, r.const_view());
    call();
    expect_conv_plus_residual("first run");
    fill(x, 44);
    fill(r, 45);
    call();
    expect_conv_plus_residual("new x and residual");
    std::copy(w.data(), w.data() + w.numel(), w_bound.begin());
    fill(w, 46);  // new weights in the same buffer
    call();
    if (caching) std::copy(w_bound.begin(), w_bound.end(), w.data());  // the bound call kept the old ones
    expect_conv_plus_residual("new weights");
  }
}

// The weight cache: reordered weights are reused until invalidated (the documented contract).
TEST(OnednnConv, WeightCacheContract) {
  onednn::backend b;
  const conv_params p = make_params({1, 1, 1}, {1, 1, 0}, {1, 1, 1}, 1);
  host_tensor<float, nhwc> x({1, 16, 6, 6}), y1({1, 16, 6, 6}), y2({1, 16, 6, 6}), y_ref({1, 16, 6, 6});
  host_tensor<float, nhwc> w({16, 16, 3, 3});
  fill(x, 31);
  fill(w, 32);
  b.conv_forward(x.view(), w.view(), nullptr, y1.view(), p);
  ASSERT_EQ(b.cached_weight_count(), 1u) << "NHWC conv should run on reordered (blocked) weights";
  fill(w, 33);  // new values, same buffer
  b.conv_forward(x.view(), w.view(), nullptr, y2.view(), p);
  EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size_bytes())) << "stale weights expected until invalidated";
  b.invalidate_weights(w.data());
  EXPECT_EQ(b.cached_weight_count(), 0u);
  b.conv_forward(x.view(), w.view(), nullptr, y2.view(), p);
  reference::conv_forward<float, nhwc, nhwc, nhwc>(x.view(), w.view(), nullptr, y_ref.view(), p);
  EXPECT_TRUE(all_close<float>(y2.const_view(), y_ref.const_view(), 16 * 9));

  b.set_weight_caching(false);
  fill(w, 34);
  b.conv_forward(x.view(), w.view(), nullptr, y2.view(), p);
  reference::conv_forward<float, nhwc, nhwc, nhwc>(x.view(), w.view(), nullptr, y_ref.view(), p);
  EXPECT_TRUE(all_close<float>(y2.const_view(), y_ref.const_view(), 16 * 9));
  EXPECT_EQ(b.cached_weight_count(), 0u);
  // Primitives are reused across calls with the same shapes.
  const auto n = b.cached_primitive_count();
  b.conv_forward(x.view(), w.view(), nullptr, y2.view(), p);
  EXPECT_EQ(b.cached_primitive_count(), n);
}

TEST(OnednnConv, ValidationErrors) {
  onednn::backend b;
  conv_params p;
  host_tensor<float, nhwc> x({1, 4, 5, 5}), w({6, 4, 3, 3}), y({1, 6, 3, 3}), y_bad({1, 6, 4, 3});
  EXPECT_TRUE(memfmt_test::error_code([&] { b.conv_forward(x.view(), w.view(), nullptr, y_bad.view(), p); }) ==
              errc::shape_mismatch);
  conv_params g3 = p;
  g3.groups = 3;
  EXPECT_TRUE(memfmt_test::error_code([&] { b.conv_forward(x.view(), w.view(), nullptr, y.view(), g3); }) ==
              errc::invalid_argument);
  tensor_view<float, nhwc> null_x(nullptr, x.extents());
  EXPECT_TRUE(memfmt_test::error_code([&] { b.conv_forward(null_x, w.view(), nullptr, y.view(), p); }) ==
              errc::null_pointer);
  host_tensor<double, nhwc> xd({1, 4, 5, 5}), wd({6, 4, 3, 3}), yd({1, 6, 3, 3});
  EXPECT_TRUE(memfmt_test::error_code([&] { b.conv_forward(xd.view(), wd.view(), nullptr, yd.view(), p); }) ==
              errc::unsupported_dtype);
  EXPECT_TRUE(memfmt_test::error_code([&] { b.conv_backward_data(y_bad.view(), w.view(), x.view(), p); }) ==
              errc::shape_mismatch);
  EXPECT_TRUE(memfmt_test::error_code([&] { b.conv_backward_weights(x.view(), y_bad.view(), w.view(), nullptr, p); }) ==
              errc::shape_mismatch);
  // Nothing was written on error.
  for (std::int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.data()[i], 0.f);
  memfmt_test::expect_error([&] { b.conv_forward(x.view(), w.view(), nullptr, y_bad.view(), p); }, errc::shape_mismatch,
                            {"[1, 6, 4, 3]"});
}

// oneDNN's own failures surface as memfmt::error(backend_failure) with oneDNN's status.
TEST(OnednnConv, BackendFailureIsWrapped) {
  try {
    onednn::detail::guarded("make a descriptor", [] {
      // 2 dims with a 4-D tag: oneDNN rejects it.
      return dnnl::memory::desc({2, 3}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::nchw);
    });
    FAIL() << "expected an error";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), errc::backend_failure);
    EXPECT_NE(std::string(e.what()).find("invalid_arguments"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("make a descriptor"), std::string::npos) << e.what();
  }
}

}  // namespace
