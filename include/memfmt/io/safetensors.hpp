// memfmt/io/safetensors.hpp - parameter stores from and to safetensors files (component
// memfmt::safetensors: needs nlohmann-json, so it stays out of the dependency-free core).
//
// The format, as the safetensors specification (huggingface/safetensors, README "Format") states it:
//   8 bytes   N, an unsigned little-endian 64-bit integer: the size of the header;
//   N bytes   a UTF-8 JSON object: {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
//             ..., "__metadata__": {"<key>": "<string value>", ...}} (metadata optional), which
//             writers pad with trailing spaces;
//   the rest  the byte buffer: each tensor's elements dense, row-major over `shape`, little-endian, in
//             [b, e) relative to the start of the buffer.
// Like the reference implementation, the reader accepts a buffer only when the tensors tile it: no
// overlap, no hole, nothing after the last tensor, and e - b == numel(shape) * size of dtype. Every
// violation, and every header field of the wrong type, is a memfmt::error naming the tensor and the
// values. Names are unique (a duplicate JSON key is an error, not "the last one wins").
//
// dtypes: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL map to memfmt::dtype. The format's other
// dtypes (U16, U32, U64, the 8-, 6- and 4-bit floats) have no memfmt type: unsupported_dtype.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../detail/checked.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../detail/utf8.hpp"
#include "../graph/parameter_store.hpp"
#include "file.hpp"
#include "json.hpp"

namespace memfmt::io {
namespace detail {

using memfmt::detail::fail;

inline std::optional<memfmt::dtype> safetensors_dtype(std::string_view s) {
  if (s == "F64") return memfmt::dtype::float64;
  if (s == "F32") return memfmt::dtype::float32;
  if (s == "F16") return memfmt::dtype::float16;
  if (s == "BF16") return memfmt::dtype::bfloat16;
  if (s == "I64") return memfmt::dtype::int64;
  if (s == "I32") return memfmt::dtype::int32;
  if (s == "I16") return memfmt::dtype::int16;
  if (s == "I8") return memfmt::dtype::int8;
  if (s == "U8") return memfmt::dtype::uint8;
  if (s == "BOOL") return memfmt::dtype::bool8;
  return std::nullopt;
}

inline const char* safetensors_name(memfmt::dtype t) {
  switch (t) {
    case memfmt::dtype::float64: return "F64";
    case memfmt::dtype::float32: return "F32";
    case memfmt::dtype::float16: return "F16";
    case memfmt::dtype::bfloat16: return "BF16";
    case memfmt::dtype::int64: return "I64";
    case memfmt::dtype::int32: return "I32";
    case memfmt::dtype::int16: return "I16";
    case memfmt::dtype::int8: return "I8";
    case memfmt::dtype::uint8: return "U8";
    case memfmt::dtype::bool8: return "BOOL";
  }
  return "?";
}

// Dtypes the format defines that memfmt has no element type for.
inline bool known_unsupported(std::string_view s) {
  for (const char* k : {"U16", "U32", "U64", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4"})
    if (s == k) return true;
  return false;
}

inline bool host_is_little_endian() noexcept {
  const std::uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

// File (little-endian) <-> host byte order, in place; nothing to do on little-endian hosts.
inline void to_from_little_endian(std::vector<std::byte>& bytes, std::size_t elem) {
  if (host_is_little_endian() || elem == 1) return;
  for (std::size_t i = 0; i + elem <= bytes.size(); i += elem)
    std::reverse(bytes.begin() + i, bytes.begin() + i + elem);
}

// A JSON number that is a non-negative integer, as uint64; anything else is an error naming `what`.
inline std::uint64_t non_negative_integer(const nlohmann::json& v, const std::string& what) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  fail(errc::invalid_argument, what + " is " + io::excerpt(v) + ", not a non-negative integer");
}

struct entry {
  std::string name;
  memfmt::dtype type;
  std::vector<std::int64_t> shape;
  std::uint64_t begin, end;
};

inline entry parse_entry(const std::string& where, const std::string& name, const nlohmann::json& v,
                         std::uint64_t buffer_size) {
  const std::string t = where + ": tensor '" + memfmt::detail::printable(name) + "'";
  if (!v.is_object()) fail(errc::invalid_argument, t + " is " + io::excerpt(v) + ", not an object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key)) fail(errc::invalid_argument, t + " has no \"" + key + "\"");
  const nlohmann::json& dt = v.at("dtype");
  if (!dt.is_string()) fail(errc::invalid_argument, t + ": dtype " + io::excerpt(dt) + " is not a string");
  const std::string dts = dt.get<std::string>();
  entry e{name, memfmt::dtype::float32, {}, 0, 0};
  if (const auto m = safetensors_dtype(dts)) {
    e.type = *m;
  } else if (known_unsupported(dts)) {
    fail(errc::unsupported_dtype, t + ": dtype " + dts +
                                      " has no memfmt element type (F64, F32, F16, BF16, I64, I32, "
                                      "I16, I8, U8 and BOOL have)");
  } else {
    fail(errc::invalid_argument, t + ": unknown dtype \"" + memfmt::detail::printable(dts) + "\"");
  }
  const nlohmann::json& shape = v.at("shape");
  if (!shape.is_array()) fail(errc::invalid_argument, t + ": shape " + io::excerpt(shape) + " is not an array");
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::uint64_t s =
        non_negative_integer(shape[i], t + ": shape " + io::excerpt(shape) + " entry " + std::to_string(i));
    if (s > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail(errc::overflow,
           t + ": shape " + io::excerpt(shape) + " entry " + std::to_string(i) + " does not fit in int64");
    e.shape.push_back(static_cast<std::int64_t>(s));
  }
  const nlohmann::json& off = v.at("data_offsets");
  if (!off.is_array() || off.size() != 2)
    fail(errc::invalid_argument, t + ": data_offsets " + io::excerpt(off) + " is not an array [begin, end]");
  e.begin = non_negative_integer(off[0], t + ": data_offsets begin");
  e.end = non_negative_integer(off[1], t + ": data_offsets end");
  if (e.begin > e.end)
    fail(errc::invalid_argument,
         t + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] end before begin");
  if (e.end > buffer_size)
    fail(errc::invalid_argument, t + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                                     "] run past the end of the " + std::to_string(buffer_size) + "-byte data buffer");
  const std::string what = t + " " + dts + " " + memfmt::detail::dims_to_string(e.shape);
  const std::int64_t n = memfmt::detail::checked_numel(e.shape, what.c_str());
  const std::size_t bytes = memfmt::detail::checked_bytes(n, size_of(e.type), what.c_str());
  if (e.end - e.begin != bytes)
    fail(errc::shape_mismatch, t + ": " + dts + " " + memfmt::detail::dims_to_string(e.shape) + " is " +
                                   std::to_string(bytes) + " bytes but data_offsets [" + std::to_string(e.begin) +
                                   ", " + std::to_string(e.end) + "] hold " + std::to_string(e.end - e.begin));
  return e;
}

// The header's JSON (the bounded reader of json.hpp), with duplicate keys at any depth refused
// (nlohmann keeps the last one silently).
inline nlohmann::json parse_header(const std::string& where, const char* text, std::size_t size) {
  if (size == 0 || text[0] != '{')
    fail(errc::invalid_argument,
         where + ": the header does not start with '{'" +
             (size ? " (it starts with byte " + std::to_string(static_cast<unsigned char>(text[0])) + ")"
                   : std::string(" (it is empty)")));
  std::vector<std::vector<std::string>> open;  // the keys seen in each enclosing object
  std::string tensor;                          // the top-level key being read
  using json = nlohmann::json;
  const auto check = [&](int depth, json::parse_event_t ev, const json& parsed) {
    if (ev == json::parse_event_t::object_start) open.emplace_back();
    if (ev == json::parse_event_t::object_end && !open.empty()) open.pop_back();
    if (ev == json::parse_event_t::key && !open.empty()) {
      const std::string key = parsed.get<std::string>();
      auto& seen = open.back();
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        fail(errc::invalid_argument, where + ": duplicate key '" + memfmt::detail::printable(key) + "'" +
                                         (depth > 1 ? " in tensor '" + memfmt::detail::printable(tensor) + "'"
                                                    : std::string(" (tensor names are unique)")));
      seen.push_back(key);
      if (depth == 1) tensor = key;
    }
  };
  return io::parse_json(std::string_view(text, size), where + ": the header", check);
}

// What a header declares, checked: the metadata, and tensors that tile a buffer of `buffer_size`
// bytes (sorted by offset).
struct header_contents {
  std::map<std::string, std::string> metadata;
  std::vector<entry> entries;
};

inline header_contents read_header(const std::string& where, const char* text, std::size_t size,
                                   std::uint64_t buffer_size) {
  const nlohmann::json header = parse_header(where, text, size);
  if (!header.is_object()) fail(errc::invalid_argument, where + ": the header is not a JSON object");
  header_contents h;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object())
        fail(errc::invalid_argument, where + ": __metadata__ is " + io::excerpt(v) + ", not an object");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string())
          fail(errc::invalid_argument,
               where + ": __metadata__ '" + memfmt::detail::printable(k) + "' is " + io::excerpt(s) + ", not a string");
        h.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    h.entries.push_back(parse_entry(where, name, v, buffer_size));
  }
  // The tensors must tile the buffer: sorted by offsets, each begins where the previous ended.
  std::sort(h.entries.begin(), h.entries.end(),
            [](const entry& a, const entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t at = 0;
  const entry* prev = nullptr;
  for (const entry& e : h.entries) {
    const auto range = [](const entry& x) {
      return "'" + memfmt::detail::printable(x.name) + "' [" + std::to_string(x.begin) + ", " + std::to_string(x.end) +
             ")";
    };
    if (e.begin < at) fail(errc::invalid_argument, where + ": tensor " + range(e) + " overlaps tensor " + range(*prev));
    if (e.begin > at)
      fail(errc::invalid_argument, where + ": " + std::to_string(e.begin - at) + " bytes before tensor " + range(e) +
                                       " belong to no tensor (" +
                                       (prev ? "after " + range(*prev) : std::string("at the start")) + ")");
    at = e.end;
    if (e.end > e.begin) prev = &e;
  }
  if (at != buffer_size)
    fail(errc::invalid_argument, where + ": the data buffer is " + std::to_string(buffer_size) +
                                     " bytes but the tensors end at " + std::to_string(at) + " (" +
                                     std::to_string(buffer_size - at) + " bytes belong to no tensor)");
  return h;
}

// The safetensors specification's limit on the header (100,000,000 bytes): a larger length is refused
// before a byte of it is read.
constexpr std::uint64_t max_header_bytes = 100000000;

// The header length from the first 8 bytes of a `size`-byte file, checked against the file.
inline std::uint64_t header_length(const std::string& where, const unsigned char* first8, std::uint64_t size) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | first8[i];
  if (n > size - 8)
    fail(errc::invalid_argument, where + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                                     std::to_string(size) + " bytes, " + std::to_string(size - 8) +
                                     " after the length)");
  if (n > max_header_bytes)
    fail(errc::invalid_argument, where + ": header length " + std::to_string(n) + " is past the " +
                                     std::to_string(max_header_bytes) + " bytes the format allows");
  return n;
}

inline void too_short(const std::string& where, std::uint64_t size) {
  if (size < 8)
    fail(errc::invalid_argument, where + ": " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
}

// The store of a checked header: each tensor's bytes [begin, end) of the data buffer, which
// `read_bytes(offset, destination, count)` copies, in host byte order.
template <class ReadBytes>
graph::parameter_store to_store(const header_contents& h, ReadBytes&& read_bytes) {
  graph::parameter_store store;
  store.metadata = h.metadata;
  for (const entry& e : h.entries) {
    graph::parameter p;
    p.type = e.type;
    p.shape = e.shape;
    p.bytes.resize(static_cast<std::size_t>(e.end - e.begin));
    if (!p.bytes.empty()) read_bytes(e.begin, p.bytes.data(), e.end - e.begin);
    to_from_little_endian(p.bytes, size_of(e.type));
    store.insert(e.name, std::move(p));
  }
  return store;
}

}  // namespace detail

// Reads a whole safetensors file held in memory. `where` names it in messages (a path).
inline graph::parameter_store read_safetensors(const std::byte* data, std::size_t size,
                                               const std::string& where = "safetensors") {
  detail::too_short(where, size);
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  const std::uint64_t n = detail::header_length(where, bytes, size);
  const detail::header_contents h =
      detail::read_header(where, reinterpret_cast<const char*>(bytes + 8), static_cast<std::size_t>(n), size - 8 - n);
  return detail::to_store(h, [&](std::uint64_t offset, std::byte* out, std::uint64_t count) {
    std::memcpy(out, data + 8 + n + offset, static_cast<std::size_t>(count));
  });
}

inline graph::parameter_store read_safetensors(const std::vector<std::byte>& file,
                                               const std::string& where = "safetensors") {
  return read_safetensors(file.data(), file.size(), where);
}

// Reads `path` as its header declares: the length, then the header (checked against the file's
// size), then each tensor's bytes straight into its parameter. A file that is not regular (a
// directory, /dev/zero) is refused by name before a byte is read.
inline graph::parameter_store load_safetensors(const std::string& path) {
  input_file f(path, "safetensors file");
  detail::too_short(path, f.size());
  unsigned char first8[8];
  f.read(0, first8, 8);
  const std::uint64_t n = detail::header_length(path, first8, f.size());
  std::string text(static_cast<std::size_t>(n), '\0');
  f.read(8, text.data(), n);
  const detail::header_contents h = detail::read_header(path, text.data(), text.size(), f.size() - 8 - n);
  return detail::to_store(
      h, [&](std::uint64_t offset, std::byte* out, std::uint64_t count) { f.read(8 + n + offset, out, count); });
}

// The file bytes of a store. Tensors go in order of element size (largest first), then name, and the
// header is padded with spaces to a multiple of 8 bytes, so every tensor starts aligned for its
// type when the file is mapped at an 8-byte boundary (the reference writer's layout).
inline std::vector<std::byte> write_safetensors(const graph::parameter_store& store) {
  std::vector<std::pair<std::string, const graph::parameter*>> order;
  for (const auto& [name, p] : store) order.emplace_back(name, &p);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return size_of(a.second->type) > size_of(b.second->type); });
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t at = 0;
  for (const auto& [name, p] : order) {
    const std::uint64_t end = at + p->bytes.size();
    header[name] = {{"dtype", detail::safetensors_name(p->type)}, {"shape", p->shape}, {"data_offsets", {at, end}}};
    at = end;
  }
  if (!store.metadata.empty()) header["__metadata__"] = store.metadata;
  std::string text = io::dump_json(header, -1, "safetensors header");
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::byte> out(8 + text.size());
  std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i, n >>= 8) out[static_cast<std::size_t>(i)] = static_cast<std::byte>(n & 0xffu);
  std::memcpy(out.data() + 8, text.data(), text.size());
  for (const auto& [name, p] : order) {
    std::vector<std::byte> b = p->bytes;
    detail::to_from_little_endian(b, size_of(p->type));
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

inline void save_safetensors(const graph::parameter_store& store, const std::string& path) {
  const std::vector<std::byte> bytes = write_safetensors(store);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) memfmt::detail::fail(errc::invalid_argument, "safetensors: cannot open '" + path + "' for writing");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) memfmt::detail::fail(errc::invalid_argument, "safetensors: writing '" + path + "' failed");
}

}  // namespace memfmt::io
