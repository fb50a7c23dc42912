// `memfmt plan` and `memfmt run` on hostile input: every case of the second hostile-input probe
// (files that crashed the tool, ended it with an internal error, cost far more than their size, or
// were accepted silently), each answered with exit 1 or 2 and a message naming the value. The
// inputs are made here: small files, sparse files for the large ones, models built with the ONNX
// protobuf API.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "memfmt/graph/network.hpp"
#include "memfmt/io/network_json.hpp"
#include "memfmt/io/safetensors.hpp"
#include "memfmt/io/timing_cache_json.hpp"
#include "onnx_builder.hpp"
#include "run_cli.hpp"

namespace {

namespace fs = std::filesystem;
using memfmt_test::onnx_builder;
using memfmt_test::run_cli;
using dims = std::vector<std::int64_t>;

class CliHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("memfmt_cli_hostile_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }
  std::string model(const std::string& name, const onnx_builder& b) const {
    std::string bytes;
    b.model().SerializeToString(&bytes);
    return write(name, bytes);
  }
  // A small network file: input, relu, output.
  std::string network_file(const std::string& name) const {
    memfmt::graph::network net;
    const auto x = net.input("x", {1, 3, 4, 4}, memfmt::dtype::float32, memfmt::format_family::channels_first);
    net.output("y", net.relu("r", x), memfmt::format_family::channels_first);
    memfmt::io::write_network_file(path(name), net);
    return path(name);
  }
  fs::path dir_;
};

// The tool refused the input with exit `code`, its message naming every fragment, and did not
// crash, abort or report an internal error.
void expect_refused(const memfmt_test::run_result& r, int code, const std::vector<std::string>& fragments,
                    const std::string& what) {
  EXPECT_EQ(r.exit_code, code) << what << ":\n" << r.output.substr(0, 2000);
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << what << ":\n" << r.output.substr(0, 2000);
  for (const auto& f : fragments)
    EXPECT_NE(r.output.find(f), std::string::npos) << what << ": '" << f << "' not in:\n" << r.output.substr(0, 2000);
}

std::string safetensors_bytes(const std::string& header) {
  std::string f;
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i, n >>= 8) f.push_back(static_cast<char>(n & 0xff));
  return f + header;
}

// 1. Models whose shape inference crashed libonnx 1.12 (Gemm at opset 6 with B of rank 1 or 0).
TEST_F(CliHostile, GraphsThatCrashedShapeInferenceAreRefused) {
  for (const dims& b_shape : {dims{4}, dims{}}) {
    onnx_builder b(6);
    b.input("x", {1, 4}).floats("B", b_shape).floats("C", {4}).output("y");
    b.node("Gemm", {"x", "B", "C"}, {"y"}, "gemm");
    const std::string f = model("gemm.onnx", b);
    for (const char* cmd : {"plan", "run"})
      expect_refused(run_cli({cmd, f}), 1, {"'gemm' (Gemm)", "not 2"},
                     std::string(cmd) + " Gemm B rank " + std::to_string(b_shape.size()));
  }
}

// 2-3. 100,000 nested arrays in a safetensors header or a network file.
TEST_F(CliHostile, DeepJsonIsRefusedWithAShortMessage) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string net = network_file("net.json");
  for (const std::string& header :
       {"{\"__metadata__\": " + deep + "}",
        std::string(R"({"x": {"dtype": "F32", "shape": )") + deep + R"(, "data_offsets": [0, 0]}})"}) {
    const std::string f = write("deep.safetensors", safetensors_bytes(header));
    for (const char* flag : {"--input", "--weights"}) {
      const auto r = run_cli({"run", net, flag, f});
      expect_refused(r, 1, {flag, "deeper than 64"}, flag);
      EXPECT_LT(r.output.size(), 600u) << r.output.substr(0, 1000);
    }
  }
  const std::string deep_net =
      write("deep.json", R"({"format": "memfmt.network", "version": 1, "nodes": [{"extents": )" + deep + "}]}");
  for (const char* cmd : {"plan", "run"}) {
    const auto r = run_cli({cmd, deep_net});
    expect_refused(r, 1, {"deep.json", "deeper than 64"}, cmd);
    EXPECT_LT(r.output.size(), 600u) << r.output.substr(0, 1000);
  }
}

// 4. Names that are not UTF-8: refused at import, not an internal error when JSON is written.
TEST_F(CliHostile, NamesThatAreNotUtf8AreRefusedAtImport) {
  onnx_builder b;
  b.input("x", {1, 3, 4, 4}).output("y\xFF");
  b.node("Relu", {"x"}, {"y\xFF"}, "relu");
  const std::string f = model("names.onnx", b);
  expect_refused(run_cli({"run", f, "--output", path("out.safetensors")}), 1, {"'y\\xFF'", "not UTF-8"},
                 "run --output");
  expect_refused(run_cli({"plan", f, "--json"}), 1, {"not UTF-8"}, "plan --json");
}

// 5-6. Directories, devices, and a 2 GiB file of zeros: refused by name or by the first bytes.
TEST_F(CliHostile, FilesThatAreNotRegularOrFarLargerThanDeclared) {
  const std::string net = network_file("net.json");
  expect_refused(run_cli({"run", net, "--input", dir_.string()}), 1, {"--input", "is a directory"}, "directory");
  expect_refused(run_cli({"plan", dir_.string() + "/"}), 1, {"is a directory"}, "plan directory");
  if (fs::exists("/dev/zero")) {
    expect_refused(run_cli({"run", net, "--weights", "/dev/zero"}), 1, {"/dev/zero", "character device"},
                   "/dev/zero weights");
    expect_refused(run_cli({"run", net, "--input", "/dev/zero"}), 1, {"/dev/zero", "character device"},
                   "/dev/zero input");
    expect_refused(run_cli({"plan", "/dev/zero"}), 1, {"/dev/zero", "character device"}, "/dev/zero network");
  }
  const std::string zeros = path("zeros.safetensors");
  std::ofstream(zeros, std::ios::binary).flush();
  fs::resize_file(zeros, std::uint64_t{2} << 30);
  const auto t0 = std::chrono::steady_clock::now();
  expect_refused(run_cli({"run", net, "--input", zeros}), 1, {"does not start with '{'"}, "2 GiB of zeros");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  const std::string onnx_zeros = path("zeros.onnx");
  std::ofstream(onnx_zeros, std::ios::binary).flush();
  fs::resize_file(onnx_zeros, std::uint64_t{1} << 30);
  expect_refused(run_cli({"plan", onnx_zeros}), 1, {"zeros.onnx", "not a serialized ONNX ModelProto"},
                 "1 GiB of zeros");
}

// 8. Single assignment: two writers of one value, two graph inputs of one name.
TEST_F(CliHostile, ValuesWrittenTwiceAreRefused) {
  onnx_builder b;
  b.input("x", {1, 3, 4, 4}).output("y");
  b.node("Relu", {"x"}, {"y"}, "a").node("Sigmoid", {"x"}, {"y"}, "b");
  expect_refused(run_cli({"run", model("twice.onnx", b)}), 1, {"'b' (Sigmoid)", "'y'", "assigned once"}, "two writers");
  onnx_builder c;
  c.input("x", {1, 3, 4, 4}).input("x", {1, 3, 4, 4}).output("y");
  c.node("Relu", {"x"}, {"y"}, "r");
  expect_refused(run_cli({"plan", model("inputs.onnx", c)}), 1, {"graph input 'x' is listed twice"}, "duplicate input");
}

// 9. Silent acceptance: a NUL byte, opsets, --batch past 64 bits, --output over the input, models
// with nothing in them.
TEST_F(CliHostile, WhatWasAcceptedSilentlyIsRefused) {
  const std::string net = network_file("net.json");
  const std::string cache = path("cache.json");
  ASSERT_EQ(run_cli({"plan", net, "--calibrate", "reference", "--cache", cache}).exit_code, 0);
  std::string text;
  {
    std::ifstream in(cache, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  write("cache.json", text + std::string("\0junk", 5));
  expect_refused(run_cli({"plan", net, "--calibrate", "reference", "--cache", cache}), 1, {"cache.json", "NUL byte"},
                 "NUL");
  EXPECT_EQ(fs::file_size(cache), text.size() + 5) << "the refused cache was rewritten";

  for (const std::int64_t opset : {std::int64_t{99}, std::int64_t{-5}}) {
    onnx_builder b(opset);
    b.input("x", {1, 3, 4, 4}).output("y");
    b.node("Relu", {"x"}, {"y"}, "r");
    expect_refused(run_cli({"plan", model("opset.onnx", b)}), 1, {"opset " + std::to_string(opset), "1 to 21"},
                   "opset " + std::to_string(opset));
  }
  expect_refused(run_cli({"run", net, "--batch", "9223372036854775808"}), 2, {"--batch", "does not fit in 64 bits"},
                 "batch");
  expect_refused(run_cli({"run", net, "--threads", "99999999999"}), 2, {"--threads", "does not fit in 32 bits"},
                 "threads");

  memfmt::graph::parameter_store in;
  in.insert<float>("x", {1, 3, 4, 4}, std::vector<float>(48, 1.f));
  memfmt::io::save_safetensors(in, path("in.safetensors"));
  expect_refused(run_cli({"run", net, "--input", path("in.safetensors"), "--output", path("in.safetensors")}), 2,
                 {"--output", "is --input", "overwrite"}, "--output = --input");
  expect_refused(run_cli({"run", net, "--output", net}), 2, {"--output", "is the model"}, "--output = model");
  EXPECT_EQ(memfmt::io::load_safetensors(path("in.safetensors")).size(), 1u);

  onnx_builder no_outputs;
  no_outputs.input("x", {1, 3, 4, 4});
  no_outputs.node("Relu", {"x"}, {"y"}, "r");
  expect_refused(run_cli({"run", model("none.onnx", no_outputs)}), 1, {"the graph has no outputs"}, "no outputs");
  memfmt::io::save_safetensors(memfmt::graph::parameter_store{}, path("empty.safetensors"));
  expect_refused(run_cli({"run", net, "--weights", path("empty.safetensors")}), 1, {"--weights", "holds no tensors"},
                 "no weights");
  const std::string empty_net = write("empty.json", R"({"format": "memfmt.network", "version": 1, "nodes": []})");
  for (const char* cmd : {"plan", "run"})
    expect_refused(run_cli({cmd, empty_net}), 1, {"empty.json", "no output node"}, std::string("empty network ") + cmd);
}

}  // namespace
