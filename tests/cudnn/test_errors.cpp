// Error paths: bad shapes, groups, dtypes and pointers are rejected by memfmt before any cuDNN call
// (the descriptor counter does not move); cuDNN and CUDA failures become memfmt::error carrying
// cuDNN's / CUDA's own text; the version check; the plan cache and its keys. No GPU needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include <memfmt/backends/cudnn/backend.hpp>

namespace {

using namespace memfmt;
using cudnn::conv_direction;

template <class T>
T* fake_ptr(std::uintptr_t slot = 1) {
  return reinterpret_cast<T*>(slot * 0x100000u);
}

template <class Fn>
void expect_error_before_cudnn(Fn&& fn, errc code, const std::string& needle) {
  const std::int64_t before = cudnn::descriptor::created_count();
  try {
    fn();
    ADD_FAILURE() << "no error thrown (expected one mentioning '" << needle << "')";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  EXPECT_EQ(cudnn::descriptor::created_count(), before) << "a cuDNN descriptor was created before validation failed";
}

TEST(CudnnErrors, ConvShapesGroupsDtypeCheckedFirst) {
  nhwc_view<const half> x(fake_ptr<const half>(1), {2, 8, 6, 6});
  nhwc_view<const half> w(fake_ptr<const half>(2), {16, 8, 3, 3});
  nhwc_view<half> y_bad(fake_ptr<half>(3), {2, 16, 6, 6});  // needs padding 1 for 6x6
  expect_error_before_cudnn([&] { cudnn::make_conv_problem(conv_direction::forward, x, w, y_bad, conv_params{}, false, nullptr); },
                            errc::shape_mismatch, "[2, 16, 4, 4]");
  conv_params g3;
  g3.groups = 3;
  nhwc_view<half> y(fake_ptr<half>(3), {2, 16, 4, 4});
  expect_error_before_cudnn([&] { cudnn::make_conv_problem(conv_direction::forward, x, w, y, g3, false, nullptr); },
                            errc::invalid_argument, "groups = 3");
  conv_params g2;
  g2.groups = 2;  // weight has 8 input channels but C / groups = 4
  expect_error_before_cudnn([&] { cudnn::make_conv_problem(conv_direction::backward_data, x, w, y, g2, false, nullptr); },
                            errc::shape_mismatch, "C / groups");
  // int32 tensors: a valid shape, an unsupported element type.
  nhwc_view<const std::int32_t> xi(fake_ptr<const std::int32_t>(1), {2, 8, 6, 6});
  nhwc_view<const std::int32_t> wi(fake_ptr<const std::int32_t>(2), {16, 8, 3, 3});
  nhwc_view<std::int32_t> yi(fake_ptr<std::int32_t>(3), {2, 16, 4, 4});
  expect_error_before_cudnn([&] { cudnn::make_conv_problem(conv_direction::forward, xi, wi, yi, conv_params{}, false, nullptr); },
                            errc::unsupported_dtype, "int32");
  nhwc_view<const half> xnull(nullptr, {2, 8, 6, 6});
  expect_error_before_cudnn([&] { cudnn::make_conv_problem(conv_direction::forward, xnull, w, y, conv_params{}, false, nullptr); },
                            errc::null_pointer, "x [2, 8, 6, 6]");
  nhwc_view<const float> xmis(reinterpret_cast<const float*>(0x100002), {2, 8, 6, 6});
  nhwc_view<const float> wf(fake_ptr<const float>(2), {16, 8, 3, 3});
  nhwc_view<float> yf(fake_ptr<float>(3), {2, 16, 4, 4});
  expect_error_before_cudnn([&] { cudnn::make_conv_problem(conv_direction::forward, xmis, wf, yf, conv_params{}, false, nullptr); },
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
  batch_norm_params p;
  p.epsilon = 0.0;
  expect_error_before_cudnn([&] { cudnn::make_bn_problem<float, nchw>("bn", x, {}, y, p); }, errc::invalid_argument,
                            "epsilon");
  p = batch_norm_params{};
  p.momentum = 1.5;
  expect_error_before_cudnn([&] { cudnn::make_bn_problem<float, nchw>("bn", x, {}, y, p); }, errc::invalid_argument,
                            "momentum = 1.5");
  expect_error_before_cudnn([&] { cudnn::make_bn_problem<float, nchw>("bn", x, {}, y_bad, batch_norm_params{}); },
                            errc::shape_mismatch, "[2, 5, 3, 3]");
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
  c.insert("c", 3);                  // evicts b
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
