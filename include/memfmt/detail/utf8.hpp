// memfmt/detail/utf8.hpp - names from files in messages: whether text is UTF-8, and a printable,
// bounded form of any bytes.
//
// Names come from untrusted files (an ONNX model's values, a safetensors tensor). A name that is not
// UTF-8 cannot be written into JSON (plans, safetensors headers), and a long one would flood a
// message; `printable` gives every message the same short, escaped form.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace memfmt::detail {

// The length of the UTF-8 sequence starting at s[i] (1 to 4), or 0 where none starts there:
// overlong forms, surrogates and code points past U+10FFFF are not UTF-8 (RFC 3629).
inline std::size_t utf8_sequence(std::string_view s, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if (c >= 0xE1 && c <= 0xEC) n = 3;
  else if (c == 0xED) n = 3, hi = 0x9F;
  else if (c >= 0xEE && c <= 0xEF) n = 3;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else if (c == 0xF4) n = 4, hi = 0x8F;
  else return 0;
  if (s.size() - i < n) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

// The offset of the first byte that starts no UTF-8 sequence, or npos where `s` is all UTF-8.
inline std::size_t first_non_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

inline bool is_utf8(std::string_view s) noexcept { return first_non_utf8(s) == std::string_view::npos; }

// `s` for a message: UTF-8 kept, every other byte and every control character as \xNN, cut after
// `max_bytes` of input with "..." and the total length.
inline std::string printable(std::string_view s, std::size_t max_bytes = 80) {
  static const char hex[] = "0123456789ABCDEF";
  std::string out;
  std::size_t i = 0;
  while (i < s.size() && i < max_bytes) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0 || c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  if (i < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace memfmt::detail
