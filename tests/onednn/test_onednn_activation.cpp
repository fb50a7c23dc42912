// Activations on the oneDNN backend (eltwise primitives; hardsigmoid as two of them) against the
// reference backend, forward and backward, float32 and bfloat16, in every pair of formats, dense
// and as padded (strided) views. Each call must round as the reference does within a few units of
// T, write nothing outside its output view, and give PyTorch's derivative at the kinks (relu at 0,
// relu6 at 0 and 6, hardsigmoid at -3 and 3 and ONNX's at -2.5 and 2.5, hardswish at 3, leaky_relu
// and elu at 0, clip at its bounds).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <memfmt/backends/onednn/backend.hpp>
#include <memfmt/backends/reference/activation.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "../common/coords.hpp"
#include "onednn_test_util.hpp"

namespace {

using namespace memfmt;
using onednn_test::all_close;

constexpr double inf = std::numeric_limits<double>::infinity();
const activation_params all_activations[] = {
    activation::identity,
    activation::relu,
    activation::relu6,
    activation::silu,
    activation::sigmoid,
    activation::hardsigmoid,
    activation::hardswish,
    activation::tanh,
    activation::elu,
    activation::leaky_relu,
    activation::gelu,
    activation::gelu_tanh,
    activation::softplus,
    activation::mish,
    activation_params::hardsigmoid(0.2, 0.5),  // ONNX's default
    activation_params::hardsigmoid(-0.25, 0.25),
    activation_params::leaky_relu(0.2),
    activation_params::leaky_relu(-0.5),
    activation_params::elu(0.5),
    activation_params::clip(-3.0, 3.0),
    activation_params::clip(-inf, 3.0),
    activation_params::clip(0.0, inf),
    activation_params::clip(-inf, inf),
};

// The inputs every activation sees first, in logical order: the kinks and values just outside them.
constexpr float kinks[] = {-3.f, 3.f, 0.f, 6.f, -6.f, -3.5f, 3.5f, 6.5f, -2.9375f, 2.9375f, -2.5f, 2.5f, -1.f, 1.f};

// A tensor of format F over a buffer `pad` elements wider at every level (padded_layout; 0: dense).
template <class T, class F>
struct strided_tensor {
  layout<F> map;
  std::vector<T> buffer;

  strided_tensor(const typename layout<F>::extents_type& e, std::int64_t pad, std::uint64_t seed, float lo, float hi)
      : map(memfmt_test::padded_layout<F>(e, pad)), buffer(static_cast<std::size_t>(map.required_span_size())) {
    onednn_test::fill(buffer.data(), static_cast<std::int64_t>(buffer.size()), seed, lo, hi);
  }
  tensor_view<T, F> view() { return tensor_view<T, F>(buffer.data(), map); }
  tensor_view<const T, F> cview() const { return tensor_view<const T, F>(buffer.data(), map); }
};

// got equals before wherever the view does not reach: the call wrote only its output's elements.
template <class T, class F>
::testing::AssertionResult untouched_outside(const strided_tensor<T, F>& got, const std::vector<T>& before) {
  std::vector<bool> inside(before.size(), false);
  memfmt_test::for_each_coord(got.map.extents(),
                              [&](const auto& c) { inside[static_cast<std::size_t>(got.map(c))] = true; });
  for (std::size_t i = 0; i < before.size(); ++i)
    if (!inside[i] && onednn_test::to_d(got.buffer[i]) != onednn_test::to_d(before[i]))
      return ::testing::AssertionFailure() << "buffer element " << i << " outside the view was written";
  return ::testing::AssertionSuccess();
}

// y = f(x) and dx = dy * f'(x) with x and dx in XF, y and dy in YF, each padded by `pad`.
template <class T, class XF, class YF>
void check(onednn::backend& b, const activation_params& kind, const typename layout<XF>::extents_type& e,
           std::int64_t pad) {
  SCOPED_TRACE(std::string(XF::name) + " -> " + YF::name + " " + std::string(to_string(dtype_of_v<T>)) +
               " activation " + to_string(kind) + " pad " + std::to_string(pad));
  strided_tensor<T, XF> x(e, pad, 31, -7.f, 7.f), dx(e, pad, 32, -1.f, 1.f);
  strided_tensor<T, YF> y(e, pad, 33, -1.f, 1.f), dy(e, pad, 34, -1.f, 1.f);
  std::int64_t i = 0;
  memfmt_test::for_each_coord(e, [&](const auto& c) {
    T& v = x.buffer[static_cast<std::size_t>(x.map(c))];
    if (i < static_cast<std::int64_t>(std::size(kinks))) v = onednn_test::from_f<T>(kinks[i++]);
    // oneDNN's hardswish' at exactly -3 is 0, PyTorch's (the reference's) -1/2: that kink is left out.
    if (kind.kind == activation::hardswish && onednn_test::to_d(v) == -3.0) v = onednn_test::from_f<T>(-3.25f);
  });
  host_tensor<T, YF> y_ref(e);
  host_tensor<T, XF> dx_ref(e);
  reference::activation_forward<T, XF, YF>(kind, x.cview(), y_ref.view());
  reference::activation_backward<T, XF, YF, XF>(kind, x.cview(), dy.cview(), dx_ref.view());

  const std::vector<T> y_before = y.buffer, dx_before = dx.buffer;
  b.activation_forward<T>(kind, x.cview(), y.view());
  // oneDNN's float mish is accurate to a few float ulps of 1, not of its value, in the negative tail
  // where mish is near 0 (x near -4: 1.6e-5 relative).
  const double forward_tolerance = kind.kind == activation::mish ? 4.0 : 1.0;
  EXPECT_TRUE(all_close<T>(y.cview(), y_ref.const_view(), forward_tolerance)) << "forward";
  EXPECT_TRUE(untouched_outside(y, y_before)) << "forward";
  b.activation_backward<T>(kind, x.cview(), dy.cview(), dx.view());
  // oneDNN forms the tanh GELU's derivative from 1 + tanh(u), which cancels in the negative tail:
  // a few float ulps of 1 where the derivative is near 0.
  const double backward_tolerance = kind.kind == activation::gelu_tanh ? 4.0 : 1.0;
  EXPECT_TRUE(all_close<T>(dx.cview(), dx_ref.const_view(), backward_tolerance)) << "backward";
  EXPECT_TRUE(untouched_outside(dx, dx_before)) << "backward";
}

template <class T>
void check_type() {
  onednn::backend b;
  for (const activation_params& kind : all_activations)
    for (const std::int64_t pad : {0, 2}) {
      check<T, nchw, nchw>(b, kind, {2, 5, 3, 4}, pad);
      check<T, nchw, nhwc>(b, kind, {2, 5, 3, 4}, pad);
      check<T, nhwc, nchw>(b, kind, {2, 5, 3, 4}, pad);
      check<T, nhwc, nhwc>(b, kind, {2, 5, 3, 4}, pad);
      check<T, ncdhw, ndhwc>(b, kind, {1, 3, 2, 3, 4}, pad);
      check<T, ndhwc, ndhwc>(b, kind, {1, 3, 2, 3, 4}, pad);
    }
}

TEST(OnednnActivation, FloatEveryFunctionAndFormatPairMatchesReference) { check_type<float>(); }

TEST(OnednnActivation, Bfloat16EveryFunctionAndFormatPairMatchesReference) {
  onednn::backend b;
  host_tensor<bfloat16, nhwc> x({1, 2, 3, 4}), y({1, 2, 3, 4});
  const std::string refused = onednn_test::refused_on_this_cpu<bfloat16>("onednn::activation_forward", [&] {
    b.activation_forward<bfloat16>(activation::hardsigmoid, x.const_view(), y.view());
  });
  if (!refused.empty()) GTEST_SKIP() << refused;
  check_type<bfloat16>();
}

// In place (y is x, dx is dy), as the executor may run them: hardsigmoid's second step reads
// what its first wrote.
TEST(OnednnActivation, HardsigmoidInPlace) {
  onednn::backend b;
  strided_tensor<float, nhwc> x(std::array<std::int64_t, 4>{2, 3, 4, 5}, 0, 41, -5.f, 5.f);
  strided_tensor<float, nhwc> dy(std::array<std::int64_t, 4>{2, 3, 4, 5}, 0, 42, -1.f, 1.f);
  host_tensor<float, nhwc> y_ref({2, 3, 4, 5}), dx_ref({2, 3, 4, 5});
  reference::activation_forward<float, nhwc, nhwc>(activation::hardsigmoid, x.cview(), y_ref.view());
  reference::activation_backward<float, nhwc, nhwc, nhwc>(activation::hardsigmoid, x.cview(), dy.cview(),
                                                          dx_ref.view());
  b.activation_backward<float>(activation::hardsigmoid, x.cview(), dy.cview(), dy.view());
  EXPECT_TRUE(all_close<float>(dy.cview(), dx_ref.const_view(), 1.0)) << "backward";
  b.activation_forward<float>(activation::hardsigmoid, x.cview(), x.view());
  EXPECT_TRUE(all_close<float>(x.cview(), y_ref.const_view(), 1.0)) << "forward";
}

TEST(OnednnActivation, SupportAnswersYesForEveryFunction) {
  const onednn::backend b;
  op_query q;
  q.op = layer_kind::activation;
  for (const activation_params& kind : all_activations)
    for (const bool backward : {false, true}) {
      q.function = kind;
      q.backward = backward;
      EXPECT_TRUE(b.support(q)) << to_string(kind) << " " << b.support(q).reason;
    }
}

}  // namespace
