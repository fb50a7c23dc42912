// memfmt/io/timing_cache_json.hpp - a graph::timing_cache as a JSON file (docs/formats.md,
// "memfmt.timing_cache" version 1). Part of memfmt::graph_io.
//
// Loading checks whose measurements the file holds: asked for a device, backend and version, a
// file of another refuses to load and says whose it is (timings from another machine would make
// the planner confidently wrong). Malformed files fail naming the entry and key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "../graph/network.hpp"
#include "../graph/timing_cache.hpp"
#include "network_json.hpp"

namespace memfmt::io {

inline constexpr int timing_cache_format_version = 1;

namespace detail {

inline json optional_ns(const std::optional<graph::cost_t>& c) { return c ? json(*c) : json(nullptr); }

// A non-negative ns, or null (unsupported) where `nullable`.
inline std::optional<graph::cost_t> read_ns(const json& j, const char* key, const std::string& where, bool nullable) {
  if (nullable && member(j, key, where).is_null()) return std::nullopt;
  const std::int64_t v = integer(j, key, where);
  if (v < 0) bad(where, "key '" + std::string(key) + "' is " + std::to_string(v) + ", a time in ns must be >= 0");
  return v;
}

}  // namespace detail

inline nlohmann::json timing_cache_to_json(const graph::timing_cache& cache) {
  using detail::json;
  json layers = json::array();
  for (const auto& [sig, t] : cache.layers())
    layers.push_back({{"signature", sig},
                      {"channels_first_ns", detail::optional_ns(t[0])},
                      {"channels_last_ns", detail::optional_ns(t[1])}});
  json conversions = json::array();
  for (const auto& [sig, t] : cache.conversions())
    for (format_family from : {format_family::channels_first, format_family::channels_last})
      if (t[graph::index(from)])
        conversions.push_back(
            {{"signature", sig}, {"from", detail::family_names(from)}, {"ns", *t[graph::index(from)]}});
  return {{"format", "memfmt.timing_cache"},
          {"version", timing_cache_format_version},
          {"device", cache.key().device},
          {"backend", cache.key().backend},
          {"backend_version", cache.key().backend_version},
          {"layers", layers},
          {"conversions", conversions}};
}

// The cache in `j`; with `expected`, an error when the file holds another device's, backend's or
// version's measurements.
inline graph::timing_cache timing_cache_from_json(const nlohmann::json& j,
                                                  const std::optional<graph::cache_key>& expected = std::nullopt) {
  using detail::json;
  const std::string what = "timing cache file";
  detail::check_header(j, "memfmt.timing_cache", timing_cache_format_version, what);
  graph::timing_cache cache(
      {detail::text(j, "device", what), detail::text(j, "backend", what), detail::text(j, "backend_version", what)});
  if (expected) cache.require_key(*expected, what);
  const json& layers = detail::member(j, "layers", what);
  if (!layers.is_array()) detail::bad(what, "key 'layers' must be an array");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string where = what + ": layers[" + std::to_string(i) + "]";
    const std::string sig = detail::text(layers[i], "signature", where);
    const graph::family_timings t{detail::read_ns(layers[i], "channels_first_ns", where, true),
                                  detail::read_ns(layers[i], "channels_last_ns", where, true)};
    if (!t[0] && !t[1]) detail::bad(where, "keys 'channels_first_ns' and 'channels_last_ns' are both null");
    if (cache.find_layer(sig)) detail::bad(where, "key 'signature' '" + sig + "' is listed twice");
    cache.record_layer(sig, t);
  }
  const json& conversions = detail::member(j, "conversions", what);
  if (!conversions.is_array()) detail::bad(what, "key 'conversions' must be an array");
  for (std::size_t i = 0; i < conversions.size(); ++i) {
    const std::string where = what + ": conversions[" + std::to_string(i) + "]";
    const std::string sig = detail::text(conversions[i], "signature", where);
    const format_family from = detail::named(detail::family_names, conversions[i], "from", where);
    if (cache.find_conversion(sig, from))
      detail::bad(where, "conversion '" + sig + "' from " + std::string(graph::to_string(from)) + " is listed twice");
    cache.record_conversion(sig, from, *detail::read_ns(conversions[i], "ns", where, false));
  }
  return cache;
}

inline std::string save_timing_cache(const graph::timing_cache& cache) {
  return io::dump_json(timing_cache_to_json(cache), 1, "timing cache file") + "\n";
}
inline graph::timing_cache load_timing_cache(std::string_view text,
                                             const std::optional<graph::cache_key>& expected = std::nullopt) {
  return timing_cache_from_json(detail::parse(text, "timing cache file"), expected);
}
inline void write_timing_cache_file(const std::string& path, const graph::timing_cache& cache) {
  detail::write_file(path, save_timing_cache(cache), "timing cache file");
}
inline graph::timing_cache read_timing_cache_file(const std::string& path,
                                                  const std::optional<graph::cache_key>& expected = std::nullopt) {
  return timing_cache_from_json(
      detail::parse(detail::read_file(path, "timing cache file"), "timing cache file '" + path + "'"), expected);
}

// The file's cache where the file exists, none where it does not (the first run on a machine).
inline std::optional<graph::timing_cache> read_timing_cache_file_if_exists(
    const std::string& path, const std::optional<graph::cache_key>& expected = std::nullopt) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  return read_timing_cache_file(path, expected);
}

}  // namespace memfmt::io
