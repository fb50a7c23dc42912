// memfmt/backends/cudnn/descriptor.hpp - a move-only owner of one cudnnBackendDescriptor_t.
//
// Thin typed helpers over cudnnBackendSetAttribute / GetAttribute / Finalize; every failure throws
// memfmt::error through check_cudnn() naming the attribute. A process-wide counter of created
// descriptors lets tests prove that argument validation happens before any cuDNN call.
#pragma once

#include <cudnn.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "status.hpp"

namespace memfmt::cudnn {

class descriptor {
 public:
  descriptor() = default;
  explicit descriptor(cudnnBackendDescriptorType_t type) : type_(type) {
    check_cudnn(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
    created_counter().fetch_add(1, std::memory_order_relaxed);
  }
  ~descriptor() { reset(); }
  descriptor(descriptor&& o) noexcept : d_(std::exchange(o.d_, nullptr)), type_(o.type_), final_(o.final_) {}
  descriptor& operator=(descriptor&& o) noexcept {
    if (this != &o) {
      reset();
      d_ = std::exchange(o.d_, nullptr);
      type_ = o.type_;
      final_ = o.final_;
    }
    return *this;
  }
  descriptor(const descriptor&) = delete;
  descriptor& operator=(const descriptor&) = delete;

  cudnnBackendDescriptor_t get() const noexcept { return d_; }
  cudnnBackendDescriptorType_t type() const noexcept { return type_; }
  bool finalized() const noexcept { return final_; }
  explicit operator bool() const noexcept { return d_ != nullptr; }

  void reset() noexcept {
    if (d_) cudnnBackendDestroyDescriptor(d_);
    d_ = nullptr;
    final_ = false;
  }

  // --- setters ---
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count, const void* data,
           const char* what) {
    check_cudnn(cudnnBackendSetAttribute(d_, name, type, count, data), what);
  }
  void set_int64(cudnnBackendAttributeName_t name, std::int64_t v, const char* what) {
    set(name, CUDNN_TYPE_INT64, 1, &v, what);
  }
  void set_int64s(cudnnBackendAttributeName_t name, const std::vector<std::int64_t>& v, const char* what) {
    set(name, CUDNN_TYPE_INT64, static_cast<std::int64_t>(v.size()), v.data(), what);
  }
  void set_bool(cudnnBackendAttributeName_t name, bool v, const char* what) {
    set(name, CUDNN_TYPE_BOOLEAN, 1, &v, what);
  }
  void set_data_type(cudnnBackendAttributeName_t name, cudnnDataType_t v, const char* what) {
    set(name, CUDNN_TYPE_DATA_TYPE, 1, &v, what);
  }
  void set_desc(cudnnBackendAttributeName_t name, const descriptor& v, const char* what) {
    cudnnBackendDescriptor_t raw = v.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw, what);
  }
  void set_descs(cudnnBackendAttributeName_t name, const std::vector<cudnnBackendDescriptor_t>& v, const char* what) {
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<std::int64_t>(v.size()), v.data(), what);
  }

  void finalize(const char* what) {
    check_cudnn(cudnnBackendFinalize(d_), what);
    final_ = true;
  }
  // Finalize, reporting failure as a status instead of throwing (engine configs that do not support
  // a graph are a normal outcome while searching for a plan).
  cudnnStatus_t try_finalize() noexcept {
    const cudnnStatus_t s = cudnnBackendFinalize(d_);
    final_ = (s == CUDNN_STATUS_SUCCESS);
    return s;
  }

  // --- getters (the descriptor must be finalized; cuDNN refuses otherwise) ---
  std::int64_t count_of(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const char* what) const {
    std::int64_t n = 0;
    check_cudnn(cudnnBackendGetAttribute(d_, name, type, 0, &n, nullptr), what);
    return n;
  }
  std::int64_t get_int64(cudnnBackendAttributeName_t name, const char* what) const {
    std::int64_t v = 0, n = 0;
    check_cudnn(cudnnBackendGetAttribute(d_, name, CUDNN_TYPE_INT64, 1, &n, &v), what);
    return v;
  }
  std::vector<std::int64_t> get_int64s(cudnnBackendAttributeName_t name, const char* what,
                                       std::int64_t max_count = 16) const {
    std::vector<std::int64_t> v(static_cast<std::size_t>(max_count));
    std::int64_t n = 0;
    check_cudnn(cudnnBackendGetAttribute(d_, name, CUDNN_TYPE_INT64, max_count, &n, v.data()), what);
    v.resize(static_cast<std::size_t>(n < max_count ? n : max_count));
    return v;
  }
  bool get_bool(cudnnBackendAttributeName_t name, const char* what) const {
    bool v = false;
    std::int64_t n = 0;
    check_cudnn(cudnnBackendGetAttribute(d_, name, CUDNN_TYPE_BOOLEAN, 1, &n, &v), what);
    return v;
  }
  cudnnDataType_t get_data_type(cudnnBackendAttributeName_t name, const char* what) const {
    cudnnDataType_t v{};
    std::int64_t n = 0;
    check_cudnn(cudnnBackendGetAttribute(d_, name, CUDNN_TYPE_DATA_TYPE, 1, &n, &v), what);
    return v;
  }
  template <class E>
  E get_enum(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const char* what) const {
    E v{};
    std::int64_t n = 0;
    check_cudnn(cudnnBackendGetAttribute(d_, name, type, 1, &n, &v), what);
    return v;
  }
  // Reads descriptor-valued attributes into freshly created descriptors of `type` (cuDNN fills
  // descriptors the caller created, it does not hand out its own).
  std::vector<descriptor> get_descs(cudnnBackendAttributeName_t name, cudnnBackendDescriptorType_t type,
                                    std::int64_t count, const char* what) const {
    std::vector<descriptor> out;
    std::vector<cudnnBackendDescriptor_t> raw;
    out.reserve(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
      out.emplace_back(type);
      raw.push_back(out.back().get());
    }
    std::int64_t n = 0;
    if (count > 0)
      check_cudnn(cudnnBackendGetAttribute(d_, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &n, raw.data()), what);
    out.resize(static_cast<std::size_t>(n < count ? n : count));
    for (auto& d : out) d.final_ = true;
    return out;
  }

  // Descriptors created by this process so far (all threads).
  static std::int64_t created_count() noexcept { return created_counter().load(std::memory_order_relaxed); }

 private:
  static std::atomic<std::int64_t>& created_counter() noexcept {
    static std::atomic<std::int64_t> c{0};
    return c;
  }
  cudnnBackendDescriptor_t d_ = nullptr;
  cudnnBackendDescriptorType_t type_ = CUDNN_BACKEND_TENSOR_DESCRIPTOR;
  bool final_ = false;
};

}  // namespace memfmt::cudnn
