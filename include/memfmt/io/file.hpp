// memfmt/io/file.hpp - reading the files memfmt is given: regular files only, each read once, no
// more of it than its format declares.
//
// A directory, a device (/dev/zero never ends), a FIFO or a socket is refused by name before any
// byte is read; a file larger than its reader's limit is refused by its size, not by running out
// of memory. The readers of each format (safetensors.hpp, the JSON files, onnx/import.hpp) check a
// header before they read a body.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "../error.hpp"

namespace memfmt::io {

// The size of `path`, a regular file (symbolic links followed); an error naming `what` and the path
// for anything else: missing, unreadable, a directory, a device, a FIFO, a socket.
// @post the file existed and was a regular file when this was called.
inline std::uint64_t regular_file_size(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  const std::string who = what + " '" + path + "'";
  if (ec || !fs::exists(st)) {
    const std::string why = ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "no such file";
    memfmt::detail::fail(errc::invalid_argument, who + " cannot be opened (" + why + ")");
  }
  const char* kind = nullptr;
  switch (st.type()) {
    case fs::file_type::regular: break;
    case fs::file_type::directory: kind = "a directory"; break;
    case fs::file_type::character: kind = "a character device"; break;
    case fs::file_type::block: kind = "a block device"; break;
    case fs::file_type::fifo: kind = "a FIFO"; break;
    case fs::file_type::socket: kind = "a socket"; break;
    default: kind = "not a regular file"; break;
  }
  if (kind) memfmt::detail::fail(errc::invalid_argument, who + " is " + kind + ", not a regular file");
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) memfmt::detail::fail(errc::invalid_argument, who + ": its size cannot be read (" + ec.message() + ")");
  return static_cast<std::uint64_t>(size);
}

// An open regular file, its size, and reads of exact byte ranges.
class input_file {
 public:
  input_file(const std::string& path, std::string what)
      : path_(path), what_(std::move(what)), size_(regular_file_size(path, what_)), in_(path, std::ios::binary) {
    if (!in_) memfmt::detail::fail(errc::invalid_argument, label() + " cannot be opened for reading");
  }
  std::uint64_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }
  std::string label() const { return what_ + " '" + path_ + "'"; }

  // Bytes [offset, offset + n) into `out`. @pre offset + n <= size(): a caller checks what the
  // file declares against its size before reading it.
  void read(std::uint64_t offset, void* out, std::uint64_t n) {
    if (offset > size_ || n > size_ - offset)
      memfmt::detail::fail(errc::invalid_argument, label() + ": " + std::to_string(n) + " bytes at offset " +
                                                       std::to_string(offset) + " run past its end (" +
                                                       std::to_string(size_) + " bytes)");
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
    if (!in_ || static_cast<std::uint64_t>(in_.gcount()) != n)
      memfmt::detail::fail(errc::invalid_argument, label() + ": reading " + std::to_string(n) + " bytes at offset " +
                                                       std::to_string(offset) + " failed (did the file change?)");
  }

 private:
  std::string path_, what_;
  std::uint64_t size_;
  std::ifstream in_;
};

// The whole of `path` (a regular file of at most `max_bytes`), read once into a string of its size.
inline std::string read_text_file(const std::string& path, const std::string& what,
                                  std::uint64_t max_bytes = std::uint64_t{1} << 30) {
  input_file f(path, what);
  if (f.size() > max_bytes)
    memfmt::detail::fail(errc::invalid_argument, f.label() + " is " + std::to_string(f.size()) + " bytes, past the " +
                                                     std::to_string(max_bytes) + " this reader takes");
  std::string text(static_cast<std::size_t>(f.size()), '\0');
  if (!text.empty()) f.read(0, text.data(), f.size());
  return text;
}

}  // namespace memfmt::io
