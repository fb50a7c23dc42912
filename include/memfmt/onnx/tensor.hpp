// memfmt/onnx/tensor.hpp - ONNX TensorProto values as memfmt parameters, and back.
//
// An initializer, a Constant's value and a backend test's input_N.pb are TensorProtos: a dtype,
// dims and the elements either in raw_data (little-endian bytes) or in one of the typed repeated
// fields (float_data, int32_data holding every type of 32 bits or fewer, int64_data, ...). They
// arrive here as graph::parameter (dtype, PyTorch-order shape, dense row-major bytes), the form
// the parameter store and the executor take. Element reads and writes as double / int64 serve the
// constant folding of shape arithmetic.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "../detail/checked.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../graph/parameter_store.hpp"

namespace memfmt::onnx {

using graph::parameter;

// The memfmt dtype of an ONNX TensorProto data type; unsupported_dtype naming `where` for the types
// memfmt has no counterpart of (strings, complex, unsigned 16-64 bit).
inline memfmt::dtype dtype_from_onnx(std::int32_t t, const std::string& where) {
  using T = ::onnx::TensorProto;
  switch (t) {
    case T::FLOAT: return memfmt::dtype::float32;
    case T::DOUBLE: return memfmt::dtype::float64;
    case T::FLOAT16: return memfmt::dtype::float16;
    case T::BFLOAT16: return memfmt::dtype::bfloat16;
    case T::INT8: return memfmt::dtype::int8;
    case T::UINT8: return memfmt::dtype::uint8;
    case T::INT16: return memfmt::dtype::int16;
    case T::INT32: return memfmt::dtype::int32;
    case T::INT64: return memfmt::dtype::int64;
    case T::BOOL: return memfmt::dtype::bool8;
    default: break;
  }
  const std::string name = ::onnx::TensorProto_DataType_IsValid(t)
                               ? ::onnx::TensorProto_DataType_Name(static_cast<::onnx::TensorProto_DataType>(t))
                               : "data type " + std::to_string(t);
  memfmt::detail::fail(errc::unsupported_dtype, where + ": ONNX element type " + name + " has no memfmt dtype");
}

inline std::int32_t dtype_to_onnx(memfmt::dtype t) {
  using T = ::onnx::TensorProto;
  switch (t) {
    case memfmt::dtype::float32: return T::FLOAT;
    case memfmt::dtype::float64: return T::DOUBLE;
    case memfmt::dtype::float16: return T::FLOAT16;
    case memfmt::dtype::bfloat16: return T::BFLOAT16;
    case memfmt::dtype::int8: return T::INT8;
    case memfmt::dtype::uint8: return T::UINT8;
    case memfmt::dtype::int16: return T::INT16;
    case memfmt::dtype::int32: return T::INT32;
    case memfmt::dtype::int64: return T::INT64;
    case memfmt::dtype::bool8: return T::BOOL;
  }
  return T::UNDEFINED;
}

// A TensorProto's value. Errors (memfmt::error naming `where`, the tensor and the values): external
// data, negative dims, an element count that overflows, and typed or raw data whose length is not
// the dims' element count.
inline parameter to_parameter(const ::onnx::TensorProto& t, const std::string& where) {
  const std::string what = where + ": tensor '" + t.name() + "'";
  if (t.data_location() == ::onnx::TensorProto::EXTERNAL)
    memfmt::detail::fail(errc::unsupported, what + " keeps its data in an external file (not supported)");
  parameter p;
  p.type = dtype_from_onnx(t.data_type(), what);
  p.shape.assign(t.dims().begin(), t.dims().end());
  const std::int64_t n = memfmt::detail::checked_numel(p.shape, what.c_str());
  const std::size_t elem = memfmt::size_of(p.type);
  const std::size_t bytes = memfmt::detail::checked_bytes(n, elem, what.c_str());
  const auto mismatch = [&](const char* field, std::size_t found) {
    memfmt::detail::fail(errc::shape_mismatch,
                         what + " " + std::string(to_string(p.type)) + " " + memfmt::detail::dims_to_string(p.shape) +
                             " needs " + std::to_string(n) + " elements, " + field + " holds " + std::to_string(found));
  };
  // The data's length is checked before anything is allocated: dims claiming more than the file
  // holds are an error, not an allocation of what they claim.
  if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes) mismatch("raw_data (bytes / element size)", t.raw_data().size() / elem);
    p.bytes.resize(bytes);
    if (bytes) std::memcpy(p.bytes.data(), t.raw_data().data(), bytes);
    return p;
  }
  const auto copy_from = [&](const auto& field, const char* name, auto cast) {
    if (static_cast<std::size_t>(field.size()) != static_cast<std::size_t>(n)) mismatch(name, field.size());
    p.bytes.resize(bytes);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto v = cast(field.Get(static_cast<int>(i)));
      std::memcpy(p.bytes.data() + static_cast<std::size_t>(i) * elem, &v, elem);
    }
  };
  switch (p.type) {
    case memfmt::dtype::float32: copy_from(t.float_data(), "float_data", [](float v) { return v; }); break;
    case memfmt::dtype::float64: copy_from(t.double_data(), "double_data", [](double v) { return v; }); break;
    case memfmt::dtype::int64: copy_from(t.int64_data(), "int64_data", [](std::int64_t v) { return v; }); break;
    case memfmt::dtype::int32: copy_from(t.int32_data(), "int32_data", [](std::int32_t v) { return v; }); break;
    case memfmt::dtype::int16:
      copy_from(t.int32_data(), "int32_data", [](std::int32_t v) { return static_cast<std::int16_t>(v); });
      break;
    case memfmt::dtype::int8:
      copy_from(t.int32_data(), "int32_data", [](std::int32_t v) { return static_cast<std::int8_t>(v); });
      break;
    case memfmt::dtype::uint8:
    case memfmt::dtype::bool8:
      copy_from(t.int32_data(), "int32_data", [](std::int32_t v) { return static_cast<std::uint8_t>(v); });
      break;
    case memfmt::dtype::float16:
    case memfmt::dtype::bfloat16:  // the 16 bits of each element, as ONNX stores them
      copy_from(t.int32_data(), "int32_data", [](std::int32_t v) { return static_cast<std::uint16_t>(v); });
      break;
  }
  return p;
}

// The TensorProto of a parameter (raw_data), named `name`.
inline ::onnx::TensorProto to_tensor_proto(const parameter& p, const std::string& name) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(dtype_to_onnx(p.type));
  for (std::int64_t d : p.shape) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(p.bytes.data()), p.bytes.size()));
  return t;
}

// Reads a serialized TensorProto (a backend test's input_0.pb / output_0.pb).
inline ::onnx::TensorProto read_tensor_proto(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) memfmt::detail::fail(errc::invalid_argument, "cannot open tensor file '" + path + "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::onnx::TensorProto t;
  if (!t.ParseFromString(bytes))
    memfmt::detail::fail(errc::invalid_argument, "'" + path + "' is not a serialized ONNX TensorProto (" +
                                                     std::to_string(bytes.size()) + " bytes)");
  return t;
}

// ---- element access for constant folding ----

// Element i as double (exact for every integer type up to 2^53 and every float type).
inline double element_as_double(const parameter& p, std::size_t i) {
  const std::byte* b = p.bytes.data() + i * memfmt::size_of(p.type);
  const auto load = [b](auto v) {
    std::memcpy(&v, b, sizeof v);
    return v;
  };
  switch (p.type) {
    case memfmt::dtype::float32: return load(float{});
    case memfmt::dtype::float64: return load(double{});
    case memfmt::dtype::float16: return static_cast<float>(load(memfmt::half{}));
    case memfmt::dtype::bfloat16: return static_cast<float>(load(memfmt::bfloat16{}));
    case memfmt::dtype::int8: return load(std::int8_t{});
    case memfmt::dtype::uint8:
    case memfmt::dtype::bool8: return load(std::uint8_t{});
    case memfmt::dtype::int16: return load(std::int16_t{});
    case memfmt::dtype::int32: return load(std::int32_t{});
    case memfmt::dtype::int64: return static_cast<double>(load(std::int64_t{}));
  }
  return 0.0;
}

// v truncated toward zero into int64, saturating at its limits (NaN gives 0): a float constant
// such as -inf or 1e30 (attention masks) has no int64 value, and the plain cast would be undefined.
inline std::int64_t saturating_int64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return std::numeric_limits<std::int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(v);
}

// Element i as int64 (floats truncated toward zero, saturating).
inline std::int64_t element_as_int64(const parameter& p, std::size_t i) {
  if (p.type == memfmt::dtype::int64) {
    std::int64_t v = 0;
    std::memcpy(&v, p.bytes.data() + i * 8, 8);
    return v;
  }
  return saturating_int64(element_as_double(p, i));
}

// Stores v into element i, converted to the parameter's dtype.
inline void store_element(parameter& p, std::size_t i, double v, std::int64_t iv) {
  std::byte* b = p.bytes.data() + i * memfmt::size_of(p.type);
  const auto put = [b](auto x) { std::memcpy(b, &x, sizeof x); };
  switch (p.type) {
    case memfmt::dtype::float32: put(static_cast<float>(v)); break;
    case memfmt::dtype::float64: put(v); break;
    case memfmt::dtype::float16: put(memfmt::half(static_cast<float>(v))); break;
    case memfmt::dtype::bfloat16: put(memfmt::bfloat16(static_cast<float>(v))); break;
    case memfmt::dtype::int8: put(static_cast<std::int8_t>(iv)); break;
    case memfmt::dtype::uint8: put(static_cast<std::uint8_t>(iv)); break;
    case memfmt::dtype::bool8: put(static_cast<std::uint8_t>(iv != 0)); break;
    case memfmt::dtype::int16: put(static_cast<std::int16_t>(iv)); break;
    case memfmt::dtype::int32: put(static_cast<std::int32_t>(iv)); break;
    case memfmt::dtype::int64: put(iv); break;
  }
}

// A zero-filled parameter of a dtype and shape.
inline parameter make_parameter(memfmt::dtype type, std::vector<std::int64_t> shape, const std::string& what) {
  parameter p;
  p.type = type;
  p.shape = std::move(shape);
  p.bytes.resize(memfmt::detail::checked_bytes(memfmt::detail::checked_numel(p.shape, what.c_str()),
                                               memfmt::size_of(type), what.c_str()));
  return p;
}

// A 1-D int64 tensor (what Shape returns and what pads, axes and sizes inputs hold).
inline parameter int64_vector(const std::vector<std::int64_t>& v) {
  parameter p = make_parameter(memfmt::dtype::int64, {static_cast<std::int64_t>(v.size())}, "int64 vector");
  if (!v.empty()) std::memcpy(p.bytes.data(), v.data(), v.size() * 8);
  return p;
}

inline std::vector<std::int64_t> int64_values(const parameter& p) {
  std::vector<std::int64_t> v(p.bytes.size() / memfmt::size_of(p.type));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = element_as_int64(p, i);
  return v;
}
inline std::vector<double> double_values(const parameter& p) {
  std::vector<double> v(p.bytes.size() / memfmt::size_of(p.type));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = element_as_double(p, i);
  return v;
}

}  // namespace memfmt::onnx
