// memfmt/io/json.hpp - the one JSON reader of every file memfmt reads (safetensors headers,
// networks, plans, timing caches, priors), and the one writer.
//
// nlohmann's parser is iterative, but its serializer and the callers' walks recurse, so depth is
// bounded where the text is read (`max_depth` levels of arrays and objects; memfmt's own files use
// fewer than ten). JSON text holds no NUL byte: one is an error at its offset, not the end of the
// document. Messages quote a value through `excerpt`, a bounded and escaped form, never whole.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "../detail/utf8.hpp"
#include "../error.hpp"

namespace memfmt::io {

struct json_limits {
  int max_depth = 64;  // nesting levels of arrays and objects
};

// An event hook of the parse (nlohmann's parser callback without the discard: every value is
// kept). safetensors uses it to refuse duplicate keys.
using json_event_hook =
    std::function<void(int depth, nlohmann::json::parse_event_t event, const nlohmann::json& parsed)>;

// `v` for a message: compact JSON, invalid UTF-8 replaced, cut after `max_chars` with "...".
// @pre v is nested at most json_limits::max_depth deep (every value parse_json returned is).
inline std::string excerpt(const nlohmann::json& v, std::size_t max_chars = 60) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) {
    s.resize(max_chars);
    while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();  // a whole character
    if (!s.empty() && static_cast<unsigned char>(s.back()) >= 0xC0) s.pop_back();
    s += "...";
  }
  return s;
}

// Parses `text`, the contents of `what` (a file's name, for messages). Errors (memfmt::error,
// errc::invalid_argument) name `what` and say where: a NUL byte, nesting past limits.max_depth,
// nlohmann's syntax errors (line and column), a number out of range.
inline nlohmann::json parse_json(std::string_view text, const std::string& what, const json_event_hook& hook = {},
                                 const json_limits& limits = {}) {
  using json = nlohmann::json;
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos)
    memfmt::detail::fail(errc::invalid_argument,
                         what + ": byte " + std::to_string(nul) + " is a NUL byte, which JSON text does not contain");
  const json::parser_callback_t check = [&](int depth, json::parse_event_t ev, json& parsed) {
    if ((ev == json::parse_event_t::object_start || ev == json::parse_event_t::array_start) &&
        depth >= limits.max_depth)
      memfmt::detail::fail(errc::invalid_argument, what + ": arrays and objects nest deeper than " +
                                                       std::to_string(limits.max_depth) + " levels");
    if (hook) hook(depth, ev, parsed);
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), check);
  } catch (const json::exception& e) {
    memfmt::detail::fail(errc::invalid_argument,
                         what + ": not valid JSON: " + memfmt::detail::printable(e.what(), 200));
  }
}

// `j` as text (`indent` as nlohmann's dump). A string that is not UTF-8 (a name from a model) is an
// error naming `what`, not nlohmann's type_error.
inline std::string dump_json(const nlohmann::json& j, int indent, const std::string& what) {
  try {
    return j.dump(indent);
  } catch (const nlohmann::json::type_error& e) {
    memfmt::detail::fail(errc::invalid_argument, what + ": a name or string is not valid UTF-8, which JSON needs (" +
                                                     memfmt::detail::printable(e.what(), 200) + ")");
  }
}

}  // namespace memfmt::io
