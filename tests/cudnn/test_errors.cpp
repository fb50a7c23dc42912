// Error paths: bad shapes, groups, dtypes and pointers are rejected by memfmt before any cuDNN call
// (the descriptor counter does not move), with the very messages of the shared validation
// (backends/validate.hpp) every backend runs; cuDNN and CUDA failures become memfmt::error carrying
// cuDNN's / CUDA's own text; the version check; the plan cache and its keys. No GPU needed.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>

#include <memfmt/backends/cudnn/backend.hpp>

#include "host_util.hpp"

namespace {

using namespace memfmt;
using cudnn::conv_direction;

using memfmt_test::expect_error_before_cudnn;
using memfmt_test::fake_ptr;

TEST(CudnnErrors, ConvShapesGroupsDtypeCheckedFirst) {
  nhwc_view<const half> x(fake_ptr<const half>(1), {2, 8, 6, 6});
  nhwc_view<const half> w(fake_ptr<const half>(2), {16, 8, 3, 3});
  nhwc_view<half> y_bad(fake_ptr<half>(3), {2, 16, 6, 6});  // needs padding 1 for 6x6
  expect_error_before_cudnn(
      [&] { cudnn::make_conv_problem(conv_direction::forward, x, w, y_bad, conv_params{}, false, nullptr); },
      errc::shape_mismatch, "[2, 16, 4, 4]");
  conv_params g3;
  g3.groups = 3;
  nhwc_view<half> y(fake_ptr<half>(3), {2, 16, 4, 4});
  expect_error_before_cudnn([&] { cudnn::make_conv_problem(conv_direction::forward, x, w, y, g3, false, nullptr); },
                            errc::invalid_argument, "groups = 3");
  conv_params g2;
  g2.groups = 2;  // weight has 8 input channels but C / groups = 4
  expect_error_before_cudnn(
      [&] { cudnn::make_conv_problem(conv_direction::backward_data, x, w, y, g2, false, nullptr); },
      errc::shape_mismatch, "C / groups");
  // int32 tensors: a valid shape, an unsupported element type.
  nhwc_view<const std::int32_t> xi(fake_ptr<const std::int32_t>(1), {2, 8, 6, 6});
  nhwc_view<const std::int32_t> wi(fake_ptr<const std::int32_t>(2), {16, 8, 3, 3});
  nhwc_view<std::int32_t> yi(fake_ptr<std::int32_t>(3), {2, 16, 4, 4});
  expect_error_before_cudnn(
      [&] { cudnn::make_conv_problem(conv_direction::forward, xi, wi, yi, conv_params{}, false, nullptr); },
      errc::unsupported_dtype, "int32");
  nhwc_view<const half> xnull(nullptr, {2, 8, 6, 6});
  expect_error_before_cudnn(
      [&] { cudnn::make_conv_problem(conv_direction::forward, xnull, w, y, conv_params{}, false, nullptr); },
      errc::null_pointer, "input x (nhwc, sizes [2, 8, 6, 6])");
  nhwc_view<const float> xmis(reinterpret_cast<const float*>(0x100002), {2, 8, 6, 6});
  nhwc_view<const float> wf(fake_ptr<const float>(2), {16, 8, 3, 3});
  nhwc_view<float> yf(fake_ptr<float>(3), {2, 16, 4, 4});
  expect_error_before_cudnn(
      [&] { cudnn::make_conv_problem(conv_direction::forward, xmis, wf, yf, conv_params{}, false, nullptr); },
      errc::misaligned, "aligned to 2 bytes");
  conv_params neg;
  neg.stride = {0, 1, 1};
  expect_error_before_cudnn([&] { cudnn::make_conv_problem(conv_direction::forward, x, w, y, neg, false, nullptr); },
                            errc::invalid_argument, "stride 0");
}

TEST(CudnnErrors, BatchNormParamsCheckedFirst) {
  nchw_view<const float> x(fake_ptr<const float>(1), {2, 4, 3, 3});
  nchw_view<float> y(fake_ptr<float>(2), {2, 4, 3, 3});
  nchw_view<float> y_bad(fake_ptr<float>(2), {2, 5, 3, 3});
  float* s = fake_ptr<float>(3);
  batch_norm_params p;
  p.epsilon = 0.0;
  expect_error_before_cudnn([&] { cudnn::make_bn_training_problem<float, nchw>(x, y, s, s, s, s, s, s, p); },
                            errc::invalid_argument, "epsilon");
  p = batch_norm_params{};
  p.momentum = 1.5;
  expect_error_before_cudnn([&] { cudnn::make_bn_inference_problem<float, nchw>(x, y, s, s, s, s, p); },
                            errc::invalid_argument, "momentum = 1.5");
  expect_error_before_cudnn(
      [&] { cudnn::make_bn_training_problem<float, nchw>(x, y_bad, s, s, s, s, s, s, batch_norm_params{}); },
      errc::shape_mismatch, "[2, 5, 3, 3]");
  // Running statistics are required, as in every backend.
  expect_error_before_cudnn(
      [&] { cudnn::make_bn_training_problem<float, nchw>(x, y, s, s, nullptr, nullptr, s, s, batch_norm_params{}); },
      errc::null_pointer, "running_mean is null but C = 4");
  nchw_view<const double> xd(fake_ptr<const double>(1), {2, 4, 3, 3});
  nchw_view<double> yd(fake_ptr<double>(2), {2, 4, 3, 3});
  double* sd = fake_ptr<double>(3);
  batch_norm_params relu;
  relu.fuse_relu = true;
  expect_error_before_cudnn(
      [&] { cudnn::make_bn_backward_problem<double, nchw>(xd, xd, yd, sd, sd, sd, sd, sd, relu); }, errc::null_pointer,
      "fuse_relu needs the forward output y");
}

// The cuDNN problems run the checks every backend shares (backends/validate.hpp) first: the same
// bad input reads exactly as the shared validation says, and no cuDNN descriptor was made.
template <class Fn>
memfmt::error error_of(Fn&& fn) {
  try {
    fn();
  } catch (const memfmt::error& e) {
    return e;
  }
  ADD_FAILURE() << "no memfmt::error thrown";
  return memfmt::error(errc::unsupported, "<nothing thrown>");
}

template <class CudnnFn, class SharedFn>
void expect_same_as_shared(const char* label, CudnnFn&& cudnn_fn, SharedFn&& shared_fn, errc code,
                           const std::string& needle) {
  SCOPED_TRACE(label);
  const std::int64_t before = cudnn::descriptor::created_count();
  const memfmt::error mine = error_of(cudnn_fn);
  EXPECT_EQ(cudnn::descriptor::created_count(), before) << "a cuDNN descriptor was created before validation failed";
  const memfmt::error shared = error_of(shared_fn);
  EXPECT_EQ(shared.code(), code) << shared.what();
  EXPECT_NE(std::string(shared.what()).find(needle), std::string::npos) << shared.what();
  EXPECT_EQ(mine.code(), shared.code()) << mine.what();
  EXPECT_EQ(std::string(mine.what()), std::string(shared.what()));
}

TEST(CudnnErrors, ConvMessagesAreTheSharedOnes) {
  // x [2, 8, 6, 6], w [16, 4, 3, 3] with groups 2, padding 1: y [2, 16, 6, 6].
  conv_params p;
  p.groups = 2;
  p.padding = {1, 1, 1};
  nhwc_view<const half> x(fake_ptr<const half>(1), {2, 8, 6, 6});
  nchw_view<const half> w(fake_ptr<const half>(2), {16, 4, 3, 3});
  nhwc_view<half> y_bad(fake_ptr<half>(3), {2, 16, 5, 6});
  expect_same_as_shared(
      "forward y sizes",
      [&] { cudnn::make_conv_problem(conv_direction::forward, x, w, y_bad, p, true, fake_ptr<const half>(4)); },
      [&] { validate_conv_forward(x, w, y_bad, p); }, errc::shape_mismatch, "[2, 16, 6, 6]");
  nhwc_view<half> dx(fake_ptr<half>(5), {2, 8, 6, 6});
  nhwc_view<const half> dy_bad(fake_ptr<const half>(6), {2, 16, 6, 5});
  expect_same_as_shared(
      "backward data dy sizes",
      [&] { cudnn::make_conv_problem(conv_direction::backward_data, dx, w, dy_bad, p, false, nullptr); },
      [&] { validate_conv_backward_data(dy_bad, w, dx, p); }, errc::shape_mismatch, "output gradient dy");
  nchw_view<half> dw_null(nullptr, {16, 4, 3, 3});
  nhwc_view<const half> dy(fake_ptr<const half>(6), {2, 16, 6, 6});
  expect_same_as_shared(
      "backward weights null dw",
      [&] { cudnn::make_conv_problem(conv_direction::backward_weights, x, dw_null, dy, p, false, nullptr); },
      [&] { validate_conv_backward_weights(x, dy, dw_null, p); }, errc::null_pointer, "weight gradient dw");
  conv_params g3 = p;
  g3.groups = 3;
  nhwc_view<half> y(fake_ptr<half>(3), {2, 16, 6, 6});
  expect_same_as_shared(
      "groups 3", [&] { cudnn::make_conv_problem(conv_direction::forward, x, w, y, g3, false, nullptr); },
      [&] { validate_conv_forward(x, w, y, g3); }, errc::invalid_argument, "groups = 3");
  // Shared checks come before cuDNN's own: a bad shape in an unsupported dtype reads as the shape error.
  nhwc_view<const std::int32_t> xi(fake_ptr<const std::int32_t>(1), {2, 8, 6, 6});
  nchw_view<const std::int32_t> wi(fake_ptr<const std::int32_t>(2), {16, 4, 3, 3});
  nhwc_view<std::int32_t> yi_bad(fake_ptr<std::int32_t>(3), {2, 16, 4, 4});
  expect_same_as_shared(
      "int32 with a bad shape",
      [&] { cudnn::make_conv_problem(conv_direction::forward, xi, wi, yi_bad, p, false, nullptr); },
      [&] { validate_conv_forward(xi, wi, yi_bad, p); }, errc::shape_mismatch, "[2, 16, 4, 4]");
}

TEST(CudnnErrors, BatchNormMessagesAreTheSharedOnes) {
  using cview = ndhwc_view<const float>;
  using view = ndhwc_view<float>;
  const std::array<std::int64_t, 5> e{2, 4, 2, 3, 3};
  cview x(fake_ptr<const float>(1), e);
  view y(fake_ptr<float>(2), e);
  float* s = fake_ptr<float>(3);
  batch_norm_params p;
  cview res_bad(fake_ptr<const float>(4), {2, 4, 2, 3, 1});
  expect_same_as_shared(
      "training residual sizes",
      [&] { cudnn::make_bn_training_problem<float, ndhwc>(x, y, s, s, s, s, s, s, p, res_bad); },
      [&] { validate_batch_norm_forward_training(x, y, s, s, s, s, s, s, p, res_bad); }, errc::shape_mismatch,
      "[2, 4, 2, 3, 1]");
  cview x1(fake_ptr<const float>(1), {1, 4, 1, 1, 1});
  view y1(fake_ptr<float>(2), {1, 4, 1, 1, 1});
  expect_same_as_shared(
      "training one value per channel",
      [&] { cudnn::make_bn_training_problem<float, ndhwc>(x1, y1, s, s, s, s, s, s, p); },
      [&] { validate_batch_norm_forward_training(x1, y1, s, s, s, s, s, s, p, cview{}); }, errc::invalid_argument,
      "1 value(s) per channel");
  expect_same_as_shared(
      "inference null running_var", [&] { cudnn::make_bn_inference_problem<float, ndhwc>(x, y, s, s, s, nullptr, p); },
      [&] { validate_batch_norm_forward_inference(x, y, s, s, s, nullptr, p, cview{}); }, errc::null_pointer,
      "running_var");
  batch_norm_params bad = p;
  bad.momentum = -0.5;
  expect_same_as_shared(
      "inference momentum", [&] { cudnn::make_bn_inference_problem<float, ndhwc>(x, y, s, s, s, s, bad); },
      [&] { validate_batch_norm_forward_inference(x, y, s, s, s, s, bad, cview{}); }, errc::invalid_argument,
      "momentum = -0.5");
  view dres_bad(fake_ptr<float>(5), {2, 4, 2, 2, 3});
  expect_same_as_shared(
      "backward dresidual sizes",
      [&] { cudnn::make_bn_backward_problem<float, ndhwc>(x, x, y, s, s, s, s, s, p, cview{}, dres_bad); },
      [&] { validate_batch_norm_backward(x, x, y, s, s, s, s, s, p, cview{}, dres_bad); }, errc::shape_mismatch,
      "residual gradient dresidual");
  expect_same_as_shared(
      "backward null dx",
      [&] { cudnn::make_bn_backward_problem<float, ndhwc>(x, x, view(nullptr, e), s, s, s, s, s, p); },
      [&] { validate_batch_norm_backward(x, x, view(nullptr, e), s, s, s, s, s, p, cview{}, view{}); },
      errc::null_pointer, "input gradient dx");
}

TEST(CudnnErrors, CudnnFailureCarriesCudnnText) {
  cudnn::tensor_spec s = cudnn::channel_spec(8, 4, dtype::float32, 1);
  s.alignment = 2;  // less than sizeof(float): cuDNN refuses at finalize
  try {
    cudnn::make_tensor(s);
    ADD_FAILURE() << "cuDNN accepted a 2-byte aligned float tensor";
  } catch (const memfmt::error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), errc::backend_failure);
    EXPECT_NE(m.find("CUDNN_STATUS_BAD_PARAM"), std::string::npos) << m;  // cudnnGetErrorString
    EXPECT_NE(m.find("cuDNN says:"), std::string::npos) << m;             // cudnnGetLastErrorString
    EXPECT_NE(m.find("finalize tensor descriptor"), std::string::npos) << m;
  }
  try {
    cudnn::check_cuda(cudaErrorInvalidValue, "cudaMemcpy (test)");
    ADD_FAILURE();
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), errc::backend_failure);
    EXPECT_NE(std::string(e.what()).find(cudaGetErrorString(cudaErrorInvalidValue)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cudaMemcpy (test)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cudnn::to_cudnn(dtype::int8), memfmt::error);
  EXPECT_EQ(cudnn::to_cudnn(dtype::bfloat16), CUDNN_DATA_BFLOAT16);
}

// Without a handle there is no device to describe: a clear error, before any plan is built.
TEST(CudnnErrors, DevicePropertiesNeedAHandle) {
  try {
    cudnn::device_properties(nullptr);
    ADD_FAILURE() << "a device-properties descriptor was built from a null handle";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), errc::backend_failure);
    EXPECT_NE(std::string(e.what()).find("CUDNN_ATTR_DEVICEPROP_HANDLE"), std::string::npos) << e.what();
  }
}

TEST(CudnnVersion, LoadedMatchesCompiledMajor) {
  const auto r = cudnn::check_version();
  EXPECT_EQ(r.compiled.major, CUDNN_MAJOR);
  EXPECT_EQ(r.compiled.minor, CUDNN_MINOR);
  const auto loaded = cudnn::version::decode(cudnnGetVersion());
  EXPECT_EQ(r.loaded.major, loaded.major);
  EXPECT_EQ(r.loaded.minor, loaded.minor);
  // The comparison itself, on synthetic pairs.
  EXPECT_THROW(cudnn::compare_versions(91900, 80906), memfmt::error);
  try {
    cudnn::compare_versions(91900, 100100);
    ADD_FAILURE() << "a major mismatch was accepted";
  } catch (const memfmt::error& e) {
    EXPECT_NE(std::string(e.what()).find("9.19.0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("10.1.0"), std::string::npos) << e.what();
  }
  const auto older = cudnn::compare_versions(91900, 91002);
  EXPECT_TRUE(older.loaded_older);
  EXPECT_NE(older.warning.find("9.10.2"), std::string::npos);
  const auto newer = cudnn::compare_versions(91000, 91900);
  EXPECT_FALSE(newer.loaded_older);
  EXPECT_TRUE(newer.warning.empty());
}

TEST(CudnnVersion, DevicePropertiesNeedCudnn98) {
  try {
    cudnn::require_device_properties(cudnn::version::decode(90702));
    ADD_FAILURE() << "cuDNN 9.7.2 accepted";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), errc::backend_failure);
    EXPECT_NE(std::string(e.what()).find("9.7.2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("9.8"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(cudnn::require_device_properties(cudnn::version::decode(90800)));
  EXPECT_NO_THROW(cudnn::require_device_properties(cudnn::version::decode(91900)));
  EXPECT_NO_THROW(cudnn::require_device_properties(cudnn::version::decode(cudnnGetVersion())));  // this machine's
}

TEST(CudnnBackend, ConstructionWithoutGpuIsAClearError) {
  if (cudnn::device_count() > 0) GTEST_SKIP() << "a GPU is present: construction succeeds (covered by the GPU tests)";
  try {
    cudnn::backend be;
    ADD_FAILURE() << "cudnn::backend constructed without a GPU";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), errc::backend_failure);
    EXPECT_NE(std::string(e.what()).find("cudnnCreate"), std::string::npos) << e.what();
  }
}

TEST(CudnnPlanCache, LeastRecentlyUsed) {
  cudnn::plan_cache<int> c(2);
  EXPECT_EQ(c.find("a"), nullptr);
  c.insert("a", 1);
  c.insert("b", 2);
  ASSERT_NE(c.find("a"), nullptr);  // a is now the most recent
  c.insert("c", 3);                 // evicts b
  EXPECT_EQ(c.find("b"), nullptr);
  ASSERT_NE(c.find("a"), nullptr);
  EXPECT_EQ(*c.find("a"), 1);
  EXPECT_EQ(*c.find("c"), 3);
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.hits(), 4u);
  EXPECT_EQ(c.misses(), 2u);
  c.insert("c", 30);
  EXPECT_EQ(*c.find("c"), 30);
  EXPECT_EQ(c.size(), 2u);
}

TEST(CudnnPlanCache, KeysSeparateEveryPlanRelevantDifference) {
  auto key = [](auto x, auto w, auto y, conv_params p) {
    return cudnn::make_conv_problem(conv_direction::forward, x, w, y, p, false, nullptr).key();
  };
  conv_params p;
  p.padding = {1, 1, 1};
  const std::string base = key(nhwc_view<const half>(fake_ptr<const half>(1), {2, 8, 6, 6}),
                               nhwc_view<const half>(fake_ptr<const half>(2), {16, 8, 3, 3}),
                               nhwc_view<half>(fake_ptr<half>(3), {2, 16, 6, 6}), p);
  EXPECT_EQ(base, key(nhwc_view<const half>(fake_ptr<const half>(4), {2, 8, 6, 6}),
                      nhwc_view<const half>(fake_ptr<const half>(5), {16, 8, 3, 3}),
                      nhwc_view<half>(fake_ptr<half>(6), {2, 16, 6, 6}), p));  // other buffers, same problem
  EXPECT_NE(base, key(nchw_view<const half>(fake_ptr<const half>(1), {2, 8, 6, 6}),
                      nhwc_view<const half>(fake_ptr<const half>(2), {16, 8, 3, 3}),
                      nhwc_view<half>(fake_ptr<half>(3), {2, 16, 6, 6}), p));  // strides differ
  EXPECT_NE(base, key(nhwc_view<const bfloat16>(fake_ptr<const bfloat16>(1), {2, 8, 6, 6}),
                      nhwc_view<const bfloat16>(fake_ptr<const bfloat16>(2), {16, 8, 3, 3}),
                      nhwc_view<bfloat16>(fake_ptr<bfloat16>(3), {2, 16, 6, 6}), p));  // dtype differs
  conv_params d = p;
  d.dilation = {1, 1, 1};
  d.padding = {2, 2, 2};
  d.dilation = {2, 2, 2};
  EXPECT_NE(base, key(nhwc_view<const half>(fake_ptr<const half>(1), {2, 8, 6, 6}),
                      nhwc_view<const half>(fake_ptr<const half>(2), {16, 8, 3, 3}),
                      nhwc_view<half>(fake_ptr<half>(3), {2, 16, 6, 6}), d));  // attributes differ
  EXPECT_NE(base, key(nhwc_view<const half>(fake_ptr<const half>(1) + 1, {2, 8, 6, 6}),
                      nhwc_view<const half>(fake_ptr<const half>(2), {16, 8, 3, 3}),
                      nhwc_view<half>(fake_ptr<half>(3), {2, 16, 6, 6}), p));  // alignment differs
}

}  // namespace
