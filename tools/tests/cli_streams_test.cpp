// memfmt_cli::run in-process: `plan` and `run` answer on the output stream they are given and
// report progress and errors on the error stream, writing nothing to std::cout or std::cerr, with
// the binary's exit codes (1 and a message saying why). cuDNN: without a GPU, or in a build without
// cuDNN, `plan --calibrate cudnn` and `run --backend cudnn` are such errors; with a GPU, the plan is
// calibrated on it and the run's outputs equal the reference backend's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "memfmt/graph/network.hpp"
#include "memfmt/io/network_json.hpp"
#include "memfmt/io/timing_cache_json.hpp"
#ifdef MEMFMT_CLI_TEST_HAVE_CUDNN
#include "memfmt/runtime/cudnn/calibrate.hpp"
#endif
#ifdef MEMFMT_CLI_TEST_HAVE_SAFETENSORS
#include "memfmt/io/safetensors.hpp"
#endif

namespace {

namespace fs = std::filesystem;
using memfmt::format_family;

struct result {
  int exit_code = -1;
  std::string out, err, leaked;  // leaked: what reached std::cout or std::cerr
};

// Runs `memfmt args...` with string streams, catching anything written to the process's streams.
result run(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"memfmt"};
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err, leaked;
  std::streambuf* cout_buf = std::cout.rdbuf(leaked.rdbuf());
  std::streambuf* cerr_buf = std::cerr.rdbuf(leaked.rdbuf());
  result r;
  r.exit_code = memfmt_cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  std::cout.rdbuf(cout_buf);
  std::cerr.rdbuf(cerr_buf);
  r.out = out.str();
  r.err = err.str();
  r.leaked = leaked.str();
  return r;
}

class CliStreams : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("memfmt_cli_streams_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    memfmt::graph::network net;
    const auto x = net.input("x", {1, 4, 8, 8}, memfmt::dtype::float32, format_family::channels_first);
    const auto c = net.conv("conv", x, memfmt::graph::conv_spec(8, 3, 1, 1));
    net.output("y", net.activation("relu", c, memfmt::activation::relu), format_family::channels_first);
    file_ = (dir_ / "net.json").string();
    memfmt::io::write_network_file(file_, net);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string file_;
};

TEST_F(CliStreams, PlanAnswersOnItsOutputStream) {
  result r = run({"plan", file_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("network " + file_ + " (network JSON, 4 layers), policy optimal\n", 0), 0u) << r.out;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.leaked, "");

  r = run({"plan", file_, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("format"), "memfmt.plan") << r.out;
  EXPECT_EQ(r.leaked, "");

  // The calibration summary is progress: the error stream, beside the plan on the output one.
  r = run({"plan", file_, "--calibrate", "reference", "--compare"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("network " + file_), std::string::npos) << r.out;
  EXPECT_EQ(r.err.rfind("memfmt plan: calibrated on ", 0), 0u) << r.err;
  EXPECT_EQ(r.leaked, "");
}

TEST_F(CliStreams, RunAnswersOnItsOutputStream) {
  const result r = run({"run", file_, "--random", "--repeat", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("model    " + file_, 0), 0u) << r.out;
  EXPECT_EQ(r.leaked, "");
}

// Whether cuDNN runs here: this build has it and a CUDA device is present.
bool cudnn_runs_here() {
#ifdef MEMFMT_CLI_TEST_HAVE_CUDNN
  return memfmt::cudnn::device_count() > 0;
#else
  return false;
#endif
}

// Without a GPU (or without cuDNN in the build): an error (exit 1) saying why and what to do
// instead, on the error stream only, as a missing file is.
TEST_F(CliStreams, CudnnWithoutAGpuIsAClearError) {
  if (cudnn_runs_here()) GTEST_SKIP() << "a CUDA device is present: cuDNN calibrates and runs";
#ifdef MEMFMT_CLI_TEST_HAVE_CUDNN
  const std::string plan_why =
      "memfmt plan: --calibrate cudnn: cuDNN calibration: no CUDA device (cudaGetDeviceCount returned ";
  const std::string run_why = "memfmt run: --backend cudnn: no CUDA device (cudaGetDeviceCount returned ";
#else
  const std::string plan_why =
      "memfmt plan: --calibrate cudnn: this build of memfmt cannot calibrate on cudnn (built without cuDNN";
  const std::string run_why = "memfmt run: --backend cudnn: this memfmt was built without cuDNN";
#endif
  result r = run({"plan", file_, "--calibrate", "cudnn"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind(plan_why, 0), 0u) << r.err;
  EXPECT_NE(r.err.find("--priors data/priors/cudnn_gpu.json"), std::string::npos) << r.err;
  EXPECT_EQ(r.leaked, "");

  r = run({"run", file_, "--backend", "cudnn", "--random", "--repeat", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind(run_why, 0), 0u) << r.err;
  EXPECT_EQ(r.leaked, "");
}

// On a GPU: the cache is cuDNN's (this device, the loaded library), every layer measured; the run
// takes host inputs and gives host outputs equal to the reference backend's.
TEST_F(CliStreams, CudnnCalibratesAndRunsOnAGpu) {
  if (!cudnn_runs_here()) GTEST_SKIP() << "no CUDA device (or no cuDNN in this build): cuDNN not run";
#ifdef MEMFMT_CLI_TEST_HAVE_CUDNN
  const std::string cache = (dir_ / "cudnn.json").string();
  result r = run({"plan", file_, "--calibrate", "cudnn", "--cache", cache});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.rfind("memfmt plan: calibrated on ", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find("prior kept"), std::string::npos) << r.err;
  const memfmt::graph::timing_cache c = memfmt::io::read_timing_cache_file(cache);
  EXPECT_EQ(c.key(), memfmt::cudnn::device_calibration_key());
  EXPECT_EQ(c.layers().size(), 2u);  // the conv and the relu
  EXPECT_EQ(r.leaked, "");

  r = run({"run", file_, "--backend", "cudnn", "--random", "--repeat", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("backend"), "cudnn") << r.out;
#ifdef MEMFMT_CLI_TEST_HAVE_SAFETENSORS
  const std::string gpu = (dir_ / "gpu.safetensors").string(), host = (dir_ / "host.safetensors").string();
  ASSERT_EQ(run({"run", file_, "--backend", "cudnn", "--repeat", "1", "--output", gpu}).exit_code, 0);
  ASSERT_EQ(run({"run", file_, "--backend", "reference", "--repeat", "1", "--output", host}).exit_code, 0);
  const auto got = memfmt::io::load_safetensors(gpu).at("y").values<float>("y");
  const auto want = memfmt::io::load_safetensors(host).at("y").values<float>("y");
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-2) << "y[" << i << "]";  // TF32
#endif
#endif
}

TEST_F(CliStreams, ErrorsGoToTheErrorStream) {
  result r = run({"plan", (dir_ / "absent.json").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("memfmt plan: ", 0), 0u) << r.err;
  EXPECT_EQ(r.leaked, "");

  r = run({"run", file_, "--policy", "fastest"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--policy"), std::string::npos) << r.err;
  EXPECT_EQ(r.leaked, "");
}

}  // namespace
