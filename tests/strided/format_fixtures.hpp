// Reader for the PyTorch fixtures written by gen_format_fixtures.py (see its docstring for the
// layout), shared by the fixture test and the CLI test.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memfmt/error.hpp"
#include "memfmt/format/memory_format.hpp"
#include "memfmt/strided/descriptor.hpp"

namespace memfmt_test {

inline const std::array<const char*, 5> format_fixture_files = {"format_rank4.json", "format_rank4_small_strides.json",
                                                                "format_rank5.json", "format_rank5_small_strides.json",
                                                                "format_other.json"};

// What a request returned: x itself, a new tensor with these strides, or an error with this text
// (or unobserved: the generator samples the requests that can only fail, see its Recorder).
struct outcome {
  enum kind_t { alias, copy, error, unobserved } kind = copy;
  std::vector<std::int64_t> strides;  // for copy
  std::string message;                // for error
  friend bool operator==(const outcome& a, const outcome& b) {
    if (a.kind != b.kind) return false;
    if (a.kind == copy) return a.strides == b.strides;
    if (a.kind == error) return a.message == b.message;
    return true;
  }
  std::string str() const {
    if (kind == alias) return "alias";
    if (kind == unobserved) return "unobserved";
    if (kind == error) return "error \"" + message + "\"";
    return "copy strides " + memfmt::detail::dims_to_string(strides);
  }
};

struct format_case {
  std::string origin;  // "file #index"
  memfmt::strided_desc t;
  bool is_contiguous = false, is_contiguous_channels_last = false, is_contiguous_channels_last_3d = false;
  bool non_overlapping_and_dense = false;
  memfmt::memory_format suggest = memfmt::memory_format::contiguous;
  std::array<outcome, 4> to, contiguous, empty_like, clone;  // in memfmt::all_memory_formats order
};

inline std::vector<format_case> load_format_cases(const std::string& dir, const std::string& file) {
  std::ifstream in(dir + "/" + file);
  if (!in) throw std::runtime_error("cannot open fixture " + dir + "/" + file);
  const auto doc = nlohmann::json::parse(in);
  const auto& formats = doc.at("formats");
  for (std::size_t i = 0; i < 4; ++i)
    if (formats.at(i).get<std::string>() != memfmt::to_string(memfmt::all_memory_formats[i]))
      throw std::runtime_error("fixture " + file + ": unexpected format order");
  const auto errors = doc.at("errors").get<std::vector<std::string>>();
  auto read_outcome = [&](const nlohmann::json& j) {
    outcome o;
    if (j.is_null()) {
      o.kind = outcome::unobserved;
    } else if (j.is_boolean()) {
      if (!j.get<bool>()) throw std::runtime_error("fixture " + file + ": false is not an outcome");
      o.kind = outcome::alias;
    } else if (j.is_number_integer()) {
      o.kind = outcome::error;
      o.message = errors.at(j.get<std::size_t>());
    } else {
      o.kind = outcome::copy;
      o.strides = j.get<std::vector<std::int64_t>>();
    }
    return o;
  };
  std::vector<format_case> cases;
  const auto& js = doc.at("cases");
  cases.reserve(js.size());
  for (std::size_t i = 0; i < js.size(); ++i) {
    const auto& c = js[i];
    format_case fc;
    fc.origin = file + " #" + std::to_string(i);
    fc.t.sizes = c.at(0).get<std::vector<std::int64_t>>();
    fc.t.strides = c.at(1).get<std::vector<std::int64_t>>();
    const auto& flags = c.at(2);
    fc.is_contiguous = flags.at(0).get<int>() != 0;
    fc.is_contiguous_channels_last = flags.at(1).get<int>() != 0;
    fc.is_contiguous_channels_last_3d = flags.at(2).get<int>() != 0;
    fc.non_overlapping_and_dense = flags.at(3).get<int>() != 0;
    fc.suggest = memfmt::all_memory_formats[c.at(3).get<std::size_t>()];
    for (std::size_t f = 0; f < 4; ++f) {
      fc.to[f] = read_outcome(c.at(4).at(f));
      fc.contiguous[f] = read_outcome(c.at(5).at(f));
      fc.empty_like[f] = read_outcome(c.at(6).at(f));
      fc.clone[f] = read_outcome(c.at(7).at(f));
    }
    cases.push_back(std::move(fc));
  }
  return cases;
}

inline std::string describe(const memfmt::strided_desc& t) {
  return "sizes " + memfmt::detail::dims_to_string(t.sizes) + " strides " + memfmt::detail::dims_to_string(t.strides);
}

}  // namespace memfmt_test
