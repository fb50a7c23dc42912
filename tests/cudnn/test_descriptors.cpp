// Every descriptor the cuDNN backend builds, finalized by cuDNN and read back through
// cudnnBackendGetAttribute, checked against the typed views and the operation parameters.
// Needs cuDNN but no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include <memfmt/backends/cudnn/graphs.hpp>
#include <memfmt/tensor/tensor_view.hpp>

#include "../common/coords.hpp"
#include "host_util.hpp"

namespace {

using namespace memfmt;
using cudnn::conv_direction;
using cudnn::descriptor;
using memfmt_test::expected_cudnn_type;
using memfmt_test::fake_ptr;
using memfmt_test::for_each_coord;
using memfmt_test::read_tensor;
using memfmt_test::tensor_readback;

// Strides by brute force from the layout's offsets (independent of layout::strides()).
template <class F>
std::vector<std::int64_t> strides_by_offsets(const layout<F>& m) {
  std::vector<std::int64_t> s;
  for (int d = 0; d < F::rank; ++d) {
    std::array<std::int64_t, F::rank> zero{}, one{};
    one[static_cast<std::size_t>(d)] = 1;
    s.push_back(m.extent(d) > 1 ? m(one) - m(zero) : -1);  // -1: stride of a size-1 dim is irrelevant
  }
  return s;
}

template <class F>
std::vector<std::int64_t> packed_strides_formula(const std::array<std::int64_t, F::rank>& e) {
  // Walk the format's order innermost first.
  std::vector<std::int64_t> s(F::rank);
  std::int64_t acc = 1;
  for (int i = F::rank - 1; i >= 0; --i) {
    const int d = F::order[static_cast<std::size_t>(i)];
    s[static_cast<std::size_t>(d)] = acc;
    acc *= e[static_cast<std::size_t>(d)];
  }
  return s;
}

void expect_strides(const std::vector<std::int64_t>& got, const std::vector<std::int64_t>& want,
                    const std::vector<std::int64_t>& dims) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t d = 0; d < got.size(); ++d)
    if (dims[d] > 1 && want[d] >= 0) {
      EXPECT_EQ(got[d], want[d]) << "dim " << d;
    }
}

// ------------------------------------------------------------------ tensors

template <class T, class F>
void check_tensor(const std::array<std::int64_t, F::rank>& e) {
  SCOPED_TRACE(std::string(F::name) + " " + std::string(to_string(dtype_of_v<T>)));
  tensor_view<const T, F> v(fake_ptr<const T>(), e);
  const cudnn::tensor_spec spec = cudnn::spec_of(v, 42);
  EXPECT_EQ(spec.alignment, 16);
  const descriptor d = cudnn::make_tensor(spec);
  ASSERT_TRUE(d.finalized());
  const tensor_readback r = read_tensor(d);
  EXPECT_EQ(r.dims, std::vector<std::int64_t>(e.begin(), e.end()));  // logical N, C, spatial in any format
  expect_strides(r.strides, packed_strides_formula<F>(e), r.dims);
  expect_strides(r.strides, strides_by_offsets(v.mapping()), r.dims);
  EXPECT_EQ(r.type, expected_cudnn_type(dtype_of_v<T>));
  EXPECT_EQ(r.uid, 42);
  EXPECT_FALSE(r.is_virtual);
  EXPECT_FALSE(r.by_value);
}

template <class T>
void check_tensor_all_formats() {
  check_tensor<T, nchw>({2, 3, 5, 7});
  check_tensor<T, nhwc>({2, 3, 5, 7});
  check_tensor<T, ncdhw>({2, 3, 4, 5, 6});
  check_tensor<T, ndhwc>({2, 3, 4, 5, 6});
}

TEST(CudnnTensorDescriptor, DimsStridesTypeReadBack) {
  check_tensor_all_formats<float>();
  check_tensor_all_formats<half>();
  check_tensor_all_formats<bfloat16>();
  check_tensor_all_formats<double>();
}

TEST(CudnnTensorDescriptor, NhwcIsAStrideOrderNotAShape) {
  const descriptor a =
      cudnn::make_tensor(cudnn::spec_of(nchw_view<const half>(fake_ptr<const half>(), {8, 16, 14, 14}), 1));
  const descriptor b =
      cudnn::make_tensor(cudnn::spec_of(nhwc_view<const half>(fake_ptr<const half>(), {8, 16, 14, 14}), 1));
  const auto ra = read_tensor(a), rb = read_tensor(b);
  EXPECT_EQ(ra.dims, rb.dims);
  EXPECT_EQ(ra.strides, (std::vector<std::int64_t>{16 * 14 * 14, 14 * 14, 14, 1}));
  EXPECT_EQ(rb.strides, (std::vector<std::int64_t>{14 * 14 * 16, 1, 14 * 16, 16}));
}

TEST(CudnnTensorDescriptor, PaddedStridesAndAlignmentFromThePointer) {
  // An NHWC slice of a buffer with 8 channels of room per pixel and a padded row.
  const auto lay = layout<nhwc>::strided({2, 6, 5, 7}, {5 * 64, 1, 64, 8});
  tensor_view<const float, nhwc> v(fake_ptr<const float>() + 1, lay);  // 4-byte aligned only
  const auto spec = cudnn::spec_of(v, 9);
  EXPECT_EQ(spec.alignment, 4);
  const auto r = read_tensor(cudnn::make_tensor(spec));  // cuDNN accepts alignment 4 for float
  EXPECT_EQ(r.strides, (std::vector<std::int64_t>{5 * 64, 1, 64, 8}));
  expect_strides(r.strides, strides_by_offsets(lay), r.dims);
  tensor_view<const half, ndhwc> h(fake_ptr<const half>() + 3, {1, 2, 3, 4, 5});  // 2-byte aligned
  const auto hs = cudnn::spec_of(h, 1);
  EXPECT_EQ(hs.alignment, 2);
  EXPECT_NO_THROW(cudnn::make_tensor(hs));
  EXPECT_EQ(cudnn::pointer_alignment(reinterpret_cast<const void*>(0x1008)), 8);
  EXPECT_EQ(cudnn::pointer_alignment(reinterpret_cast<const void*>(0x1040)), 16);
}

TEST(CudnnTensorDescriptor, VirtualAndByValue) {
  const auto x = cudnn::spec_of(nhwc_view<const half>(fake_ptr<const half>(), {2, 8, 4, 4}), 1);
  const auto rv = read_tensor(cudnn::make_tensor(cudnn::virtual_like(x, dtype::float32, 100)));
  EXPECT_TRUE(rv.is_virtual);
  EXPECT_EQ(rv.type, CUDNN_DATA_FLOAT);
  EXPECT_EQ(rv.strides, read_tensor(cudnn::make_tensor(x)).strides);
  const auto rs = read_tensor(cudnn::make_tensor(cudnn::scalar_spec(4, dtype::float32, 14)));
  EXPECT_TRUE(rs.by_value);
  EXPECT_EQ(rs.dims, (std::vector<std::int64_t>{1, 1, 1, 1}));
  const auto rc = read_tensor(cudnn::make_tensor(cudnn::channel_spec(24, 5, dtype::float32, 10)));
  EXPECT_EQ(rc.dims, (std::vector<std::int64_t>{1, 24, 1, 1, 1}));
  // Channels-last strides, size-1 dims included: cuDNN's runtime-fusion engines check the order.
  EXPECT_EQ(rc.strides, (std::vector<std::int64_t>{24, 1, 24, 24, 24}));
}

// ------------------------------------------------------------------ convolution descriptor

// cuDNN 9.19's getter of CUDNN_ATTR_CONVOLUTION_CONV_MODE rejects CUDNN_TYPE_CONVOLUTION_MODE
// ("CUDNN_TYPE_DATA_TYPE != attrType") and answers under the CUDNN_TYPE_DATA_TYPE tag; accept either.
cudnnConvolutionMode_t read_conv_mode(const descriptor& d) {
  cudnnConvolutionMode_t m{};
  std::int64_t n = 0;
  if (cudnnBackendGetAttribute(d.get(), CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &n, &m) ==
      CUDNN_STATUS_SUCCESS)
    return m;
  cudnn::check_cudnn(
      cudnnBackendGetAttribute(d.get(), CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_DATA_TYPE, 1, &n, &m),
      "get CUDNN_ATTR_CONVOLUTION_CONV_MODE");
  return m;
}

void check_conv_desc(const descriptor& d, int spatial, const conv_params& p, cudnnDataType_t compute) {
  EXPECT_EQ(d.get_int64(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, "spatial dims"), spatial);
  EXPECT_EQ(d.get_data_type(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, "comp type"), compute);
  EXPECT_EQ(read_conv_mode(d), CUDNN_CROSS_CORRELATION);
  const auto pre = d.get_int64s(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, "pre");
  const auto post = d.get_int64s(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, "post");
  const auto st = d.get_int64s(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, "strides");
  const auto dil = d.get_int64s(CUDNN_ATTR_CONVOLUTION_DILATIONS, "dilations");
  ASSERT_EQ(pre.size(), static_cast<std::size_t>(spatial));
  ASSERT_EQ(post.size(), static_cast<std::size_t>(spatial));
  ASSERT_EQ(st.size(), static_cast<std::size_t>(spatial));
  ASSERT_EQ(dil.size(), static_cast<std::size_t>(spatial));
  for (int i = 0; i < spatial; ++i) {
    const auto u = static_cast<std::size_t>(i);
    EXPECT_EQ(pre[u], p.padding[u]);
    EXPECT_EQ(post[u], p.end_padding(i));
    EXPECT_EQ(st[u], p.stride[u]);
    EXPECT_EQ(dil[u], p.dilation[u]);
  }
}

TEST(CudnnConvolutionDescriptor, ParamsReadBack2dAnd3d) {
  conv_params p;
  p.stride = {2, 1, 3};
  p.padding = {1, 2, 0};
  p.dilation = {1, 2, 2};
  for (int spatial : {2, 3})
    for (cudnnDataType_t ct : {CUDNN_DATA_FLOAT, CUDNN_DATA_DOUBLE}) {
      SCOPED_TRACE(spatial);
      check_conv_desc(cudnn::make_convolution(cudnn::conv_spec_of(p, spatial, ct)), spatial, p, ct);
    }
  p.padding_end = std::array<std::int64_t, 3>{0, 3, 1};  // asymmetric: post padding is the end padding
  for (int spatial : {2, 3})
    check_conv_desc(cudnn::make_convolution(cudnn::conv_spec_of(p, spatial, CUDNN_DATA_FLOAT)), spatial, p,
                    CUDNN_DATA_FLOAT);
  EXPECT_EQ(cudnn::compute_type_for(dtype::float16), CUDNN_DATA_FLOAT);
  EXPECT_EQ(cudnn::compute_type_for(dtype::bfloat16), CUDNN_DATA_FLOAT);
  EXPECT_EQ(cudnn::compute_type_for(dtype::float32), CUDNN_DATA_FLOAT);
  EXPECT_EQ(cudnn::compute_type_for(dtype::float64), CUDNN_DATA_DOUBLE);
}

// ------------------------------------------------------------------ convolution operations

struct conv_case {
  std::array<std::int64_t, 5> x, w;
  conv_params p;
};

template <class T, class XF, class WF>
void check_conv_ops(const std::array<std::int64_t, XF::rank>& xe, const std::array<std::int64_t, XF::rank>& we,
                    const conv_params& p) {
  SCOPED_TRACE(std::string(XF::name) + "/" + WF::name + " " + std::string(to_string(dtype_of_v<T>)) + " groups " +
               std::to_string(p.groups));
  const auto ye = conv_output_extents(xe, we, p);
  tensor_view<const T, XF> x(fake_ptr<const T>(1), xe);
  tensor_view<const T, WF> w(fake_ptr<const T>(2), we);
  tensor_view<T, XF> y(fake_ptr<T>(3), ye);
  const int spatial = XF::rank - 2;
  const cudnnDataType_t ct = cudnn::compute_type_for(dtype_of_v<T>);
  struct dir_attrs {
    conv_direction dir;
    cudnnBackendAttributeName_t x, w, y, conv;
  };
  const dir_attrs dirs[] = {
      {conv_direction::forward, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC},
      {conv_direction::backward_data, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC},
      {conv_direction::backward_weights, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC},
  };
  for (const auto& da : dirs) {
    const auto pr = cudnn::make_conv_problem(da.dir, x, w, y, p, false, nullptr);
    cudnn::graph_builder g = cudnn::conv_graph(pr);
    const descriptor& graph = g.finalize_graph();  // cuDNN checks the x/w/y/conv consistency here too
    ASSERT_TRUE(graph.finalized());
    EXPECT_EQ(g.operations().size(), 1u);
    EXPECT_GT(graph.get_int64(CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, "engine count"), 0);
    const descriptor& op = g.operations().front();
    // cuDNN 9.19 cannot read an operation's attributes back usefully (its tensor copies come back
    // in an internal grouped form with uid -1, the conv descriptor not at all), so the descriptors
    // the operation was finalized with are read back; cuDNN finalizing the operation and the graph
    // is its own check that they are consistent (x, w, y, conv).
    const auto rx = read_tensor(g.tensor_by_uid(cudnn::uid::x)), rw = read_tensor(g.tensor_by_uid(cudnn::uid::w)),
               ry = read_tensor(g.tensor_by_uid(cudnn::uid::y));
    EXPECT_EQ(rx.dims, std::vector<std::int64_t>(xe.begin(), xe.end()));
    EXPECT_EQ(ry.dims, std::vector<std::int64_t>(ye.begin(), ye.end()));
    // Groups reach cuDNN only through the filter dims: K, C / groups, kernel...
    EXPECT_EQ(rw.dims[0], we[0]);
    EXPECT_EQ(rw.dims[1], xe[1] / p.groups);
    EXPECT_EQ(rx.dims[1] / rw.dims[1], p.groups);
    expect_strides(rx.strides, packed_strides_formula<XF>(xe), rx.dims);
    expect_strides(rw.strides, packed_strides_formula<WF>(we), rw.dims);
    expect_strides(ry.strides, packed_strides_formula<XF>(ye), ry.dims);
    EXPECT_EQ(rx.type, expected_cudnn_type(dtype_of_v<T>));
    EXPECT_EQ(rw.type, rx.type);
    EXPECT_EQ(ry.type, rx.type);
    EXPECT_NE(rx.uid, rw.uid);
    EXPECT_NE(rx.uid, ry.uid);
    EXPECT_NE(rw.uid, ry.uid);
    (void)da.conv;
    ASSERT_EQ(g.attributes().size(), 1u);
    check_conv_desc(g.attributes().front(), spatial, p, ct);
    EXPECT_TRUE(op.finalized());
  }
}

template <class T>
void check_conv_ops_all() {
  conv_params p;
  p.padding = {1, 1, 1};
  p.stride = {2, 1, 1};
  check_conv_ops<T, nchw, nchw>({2, 8, 9, 10}, {16, 8, 3, 3}, p);
  check_conv_ops<T, nhwc, nhwc>({2, 8, 9, 10}, {16, 8, 3, 3}, p);
  check_conv_ops<T, nhwc, nchw>({2, 8, 9, 10}, {16, 8, 3, 3}, p);  // mixed activation/weight formats
  conv_params g = p;
  g.groups = 4;  // ResNeXt-like grouped
  check_conv_ops<T, nhwc, nhwc>({2, 16, 9, 10}, {8, 4, 3, 3}, g);
  conv_params dw;
  dw.padding = {1, 1, 1};
  dw.groups = 8;  // depthwise
  check_conv_ops<T, nchw, nchw>({1, 8, 6, 6}, {8, 1, 3, 3}, dw);
  conv_params p3;
  p3.padding = {1, 0, 1};
  p3.dilation = {1, 2, 1};
  check_conv_ops<T, ncdhw, ncdhw>({1, 4, 5, 6, 7}, {8, 4, 3, 3, 3}, p3);
  check_conv_ops<T, ndhwc, ndhwc>({1, 4, 5, 6, 7}, {8, 4, 3, 3, 3}, p3);
}

TEST(CudnnConvolutionOperation, FpropDgradWgradReadBack) {
  check_conv_ops_all<float>();
  check_conv_ops_all<half>();
  check_conv_ops_all<bfloat16>();
}

TEST(CudnnConvolutionOperation, FusedBiasGraph) {
  nhwc_view<const half> x(fake_ptr<const half>(1), {2, 8, 6, 6});
  nhwc_view<const half> w(fake_ptr<const half>(2), {16, 8, 3, 3});
  conv_params p;
  p.padding = {1, 1, 1};
  nhwc_view<half> y(fake_ptr<half>(3), {2, 16, 6, 6});
  const auto pr = cudnn::make_conv_problem(conv_direction::forward, x, w, y, p, true, fake_ptr<const half>(4));
  ASSERT_TRUE(pr.bias.has_value());
  cudnn::graph_builder g = cudnn::conv_bias_graph(pr);
  const descriptor& graph = g.finalize_graph();
  ASSERT_TRUE(graph.finalized());
  EXPECT_GT(graph.get_int64(CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, "engine count"), 0);
  EXPECT_EQ(g.operations().size(), 2u);
  const auto rb = read_tensor(g.tensor_by_uid(cudnn::uid::bias));
  EXPECT_EQ(rb.dims, (std::vector<std::int64_t>{1, 16, 1, 1}));
  EXPECT_EQ(rb.type, CUDNN_DATA_HALF);
  const auto rv = read_tensor(g.tensor_by_uid(cudnn::uid::virtual_base));
  EXPECT_TRUE(rv.is_virtual);
  EXPECT_EQ(rv.type, CUDNN_DATA_FLOAT);
  // conv -> virtual (float) -> add bias -> y.
  ASSERT_EQ(g.attributes().size(), 2u);
  const descriptor& pw = g.attributes().back();
  // (cuDNN 9.19 cannot read a pointwise descriptor's mode or precision back.)
  EXPECT_TRUE(pw.finalized());
  EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::y)).type, CUDNN_DATA_HALF);
  // The unfused fallback and the bias gradient also finalize.
  cudnn::graph_builder g2 = cudnn::bias_add_graph(pr.y, *pr.bias, CUDNN_DATA_FLOAT);
  EXPECT_TRUE(g2.finalize_graph().finalized());
  cudnn::graph_builder g3 = cudnn::bias_grad_graph(pr.y, *pr.bias, CUDNN_DATA_FLOAT);
  EXPECT_TRUE(g3.finalize_graph().finalized());
}

// ------------------------------------------------------------------ batch norm

template <class T, class F>
cudnn::bn_problem bn_problem_for(const std::array<std::int64_t, F::rank>& e, bool residual, bool relu, bool running) {
  batch_norm_params p;
  p.fuse_relu = relu;
  tensor_view<const T, F> x(fake_ptr<const T>(1), e);
  tensor_view<T, F> y(fake_ptr<T>(2), e);
  auto pr = cudnn::make_bn_problem<T, F>("test", x, {}, y, p);
  pr.update_running = running;
  if (residual) {
    pr.has_residual = true;
    pr.residual = cudnn::spec_of(tensor_view<const T, F>(fake_ptr<const T>(5), e), cudnn::uid::residual);
  }
  return pr;
}

// cuDNN 9.19 does not let NORM_FORWARD / NORM_BACKWARD operations (nor OPERATIONGRAPH_OPS) be read
// back (NOT_SUPPORTED), so the norm graphs are checked through their tensors, read back from the
// descriptors the operations were finalized with, and through cuDNN accepting op and graph.
template <class T, class F>
void check_bn_graphs(const std::array<std::int64_t, F::rank>& e) {
  SCOPED_TRACE(std::string(F::name) + " " + std::string(to_string(dtype_of_v<T>)));
  const cudnnDataType_t ptype = std::is_same_v<T, double> ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  std::vector<std::int64_t> cdims(F::rank, 1);
  cdims[1] = e[1];
  const std::vector<std::int64_t> dims(e.begin(), e.end());
  for (bool training : {true, false}) {
    const auto pr = bn_problem_for<T, F>(e, false, false, training);
    cudnn::graph_builder g = cudnn::bn_forward_graph(pr, training, true);
    const descriptor& graph = g.finalize_graph();
    ASSERT_TRUE(graph.finalized());
    EXPECT_GT(graph.get_int64(CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, "engine count"), 0);
    EXPECT_EQ(g.operations().size(), 1u);
    const auto rx = read_tensor(g.tensor_by_uid(cudnn::uid::x));
    EXPECT_EQ(rx.dims, dims);
    expect_strides(rx.strides, packed_strides_formula<F>(e), rx.dims);
    EXPECT_EQ(rx.type, expected_cudnn_type(dtype_of_v<T>));
    const auto ry = read_tensor(g.tensor_by_uid(cudnn::uid::y));
    EXPECT_EQ(ry.dims, dims);
    EXPECT_EQ(ry.strides, rx.strides);
    for (std::int64_t id : {cudnn::uid::scale, cudnn::uid::shift, cudnn::uid::mean, cudnn::uid::inv_variance}) {
      const auto rc = read_tensor(g.tensor_by_uid(id));
      EXPECT_EQ(rc.dims, cdims) << "uid " << id;
      EXPECT_EQ(rc.type, ptype) << "uid " << id;
      EXPECT_FALSE(rc.is_virtual);
    }
    const auto reps = read_tensor(g.tensor_by_uid(cudnn::uid::epsilon));
    EXPECT_TRUE(reps.by_value);
    EXPECT_EQ(reps.type, ptype);
    EXPECT_EQ(g.specs().count(cudnn::uid::momentum), training ? 1u : 0u);
    if (training) {
      EXPECT_TRUE(read_tensor(g.tensor_by_uid(cudnn::uid::momentum)).by_value);
      for (std::int64_t id : {cudnn::uid::running_mean_in, cudnn::uid::running_var_in, cudnn::uid::running_mean_out,
                              cudnn::uid::running_var_out})
        EXPECT_EQ(read_tensor(g.tensor_by_uid(id)).dims, cdims) << "uid " << id;
    }
  }
  // Fused residual + relu epilogue (norm -> add -> relu), the in-place fallback, and 1/sqrt(var + eps).
  {
    const auto pr = bn_problem_for<T, F>(e, true, true, true);
    cudnn::graph_builder g = cudnn::bn_forward_graph(pr, true, true);
    EXPECT_GT(g.finalize_graph().get_int64(CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, "engine count"), 0);
    EXPECT_EQ(g.operations().size(), 3u);
    EXPECT_TRUE(read_tensor(g.tensor_by_uid(cudnn::uid::virtual_base)).is_virtual);
    EXPECT_TRUE(read_tensor(g.tensor_by_uid(cudnn::uid::virtual_base + 1)).is_virtual);
    EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::residual)).dims, dims);
    ASSERT_EQ(g.attributes().size(), 2u);
    cudnn::graph_builder ep = cudnn::epilogue_graph(pr);
    EXPECT_TRUE(ep.finalize_graph().finalized());
    EXPECT_EQ(ep.operations().size(), 2u);
    EXPECT_EQ(read_tensor(ep.tensor_by_uid(cudnn::uid::aux)).strides,
              read_tensor(ep.tensor_by_uid(cudnn::uid::y)).strides);
    cudnn::graph_builder inv = cudnn::inv_std_graph(pr);
    EXPECT_TRUE(inv.finalize_graph().finalized());
    EXPECT_EQ(read_tensor(inv.tensor_by_uid(cudnn::uid::inv_variance)).dims, cdims);
  }
  // Backward: relu mask (pointwise RELU_BWD, readable) and the norm backward op.
  {
    auto pr = bn_problem_for<T, F>(e, false, true, false);
    pr.dy = cudnn::spec_of(tensor_view<const T, F>(fake_ptr<const T>(6), e), cudnn::uid::dy);
    pr.dx = cudnn::spec_of(tensor_view<T, F>(fake_ptr<T>(7), e), cudnn::uid::dx);
    pr.grad = cudnn::spec_of(tensor_view<T, F>(fake_ptr<T>(8), e), cudnn::uid::grad);
    cudnn::graph_builder gm = cudnn::relu_grad_graph(pr);
    ASSERT_TRUE(gm.finalize_graph().finalized());
    EXPECT_EQ(gm.specs().size(), 3u);  // dy, y, grad
    cudnn::graph_builder gb = cudnn::bn_backward_graph(pr, true);
    EXPECT_GT(gb.finalize_graph().get_int64(CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, "engine count"), 0);
    EXPECT_EQ(gb.specs().count(cudnn::uid::dy), 0u);  // the masked gradient replaces dy
    const auto rdx = read_tensor(gb.tensor_by_uid(cudnn::uid::dx));
    EXPECT_EQ(rdx.dims, dims);
    expect_strides(rdx.strides, packed_strides_formula<F>(e), rdx.dims);
    EXPECT_EQ(read_tensor(gb.tensor_by_uid(cudnn::uid::dscale)).type, ptype);
    EXPECT_EQ(read_tensor(gb.tensor_by_uid(cudnn::uid::dshift)).dims, cdims);
  }
}

// Pointwise graphs describe dense tensors with one position with channels-last strides (cuDNN's
// runtime-fusion engine reads size-1 strides literally): every element keeps its offset, and
// per-channel operands broadcast along C.
template <class T, class F>
void check_pointwise_frame(const std::array<std::int64_t, F::rank>& e, cudnn::pointwise_frame::form expect,
                           const std::vector<std::int64_t>& framed_dims, const std::vector<std::int64_t>& param_dims) {
  SCOPED_TRACE(std::string(F::name) + " " + memfmt::detail::dims_to_string(e));
  const auto pr = bn_problem_for<T, F>(e, true, true, false);
  const cudnn::pointwise_frame f(pr.x);
  EXPECT_EQ(f.kind(), expect);
  cudnn::graph_builder inf = cudnn::bn_inference_pointwise_graph(pr);
  ASSERT_TRUE(inf.finalize_graph().finalized());
  cudnn::graph_builder ep = cudnn::epilogue_graph(pr);
  ASSERT_TRUE(ep.finalize_graph().finalized());
  const auto rx = read_tensor(inf.tensor_by_uid(cudnn::uid::x));
  EXPECT_EQ(rx.dims, framed_dims);
  EXPECT_EQ(read_tensor(inf.tensor_by_uid(cudnn::uid::mean)).dims, param_dims);
  for (std::int64_t id : {cudnn::uid::y, cudnn::uid::residual})
    EXPECT_EQ(read_tensor(inf.tensor_by_uid(id)).strides, rx.strides) << "uid " << id;
  EXPECT_EQ(read_tensor(ep.tensor_by_uid(cudnn::uid::aux)).dims, rx.dims);
  // Same bytes: walk every element of the original and of the framed description and compare the
  // sets of offsets; and the per-channel operand broadcasts along C.
  const layout<F> map = layout<F>::packed(e);
  std::vector<std::int64_t> original, framed;
  for_each_coord(e, [&](const auto& c) { original.push_back(map(c)); });
  ASSERT_EQ(rx.dims.size(), 4u);
  const std::array<std::int64_t, 4> fe{rx.dims[0], rx.dims[1], rx.dims[2], rx.dims[3]};
  for_each_coord(fe, [&](const auto& c) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < 4; ++d) off += c[d] * rx.strides[d];
    framed.push_back(off);
  });
  std::sort(original.begin(), original.end());
  std::sort(framed.begin(), framed.end());
  EXPECT_EQ(framed, original);
  // The dimension holding C in the framed tensor has C's stride in the original.
  for (std::size_t d = 0; d < param_dims.size(); ++d)
    if (param_dims[d] > 1) {
      EXPECT_EQ(rx.strides[d], map.stride(1)) << "dim " << d;
    }
}

TEST(CudnnPointwiseFrame, OnePositionBecomesPackedChannelsLast) {
  using form = cudnn::pointwise_frame::form;
  check_pointwise_frame<float, nchw>({2, 8, 1, 1}, form::channels_only, {2, 8, 1, 1}, {1, 8, 1, 1});
  check_pointwise_frame<float, ncdhw>({3, 8, 1, 1, 1}, form::channels_only, {3, 8, 1, 1}, {1, 8, 1, 1});
  check_pointwise_frame<half, nhwc>({3, 8, 1, 1}, form::channels_only, {3, 8, 1, 1}, {1, 8, 1, 1});
  // Everything else stays as it is (channels-first included: see pointwise_frame).
  check_pointwise_frame<float, nhwc>({2, 8, 5, 7}, form::as_is, {2, 8, 5, 7}, {1, 8, 1, 1});
  check_pointwise_frame<float, nchw>({2, 8, 5, 7}, form::as_is, {2, 8, 5, 7}, {1, 8, 1, 1});
  check_pointwise_frame<float, nhwc>({2, 1, 5, 7}, form::as_is, {2, 1, 5, 7}, {1, 1, 1, 1});
  // The conv bias-add fallback over a one-position output: y [N, K, 1, 1] channels-first.
  const cudnn::tensor_spec y =
      cudnn::spec_of(nchw_view<const float>(fake_ptr<const float>(), {2, 8, 1, 1}), cudnn::uid::y);
  EXPECT_EQ(y.strides, (std::vector<std::int64_t>{8, 1, 1, 1}));
  cudnn::graph_builder g =
      cudnn::bias_add_graph(y, cudnn::channel_spec(8, 4, dtype::float32, cudnn::uid::bias), CUDNN_DATA_FLOAT);
  ASSERT_TRUE(g.finalize_graph().finalized());
  EXPECT_EQ(read_tensor(g.tensor_by_uid(cudnn::uid::aux)).strides, (std::vector<std::int64_t>{8, 1, 8, 8}));
}

TEST(CudnnBatchNorm, ForwardBackwardGraphsReadBack) {
  check_bn_graphs<float, nchw>({2, 8, 5, 5});
  check_bn_graphs<float, nhwc>({2, 8, 5, 5});
  check_bn_graphs<half, nhwc>({2, 16, 5, 5});
  check_bn_graphs<half, nchw>({2, 16, 5, 5});
  check_bn_graphs<bfloat16, nhwc>({2, 16, 5, 5});
  check_bn_graphs<bfloat16, ndhwc>({2, 16, 3, 4, 5});
  check_bn_graphs<float, ncdhw>({2, 8, 3, 4, 5});
}

}  // namespace
