// The cuDNN timing-cache key (runtime/cudnn/calibrate.hpp): without a CUDA device, a clear error
// naming what cudaGetDeviceCount returned; with one, the GPU's name and compute capability as
// cudaGetDeviceProperties reports them, backend "cudnn" and the loaded library's version.
#include <gtest/gtest.h>

#include <string>

#include <memfmt/runtime/cudnn/calibrate.hpp>

namespace {

using namespace memfmt;

TEST(CudnnCalibrationKey, WithoutADeviceIsAClearError) {
  if (cudnn::device_count() > 0) GTEST_SKIP() << "a CUDA device is present: the no-device error cannot be raised";
  try {
    (void)cudnn::device_calibration_key();  // the current device
    FAIL() << "device_calibration_key() returned without a CUDA device";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
    const std::string what = e.what();
    EXPECT_NE(what.find("no CUDA device"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaGetDeviceCount returned"), std::string::npos) << what;
  }
  EXPECT_THROW((void)cudnn::device_calibration_key(0), memfmt::error);  // an explicit device, the same
}

TEST(CudnnCalibrationKey, NamesTheGpuItsCapabilityAndTheLoadedCudnn) {
  if (cudnn::device_count() == 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports none or fails)";
  cudaDeviceProp p{};
  ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  const graph::cache_key k = cudnn::device_calibration_key(0);
  EXPECT_EQ(k.device, std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ")");
  EXPECT_EQ(k.backend, "cudnn");
  EXPECT_EQ(k.backend_version, cudnn::check_version().loaded.to_string());
  cudnn::backend b;
  EXPECT_EQ(calibration_key(b), cudnn::device_calibration_key(b.device()));
  EXPECT_THROW((void)cudnn::device_calibration_key(cudnn::device_count()), memfmt::error);
}

}  // namespace
