// memfmt/error.hpp - the one exception type of the library's host API.
//
// Host-side entry points validate their arguments and throw memfmt::error with a message that
// names the offending values. Index math (layouts, device code) never throws: it is noexcept and
// callers validate once, up front.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace memfmt {

enum class errc {
  invalid_argument,   // a value out of its domain (negative size, bad stride order, ...)
  shape_mismatch,     // two tensors that must agree in shape do not
  format_mismatch,    // the data is not dense in the requested format
  overflow,           // a size or offset does not fit in 64 bits
  null_pointer,       // a data pointer is null where data is needed
  misaligned,         // a pointer is not aligned for its element type
  unsupported_dtype,  // an element type the operation cannot handle
  unsupported,        // a valid request the backend does not implement
  backend_failure,    // cuDNN, oneDNN or CUDA reported an error
  out_of_memory,      // memory the operation needs could not be allocated
};

inline const char* to_string(errc c) noexcept {
  switch (c) {
    case errc::invalid_argument: return "invalid argument";
    case errc::shape_mismatch: return "shape mismatch";
    case errc::format_mismatch: return "format mismatch";
    case errc::overflow: return "overflow";
    case errc::null_pointer: return "null pointer";
    case errc::misaligned: return "misaligned pointer";
    case errc::unsupported_dtype: return "unsupported dtype";
    case errc::unsupported: return "unsupported";
    case errc::backend_failure: return "backend failure";
    case errc::out_of_memory: return "out of memory";
  }
  return "unknown";
}

class error : public std::runtime_error {
 public:
  error(errc code, const std::string& what) : std::runtime_error(what), code_(code) {}
  errc code() const noexcept { return code_; }

 private:
  errc code_;
};

namespace detail {

// "[2, 3, 4]" - the notation every message uses for sizes and strides.
template <class Range>
std::string dims_to_string(const Range& r) {
  std::ostringstream os;
  os << '[';
  bool first = true;
  for (auto v : r) {
    if (!first) os << ", ";
    os << static_cast<long long>(v);
    first = false;
  }
  os << ']';
  return os.str();
}

inline std::string dims_to_string(std::initializer_list<std::int64_t> r) {
  return dims_to_string<std::initializer_list<std::int64_t>>(r);
}

[[noreturn]] inline void fail(errc code, const std::string& what) { throw error(code, what); }

}  // namespace detail
}  // namespace memfmt
