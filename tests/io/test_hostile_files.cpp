// Files an attacker (or a mistake) hands memfmt's readers: nesting deep enough to overflow a
// recursive walk, NUL bytes, names that are not UTF-8, directories and devices, files far larger
// than what they declare. Each is refused with a memfmt::error that names the file and stays short;
// the UTF-8 check agrees with a brute-force decoder over every 1- to 3-byte sequence.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../common/expect_error.hpp"
#include "memfmt/detail/utf8.hpp"
#include "memfmt/graph/network.hpp"
#include "memfmt/io/file.hpp"
#include "memfmt/io/json.hpp"
#include "memfmt/io/network_json.hpp"
#include "memfmt/io/plan_json.hpp"
#include "memfmt/io/priors_json.hpp"
#include "memfmt/io/safetensors.hpp"
#include "memfmt/io/timing_cache_json.hpp"

namespace {

namespace fs = std::filesystem;
using memfmt::errc;
using memfmt_test::expect_error;

// A file of this test's own, removed at the end.
class HostileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("memfmt_hostile_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  // A sparse file of `size` zero bytes: no disk, no time.
  std::string sparse(const std::string& name, std::uint64_t size) const {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary).flush();
    fs::resize_file(p, size);
    return p;
  }
  fs::path dir_;
};

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// The 8-byte length and the header, no data.
std::string safetensors_bytes(const std::string& header) {
  std::string f;
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i, n >>= 8) f.push_back(static_cast<char>(n & 0xff));
  return f + header;
}

// The reference: decodes code point after code point by the bit patterns of RFC 3629 (a lead
// byte's high bits give the length, each continuation byte adds 6 bits), then rejects overlong
// forms, surrogates and values past U+10FFFF by the decoded value.
bool reference_is_utf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    std::uint32_t cp = 0;
    std::size_t n = 0;
    if (b(i) < 0x80) n = 1, cp = b(i);
    else if ((b(i) & 0xE0) == 0xC0) n = 2, cp = b(i) & 0x1Fu;
    else if ((b(i) & 0xF0) == 0xE0) n = 3, cp = b(i) & 0x0Fu;
    else if ((b(i) & 0xF8) == 0xF0) n = 4, cp = b(i) & 0x07u;
    else return false;
    if (i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((b(i + k) & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b(i + k) & 0x3Fu);
    }
    const std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

TEST(Utf8, AgreesWithABruteForceDecoderOnEveryShortSequence) {
  std::size_t checked = 0;
  for (std::uint32_t len = 1; len <= 3; ++len)
    for (std::uint32_t v = 0; v < (1u << (8 * len)); ++v) {
      char buf[3];
      for (std::uint32_t k = 0; k < len; ++k) buf[k] = static_cast<char>((v >> (8 * (len - 1 - k))) & 0xff);
      const std::string s(buf, len);
      ASSERT_EQ(memfmt::detail::is_utf8(s), reference_is_utf8(s)) << len << " bytes, value " << std::hex << v;
      ++checked;
    }
  EXPECT_EQ(checked, 256u + 65536u + 16777216u);
  // Four-byte forms at the edges: U+10000, U+10FFFF, past it, overlong.
  for (const char* s : {"\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF", "\xF4\x90\x80\x80", "\xF0\x8F\xBF\xBF"})
    EXPECT_EQ(memfmt::detail::is_utf8(s), reference_is_utf8(s)) << memfmt::detail::printable(s);
  EXPECT_TRUE(memfmt::detail::is_utf8("\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(memfmt::detail::is_utf8("\xF4\x90\x80\x80"));
}

TEST(Utf8, PrintableEscapesAndBounds) {
  EXPECT_EQ(memfmt::detail::printable("conv1"), "conv1");
  EXPECT_EQ(memfmt::detail::printable("a\xFF\xFE"
                                      "b"),
            "a\\xFF\\xFEb");
  EXPECT_EQ(memfmt::detail::printable("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(memfmt::detail::printable(std::string("x\0y\n", 4)), "x\\x00y\\x0A");
  const std::string long_name(100000, 'n');
  const std::string p = memfmt::detail::printable(long_name);
  EXPECT_LT(p.size(), 120u);
  EXPECT_NE(p.find("100000 bytes"), std::string::npos) << p;
}

TEST(Json, DepthNulAndExcerpts) {
  EXPECT_NO_THROW(memfmt::io::parse_json(nested(64), "f"));
  expect_error([] { memfmt::io::parse_json(nested(65), "f.json"); }, errc::invalid_argument,
               {"f.json", "nest deeper than 64 levels"});
  // The depth that overflowed the serializer's recursion in the message (100,000): refused after
  // reading 64 levels, with a short message.
  const std::string deep = "{\"a\": " + nested(100000) + "}";
  const std::string e = memfmt_test::error_text([&] { memfmt::io::parse_json(deep, "deep.json"); });
  EXPECT_NE(e.find("deeper than 64"), std::string::npos) << e;
  EXPECT_LT(e.size(), 200u);
  expect_error([] { memfmt::io::parse_json(std::string("{\"a\": 1}\0junk", 13), "cache.json"); },
               errc::invalid_argument, {"cache.json", "byte 8 is a NUL byte"});
  // A syntax error quotes no more than a bounded, escaped excerpt, even of a huge or binary token.
  const std::string junk = "{\"a\": \"" + std::string(1 << 20, 'x') + "\xFF\"}";
  const std::string s = memfmt_test::error_text([&] { memfmt::io::parse_json(junk, "junk.json"); });
  EXPECT_NE(s.find("not valid JSON"), std::string::npos) << s.substr(0, 300);
  EXPECT_LT(s.size(), 400u);
  EXPECT_EQ(memfmt::detail::first_non_utf8(s), std::string::npos);
  const nlohmann::json big = nlohmann::json::array({std::string(5000, 'z'), 1, 2});
  EXPECT_LE(memfmt::io::excerpt(big).size(), 63u);
}

TEST(Json, NamesThatAreNotUtf8AreAnErrorWhenWritten) {
  memfmt::graph::network net;
  const auto x = net.input("in\xFF", {1, 2, 4, 4}, memfmt::dtype::float32, memfmt::format_family::channels_first);
  net.output("out", x, memfmt::format_family::channels_first);
  expect_error([&] { memfmt::io::save_network(net); }, errc::invalid_argument, {"network file", "not valid UTF-8"});
  memfmt::graph::parameter_store s;
  s.insert<float>("w\xFE", {1}, {1.f});
  expect_error([&] { memfmt::io::write_safetensors(s); }, errc::invalid_argument,
               {"safetensors header", "not valid UTF-8"});
}

TEST_F(HostileFiles, DeepNestingInEveryJsonFileIsRefused) {
  const std::string deep = nested(100000);
  const std::string net =
      write("net.json", R"({"format": "memfmt.network", "version": 1, "nodes": [{"extents": )" + deep + "}]}");
  expect_error([&] { memfmt::io::read_network_file(net); }, errc::invalid_argument, {"network file", "deeper than 64"});
  const std::string cache = write("cache.json", "{\"format\": " + deep + "}");
  expect_error([&] { memfmt::io::read_timing_cache_file(cache); }, errc::invalid_argument,
               {"timing cache", "deeper than 64"});
  const std::string priors = write("priors.json", "[" + deep + "]");
  expect_error([&] { memfmt::io::read_priors_file(priors); }, errc::invalid_argument,
               {"priors file", "deeper than 64"});
  for (const std::string& at :
       {std::string("{\"__metadata__\": ") + deep + "}",
        std::string(R"({"w": {"dtype": "F32", "shape": )") + deep + R"(, "data_offsets": [0, 0]}})",
        std::string(R"({"w": {"dtype": )") + deep + "}}", std::string(R"({"w": {"data_offsets": )") + deep + "}}"}) {
    const std::string f = write("deep.safetensors", safetensors_bytes(at));
    const std::string e = memfmt_test::error_text([&] { memfmt::io::load_safetensors(f); });
    EXPECT_NE(e.find("deeper than 64"), std::string::npos) << e.substr(0, 300);
    EXPECT_LT(e.size(), 300u);
  }
}

TEST_F(HostileFiles, NulBytesEndNoDocumentEarly) {
  memfmt::graph::timing_cache cache;
  const std::string text = memfmt::io::save_timing_cache(cache);
  const std::string f = write("cache.json", text + std::string("\0junk", 5));
  expect_error([&] { memfmt::io::read_timing_cache_file(f); }, errc::invalid_argument,
               {"timing cache file", "byte " + std::to_string(text.size()) + " is a NUL byte"});
  const std::string h = write("nul.safetensors", safetensors_bytes(std::string("{}\0", 3)));
  expect_error([&] { memfmt::io::load_safetensors(h); }, errc::invalid_argument, {"byte 2 is a NUL byte"});
}

TEST_F(HostileFiles, DirectoriesAndDevicesAreRefusedByName) {
  const std::string d = dir_.string();
  expect_error([&] { memfmt::io::load_safetensors(d); }, errc::invalid_argument, {d, "is a directory"});
  expect_error([&] { memfmt::io::read_network_file(d); }, errc::invalid_argument, {d, "is a directory"});
  if (fs::exists("/dev/zero")) {  // would never end, read as a file
    expect_error([] { memfmt::io::load_safetensors("/dev/zero"); }, errc::invalid_argument,
                 {"/dev/zero", "is a character device"});
    expect_error([] { memfmt::io::read_timing_cache_file("/dev/zero"); }, errc::invalid_argument,
                 {"/dev/zero", "is a character device"});
  }
  const memfmt::graph::network none;
  const memfmt::graph::cost_model model;
  expect_error([&] { memfmt::io::read_plan_file(d + "/missing.json", none, model); }, errc::invalid_argument,
               {"missing.json", "cannot be opened"});
}

// The first 8 bytes decide a 2 GiB file of zeros: a header length of 0. Reading the whole file
// first took 4.2 GB and 9-15 s; the reader reads 8 bytes.
TEST_F(HostileFiles, AHeaderIsCheckedBeforeTheBodyIsRead) {
  const std::string zeros = sparse("zeros.safetensors", std::uint64_t{2} << 30);
  const auto t0 = std::chrono::steady_clock::now();
  expect_error([&] { memfmt::io::load_safetensors(zeros); }, errc::invalid_argument,
               {"zeros.safetensors", "does not start with '{'", "empty"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  // A declared header past the format's 100,000,000-byte limit is refused before it is read.
  std::string f = safetensors_bytes("{}");
  const std::uint64_t n = 200000000;
  for (int i = 0; i < 8; ++i) f[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  const std::string big = write("big.safetensors", f);
  fs::resize_file(big, 300000000);
  expect_error([&] { memfmt::io::load_safetensors(big); }, errc::invalid_argument,
               {"header length 200000000", "100000000 bytes the format allows"});
  // A JSON file larger than its reader takes is refused by its size.
  const std::string huge = sparse("huge.json", std::uint64_t{1} << 31);
  expect_error([&] { memfmt::io::read_text_file(huge, "network file", 1 << 20); }, errc::invalid_argument,
               {"huge.json", "2147483648 bytes", "past the 1048576"});
}

TEST_F(HostileFiles, ATensorIsReadFromItsOffsets) {
  memfmt::graph::parameter_store s;
  s.insert<float>("a", {2}, {1.f, 2.f});
  s.insert<double>("b", {1}, {3.0});
  s.metadata["k"] = "v";
  const auto bytes = memfmt::io::write_safetensors(s);
  const std::string f = write("s.safetensors", std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  const auto back = memfmt::io::load_safetensors(f);
  EXPECT_EQ(back.at("a").values<float>("a"), (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(back.at("b").values<double>("b"), (std::vector<double>{3.0}));
  EXPECT_EQ(back.metadata.at("k"), "v");
}

}  // namespace
