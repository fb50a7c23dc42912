// safetensors reading and writing: a file from the safetensors package's writer, round trips, and
// every malformation the reader must name (hand-built bytes following the format's specification).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../common/expect_error.hpp"
#include "memfmt/io/safetensors.hpp"

namespace {

using memfmt::dtype;
using memfmt::errc;
using memfmt::graph::parameter;
using memfmt::graph::parameter_store;
using memfmt_test::expect_error;

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  if (!s.empty()) std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// A file: the 8-byte little-endian length of `header` (or `length` when given), the header, `data`.
std::vector<std::byte> make_file(const std::string& header, const std::vector<std::byte>& data,
                                 std::uint64_t length = UINT64_MAX) {
  std::uint64_t n = length == UINT64_MAX ? header.size() : length;
  std::vector<std::byte> f;
  for (int i = 0; i < 8; ++i, n >>= 8) f.push_back(static_cast<std::byte>(n & 0xff));
  const auto h = bytes_of(header);
  f.insert(f.end(), h.begin(), h.end());
  f.insert(f.end(), data.begin(), data.end());
  return f;
}

std::vector<std::byte> zeros(std::size_t n) { return std::vector<std::byte>(n); }

parameter_store read(const std::vector<std::byte>& f) { return memfmt::io::read_safetensors(f, "test.safetensors"); }

TEST(Safetensors, ReadsTheReferenceWritersFile) {
  const parameter_store s =
      memfmt::io::load_safetensors(std::string(MEMFMT_IO_FIXTURE_DIR) + "/reference_writer.safetensors");
  ASSERT_EQ(s.size(), 8u);
  EXPECT_EQ(s.metadata.at("format"), "pt");
  EXPECT_EQ(s.metadata.at("writer"), "safetensors");

  const parameter& w = s.at("conv.weight");
  EXPECT_EQ(w.type, dtype::float32);
  EXPECT_EQ(w.shape, (std::vector<std::int64_t>{2, 3, 1, 2}));
  const auto wv = w.values<float>("conv.weight");
  ASSERT_EQ(wv.size(), 12u);
  for (std::size_t i = 0; i < wv.size(); ++i) EXPECT_EQ(wv[i], 0.5f * static_cast<float>(i) - 3.f) << i;

  const auto var = s.at("bn.running_var").values<double>();
  ASSERT_EQ(var.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(var[i], 1.0 / static_cast<double>(i + 1));

  const auto h = s.at("half").values<memfmt::half>();
  ASSERT_EQ(h.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(static_cast<float>(h[i]), 0.25f * static_cast<float>(i) - 1.f);

  const auto bf = s.at("bf").values<memfmt::bfloat16>();
  ASSERT_EQ(bf.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(static_cast<float>(bf[i]), std::ldexp(1.f, static_cast<int>(i)));

  const parameter& count = s.at("bn.num_batches_tracked");
  EXPECT_EQ(count.type, dtype::int64);
  EXPECT_TRUE(count.shape.empty());
  EXPECT_EQ(count.values<std::int64_t>(), std::vector<std::int64_t>{1000003});

  EXPECT_EQ(s.at("codes").values<std::int8_t>(), (std::vector<std::int8_t>{-2, -1, 0, 1}));
  EXPECT_EQ(s.at("mask").values<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ(s.at("empty").shape, (std::vector<std::int64_t>{0, 3}));
  EXPECT_TRUE(s.at("empty").bytes.empty());
}

void expect_same(const parameter_store& a, const parameter_store& b) {
  ASSERT_EQ(a.names(), b.names());
  for (const auto& [name, p] : a) {
    const parameter& q = b.at(name);
    EXPECT_EQ(p.type, q.type) << name;
    EXPECT_EQ(p.shape, q.shape) << name;
    EXPECT_EQ(p.bytes, q.bytes) << name;
  }
  EXPECT_EQ(a.metadata, b.metadata);
}

TEST(Safetensors, RoundTripKeepsEveryTensorAndAlignsThem) {
  parameter_store s;
  s.insert<float>("a.weight", {2, 3}, {1, 2, 3, 4, 5, -6.5f});
  s.insert<double>("a.bias", {2}, {0.125, -1e300});
  s.insert<memfmt::half>("h", {3}, {memfmt::half(1.f), memfmt::half(-2.f), memfmt::half(0.5f)});
  s.insert<std::int8_t>("odd", {3}, {1, -2, 3});  // 3 bytes: the next tensor must still be aligned
  s.insert<std::int64_t>("steps", {}, {42});
  s.insert<float>("none", {4, 0}, {});
  s.metadata["note"] = "round trip";
  const std::vector<std::byte> file = memfmt::io::write_safetensors(s);

  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<unsigned char>(file[static_cast<std::size_t>(i)]);
  EXPECT_EQ((8 + n) % 8, 0u) << "the header is padded to 8 bytes";
  const auto header = nlohmann::json::parse(reinterpret_cast<const char*>(file.data()) + 8,
                                            reinterpret_cast<const char*>(file.data()) + 8 + n);
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") continue;
    const std::uint64_t begin = v["data_offsets"][0];
    EXPECT_EQ(begin % memfmt::size_of(s.at(name).type), 0u) << name << " starts misaligned at " << begin;
  }
  expect_same(s, read(file));

  const std::string path = ::testing::TempDir() + "memfmt_round_trip.safetensors";
  memfmt::io::save_safetensors(s, path);
  expect_same(s, memfmt::io::load_safetensors(path));
  std::remove(path.c_str());
}

TEST(Safetensors, RewritesTheReferenceWritersFileLosslessly) {
  const parameter_store s =
      memfmt::io::load_safetensors(std::string(MEMFMT_IO_FIXTURE_DIR) + "/reference_writer.safetensors");
  expect_same(s, read(memfmt::io::write_safetensors(s)));
}

TEST(Safetensors, AcceptsAHandBuiltSpecFileWithPaddingAndNoMetadata) {
  // Two float32 tensors, header padded with spaces as writers do.
  std::vector<std::byte> data(16);
  const float v[4] = {1.f, 2.f, 3.f, 4.f};
  std::memcpy(data.data(), v, 16);
  const auto s = read(make_file(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]},)"
                                R"("a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}   )",
                                data));
  EXPECT_EQ(s.at("a").values<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(s.at("b").values<float>(), std::vector<float>{4});
  EXPECT_TRUE(s.metadata.empty());
}

std::string one(const std::string& name, const std::string& dtype, const std::string& shape,
                const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

TEST(SafetensorsErrors, TruncatedFilesAndHeaderLengths) {
  expect_error([] { read(zeros(5)); }, errc::invalid_argument, {"test.safetensors", "5 bytes", "8-byte header length"});
  const std::string h = "{" + one("w", "F32", "[4]", "[0,16]") + "}";
  expect_error([&] { read(make_file(h, zeros(16), 1000)); }, errc::invalid_argument,
               {"header length 1000", "runs past the end of the file"});
  // The file cut inside the data: the tensor's range runs past the buffer.
  expect_error([&] { read(make_file(h, zeros(10))); }, errc::invalid_argument,
               {"'w'", "[0, 16]", "10-byte data buffer"});
  expect_error([&] { read(make_file("", {})); }, errc::invalid_argument, {"does not start with '{'", "empty"});
}

TEST(SafetensorsErrors, HeaderNotAnObjectOrNotJson) {
  expect_error([] { read(make_file("[1, 2]", {})); }, errc::invalid_argument, {"does not start with '{'"});
  expect_error([] { read(make_file("{\"w\": ", {})); }, errc::invalid_argument, {"not valid JSON"});
  expect_error([] { read(make_file("{\"w\": 3}", {})); }, errc::invalid_argument, {"tensor 'w'", "not an object"});
  expect_error([] { read(make_file(R"({"__metadata__": [1]})", {})); }, errc::invalid_argument,
               {"__metadata__", "not an object"});
  expect_error([] { read(make_file(R"({"__metadata__": {"k": 1}})", {})); }, errc::invalid_argument,
               {"__metadata__ 'k'", "not a string"});
}

TEST(SafetensorsErrors, OffsetsOverlapGapTrailingAndBackwards) {
  expect_error(
      [] {
        read(
            make_file("{" + one("a", "F32", "[2]", "[0,8]") + "," + one("b", "F32", "[2]", "[4,12]") + "}", zeros(12)));
      },
      errc::invalid_argument, {"'b' [4, 12)", "overlaps", "'a' [0, 8)"});
  expect_error(
      [] {
        read(
            make_file("{" + one("a", "F32", "[1]", "[0,4]") + "," + one("b", "F32", "[1]", "[8,12]") + "}", zeros(12)));
      },
      errc::invalid_argument, {"4 bytes before tensor 'b' [8, 12)", "belong to no tensor"});
  expect_error([] { read(make_file("{" + one("a", "F32", "[1]", "[0,4]") + "}", zeros(9))); }, errc::invalid_argument,
               {"9 bytes", "end at 4", "5 bytes belong to no tensor"});
  expect_error([] { read(make_file("{" + one("a", "F32", "[0]", "[8,4]") + "}", zeros(8))); }, errc::invalid_argument,
               {"'a'", "[8, 4]", "end before begin"});
  expect_error([] { read(make_file("{" + one("a", "F32", "[1]", "[0,4,8]") + "}", zeros(8))); }, errc::invalid_argument,
               {"'a'", "data_offsets [0,4,8]", "[begin, end]"});
  expect_error([] { read(make_file("{" + one("a", "F32", "[1]", "[-4,0]") + "}", zeros(8))); }, errc::invalid_argument,
               {"'a'", "data_offsets begin is -4"});
}

TEST(SafetensorsErrors, SizeNotMatchingShapeTimesDtype) {
  expect_error([] { read(make_file("{" + one("w", "F64", "[2,3]", "[0,24]") + "}", zeros(24))); }, errc::shape_mismatch,
               {"'w'", "F64 [2, 3] is 48 bytes", "[0, 24] hold 24"});
}

TEST(SafetensorsErrors, DtypesShapesAndOverflow) {
  expect_error([] { read(make_file("{" + one("w", "F31", "[1]", "[0,4]") + "}", zeros(4))); }, errc::invalid_argument,
               {"'w'", "unknown dtype \"F31\""});
  expect_error([] { read(make_file("{" + one("w", "U16", "[2]", "[0,4]") + "}", zeros(4))); }, errc::unsupported_dtype,
               {"'w'", "U16", "no memfmt element type"});
  expect_error([] { read(make_file(R"({"w":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", zeros(4))); },
               errc::invalid_argument, {"'w'", "dtype 7 is not a string"});
  expect_error([] { read(make_file("{" + one("w", "F32", "[4294967296,4294967296]", "[0,4]") + "}", zeros(4))); },
               errc::overflow, {"'w'", "[4294967296, 4294967296]", "overflows"});
  // The element count fits; the byte count does not.
  expect_error([] { read(make_file("{" + one("w", "F64", "[2305843009213693952]", "[0,4]") + "}", zeros(4))); },
               errc::overflow, {"'w'", "2305843009213693952", "8 bytes"});
  expect_error([] { read(make_file("{" + one("w", "F32", "[18446744073709551615]", "[0,4]") + "}", zeros(4))); },
               errc::overflow, {"'w'", "18446744073709551615", "does not fit in int64"});
  expect_error([] { read(make_file("{" + one("w", "F32", "[-1]", "[0,4]") + "}", zeros(4))); }, errc::invalid_argument,
               {"'w'", "shape [-1] entry 0 is -1"});
  expect_error([] { read(make_file("{" + one("w", "F32", "[1.5]", "[0,4]") + "}", zeros(4))); }, errc::invalid_argument,
               {"'w'", "1.5", "not a non-negative integer"});
  expect_error([] { read(make_file("{" + one("w", "F32", "4", "[0,4]") + "}", zeros(4))); }, errc::invalid_argument,
               {"'w'", "shape 4 is not an array"});
  expect_error([] { read(make_file(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", zeros(4))); },
               errc::invalid_argument, {"'w'", "no \"shape\""});
}

TEST(SafetensorsErrors, DuplicateNamesAndKeys) {
  expect_error(
      [] {
        read(make_file("{" + one("w", "F32", "[1]", "[0,4]") + "," + one("w", "F32", "[1]", "[4,8]") + "}", zeros(8)));
      },
      errc::invalid_argument, {"duplicate key 'w'", "tensor names are unique"});
  expect_error(
      [] { read(make_file(R"({"w":{"dtype":"F32","dtype":"F64","shape":[1],"data_offsets":[0,4]}})", zeros(4))); },
      errc::invalid_argument, {"duplicate key 'dtype'", "in tensor 'w'"});
}

TEST(ParameterStore, RejectsDuplicatesMismatchedBytesAndWrongTypes) {
  parameter_store s;
  s.insert<float>("w", {2}, {1, 2});
  expect_error([&] { s.insert<float>("w", {1}, {3}); }, errc::invalid_argument,
               {"'w' is already present", "float32 [2]"});
  expect_error(
      [&] {
        s.insert<float>("v", {3}, {1, 2});
      },
      errc::shape_mismatch, {"'v'", "float32 [3]", "12 bytes", "8 bytes were given"});
  expect_error([&] { s.insert<float>("n", {-1}, {}); }, errc::invalid_argument, {"'n'", "negative size"});
  expect_error([&] { (void)s.at("w").values<double>("w"); }, errc::unsupported_dtype,
               {"'w' is float32, read as float64"});
  expect_error([&] { (void)s.at("missing"); }, errc::invalid_argument, {"no parameter 'missing'"});
  parameter p;
  p.type = dtype::float64;
  p.shape = {1};
  p.bytes.resize(8);
  s.assign("w", p);
  EXPECT_EQ(s.at("w").type, dtype::float64);
}

}  // namespace
