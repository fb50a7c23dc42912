// The cuDNN backend's layer graphs one by one against the reference backend on a GPU (NHWC, fp32
// and fp16): every activation, broadcast binary ops (either operand broadcast), max and average
// pooling with padding, ceil mode and both average rules, nearest and bilinear up-sampling, global
// average pooling, linear with and without bias, concat, channel slices and format conversion;
// padding (every mode, forward and constant backward) and softmax / log-softmax (forward and
// backward, fp32 and fp16) in both formats; then the backward pass of each layer (the
// trainer's), in both formats where the layer runs in both. Skips when there is no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <memfmt/backends/cudnn/backend.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/convert/convert.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "kernel_converter.hpp"

namespace {

using namespace memfmt;

class CudnnLayersGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cudnn::device_count() == 0)
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports none or fails): cuDNN layer GPU tests skipped";
    be_ = std::make_unique<cudnn::backend>(memfmt_test::with_layer_kernels());
  }
  std::unique_ptr<cudnn::backend> be_;
};

// A host tensor and its device copy (through the backend's memory hooks).
template <class T, class F>
struct mirrored {
  host_tensor<T, F> host;
  cudnn::backend* be;
  T* device;
  mirrored(cudnn::backend& b, const std::array<std::int64_t, F::rank>& e, std::uint32_t seed) : host(e), be(&b) {
    std::uint32_t s = seed;
    T* p = host.view().data();
    for (std::int64_t i = 0; i < host.view().numel(); ++i) {
      s = s * 1664525u + 1013904223u;
      p[i] = static_cast<T>(static_cast<float>(static_cast<int>((s >> 9) % 33) - 16) / 16.0f);
    }
    device = static_cast<T*>(b.allocate(bytes()));
    b.copy_in(device, p, bytes());
  }
  ~mirrored() { be->deallocate(device, bytes()); }
  // Adds d to every value, on the host and the device.
  void offset(float d) {
    T* p = host.view().data();
    for (std::int64_t i = 0; i < host.view().numel(); ++i) p[i] = static_cast<T>(static_cast<float>(p[i]) + d);
    be->copy_in(device, p, bytes());
  }
  mirrored(const mirrored&) = delete;
  std::size_t bytes() const { return static_cast<std::size_t>(host.view().numel()) * sizeof(T); }
  tensor_view<const T, F> dev() const { return tensor_view<const T, F>(device, host.view().mapping()); }
  tensor_view<T, F> dev_out() { return tensor_view<T, F>(device, host.view().mapping()); }
  // The device contents, back on the host.
  host_tensor<T, F> fetch() const {
    host_tensor<T, F> r(host.view().extents());
    be->copy_out(r.view().data(), device, bytes());
    return r;
  }
};

template <class T, class F>
void expect_close(const host_tensor<T, F>& got, const host_tensor<T, F>& want, double tol) {
  const T* g = got.view().data();
  const T* w = want.view().data();
  int bad = 0;
  for (std::int64_t i = 0; i < got.view().numel(); ++i) {
    const double a = static_cast<float>(g[i]), b = static_cast<float>(w[i]);
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;  // equal infinities (a quotient by 0) too
    if (!(std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b))) && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": " << a << ", reference " << b;
  }
}

template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 2e-3 : 2e-2;  // TF32 / fp16 storage
}

// Every function at its defaults, then with other parameters; the clip bounds and the kinks of the
// shifted input in activation_backwards lie off the inputs' grid of sixteenths.
std::vector<activation_params> gpu_activations() {
  std::vector<activation_params> f;
  for (int k = 0; k < activation_count; ++k) f.push_back(static_cast<activation>(k));
  for (const activation_params& p :
       {activation_params::hardsigmoid(0.2, 0.5), activation_params::leaky_relu(0.1), activation_params::elu(0.5),
        activation_params::clip(-0.53, 0.47), activation_params::clip(-std::numeric_limits<double>::infinity(), 0.47),
        activation_params::clip(-0.53, std::numeric_limits<double>::infinity())})
    f.push_back(p);
  return f;
}

template <class T>
void activations(cudnn::backend& be) {
  reference::backend ref;
  mirrored<T, nhwc> x(be, {2, 8, 5, 3}, 1);
  for (const activation_params& k : gpu_activations()) {
    SCOPED_TRACE(to_string(k));
    mirrored<T, nhwc> y(be, {2, 8, 5, 3}, 2);
    host_tensor<T, nhwc> want({2, 8, 5, 3});
    ref.activation_forward(k, x.host.const_view(), want.view());
    be.activation_forward(k, x.dev(), y.dev_out());
    expect_close(y.fetch(), want, tolerance<T>());
  }
}
TEST_F(CudnnLayersGpu, ActivationsFp32) { activations<float>(*be_); }
TEST_F(CudnnLayersGpu, ActivationsFp16) { activations<half>(*be_); }

TEST_F(CudnnLayersGpu, BinaryBroadcastEitherOperand) {
  reference::backend ref;
  mirrored<float, nhwc> full(*be_, {2, 8, 4, 3}, 3), per_channel(*be_, {1, 8, 1, 1}, 4);
  for (binary_op k : {binary_op::add, binary_op::sub, binary_op::mul, binary_op::div}) {
    for (bool broadcast_first : {false, true}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(k)) + (broadcast_first ? " a broadcast" : " b broadcast"));
      mirrored<float, nhwc> y(*be_, {2, 8, 4, 3}, 5);
      host_tensor<float, nhwc> want({2, 8, 4, 3});
      // Divisors away from zero: shift the per-channel values.
      if (broadcast_first) {
        ref.binary_forward(k, per_channel.host.const_view(), full.host.const_view(), want.view());
        be_->binary_forward(k, per_channel.dev(), full.dev(), y.dev_out());
      } else {
        ref.binary_forward(k, full.host.const_view(), per_channel.host.const_view(), want.view());
        be_->binary_forward(k, full.dev(), per_channel.dev(), y.dev_out());
      }
      auto got = y.fetch();
      // Division by the zeros of the inputs gives inf on both sides; compare where finite.
      float* g = got.view().data();
      const float* w = want.view().data();
      for (std::int64_t i = 0; i < want.view().numel(); ++i)
        if (!std::isfinite(w[i])) g[i] = w[i];
      expect_close(got, want, tolerance<float>());
    }
  }
}

// Calls fn(p) for a padded 3 x 3, stride 2 pooling of every kind, padding count and ceil mode that
// cuDNN runs.
template <class Fn>
void for_each_pool_rule(Fn&& fn) {
  pool_params p;
  p.kernel = {3, 3, 1};
  p.stride = {2, 2, 1};
  p.padding = {1, 1, 0};
  p.padding_end = {1, 1, 0};
  for (pool_kind kind : {pool_kind::max, pool_kind::average})
    for (bool include : {true, false})
      for (bool ceil : {false, true}) {
        if (ceil && include && kind == pool_kind::average) continue;  // refused (resample.hpp)
        p.kind = kind;
        p.count_include_pad = include;
        p.ceil_mode = ceil;
        SCOPED_TRACE(std::to_string(static_cast<int>(kind)) + (include ? " incl" : " excl") + (ceil ? " ceil" : ""));
        fn(p);
      }
}

TEST_F(CudnnLayersGpu, PoolingPaddingCeilAndAverageRules) {
  reference::backend ref;
  mirrored<float, nhwc> x(*be_, {2, 8, 7, 6}, 6);
  for_each_pool_rule([&](const pool_params& p) {
    const auto ye = pool_output_extents(x.host.view().extents(), p);
    mirrored<float, nhwc> y(*be_, ye, 7);
    host_tensor<float, nhwc> want(ye);
    ref.pool_forward(x.host.const_view(), want.view(), p);
    be_->pool_forward(x.dev(), y.dev_out(), p);
    expect_close(y.fetch(), want, tolerance<float>());
  });
}

// cuDNN 9.19 on an H100 finds no engine for an up-sampling resample graph: a clear refusal (the
// capability query says so before any work; support.hpp).
TEST_F(CudnnLayersGpu, UpsamplingHasNoEngine) {
  mirrored<float, nhwc> x(*be_, {2, 8, 4, 3}, 8), dy(*be_, {2, 8, 8, 9}, 34);
  upsample_params p;
  p.output = {8, 9, 1};
  for (resample_mode m : {resample_mode::nearest, resample_mode::linear}) {
    p.mode = m;
    SCOPED_TRACE(m == resample_mode::nearest ? "nearest" : "bilinear");
    mirrored<float, nhwc> y(*be_, {2, 8, 8, 9}, 9), dx(*be_, {2, 8, 4, 3}, 35);
    for (int pass = 0; pass < 2; ++pass) {
      try {
        if (pass == 0) be_->upsample_forward(x.dev(), y.dev_out(), p);
        else be_->upsample_backward(dy.dev(), dx.dev_out(), p);
        ADD_FAILURE() << "an up-sampling resample ran (pass " << pass
                      << "): cuDNN now has an engine; lift the refusal in support.hpp";
      } catch (const memfmt::error& e) {
        EXPECT_EQ(e.code(), errc::unsupported) << e.what();
      }
    }
  }
}

TEST_F(CudnnLayersGpu, GlobalAveragePoolLinearConcatSliceConvert) {
  reference::backend ref;
  mirrored<float, nhwc> x(*be_, {2, 8, 5, 3}, 10);
  mirrored<float, nhwc> g(*be_, {2, 8, 1, 1}, 11);
  host_tensor<float, nhwc> want_g({2, 8, 1, 1});
  ref.global_average_pool_forward(x.host.const_view(), want_g.view());
  be_->global_average_pool_forward(x.dev(), g.dev_out());
  expect_close(g.fetch(), want_g, tolerance<float>());

  mirrored<float, nchw> w(*be_, {6, 8, 1, 1}, 12), bias(*be_, {1, 6, 1, 1}, 13);
  for (bool with_bias : {false, true}) {
    mirrored<float, nchw> y(*be_, {2, 6, 1, 1}, 14);
    host_tensor<float, nchw> want({2, 6, 1, 1});
    const host_tensor<float, nhwc> g_host = g.fetch();  // what the device linear reads
    ref.linear_forward(g_host.const_view(), w.host.view().data(), with_bias ? bias.host.view().data() : nullptr,
                       want.view());
    be_->linear_forward(g.dev(), w.device, with_bias ? bias.device : nullptr, y.dev_out());
    expect_close(y.fetch(), want, tolerance<float>());
  }

  mirrored<float, nhwc> a(*be_, {2, 3, 4, 3}, 15), b(*be_, {2, 5, 4, 3}, 16), cat(*be_, {2, 8, 4, 3}, 17);
  host_tensor<float, nhwc> want_cat({2, 8, 4, 3});
  ref.concat_forward(std::vector<tensor_view<const float, nhwc>>{a.host.const_view(), b.host.const_view()},
                     want_cat.view());
  be_->concat_forward(std::vector<tensor_view<const float, nhwc>>{a.dev(), b.dev()}, cat.dev_out());
  const auto got_cat = cat.fetch();
  expect_close(got_cat, want_cat, 0.0);
  mirrored<float, nhwc> part(*be_, {2, 5, 4, 3}, 18);
  be_->slice_forward(cat.dev(), memfmt::slice_params{1, 3, 8, 1}, part.dev_out());
  expect_close(part.fetch(), b.host, 0.0);

  mirrored<float, nchw> cf(*be_, {2, 8, 4, 3}, 19);
  be_->convert(cat.dev(), cf.dev_out());
  host_tensor<float, nchw> want_cf({2, 8, 4, 3});
  memfmt::convert(got_cat.const_view(), want_cf.view());
  expect_close(cf.fetch(), want_cf, 0.0);
}

// ------------------------------------------------------------------ backward passes

// Distinct values (no ties for max pooling to break differently), copied to the device.
template <class T, class F>
void make_distinct(mirrored<T, F>& m) {
  T* p = m.host.view().data();
  const std::int64_t n = m.host.view().numel();
  for (std::int64_t i = 0; i < n; ++i)
    p[i] = static_cast<T>(static_cast<float>((i * 7919) % n) / static_cast<float>(n) - 0.5f);
  m.be->copy_in(m.device, p, m.bytes());
}

template <class T>
void activation_backwards(cudnn::backend& be) {
  reference::backend ref;
  const std::array<std::int64_t, 4> e{2, 8, 5, 3};
  mirrored<T, nhwc> x(be, e, 21), dy(be, e, 22);
  // x spans [-1, 1] in steps of 1/16: 0 is relu's kink, where both sides take the derivative 0.
  // leaky_relu and elu, whose derivative at 0 a convention decides, see x shifted by 1/32.
  mirrored<T, nhwc> shifted(be, e, 21);
  shifted.offset(1.0f / 32.0f);
  for (const activation_params& k : gpu_activations()) {
    SCOPED_TRACE(to_string(k));
    const bool off_grid = k.kind == activation::leaky_relu || k.kind == activation::elu;
    const mirrored<T, nhwc>& in = off_grid ? shifted : x;
    mirrored<T, nhwc> dx(be, e, 23);
    host_tensor<T, nhwc> want(e);
    ref.activation_backward(k, in.host.const_view(), dy.host.const_view(), want.view());
    be.activation_backward(k, in.dev(), dy.dev(), dx.dev_out());
    expect_close(dx.fetch(), want, tolerance<T>());
  }
}
TEST_F(CudnnLayersGpu, ActivationBackwardFp32) { activation_backwards<float>(*be_); }
TEST_F(CudnnLayersGpu, ActivationBackwardFp16) { activation_backwards<half>(*be_); }

TEST_F(CudnnLayersGpu, BinaryBackwardSumsOverBroadcastDims) {
  reference::backend ref;
  const std::array<std::int64_t, 4> full{2, 8, 4, 3};
  mirrored<float, nhwc> dy(*be_, full, 24), a(*be_, full, 25);
  for (const std::array<std::int64_t, 4>& bext :
       {full, std::array<std::int64_t, 4>{1, 8, 1, 1}, std::array<std::int64_t, 4>{2, 1, 4, 3},
        std::array<std::int64_t, 4>{2, 8, 1, 1}}) {
    mirrored<float, nhwc> b(*be_, bext, 26);
    // Divisors away from zero.
    float* bp = b.host.view().data();
    for (std::int64_t i = 0; i < b.host.view().numel(); ++i) bp[i] = bp[i] >= 0 ? bp[i] + 0.5f : bp[i] - 0.5f;
    be_->copy_in(b.device, bp, b.bytes());
    for (binary_op k : {binary_op::add, binary_op::sub, binary_op::mul, binary_op::div}) {
      SCOPED_TRACE(memfmt::detail::dims_to_string(bext) + " op " + std::to_string(static_cast<int>(k)));
      mirrored<float, nhwc> da(*be_, full, 27), db(*be_, bext, 28);
      host_tensor<float, nhwc> want_a(full), want_b(bext);
      ref.binary_backward(k, a.host.const_view(), b.host.const_view(), dy.host.const_view(), want_a.view(),
                          want_b.view());
      be_->binary_backward(k, a.dev(), b.dev(), dy.dev(), da.dev_out(), db.dev_out());
      expect_close(da.fetch(), want_a, tolerance<float>());
      expect_close(db.fetch(), want_b, tolerance<float>());
      // The first operand broadcast instead (b's extents for a).
      mirrored<float, nhwc> da2(*be_, bext, 29), db2(*be_, full, 30);
      host_tensor<float, nhwc> want_a2(bext), want_b2(full);
      ref.binary_backward(k, b.host.const_view(), a.host.const_view(), dy.host.const_view(), want_a2.view(),
                          want_b2.view());
      if (k != binary_op::div) {  // a's values would be divisors, some zero
        be_->binary_backward(k, b.dev(), a.dev(), dy.dev(), da2.dev_out(), db2.dev_out());
        expect_close(da2.fetch(), want_a2, tolerance<float>());
        expect_close(db2.fetch(), want_b2, tolerance<float>());
      }
    }
  }
}

template <class F>
void pool_backwards(cudnn::backend& be) {
  SCOPED_TRACE(F::name);
  reference::backend ref;
  const std::array<std::int64_t, 4> xe{2, 8, 7, 6};
  mirrored<float, F> x(be, xe, 31);
  make_distinct(x);
  for_each_pool_rule([&](const pool_params& p) {
    const auto ye = pool_output_extents(xe, p);
    mirrored<float, F> dy(be, ye, 32), dx(be, xe, 33);
    host_tensor<float, F> want(xe);
    ref.pool_backward(x.host.const_view(), dy.host.const_view(), want.view(), p);
    be.pool_backward(x.dev(), dy.dev(), dx.dev_out(), p);
    expect_close(dx.fetch(), want, tolerance<float>());
  });
}
TEST_F(CudnnLayersGpu, PoolBackwardNhwc) { pool_backwards<nhwc>(*be_); }
TEST_F(CudnnLayersGpu, PoolBackwardNchw) { pool_backwards<nchw>(*be_); }

template <class F>
void global_pool_backward(cudnn::backend& be) {
  SCOPED_TRACE(F::name);
  reference::backend ref;
  mirrored<float, F> gdy(be, {2, 8, 1, 1}, 36), gdx(be, {2, 8, 5, 3}, 37);
  host_tensor<float, F> want_g({2, 8, 5, 3});
  ref.global_average_pool_backward(gdy.host.const_view(), want_g.view());
  be.global_average_pool_backward(gdy.dev(), gdx.dev_out());
  expect_close(gdx.fetch(), want_g, tolerance<float>());
}
TEST_F(CudnnLayersGpu, GlobalPoolBackwardNhwc) { global_pool_backward<nhwc>(*be_); }
TEST_F(CudnnLayersGpu, GlobalPoolBackwardNchw) { global_pool_backward<nchw>(*be_); }

TEST_F(CudnnLayersGpu, LinearBackward) {
  reference::backend ref;
  // x [3, 4, 2, 5] channels-first (40 features in flatten order), and one position channels-last.
  mirrored<float, nchw> x(*be_, {3, 4, 2, 5}, 38), dy(*be_, {3, 6, 1, 1}, 39), w(*be_, {6, 40, 1, 1}, 40);
  mirrored<float, nchw> dx(*be_, {3, 4, 2, 5}, 41), dw(*be_, {6, 40, 1, 1}, 42), dbias(*be_, {1, 6, 1, 1}, 43);
  host_tensor<float, nchw> want_dx({3, 4, 2, 5}), want_dw({6, 40, 1, 1}), want_db({1, 6, 1, 1});
  ref.linear_backward_data(dy.host.const_view(), w.host.view().data(), want_dx.view());
  be_->linear_backward_data(dy.dev(), static_cast<const float*>(w.device), dx.dev_out());
  expect_close(dx.fetch(), want_dx, tolerance<float>());
  for (bool with_bias : {false, true}) {
    SCOPED_TRACE(with_bias ? "dbias" : "no dbias");
    ref.linear_backward_weights(x.host.const_view(), dy.host.const_view(), want_dw.view().data(),
                                with_bias ? want_db.view().data() : nullptr);
    be_->linear_backward_weights(x.dev(), dy.dev(), dw.device, with_bias ? dbias.device : nullptr);
    expect_close(dw.fetch(), want_dw, tolerance<float>());
    if (with_bias) expect_close(dbias.fetch(), want_db, tolerance<float>());
  }
  mirrored<float, nhwc> x1(*be_, {3, 40, 1, 1}, 44), dx1(*be_, {3, 40, 1, 1}, 45);
  host_tensor<float, nhwc> want_dx1({3, 40, 1, 1});
  ref.linear_backward_data(dy.host.const_view(), w.host.view().data(), want_dx1.view());
  be_->linear_backward_data(dy.dev(), static_cast<const float*>(w.device), dx1.dev_out());
  expect_close(dx1.fetch(), want_dx1, tolerance<float>());
  ref.linear_backward_weights(x1.host.const_view(), dy.host.const_view(), want_dw.view().data(),
                              static_cast<float*>(nullptr));
  be_->linear_backward_weights(x1.dev(), dy.dev(), dw.device, static_cast<float*>(nullptr));
  expect_close(dw.fetch(), want_dw, tolerance<float>());
}

template <class F>
void concat_slice_backwards(cudnn::backend& be) {
  SCOPED_TRACE(F::name);
  reference::backend ref;
  mirrored<float, F> dy(be, {2, 8, 4, 3}, 46);
  mirrored<float, F> da(be, {2, 3, 4, 3}, 47), db(be, {2, 5, 4, 3}, 48);
  host_tensor<float, F> want_a({2, 3, 4, 3}), want_b({2, 5, 4, 3});
  ref.concat_backward(dy.host.const_view(), std::vector<tensor_view<float, F>>{want_a.view(), want_b.view()});
  be.concat_backward(dy.dev(), std::vector<tensor_view<float, F>>{da.dev_out(), db.dev_out()});
  expect_close(da.fetch(), want_a, 0.0);
  expect_close(db.fetch(), want_b, 0.0);
  // The slice's gradient: dy in channels [3, 8), zeros elsewhere (dx starts with other values).
  mirrored<float, F> sdy(be, {2, 5, 4, 3}, 49), sdx(be, {2, 8, 4, 3}, 50);
  host_tensor<float, F> want_s({2, 8, 4, 3});
  ref.slice_backward(sdy.host.const_view(), memfmt::slice_params{1, 3, 8, 1}, want_s.view());
  be.slice_backward(sdy.dev(), memfmt::slice_params{1, 3, 8, 1}, sdx.dev_out());
  expect_close(sdx.fetch(), want_s, 0.0);
  // Along H (coordinate attention's [pooled H, pooled W]), both passes.
  const concat_params along_h{2};
  mirrored<float, F> ha(be, {2, 4, 3, 1}, 55), hb(be, {2, 4, 5, 1}, 56), hcat(be, {2, 4, 8, 1}, 57);
  host_tensor<float, F> want_h({2, 4, 8, 1}), want_ha({2, 4, 3, 1}), want_hb({2, 4, 5, 1});
  ref.concat_forward(std::vector<tensor_view<const float, F>>{ha.host.const_view(), hb.host.const_view()},
                     want_h.view(), along_h);
  be.concat_forward(std::vector<tensor_view<const float, F>>{ha.dev(), hb.dev()}, hcat.dev_out(), along_h);
  expect_close(hcat.fetch(), want_h, 0.0);
  ref.concat_backward(want_h.const_view(), std::vector<tensor_view<float, F>>{want_ha.view(), want_hb.view()}, along_h);
  be.concat_backward(hcat.dev(), std::vector<tensor_view<float, F>>{ha.dev_out(), hb.dev_out()}, along_h);
  expect_close(ha.fetch(), want_ha, 0.0);
  expect_close(hb.fetch(), want_hb, 0.0);
}
TEST_F(CudnnLayersGpu, ConcatAndSliceBackwardNhwc) { concat_slice_backwards<nhwc>(*be_); }
TEST_F(CudnnLayersGpu, ConcatAndSliceBackwardNchw) { concat_slice_backwards<nchw>(*be_); }

// Channel shuffle, depth to space and space to depth as the backend's 2-D copies, both passes.
template <class F>
void rearrange_against_reference(cudnn::backend& be, const std::array<std::int64_t, F::rank>& xe,
                                 const rearrange_params& p) {
  SCOPED_TRACE(std::string(F::name) + " " + to_string(p.kind) + " " + to_string(p.order));
  reference::backend ref;
  const auto ye = rearrange_output_extents(xe, p);
  mirrored<float, F> x(be, xe, 51), y(be, ye, 52), dy(be, ye, 53), dx(be, xe, 54);
  host_tensor<float, F> want(ye), want_dx(xe);
  ref.rearrange_forward(x.host.const_view(), p, want.view());
  be.rearrange_forward(x.dev(), p, y.dev_out());
  expect_close(y.fetch(), want, 0.0);
  ref.rearrange_backward(dy.host.const_view(), p, want_dx.view());
  be.rearrange_backward(dy.dev(), p, dx.dev_out());
  expect_close(dx.fetch(), want_dx, 0.0);
}
TEST_F(CudnnLayersGpu, RearrangementsBothFormats) {
  for (const block_order order : {block_order::crd, block_order::dcr}) {
    rearrange_against_reference<nhwc>(*be_, {2, 12, 3, 4}, {rearrange_kind::depth_to_space, 2, order});
    rearrange_against_reference<nchw>(*be_, {2, 12, 3, 4}, {rearrange_kind::depth_to_space, 2, order});
    rearrange_against_reference<nhwc>(*be_, {2, 3, 4, 6}, {rearrange_kind::space_to_depth, 2, order});
  }
  rearrange_against_reference<nhwc>(*be_, {2, 12, 3, 4}, {rearrange_kind::channel_shuffle, 3, block_order::crd});
  rearrange_against_reference<nchw>(*be_, {2, 12, 3, 4}, {rearrange_kind::channel_shuffle, 2, block_order::crd});
  rearrange_params swap{rearrange_kind::transpose, 1, block_order::crd};
  swap.perm = {0, 1, 3, 2, 4};
  rearrange_against_reference<nhwc>(*be_, {2, 12, 3, 4}, swap);
  rearrange_against_reference<nchw>(*be_, {2, 12, 3, 4}, swap);
}

template <class F>
void pad_against_reference(cudnn::backend& be, const std::array<std::int64_t, F::rank>& xe, pad_params p) {
  SCOPED_TRACE(F::name);
  reference::backend ref;
  mirrored<float, F> x(be, xe, 20);
  for (pad_mode mode : {pad_mode::constant, pad_mode::reflect, pad_mode::replicate})
    for (double value : {0.0, -1.5}) {
      if (mode != pad_mode::constant && value != 0.0) continue;
      p.mode = mode;
      p.value = value;
      SCOPED_TRACE("mode " + std::to_string(static_cast<int>(mode)) + " value " + std::to_string(value));
      const auto ye = pad_output_extents(xe, p);
      mirrored<float, F> y(be, ye, 21), dy(be, ye, 22), dx(be, xe, 23);
      host_tensor<float, F> want(ye), want_dx(xe);
      ref.pad_forward(x.host.const_view(), want.view(), p);
      be.pad_forward(x.dev(), y.dev_out(), p);
      expect_close(y.fetch(), want, 0.0);
      if (mode == pad_mode::constant) {
        ref.pad_backward(dy.host.const_view(), want_dx.view(), p);
        be.pad_backward(dy.dev(), dx.dev_out(), p);
        expect_close(dx.fetch(), want_dx, 0.0);
      } else {
        EXPECT_THROW(be.pad_backward(dy.dev(), dx.dev_out(), p), memfmt::error);
      }
    }
}

TEST_F(CudnnLayersGpu, PaddingEveryModeBothFormats) {
  pad_params p4;
  p4.begin = {1, 2, 0};
  p4.end = {2, 1, 0};
  pad_against_reference<nchw>(*be_, {2, 3, 4, 5}, p4);
  pad_against_reference<nhwc>(*be_, {2, 3, 4, 5}, p4);
  pad_params p5;
  p5.begin = {1, 0, 2};
  p5.end = {2, 3, 1};
  pad_against_reference<ncdhw>(*be_, {1, 3, 3, 4, 5}, p5);
  pad_against_reference<ndhwc>(*be_, {1, 3, 3, 4, 5}, p5);
}

template <class T, class F>
void softmax_against_reference(cudnn::backend& be, const std::array<std::int64_t, F::rank>& e) {
  SCOPED_TRACE(F::name);
  reference::backend ref;
  mirrored<T, F> x(be, e, 30), dy(be, e, 31);
  for (bool log : {false, true}) {
    SCOPED_TRACE(log ? "log-softmax" : "softmax");
    const softmax_params p{log};
    mirrored<T, F> y(be, e, 32), dx(be, e, 33);
    host_tensor<T, F> want(e), want_dx(e);
    ref.softmax_forward(x.host.const_view(), want.view(), p);
    be.softmax_forward(x.dev(), y.dev_out(), p);
    const host_tensor<T, F> got = y.fetch();
    expect_close(got, want, tolerance<T>());
    ref.softmax_backward(got.const_view(), dy.host.const_view(), want_dx.view(), p);  // from what the device read
    be.softmax_backward(y.dev(), dy.dev(), dx.dev_out(), p);
    expect_close(dx.fetch(), want_dx, tolerance<T>());
  }
}

TEST_F(CudnnLayersGpu, SoftmaxForwardBackwardBothFormats) {
  softmax_against_reference<float, nchw>(*be_, {2, 7, 3, 4});
  softmax_against_reference<float, nhwc>(*be_, {2, 7, 3, 4});
  softmax_against_reference<half, nhwc>(*be_, {2, 7, 3, 4});
  softmax_against_reference<half, nchw>(*be_, {2, 7, 3, 4});
  softmax_against_reference<float, ncdhw>(*be_, {1, 5, 2, 3, 4});
  softmax_against_reference<float, ndhwc>(*be_, {1, 5, 2, 3, 4});
}

}  // namespace
