// memfmt/graph/parameter_store.hpp - named parameter tensors, as a network's weights arrive.
//
// A parameter is what a PyTorch state_dict entry is: a name ("layer1.0.conv1.weight"), a dtype,
// logical extents in PyTorch's order (a conv weight is [K, C/groups, R, S]) and its elements dense
// in row-major order of those extents, in the host's byte order. The store owns the bytes; the executor reads
// it once at build time and keeps its own copies in the layouts the layers run in, so the store may
// be dropped afterwards. File formats (io/safetensors.hpp) fill and read stores; this header needs
// no library beyond the standard one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/checked.hpp"
#include "../dtype.hpp"
#include "../error.hpp"

namespace memfmt::graph {

struct parameter {
  memfmt::dtype type = memfmt::dtype::float32;
  std::vector<std::int64_t> shape;  // logical extents, PyTorch order; {} is a scalar
  std::vector<std::byte> bytes;     // numel(shape) * size_of(type) bytes, row-major, host byte order

  std::int64_t numel() const { return memfmt::detail::checked_numel(shape, "parameter"); }

  // The elements as T; T must be the parameter's dtype (a float32 store read as double is an error,
  // not a reinterpretation). memcpy'd out so that the bytes need no alignment for T.
  template <class T>
  std::vector<T> values(std::string_view name = "parameter") const {
    if (dtype_of_v<T> != type)
      memfmt::detail::fail(errc::unsupported_dtype, "parameter '" + std::string(name) + "' is " +
                                                        std::string(to_string(type)) + ", read as " +
                                                        std::string(to_string(dtype_of_v<T>)));
    std::vector<T> v(bytes.size() / sizeof(T));
    if constexpr (std::is_same_v<T, bool>) {  // vector<bool> has no data()
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = bytes[i] != std::byte{0};
    } else if (!bytes.empty()) {
      std::memcpy(v.data(), bytes.data(), bytes.size());
    }
    return v;
  }
};

// "float32 [64, 3, 7, 7]": how messages name a parameter's dtype and shape.
inline std::string describe(memfmt::dtype type, const std::vector<std::int64_t>& shape) {
  return std::string(to_string(type)) + " " + memfmt::detail::dims_to_string(shape);
}

// Name -> parameter, ordered by name (so iteration and files written from it are deterministic).
class parameter_store {
 public:
  // Adds a parameter; a name already present, a negative extent, an element count that overflows or
  // a byte count that does not match shape * dtype is an error naming the parameter and the values.
  void insert(std::string name, parameter p) {
    if (name.empty()) memfmt::detail::fail(errc::invalid_argument, "parameter store: a parameter needs a name");
    if (params_.count(name))
      memfmt::detail::fail(errc::invalid_argument, "parameter store: '" + name + "' is already present (" +
                                                       describe(params_.at(name).type, params_.at(name).shape) + ")");
    const std::string what = "parameter '" + name + "' " + memfmt::detail::dims_to_string(p.shape);
    const std::int64_t n = memfmt::detail::checked_numel(p.shape, what.c_str());
    const std::size_t expected = memfmt::detail::checked_bytes(n, size_of(p.type), what.c_str());
    if (p.bytes.size() != expected)
      memfmt::detail::fail(errc::shape_mismatch, "parameter store: '" + name + "' is " + describe(p.type, p.shape) +
                                                     ", " + std::to_string(expected) + " bytes, but " +
                                                     std::to_string(p.bytes.size()) + " bytes were given");
    params_.emplace(std::move(name), std::move(p));
  }

  // Typed convenience: the values in row-major order of `shape`.
  template <class T>
  void insert(std::string name, std::vector<std::int64_t> shape, const std::vector<T>& values) {
    parameter p;
    p.type = dtype_of_v<T>;
    p.shape = std::move(shape);
    p.bytes.resize(values.size() * sizeof(T));
    if constexpr (std::is_same_v<T, bool>) {
      for (std::size_t i = 0; i < values.size(); ++i)
        p.bytes[i] = std::byte{values[i] ? std::uint8_t{1} : std::uint8_t{0}};
    } else if (!values.empty()) {
      std::memcpy(p.bytes.data(), values.data(), p.bytes.size());
    }
    insert(std::move(name), std::move(p));
  }

  // Replaces an existing parameter or adds a new one (trained weights written back).
  void assign(const std::string& name, parameter p) {
    params_.erase(name);
    insert(name, std::move(p));
  }

  const parameter* find(std::string_view name) const {
    const auto it = params_.find(std::string(name));
    return it == params_.end() ? nullptr : &it->second;
  }
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  const parameter& at(std::string_view name) const {
    if (const parameter* p = find(name)) return *p;
    memfmt::detail::fail(errc::invalid_argument, "parameter store: no parameter '" + std::string(name) + "' (" +
                                                     std::to_string(params_.size()) + " parameters)");
  }

  std::size_t size() const noexcept { return params_.size(); }
  bool empty() const noexcept { return params_.empty(); }
  auto begin() const noexcept { return params_.begin(); }
  auto end() const noexcept { return params_.end(); }
  std::vector<std::string> names() const {
    std::vector<std::string> r;
    for (const auto& kv : params_) r.push_back(kv.first);
    return r;
  }

  // Free-form string pairs a file carries beside the tensors (safetensors' "__metadata__").
  std::map<std::string, std::string> metadata;

 private:
  std::map<std::string, parameter> params_;
};

}  // namespace memfmt::graph
