// The layer graphs of the cuDNN backend (pointwise.hpp, resample.hpp, reduction.hpp, matmul.hpp):
// each problem's graph is finalized by cuDNN and its tensors and attributes are read back and
// compared with what the views and parameters ask; bad arguments are errors naming the values,
// raised before any cuDNN call. Needs cuDNN but no GPU.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <memfmt/backends/cudnn/backward.hpp>
#include <memfmt/backends/cudnn/matmul.hpp>
#include <memfmt/backends/cudnn/pointwise.hpp>
#include <memfmt/backends/cudnn/reduction.hpp>
#include <memfmt/backends/cudnn/resample.hpp>
#include <memfmt/tensor/tensor_view.hpp>

#include "host_util.hpp"

namespace {

using namespace memfmt;
using cudnn::descriptor;
using cudnn::op_record;
using memfmt_test::expect_error_before_cudnn;
using memfmt_test::expected_cudnn_type;
using memfmt_test::fake_ptr;
using memfmt_test::read_tensor;

using dims = std::vector<std::int64_t>;

// Packed strides of logical dims `e` in the order `order` (outermost first), written out here
// rather than taken from the library's layouts.
dims packed(const dims& e, const std::vector<int>& order) {
  dims s(e.size());
  std::int64_t acc = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    s[static_cast<std::size_t>(*it)] = acc;
    acc *= e[static_cast<std::size_t>(*it)];
  }
  return s;
}
const std::vector<int> nchw_order{0, 1, 2, 3}, nhwc_order{0, 2, 3, 1};

// Finalizes the graph (cuDNN checks that every operation fits its tensors) and returns it.
const descriptor& finalized(cudnn::graph_builder& g) {
  const descriptor& graph = g.finalize_graph();
  EXPECT_TRUE(graph.finalized());
  return graph;
}

std::vector<cudnnPointwiseMode_t> modes_of(const cudnn::graph_builder& g) {
  std::vector<cudnnPointwiseMode_t> m;
  for (const op_record& r : g.log()) m.push_back(r.mode);
  return m;
}

// The tensor `id` of `g` has the dims `d`, the packed strides of `order` and T's cuDNN type.
template <class T>
void expect_packed_tensor(const cudnn::graph_builder& g, std::int64_t id, const dims& d,
                          const std::vector<int>& order) {
  SCOPED_TRACE("uid " + std::to_string(id));
  const auto r = read_tensor(g.tensor_by_uid(id));
  EXPECT_EQ(r.dims, d);
  EXPECT_EQ(r.strides, packed(d, order));
  EXPECT_EQ(r.type, expected_cudnn_type(dtype_of_v<T>));
}

// The pointwise modes the graph of an activation runs, in order.
struct activation_modes {
  activation_params function;
  std::vector<cudnnPointwiseMode_t> modes;
};

// The functions with parameters beyond their defaults, with infinite clip bounds.
const activation_params onnx_hardsigmoid = activation_params::hardsigmoid(0.2, 0.5);
const activation_params leaky = activation_params::leaky_relu(0.125);
const activation_params elu = activation_params::elu(1.5);
const activation_params clip_both = activation_params::clip(-1.0, 2.0);
const activation_params clip_below = activation_params::clip(-1.0, std::numeric_limits<double>::infinity());
const activation_params clip_above = activation_params::clip(-std::numeric_limits<double>::infinity(), 2.0);
const activation_params clip_none = activation_params(activation::clip);

// For every row of `table`: the graph of the problem `problem_of(kind)` gives, finalized, runs the
// row's modes; `check(kind, problem, graph)` checks the rest.
template <class ProblemOf, class GraphOf, class Check>
void for_each_activation(const std::vector<activation_modes>& table, ProblemOf problem_of, GraphOf graph_of,
                         Check check) {
  for (const activation_modes& ex : table) {
    SCOPED_TRACE("activation " + to_string(ex.function));
    const auto pr = problem_of(ex.function);
    cudnn::graph_builder g = graph_of(pr);
    finalized(g);
    EXPECT_EQ(modes_of(g), ex.modes);
    EXPECT_EQ(g.operations().size(), ex.modes.size());
    check(ex.function, pr, g);
  }
}

template <class T, class F>
std::string format_and_type() {
  return std::string(F::name) + " " + std::string(to_string(dtype_of_v<T>));
}

// ------------------------------------------------------------------ activations

template <class T, class F>
void check_activations(const std::array<std::int64_t, 4>& e, const std::vector<int>& order) {
  SCOPED_TRACE((format_and_type<T, F>()));
  const tensor_view<const T, F> x(fake_ptr<const T>(1), e);
  const tensor_view<T, F> y(fake_ptr<T>(2), e);
  const dims d(e.begin(), e.end());
  const std::vector<activation_modes> table = {
      {activation::identity, {CUDNN_POINTWISE_IDENTITY}},
      {activation::relu, {CUDNN_POINTWISE_RELU_FWD}},
      {activation::relu6, {CUDNN_POINTWISE_RELU_FWD}},
      {activation::sigmoid, {CUDNN_POINTWISE_SIGMOID_FWD}},
      {activation::tanh, {CUDNN_POINTWISE_TANH_FWD}},
      {activation::silu, {CUDNN_POINTWISE_SWISH_FWD}},
      {activation::hardsigmoid, {CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_ADD, CUDNN_POINTWISE_RELU_FWD}},
      {onnx_hardsigmoid, {CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_ADD, CUDNN_POINTWISE_RELU_FWD}},
      {activation::hardswish,
       {CUDNN_POINTWISE_ADD, CUDNN_POINTWISE_RELU_FWD, CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_MUL}},
      {leaky, {CUDNN_POINTWISE_RELU_FWD}},
      {elu, {CUDNN_POINTWISE_ELU_FWD}},
      {clip_both, {CUDNN_POINTWISE_MAX, CUDNN_POINTWISE_MIN}},
      {clip_below, {CUDNN_POINTWISE_MAX}},
      {clip_above, {CUDNN_POINTWISE_MIN}},
      {clip_none, {CUDNN_POINTWISE_IDENTITY}},
      {activation::gelu, {CUDNN_POINTWISE_GELU_FWD}},
      {activation::gelu_tanh, {CUDNN_POINTWISE_GELU_APPROX_TANH_FWD}},
      {activation::softplus, {CUDNN_POINTWISE_SOFTPLUS_FWD}},
      {activation::mish, {CUDNN_POINTWISE_SOFTPLUS_FWD, CUDNN_POINTWISE_TANH_FWD, CUDNN_POINTWISE_MUL}},
  };
  const auto problem_of = [&](const activation_params& f) { return cudnn::make_activation_problem(f, x, y); };
  const auto check = [&](const activation_params& f, const cudnn::pointwise_problem& pr,
                         const cudnn::graph_builder& g) {
    expect_packed_tensor<T>(g, cudnn::uid::x, d, order);
    expect_packed_tensor<T>(g, cudnn::uid::y, d, order);
    // relu6 and hardswish clip relu at 6, hardsigmoid at 1; only leaky_relu sets a slope, elu an alpha.
    std::optional<double> clip, slope, elu_alpha;
    for (const op_record& r : g.log()) {
      if (r.options.relu_upper_clip) clip = r.options.relu_upper_clip;
      if (r.options.relu_lower_clip_slope) slope = r.options.relu_lower_clip_slope;
      if (r.options.elu_alpha) elu_alpha = r.options.elu_alpha;
      if (r.mode == CUDNN_POINTWISE_SWISH_FWD) {
        EXPECT_EQ(r.options.swish_beta.value_or(-1.0), 1.0);
      }
      EXPECT_EQ(r.options.softplus_beta,
                r.mode == CUDNN_POINTWISE_SOFTPLUS_FWD ? std::optional<double>(1.0) : std::nullopt);
    }
    const bool six = f.kind == activation::relu6 || f.kind == activation::hardswish;
    EXPECT_EQ(clip, six                                 ? std::optional<double>(6.0)
                    : f.kind == activation::hardsigmoid ? std::optional<double>(1.0)
                                                        : std::nullopt);
    EXPECT_EQ(slope, f.kind == activation::leaky_relu ? std::optional<double>(0.125) : std::nullopt);
    EXPECT_EQ(elu_alpha, f.kind == activation::elu ? std::optional<double>(1.5) : std::nullopt);
    // The by-value constants are tensors of the graph with the values the variant pack will pass.
    const auto constants = pr.constants();
    for (const cudnn::graph_constant& c : constants) {
      const auto rc = read_tensor(g.tensor_by_uid(c.uid));
      EXPECT_TRUE(rc.by_value);
      EXPECT_EQ(rc.type, CUDNN_DATA_FLOAT);
    }
    std::vector<std::pair<std::int64_t, float>> expected;
    const std::int64_t c0 = cudnn::uid::constant_base;
    if (f.kind == activation::hardswish) expected = {{c0, 3.0f}, {c0 + 1, 1.0f / 6.0f}};
    if (f.kind == activation::hardsigmoid)
      expected = {{c0, static_cast<float>(f.alpha)}, {c0 + 1, static_cast<float>(f.beta)}};
    if (f == clip_both) expected = {{c0, -1.0f}, {c0 + 1, 2.0f}};
    if (f == clip_below) expected = {{c0, -1.0f}};
    if (f == clip_above) expected = {{c0 + 1, 2.0f}};
    ASSERT_EQ(constants.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(constants[i].uid, expected[i].first);
      EXPECT_EQ(constants[i].value, expected[i].second);
    }
    if (f.kind == activation::hardswish) {
      // x * relu6(x + 3): the third operation multiplies by x itself.
      EXPECT_EQ(g.log()[2].b, cudnn::uid::x);
    }
    if (f.kind == activation::mish) {
      // x * tanh(softplus(x)): softplus of x, tanh of that, times x itself into y.
      EXPECT_EQ(g.log()[0].x, cudnn::uid::x);
      EXPECT_EQ(g.log()[1].x, g.log()[0].y);
      EXPECT_EQ(g.log()[2].x, cudnn::uid::x);
      EXPECT_EQ(g.log()[2].b, g.log()[1].y);
      EXPECT_EQ(g.log()[2].y, cudnn::uid::y);
    }
    if (f.kind == activation::hardsigmoid) {
      // alpha x, + beta, then relu clipped at 1 into y.
      EXPECT_EQ(g.log()[0].b, c0);
      EXPECT_EQ(g.log()[1].b, c0 + 1);
      EXPECT_EQ(g.log()[2].y, cudnn::uid::y);
    }
  };
  for_each_activation(table, problem_of, cudnn::pointwise_graph, check);
}

TEST(CudnnLayerGraphs, ActivationsEveryKindFormatAndType) {
  check_activations<float, nchw>({2, 3, 4, 5}, nchw_order);
  check_activations<float, nhwc>({2, 3, 4, 5}, nhwc_order);
  check_activations<half, nhwc>({2, 8, 4, 5}, nhwc_order);
  check_activations<bfloat16, nchw>({2, 8, 4, 5}, nchw_order);
}

TEST(CudnnLayerGraphs, OnePositionIsDescribedChannelsLast) {
  // [N, C, 1, 1] in NCHW is the same bytes as in NHWC; the graph uses the channels-last strides.
  const nchw_view<const float> x(fake_ptr<const float>(1), {4, 6, 1, 1});
  const nchw_view<float> y(fake_ptr<float>(2), {4, 6, 1, 1});
  cudnn::graph_builder g = cudnn::pointwise_graph(cudnn::make_activation_problem(activation::relu, x, y));
  finalized(g);
  EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::x)).strides, (dims{6, 1, 6, 6}));
}

TEST(CudnnLayerGraphs, ActivationErrorsBeforeCudnn) {
  const nhwc_view<const float> x(fake_ptr<const float>(1), {2, 3, 4, 5});
  const nhwc_view<float> y_bad(fake_ptr<float>(2), {2, 3, 4, 6});
  expect_error_before_cudnn([&] { (void)cudnn::make_activation_problem(activation::relu, x, y_bad); },
                            errc::shape_mismatch, "[2, 3, 4, 6]");
  const nhwc_view<const double> xd(fake_ptr<const double>(1), {2, 3, 4, 5});
  const nhwc_view<double> yd(fake_ptr<double>(2), {2, 3, 4, 5});
  expect_error_before_cudnn([&] { (void)cudnn::make_activation_problem(activation::relu, xd, yd); },
                            errc::unsupported_dtype, "float64");
}

// ------------------------------------------------------------------ binary ops

TEST(CudnnLayerGraphs, BinaryBroadcastOverChannelsBatchAndSpatial) {
  const dims full{2, 8, 4, 5};
  const nhwc_view<const half> a(fake_ptr<const half>(1), {2, 8, 4, 5});
  const nhwc_view<half> y(fake_ptr<half>(3), {2, 8, 4, 5});
  struct operand {
    std::array<std::int64_t, 4> e;
  };
  for (const operand& o :
       {operand{{2, 8, 4, 5}}, operand{{1, 8, 1, 1}}, operand{{2, 1, 4, 5}}, operand{{2, 8, 1, 1}}}) {
    const nhwc_view<const half> b(fake_ptr<const half>(2), o.e);
    for (binary_op k : {binary_op::add, binary_op::sub, binary_op::mul, binary_op::div}) {
      SCOPED_TRACE(memfmt::detail::dims_to_string(o.e) + " op " + std::to_string(static_cast<int>(k)));
      cudnn::graph_builder g = cudnn::pointwise_graph(cudnn::make_binary_problem(k, a, b, y));
      finalized(g);
      ASSERT_EQ(g.log().size(), 1u);
      EXPECT_EQ(g.log()[0].mode, cudnn::pointwise_mode_of(k));
      EXPECT_EQ(g.log()[0].x, cudnn::uid::x);
      EXPECT_EQ(g.log()[0].b, cudnn::uid::bias);
      const auto rb = read_tensor(g.tensor_by_uid(cudnn::uid::bias));
      EXPECT_EQ(rb.dims, dims(o.e.begin(), o.e.end()));
      EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::y)).dims, full);
    }
  }
  EXPECT_EQ(cudnn::pointwise_mode_of(binary_op::add), CUDNN_POINTWISE_ADD);
  EXPECT_EQ(cudnn::pointwise_mode_of(binary_op::sub), CUDNN_POINTWISE_SUB);
  EXPECT_EQ(cudnn::pointwise_mode_of(binary_op::mul), CUDNN_POINTWISE_MUL);
  EXPECT_EQ(cudnn::pointwise_mode_of(binary_op::div), CUDNN_POINTWISE_DIV);
}

TEST(CudnnLayerGraphs, BinaryBroadcastFirstOperandIsRewritten) {
  const nhwc_view<const float> a(fake_ptr<const float>(1), {1, 8, 1, 1});
  const nhwc_view<const float> b(fake_ptr<const float>(2), {2, 8, 4, 5});
  const nhwc_view<float> y(fake_ptr<float>(3), {2, 8, 4, 5});
  const auto ops = [&](binary_op k) {
    cudnn::graph_builder g = cudnn::pointwise_graph(cudnn::make_binary_problem(k, a, b, y));
    finalized(g);
    return g.log();
  };
  // add and mul swap the operands: the full tensor b is cuDNN's x.
  for (binary_op k : {binary_op::add, binary_op::mul}) {
    const auto log = ops(k);
    ASSERT_EQ(log.size(), 1u);
    EXPECT_EQ(log[0].x, cudnn::uid::bias);
    EXPECT_EQ(log[0].b, cudnn::uid::x);
  }
  // a - b = -(b - a)
  const auto sub = ops(binary_op::sub);
  ASSERT_EQ(sub.size(), 2u);
  EXPECT_EQ(sub[0].mode, CUDNN_POINTWISE_SUB);
  EXPECT_EQ(sub[0].x, cudnn::uid::bias);
  EXPECT_EQ(sub[0].b, cudnn::uid::x);
  EXPECT_EQ(sub[1].mode, CUDNN_POINTWISE_NEG);
  EXPECT_EQ(sub[1].y, cudnn::uid::y);
  // a / b = (1 / b) * a
  const auto div = ops(binary_op::div);
  ASSERT_EQ(div.size(), 2u);
  EXPECT_EQ(div[0].mode, CUDNN_POINTWISE_RECIPROCAL);
  EXPECT_EQ(div[0].x, cudnn::uid::bias);
  EXPECT_EQ(div[1].mode, CUDNN_POINTWISE_MUL);
  EXPECT_EQ(div[1].b, cudnn::uid::x);
}

TEST(CudnnLayerGraphs, BinaryErrorsBeforeCudnn) {
  const nhwc_view<const float> a(fake_ptr<const float>(1), {2, 1, 4, 5});
  const nhwc_view<const float> b(fake_ptr<const float>(2), {1, 8, 1, 1});
  const nhwc_view<float> y(fake_ptr<float>(3), {2, 8, 4, 5});
  expect_error_before_cudnn([&] { (void)cudnn::make_binary_problem(binary_op::add, a, b, y); }, errc::unsupported,
                            "[2, 1, 4, 5] and [1, 8, 1, 1] are both broadcast");
  const nhwc_view<const float> c(fake_ptr<const float>(2), {2, 3, 4, 5});
  expect_error_before_cudnn([&] { (void)cudnn::make_binary_problem(binary_op::mul, c, b, y); }, errc::shape_mismatch,
                            "do not broadcast in dim 1");
}

// ------------------------------------------------------------------ pooling and up-sampling

struct resample_readback {
  cudnnResampleMode_t mode;
  std::vector<cudnnFraction_t> window, strides, pre, post;
};
std::vector<cudnnFraction_t> fractions(const descriptor& d, cudnnBackendAttributeName_t name) {
  std::vector<cudnnFraction_t> v(8);
  std::int64_t n = 0;
  cudnn::check_cudnn(cudnnBackendGetAttribute(d.get(), name, CUDNN_TYPE_FRACTION, 8, &n, v.data()), "get fractions");
  v.resize(static_cast<std::size_t>(n));
  return v;
}
resample_readback read_resample(const cudnn::graph_builder& g) {
  const descriptor& d = g.attributes().back();
  resample_readback r;
  r.mode = d.get_enum<cudnnResampleMode_t>(CUDNN_ATTR_RESAMPLE_MODE, CUDNN_TYPE_RESAMPLE_MODE, "get mode");
  r.window = fractions(d, CUDNN_ATTR_RESAMPLE_WINDOW_DIMS);
  r.strides = fractions(d, CUDNN_ATTR_RESAMPLE_STRIDES);
  r.pre = fractions(d, CUDNN_ATTR_RESAMPLE_PRE_PADDINGS);
  r.post = fractions(d, CUDNN_ATTR_RESAMPLE_POST_PADDINGS);
  return r;
}
// "n/d, ..." for comparisons with readable failures.
std::string text(const std::vector<cudnnFraction_t>& v) { return cudnn::fractions_to_string(v); }

TEST(CudnnLayerGraphs, MaxAndAveragePoolingReadBack) {
  pool_params p;
  p.kernel = {3, 2, 1};
  p.stride = {2, 1, 1};
  p.padding = {1, 0, 0};
  p.padding_end = {1, 1, 0};
  const dims xe{2, 8, 9, 6};
  for (pool_kind kind : {pool_kind::max, pool_kind::average}) {
    for (bool include : {true, false}) {
      p.kind = kind;
      p.count_include_pad = include;
      SCOPED_TRACE(std::string(kind == pool_kind::max ? "max" : "average") + (include ? " incl" : " excl"));
      const nhwc_view<const half> x(fake_ptr<const half>(1), {2, 8, 9, 6});
      const nhwc_view<half> y(fake_ptr<half>(2), {2, 8, 5, 6});  // (9 + 2 - 3) / 2 + 1, (6 + 1 - 2) / 1 + 1
      const cudnn::resample_problem pr = cudnn::make_pool_problem(x, y, p);
      cudnn::graph_builder g = cudnn::resample_graph(pr);
      finalized(g);
      const resample_readback r = read_resample(g);
      EXPECT_EQ(r.mode, kind == pool_kind::max ? CUDNN_RESAMPLE_MAXPOOL
                        : include              ? CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING
                                               : CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING);
      // (cuDNN 9.19 reads every padding mode back as NEG_INF: the spec says what was set.)
      EXPECT_EQ(pr.spec.padding_mode, kind == pool_kind::max ? CUDNN_NEG_INF_PAD : CUDNN_ZERO_PAD);
      EXPECT_EQ(text(r.window), "[3, 2]");
      EXPECT_EQ(text(r.strides), "[2, 1]");
      EXPECT_EQ(text(r.pre), "[1, 0]");
      EXPECT_EQ(text(r.post), "[1, 1]");
      const auto rx = read_tensor(g.tensor_by_uid(cudnn::uid::x));
      EXPECT_EQ(rx.dims, xe);
      EXPECT_EQ(rx.strides, packed(xe, nhwc_order));
      EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::y)).dims, (dims{2, 8, 5, 6}));
    }
  }
}

TEST(CudnnLayerGraphs, Pooling3dAndCeilMode) {
  pool_params p;
  p.kernel = {2, 2, 2};
  p.stride = {2, 2, 2};
  p.ceil_mode = true;
  // 5 -> ceil((5 - 2) / 2) + 1 = 3 windows: the last one needs one more end padding.
  const ndhwc_view<const float> x(fake_ptr<const float>(1), {1, 4, 5, 4, 4});
  const ndhwc_view<float> y(fake_ptr<float>(2), {1, 4, 3, 2, 2});
  cudnn::graph_builder g = cudnn::resample_graph(cudnn::make_pool_problem(x, y, p));
  finalized(g);
  const resample_readback r = read_resample(g);
  EXPECT_EQ(text(r.window), "[2, 2, 2]");
  EXPECT_EQ(text(r.post), "[1, 0, 0]");
  // An average that counts padding would count that extra padding: refused, naming the input.
  p.kind = pool_kind::average;
  p.count_include_pad = true;
  expect_error_before_cudnn([&] { (void)cudnn::make_pool_problem(x, y, p); }, errc::unsupported,
                            "[1, 4, 5, 4, 4] with ceil_mode and count_include_pad");
  p.count_include_pad = false;
  cudnn::graph_builder g2 = cudnn::resample_graph(cudnn::make_pool_problem(x, y, p));
  finalized(g2);
  EXPECT_EQ(read_resample(g2).mode, CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING);
  // Wrong output extents: the shared validation's message, before cuDNN.
  const ndhwc_view<float> y_bad(fake_ptr<float>(2), {1, 4, 2, 2, 2});
  expect_error_before_cudnn([&] { (void)cudnn::make_pool_problem(x, y_bad, p); }, errc::shape_mismatch,
                            "[1, 4, 2, 2, 2]");
}

TEST(CudnnLayerGraphs, NearestAndBilinearUpsampling) {
  upsample_params p;
  p.output = {8, 15, 1};
  const nchw_view<const bfloat16> x(fake_ptr<const bfloat16>(1), {2, 3, 4, 5});
  const nchw_view<bfloat16> y(fake_ptr<bfloat16>(2), {2, 3, 8, 15});
  for (resample_mode m : {resample_mode::nearest, resample_mode::linear}) {
    p.mode = m;
    cudnn::graph_builder g = cudnn::resample_graph(cudnn::make_upsample_problem(x, y, p));
    finalized(g);
    const resample_readback r = read_resample(g);
    EXPECT_EQ(r.mode, m == resample_mode::nearest ? CUDNN_RESAMPLE_NEAREST : CUDNN_RESAMPLE_BILINEAR);
    // Scale factors 2 and 3: window 2, stride 1/s, paddings adding up to 2 - 1/s.
    EXPECT_EQ(text(r.window), "[2, 2]");
    EXPECT_EQ(text(r.strides), "[1/2, 1/3]");
    EXPECT_EQ(text(r.pre), "[1/2, 1/2]");
    EXPECT_EQ(text(r.post), "[1, 7/6]");
    EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::y)).strides, packed({2, 3, 8, 15}, nchw_order));
  }
  // Scales that are not whole numbers >= 2 are refused, naming the sizes.
  p.output = {6, 10, 1};
  const nchw_view<bfloat16> y_odd(fake_ptr<bfloat16>(2), {2, 3, 6, 10});
  expect_error_before_cudnn([&] { (void)cudnn::make_upsample_problem(x, y_odd, p); }, errc::unsupported,
                            "spatial dim 0 scales 4 -> 6");
  upsample_params p3;
  p3.mode = resample_mode::linear;
  p3.output = {4, 4, 4};
  const ncdhw_view<const float> x3(fake_ptr<const float>(1), {1, 2, 2, 2, 2});
  const ncdhw_view<float> y3(fake_ptr<float>(2), {1, 2, 4, 4, 4});
  expect_error_before_cudnn([&] { (void)cudnn::make_upsample_problem(x3, y3, p3); }, errc::unsupported,
                            "bilinearly in 2-D only");
  p3.mode = resample_mode::nearest;
  cudnn::graph_builder g3 = cudnn::resample_graph(cudnn::make_upsample_problem(x3, y3, p3));
  finalized(g3);
  EXPECT_EQ(text(read_resample(g3).strides), "[1/2, 1/2, 1/2]");
}

TEST(CudnnLayerGraphs, ResampleSpecMustMatchTheRank) {
  cudnn::resample_spec r;
  r.window = {{2, 1}};
  r.strides = {{2, 1}};
  r.pre_padding = {{0, 1}};
  r.post_padding = {{0, 1}};
  cudnn::tensor_spec x;
  x.dims = {1, 2, 4, 4};
  x.strides = {32, 16, 4, 1};
  cudnn::graph_builder g;
  try {
    g.resample(r, x, x);
    ADD_FAILURE() << "no error";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("window [2]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[1, 2, 4, 4]"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------------ global average pooling

TEST(CudnnLayerGraphs, GlobalAveragePoolIsASumAndAScale) {
  const nhwc_view<const half> x(fake_ptr<const half>(1), {2, 8, 3, 5});
  const nhwc_view<half> y(fake_ptr<half>(2), {2, 8, 1, 1});
  const cudnn::global_pool_problem pr = cudnn::make_global_average_pool_problem(x, y);
  cudnn::graph_builder g = cudnn::global_average_pool_graph(pr);
  finalized(g);
  ASSERT_EQ(g.log().size(), 2u);
  EXPECT_EQ(g.log()[0].op, op_record::kind::reduction_sum);
  EXPECT_EQ(g.log()[1].mode, CUDNN_POINTWISE_MUL);
  EXPECT_EQ(g.log()[1].b, cudnn::uid::constant_base);
  ASSERT_EQ(pr.constants().size(), 1u);
  EXPECT_FLOAT_EQ(pr.constants()[0].value, 1.0f / 15.0f);
  const auto sum = read_tensor(g.tensor_by_uid(cudnn::uid::virtual_base));
  EXPECT_TRUE(sum.is_virtual);
  EXPECT_EQ(sum.dims, (dims{2, 8, 1, 1}));
  EXPECT_EQ(sum.type, CUDNN_DATA_FLOAT);
  EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::x)).strides, packed({2, 8, 3, 5}, nhwc_order));
  EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::y)).strides, (dims{8, 1, 8, 8}));
  const nhwc_view<half> y_bad(fake_ptr<half>(2), {2, 8, 1, 2});
  expect_error_before_cudnn([&] { (void)cudnn::make_global_average_pool_problem(x, y_bad); }, errc::shape_mismatch,
                            "[2, 8, 1, 2]");
}

// ------------------------------------------------------------------ linear

TEST(CudnnLayerGraphs, LinearAsMatmulPlusBias) {
  // x [3, 4, 2, 5] as 3 rows of 40 features; w [7, 40] row-major read as its transpose.
  const nchw_view<const float> x(fake_ptr<const float>(1), {3, 4, 2, 5});
  const nchw_view<float> y(fake_ptr<float>(2), {3, 7, 1, 1});
  for (bool with_bias : {false, true}) {
    SCOPED_TRACE(with_bias ? "bias" : "no bias");
    const cudnn::linear_problem pr =
        cudnn::make_linear_problem(x, fake_ptr<const float>(3), with_bias ? fake_ptr<const float>(4) : nullptr, y);
    cudnn::graph_builder g = cudnn::linear_graph(pr);
    finalized(g);
    ASSERT_EQ(g.log().size(), with_bias ? 2u : 1u);
    EXPECT_EQ(g.log()[0].op, op_record::kind::matmul);
    const auto ra = read_tensor(g.tensor_by_uid(cudnn::uid::x));
    const auto rb = read_tensor(g.tensor_by_uid(cudnn::uid::w));
    const auto rc = read_tensor(g.tensor_by_uid(cudnn::uid::y));
    EXPECT_EQ(ra.dims, (dims{1, 3, 40}));
    EXPECT_EQ(ra.strides, (dims{120, 40, 1}));
    EXPECT_EQ(rb.dims, (dims{1, 40, 7}));
    EXPECT_EQ(rb.strides, (dims{280, 1, 40}));  // w[k, f] at k * 40 + f
    EXPECT_EQ(rc.dims, (dims{1, 3, 7}));
    EXPECT_EQ(rc.strides, (dims{21, 7, 1}));
    const descriptor& mm = g.attributes().front();
    EXPECT_EQ(mm.get_data_type(CUDNN_ATTR_MATMUL_COMP_TYPE, "get comp type"), CUDNN_DATA_FLOAT);
    if (with_bias) {
      EXPECT_EQ(g.log()[1].mode, CUDNN_POINTWISE_ADD);
      EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::bias)).dims, (dims{1, 1, 7}));
      EXPECT_TRUE(read_tensor(g.tensor_by_uid(cudnn::uid::virtual_base)).is_virtual);
    }
  }
  // One position: channels-last holds the features in flatten order too.
  const nhwc_view<const half> x1(fake_ptr<const half>(1), {3, 4, 1, 1});
  const nhwc_view<half> y1(fake_ptr<half>(2), {3, 7, 1, 1});
  cudnn::graph_builder g1 =
      cudnn::linear_graph(cudnn::make_linear_problem<half>(x1, fake_ptr<const half>(3), nullptr, y1));
  finalized(g1);
  EXPECT_EQ(read_tensor(g1.tensor_by_uid(cudnn::uid::x)).strides, (dims{12, 4, 1}));
}

TEST(CudnnLayerGraphs, LinearErrorsBeforeCudnn) {
  const nhwc_view<const float> x(fake_ptr<const float>(1), {3, 4, 2, 5});
  const nhwc_view<float> y(fake_ptr<float>(2), {3, 7, 1, 1});
  expect_error_before_cudnn([&] { (void)cudnn::make_linear_problem<float>(x, fake_ptr<const float>(3), nullptr, y); },
                            errc::unsupported, "flatten (C, spatial) order");
  const nchw_view<const float> xc(fake_ptr<const float>(1), {3, 4, 2, 5});
  const nchw_view<float> y_bad(fake_ptr<float>(2), {2, 7, 1, 1});
  expect_error_before_cudnn(
      [&] { (void)cudnn::make_linear_problem<float>(xc, fake_ptr<const float>(3), nullptr, y_bad); },
      errc::shape_mismatch, "[2, 7, 1, 1]");
  expect_error_before_cudnn([&] { (void)cudnn::make_linear_problem<float>(xc, nullptr, nullptr, y); },
                            errc::null_pointer, "7 x 40");
}

// ------------------------------------------------------------------ backward passes

template <class T, class F>
void check_activation_backward(const std::array<std::int64_t, 4>& e, const std::vector<int>& order) {
  SCOPED_TRACE((format_and_type<T, F>()));
  const tensor_view<const T, F> x(fake_ptr<const T>(1), e), dy(fake_ptr<const T>(2), e);
  const tensor_view<T, F> dx(fake_ptr<T>(3), e);
  const dims d(e.begin(), e.end());
  const std::vector<activation_modes> table = {
      {activation::identity, {CUDNN_POINTWISE_IDENTITY}},
      {activation::relu, {CUDNN_POINTWISE_RELU_BWD}},
      {activation::relu6, {CUDNN_POINTWISE_RELU_BWD}},
      {activation::sigmoid, {CUDNN_POINTWISE_SIGMOID_BWD}},
      {activation::tanh, {CUDNN_POINTWISE_TANH_BWD}},
      {activation::silu, {CUDNN_POINTWISE_SWISH_BWD}},
      {activation::hardsigmoid,
       {CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_ADD, CUDNN_POINTWISE_RELU_BWD, CUDNN_POINTWISE_MUL}},
      {onnx_hardsigmoid, {CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_ADD, CUDNN_POINTWISE_RELU_BWD, CUDNN_POINTWISE_MUL}},
      {activation::hardswish,
       {CUDNN_POINTWISE_ADD, CUDNN_POINTWISE_RELU_FWD, CUDNN_POINTWISE_RELU_BWD, CUDNN_POINTWISE_ADD,
        CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_MUL}},
      {leaky, {CUDNN_POINTWISE_RELU_BWD}},
      {elu, {CUDNN_POINTWISE_ELU_BWD}},
      {clip_both, {CUDNN_POINTWISE_SUB, CUDNN_POINTWISE_RELU_BWD}},
      {clip_below, {CUDNN_POINTWISE_SUB, CUDNN_POINTWISE_RELU_BWD}},
      {clip_above, {CUDNN_POINTWISE_NEG, CUDNN_POINTWISE_ADD, CUDNN_POINTWISE_RELU_BWD}},
      {clip_none, {CUDNN_POINTWISE_IDENTITY}},
      {activation::gelu, {CUDNN_POINTWISE_GELU_BWD}},
      {activation::gelu_tanh, {CUDNN_POINTWISE_GELU_APPROX_TANH_BWD}},
      {activation::softplus, {CUDNN_POINTWISE_SOFTPLUS_BWD}},
      {activation::mish,
       {CUDNN_POINTWISE_SOFTPLUS_FWD, CUDNN_POINTWISE_TANH_FWD, CUDNN_POINTWISE_SIGMOID_FWD, CUDNN_POINTWISE_MUL,
        CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_TANH_BWD, CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_ADD}},
  };
  const auto problem_of = [&](const activation_params& f) {
    return cudnn::make_activation_backward_problem(f, x, dy, dx);
  };
  const auto check = [&](const activation_params& f, const cudnn::activation_backward_problem& pr,
                         const cudnn::graph_builder& g) {
    const bool reads_x = f.kind != activation::identity && f != clip_none;  // dx = dy reads no x
    for (std::int64_t id : {cudnn::uid::x, cudnn::uid::dy, cudnn::uid::dx}) {
      if (!reads_x && id == cudnn::uid::x) continue;
      expect_packed_tensor<T>(g, id, d, order);
    }
    const op_record& first = g.log().front();
    const op_record& last = g.log().back();
    EXPECT_EQ(last.y, cudnn::uid::dx);
    if (g.log().size() == 1 && reads_x) {
      // dy is cuDNN's DYDESC, x its XDESC (the forward input), dx its DXDESC.
      EXPECT_EQ(first.x, cudnn::uid::dy);
      EXPECT_EQ(first.b, cudnn::uid::x);
    }
    EXPECT_EQ(first.options.relu_upper_clip.has_value(), f.kind == activation::relu6);
    if (f.kind == activation::relu6) {
      EXPECT_EQ(first.options.relu_upper_clip.value_or(-1.0), 6.0);
    }
    if (f.kind == activation::silu) {
      EXPECT_EQ(first.options.swish_beta.value_or(-1.0), 1.0);
    }
    EXPECT_EQ(first.options.relu_lower_clip_slope,
              f.kind == activation::leaky_relu ? std::optional<double>(0.125) : std::nullopt);
    EXPECT_EQ(first.options.elu_alpha, f.kind == activation::elu ? std::optional<double>(1.5) : std::nullopt);
    EXPECT_EQ(first.options.softplus_beta,
              f.kind == activation::softplus || f.kind == activation::mish ? std::optional<double>(1.0) : std::nullopt);
    if (f.kind == activation::mish) {
      // dx = dy tanh(sp) + TANH_BWD(dy x sigmoid(x), sp): every step reads what the derivation says.
      const auto& log = g.log();
      const std::int64_t sp = log[0].y, t = log[1].y, s = log[2].y;
      EXPECT_EQ(log[0].x, cudnn::uid::x);
      EXPECT_EQ(log[1].x, sp);
      EXPECT_EQ(log[2].x, cudnn::uid::x);
      EXPECT_EQ(std::make_pair(log[3].x, log[3].b), std::make_pair(cudnn::uid::dy, cudnn::uid::x));
      EXPECT_EQ(std::make_pair(log[4].x, log[4].b), std::make_pair(log[3].y, s));
      EXPECT_EQ(std::make_pair(log[5].x, log[5].b), std::make_pair(log[4].y, sp));
      EXPECT_EQ(std::make_pair(log[6].x, log[6].b), std::make_pair(cudnn::uid::dy, t));
      EXPECT_EQ(std::make_pair(log[7].x, log[7].b), std::make_pair(log[6].y, log[5].y));
    }
    const std::int64_t c0 = cudnn::uid::constant_base;
    if (f.kind == activation::hardswish) {
      ASSERT_EQ(pr.constants().size(), 2u);
      EXPECT_EQ(pr.constants()[0].value, 3.0f);
      EXPECT_FLOAT_EQ(pr.constants()[1].value, 1.0f / 6.0f);
      EXPECT_TRUE(read_tensor(g.tensor_by_uid(c0)).by_value);
      // The window of the derivative is relu6's backward (clip 6) at x + 3.
      const op_record& window = g.log()[2];
      EXPECT_EQ(window.mode, CUDNN_POINTWISE_RELU_BWD);
      EXPECT_EQ(window.b, g.log()[0].y);
      EXPECT_EQ(window.options.relu_upper_clip.value_or(-1.0), 6.0);
      EXPECT_EQ(window.x, cudnn::uid::x);
    } else if (f.kind == activation::hardsigmoid) {
      ASSERT_EQ(pr.constants().size(), 2u);
      EXPECT_EQ(pr.constants()[0].value, static_cast<float>(f.alpha));
      EXPECT_EQ(pr.constants()[1].value, static_cast<float>(f.beta));
      // The window is relu's backward clipped at 1 on alpha x + beta, then dy scaled by alpha.
      const op_record& window = g.log()[2];
      EXPECT_EQ(window.x, cudnn::uid::dy);
      EXPECT_EQ(window.b, g.log()[1].y);
      EXPECT_EQ(window.options.relu_upper_clip.value_or(-1.0), 1.0);
      EXPECT_EQ(last.b, c0);
    } else if (f.kind == activation::clip && f != clip_none) {
      // RELU_BWD's window on x - lo (clipped at hi - lo), or on hi - x.
      const op_record& window = g.log().back();
      EXPECT_EQ(window.mode, CUDNN_POINTWISE_RELU_BWD);
      EXPECT_EQ(window.x, cudnn::uid::dy);
      EXPECT_EQ(window.b, g.log()[g.log().size() - 2].y);
      EXPECT_EQ(window.options.relu_upper_clip, f == clip_both ? std::optional<double>(3.0) : std::nullopt);
      EXPECT_EQ(pr.constants().size(), f == clip_both ? 2u : 1u);
    } else {
      EXPECT_TRUE(pr.constants().empty());
    }
  };
  for_each_activation(table, problem_of, cudnn::activation_backward_graph, check);
}

TEST(CudnnLayerGraphs, ActivationBackwardEveryKindFormatAndType) {
  check_activation_backward<float, nhwc>({2, 3, 4, 5}, nhwc_order);
  check_activation_backward<half, nhwc>({2, 8, 4, 5}, nhwc_order);
  check_activation_backward<bfloat16, nchw>({2, 8, 4, 5}, nchw_order);
  const nhwc_view<const float> x(fake_ptr<const float>(1), {2, 3, 4, 5});
  const nhwc_view<float> dx_bad(fake_ptr<float>(3), {2, 3, 4, 6});
  expect_error_before_cudnn([&] { (void)cudnn::make_activation_backward_problem(activation::relu, x, x, dx_bad); },
                            errc::shape_mismatch, "[2, 3, 4, 6]");
}

TEST(CudnnLayerGraphs, BinaryBackwardSumsBroadcastOperands) {
  const std::array<std::int64_t, 4> full{2, 8, 4, 5};
  const nhwc_view<const half> a(fake_ptr<const half>(1), full), dy(fake_ptr<const half>(3), full);
  const nhwc_view<half> da(fake_ptr<half>(4), full);
  for (const std::array<std::int64_t, 4>& be :
       {full, std::array<std::int64_t, 4>{1, 8, 1, 1}, std::array<std::int64_t, 4>{2, 1, 4, 5}}) {
    const nhwc_view<const half> b(fake_ptr<const half>(2), be);
    const nhwc_view<half> db(fake_ptr<half>(5), be);
    const bool broadcast = be != full;
    for (binary_op k : {binary_op::add, binary_op::sub, binary_op::mul, binary_op::div}) {
      SCOPED_TRACE(memfmt::detail::dims_to_string(be) + " op " + std::to_string(static_cast<int>(k)));
      const auto problems = cudnn::make_binary_backward_problems(k, a, b, dy, da, db);
      ASSERT_EQ(problems.size(), 2u);
      EXPECT_FALSE(problems[0].of_b);
      EXPECT_TRUE(problems[1].of_b);
      EXPECT_FALSE(problems[0].reduce);  // a has dy's extents: its gradient is written directly
      EXPECT_EQ(problems[1].reduce, broadcast);
      for (const cudnn::binary_grad_problem& pr : problems) {
        const bool dy_itself = pr.reduce && (k == binary_op::add || (k == binary_op::sub && !pr.of_b));
        EXPECT_EQ(pr.pointwise, !dy_itself);
        if (pr.pointwise) {
          cudnn::graph_builder g = cudnn::binary_grad_pointwise_graph(pr);
          finalized(g);
          EXPECT_EQ(g.log().front().x, cudnn::uid::dy);
          EXPECT_EQ(g.log().back().y, pr.reduce ? cudnn::uid::grad : cudnn::uid::dx);
          const auto m = modes_of(g);
          if (k == binary_op::mul) {
            EXPECT_EQ(m, std::vector<cudnnPointwiseMode_t>{CUDNN_POINTWISE_MUL});
            EXPECT_EQ(g.log()[0].b, pr.of_b ? cudnn::uid::x : cudnn::uid::bias);  // d(ab)/da = b
          }
          if (k == binary_op::sub && pr.of_b) {
            EXPECT_EQ(m.back(), CUDNN_POINTWISE_NEG);
          }
          if (k == binary_op::div) {
            const std::vector<cudnnPointwiseMode_t> want =
                pr.of_b ? std::vector<cudnnPointwiseMode_t>{CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_DIV,
                                                            CUDNN_POINTWISE_DIV, CUDNN_POINTWISE_NEG}
                        : std::vector<cudnnPointwiseMode_t>{CUDNN_POINTWISE_DIV};
            EXPECT_EQ(m, want);
          }
          const auto full_t = read_tensor(g.tensor_by_uid(pr.reduce ? cudnn::uid::grad : cudnn::uid::dx));
          EXPECT_EQ(full_t.dims, dims(full.begin(), full.end()));
          EXPECT_EQ(full_t.strides, packed(dims(full.begin(), full.end()), nhwc_order));
        }
        if (pr.reduce) {
          cudnn::graph_builder g = cudnn::binary_grad_reduction_graph(pr);
          finalized(g);
          ASSERT_EQ(g.log().size(), 1u);
          EXPECT_EQ(g.log()[0].op, op_record::kind::reduction_sum);
          EXPECT_EQ(g.log()[0].x, dy_itself ? cudnn::uid::dy : cudnn::uid::grad);
          EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::dx)).dims, dims(be.begin(), be.end()));
        }
      }
    }
  }
  // Only the wanted gradients; a needs b's data for mul (the shared validation, before cuDNN).
  const nhwc_view<const half> b(fake_ptr<const half>(2), full);
  EXPECT_EQ(cudnn::make_binary_backward_problems(binary_op::add, a, b, dy, da, nhwc_view<half>{}).size(), 1u);
  const nhwc_view<const half> no_b(nullptr, full);
  expect_error_before_cudnn(
      [&] { (void)cudnn::make_binary_backward_problems(binary_op::mul, a, no_b, dy, da, nhwc_view<half>{}); },
      errc::null_pointer, "operand b");
}

TEST(CudnnLayerGraphs, PoolBackwardIsResampleBackward) {
  pool_params p;
  p.kernel = {3, 2, 1};
  p.stride = {2, 1, 1};
  p.padding = {1, 0, 0};
  p.padding_end = {1, 1, 0};
  for (pool_kind kind : {pool_kind::max, pool_kind::average}) {
    p.kind = kind;
    SCOPED_TRACE(kind == pool_kind::max ? "max" : "average");
    const nhwc_view<const half> x(fake_ptr<const half>(1), {2, 8, 9, 6});
    const nhwc_view<const half> dy(fake_ptr<const half>(2), {2, 8, 5, 6});
    const nhwc_view<half> dx(fake_ptr<half>(3), {2, 8, 9, 6});
    const cudnn::resample_backward_problem pr = cudnn::make_pool_backward_problem(x, dy, dx, p);
    cudnn::graph_builder g = cudnn::resample_backward_graph(pr);
    finalized(g);
    ASSERT_EQ(g.log().size(), 1u);
    EXPECT_EQ(g.log()[0].op, op_record::kind::resample_backward);
    EXPECT_EQ(g.log()[0].x, cudnn::uid::dy);
    EXPECT_EQ(g.log()[0].y, cudnn::uid::dx);
    const resample_readback r = read_resample(g);
    EXPECT_EQ(r.mode, kind == pool_kind::max ? CUDNN_RESAMPLE_MAXPOOL
                      : p.count_include_pad  ? CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING
                                             : CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING);
    EXPECT_EQ(text(r.window), "[3, 2]");
    EXPECT_EQ(text(r.strides), "[2, 1]");
    EXPECT_EQ(text(r.pre), "[1, 0]");
    EXPECT_EQ(text(r.post), "[1, 1]");
    EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::dx)).strides, packed({2, 8, 9, 6}, nhwc_order));
    EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::dy)).dims, (dims{2, 8, 5, 6}));
    // Max pooling reads x and the forward output, recomputed by a forward graph into packed scratch.
    EXPECT_EQ(pr.forward.has_value(), kind == pool_kind::max);
    EXPECT_FALSE(pr.xy_alias);  // channels-last average pooling: neither x nor y
    EXPECT_EQ(g.log()[0].b, kind == pool_kind::max ? cudnn::uid::x : -1);
    if (pr.forward) {
      cudnn::graph_builder f = cudnn::resample_graph(*pr.forward);
      finalized(f);
      EXPECT_EQ(read_tensor(f.tensor_by_uid(cudnn::uid::y)).strides, packed({2, 8, 5, 6}, nhwc_order));
      EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::y)).dims, (dims{2, 8, 5, 6}));
    }
  }
  // The forward's refusals hold for the backward: ceil_mode with count_include_pad.
  pool_params c;
  c.kind = pool_kind::average;
  c.kernel = {2, 2, 2};
  c.stride = {2, 2, 2};
  c.ceil_mode = true;
  c.count_include_pad = true;
  const ncdhw_view<const float> dy3(fake_ptr<const float>(2), {1, 4, 3, 2, 2});
  const ncdhw_view<float> dx3(fake_ptr<float>(3), {1, 4, 5, 4, 4});
  expect_error_before_cudnn([&] { (void)cudnn::make_pool_backward_problem(ncdhw_view<const float>{}, dy3, dx3, c); },
                            errc::unsupported, "with ceil_mode and count_include_pad");
  c.count_include_pad = false;
  const cudnn::resample_backward_problem pr3 =
      cudnn::make_pool_backward_problem(ncdhw_view<const float>{}, dy3, dx3, c);
  EXPECT_FALSE(pr3.forward.has_value());  // no x given: X and Y bound to dx and dy
  EXPECT_TRUE(pr3.xy_alias);
  cudnn::graph_builder g3 = cudnn::resample_backward_graph(pr3);
  finalized(g3);
  EXPECT_EQ(text(read_resample(g3).post), "[1, 0, 0]");
}

TEST(CudnnLayerGraphs, UpsampleAndGlobalPoolBackward) {
  upsample_params p;
  p.output = {8, 15, 1};
  const nchw_view<const bfloat16> dy(fake_ptr<const bfloat16>(1), {2, 3, 8, 15});
  const nchw_view<bfloat16> dx(fake_ptr<bfloat16>(2), {2, 3, 4, 5});
  for (resample_mode m : {resample_mode::nearest, resample_mode::linear}) {
    p.mode = m;
    cudnn::graph_builder g = cudnn::resample_backward_graph(cudnn::make_upsample_backward_problem(dy, dx, p));
    finalized(g);
    const resample_readback r = read_resample(g);
    EXPECT_EQ(r.mode, m == resample_mode::nearest ? CUDNN_RESAMPLE_NEAREST : CUDNN_RESAMPLE_BILINEAR);
    EXPECT_EQ(text(r.strides), "[1/2, 1/3]");  // the forward's spec
    EXPECT_EQ(text(r.post), "[1, 7/6]");
    EXPECT_EQ(g.log()[0].op, op_record::kind::resample_backward);
    EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::dy)).strides, packed({2, 3, 8, 15}, nchw_order));
    // cuDNN finalizes no nearest backward without X and Y (nor, reportedly, runs a channels-first
    // one): they are described with dx's and dy's sizes and bound to their memory.
    EXPECT_EQ(g.log()[0].b, cudnn::uid::x);
    EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::x)).dims, (dims{2, 3, 4, 5}));
    EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::y)).dims, (dims{2, 3, 8, 15}));
  }
  // Channels-last bilinear finalizes without them; nearest needs them in either format.
  upsample_params q;
  q.output = {8, 10, 1};
  const nhwc_view<const float> dy_cl(fake_ptr<const float>(1), {2, 3, 8, 10});
  const nhwc_view<float> dx_cl(fake_ptr<float>(2), {2, 3, 4, 5});
  for (resample_mode m : {resample_mode::nearest, resample_mode::linear}) {
    q.mode = m;
    const cudnn::resample_backward_problem pr = cudnn::make_upsample_backward_problem(dy_cl, dx_cl, q);
    EXPECT_EQ(pr.xy_alias, m == resample_mode::nearest);
    cudnn::graph_builder g = cudnn::resample_backward_graph(pr);
    finalized(g);
    cudnn::resample_backward_problem bare = pr;
    bare.xy_alias = false;
    if (m == resample_mode::nearest) {
      EXPECT_THROW(cudnn::resample_backward_graph(bare), memfmt::error);
    }
  }
  // Global average pooling: average pooling with the whole input as window.
  for (bool cl : {false, true}) {
    SCOPED_TRACE(cl ? "nhwc" : "nchw");
    cudnn::resample_backward_problem pr;
    if (cl)
      pr =
          cudnn::make_global_average_pool_backward_problem(nhwc_view<const half>(fake_ptr<const half>(1), {2, 8, 1, 1}),
                                                           nhwc_view<half>(fake_ptr<half>(2), {2, 8, 3, 5}));
    else
      pr =
          cudnn::make_global_average_pool_backward_problem(nchw_view<const half>(fake_ptr<const half>(1), {2, 8, 1, 1}),
                                                           nchw_view<half>(fake_ptr<half>(2), {2, 8, 3, 5}));
    EXPECT_EQ(pr.xy_alias, !cl);
    cudnn::graph_builder g = cudnn::resample_backward_graph(pr);
    finalized(g);
    const resample_readback r = read_resample(g);
    EXPECT_EQ(r.mode, CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING);
    EXPECT_EQ(text(r.window), "[3, 5]");
    EXPECT_EQ(text(r.strides), "[1, 1]");
    EXPECT_EQ(text(r.pre), "[0, 0]");
    EXPECT_EQ(text(r.post), "[0, 0]");
    EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::dy)).strides, (dims{8, 1, 8, 8}));
    EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::dx)).strides, packed({2, 8, 3, 5}, cl ? nhwc_order : nchw_order));
  }
}

TEST(CudnnLayerGraphs, LinearBackwardAsMatmuls) {
  // x [3, 4, 2, 5]: 3 rows of 40 features; w [7, 40] row-major; dy [3, 7, 1, 1].
  const nchw_view<const float> x(fake_ptr<const float>(1), {3, 4, 2, 5});
  const nchw_view<const float> dy(fake_ptr<const float>(2), {3, 7, 1, 1});
  const nchw_view<float> dx(fake_ptr<float>(3), {3, 4, 2, 5});
  const cudnn::linear_problem data = cudnn::make_linear_backward_data_problem(dy, fake_ptr<const float>(4), dx);
  cudnn::graph_builder gd = cudnn::matmul_graph(data);
  finalized(gd);
  EXPECT_EQ(read_tensor(gd.tensor_by_uid(cudnn::uid::dy)).dims, (dims{1, 3, 7}));
  EXPECT_EQ(read_tensor(gd.tensor_by_uid(cudnn::uid::dy)).strides, (dims{21, 7, 1}));
  EXPECT_EQ(read_tensor(gd.tensor_by_uid(cudnn::uid::w)).dims, (dims{1, 7, 40}));
  EXPECT_EQ(read_tensor(gd.tensor_by_uid(cudnn::uid::w)).strides, (dims{280, 40, 1}));  // w[k, f] at k * 40 + f
  EXPECT_EQ(read_tensor(gd.tensor_by_uid(cudnn::uid::dx)).dims, (dims{1, 3, 40}));
  EXPECT_EQ(read_tensor(gd.tensor_by_uid(cudnn::uid::dx)).strides, (dims{120, 40, 1}));
  for (bool with_bias : {false, true}) {
    SCOPED_TRACE(with_bias ? "dbias" : "no dbias");
    const cudnn::linear_problem wg = cudnn::make_linear_backward_weights_problem<float>(
        x, dy, fake_ptr<float>(5), with_bias ? fake_ptr<float>(6) : nullptr);
    cudnn::graph_builder gw = cudnn::matmul_graph(wg);
    finalized(gw);
    EXPECT_EQ(read_tensor(gw.tensor_by_uid(cudnn::uid::dy)).dims, (dims{1, 7, 3}));
    EXPECT_EQ(read_tensor(gw.tensor_by_uid(cudnn::uid::dy)).strides, (dims{21, 1, 7}));  // dy^T, no copy
    EXPECT_EQ(read_tensor(gw.tensor_by_uid(cudnn::uid::x)).dims, (dims{1, 3, 40}));
    EXPECT_EQ(read_tensor(gw.tensor_by_uid(cudnn::uid::w)).dims, (dims{1, 7, 40}));
    EXPECT_EQ(read_tensor(gw.tensor_by_uid(cudnn::uid::w)).strides, (dims{280, 40, 1}));
    EXPECT_EQ(wg.bias.has_value(), with_bias);
    if (with_bias) {
      cudnn::graph_builder gb = cudnn::linear_dbias_graph(wg);
      finalized(gb);
      EXPECT_EQ(gb.log()[0].op, op_record::kind::reduction_sum);
      EXPECT_EQ(read_tensor(gb.tensor_by_uid(cudnn::uid::dy)).dims, (dims{1, 3, 7}));
      EXPECT_EQ(read_tensor(gb.tensor_by_uid(cudnn::uid::dy)).strides, (dims{21, 7, 1}));
      EXPECT_EQ(read_tensor(gb.tensor_by_uid(cudnn::uid::bias)).dims, (dims{1, 1, 7}));
    }
  }
  // A channels-last input (gradient) with several positions is refused as in the forward.
  const nhwc_view<float> dx_cl(fake_ptr<float>(3), {3, 4, 2, 5});
  expect_error_before_cudnn(
      [&] { (void)cudnn::make_linear_backward_data_problem(dy, fake_ptr<const float>(4), dx_cl); }, errc::unsupported,
      "flatten (C, spatial) order");
  expect_error_before_cudnn([&] { (void)cudnn::make_linear_backward_weights_problem<float>(x, dy, nullptr, nullptr); },
                            errc::null_pointer, "7 x 40");
}

}  // namespace
