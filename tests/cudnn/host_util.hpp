// Helpers of the cuDNN host tests: fake device addresses, reading a tensor descriptor back, and
// checking that an error is raised before any cuDNN descriptor is created. Needs cuDNN, no GPU.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <memfmt/backends/cudnn/descriptor.hpp>
#include <memfmt/dtype.hpp>
#include <memfmt/error.hpp>

namespace memfmt_test {

// A fake, 256-byte aligned device address: descriptors never dereference it.
template <class T>
T* fake_ptr(std::uintptr_t slot = 1) {
  return reinterpret_cast<T*>(slot * 0x100000u);
}

inline cudnnDataType_t expected_cudnn_type(memfmt::dtype t) {
  switch (t) {
    case memfmt::dtype::float32: return CUDNN_DATA_FLOAT;
    case memfmt::dtype::float64: return CUDNN_DATA_DOUBLE;
    case memfmt::dtype::float16: return CUDNN_DATA_HALF;
    case memfmt::dtype::bfloat16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_INT8;
  }
}

struct tensor_readback {
  std::vector<std::int64_t> dims, strides;
  cudnnDataType_t type;
  std::int64_t uid, alignment;
  bool is_virtual, by_value;
};
inline tensor_readback read_tensor(const memfmt::cudnn::descriptor& d) {
  tensor_readback r;
  r.dims = d.get_int64s(CUDNN_ATTR_TENSOR_DIMENSIONS, "get dims");
  r.strides = d.get_int64s(CUDNN_ATTR_TENSOR_STRIDES, "get strides");
  r.type = d.get_data_type(CUDNN_ATTR_TENSOR_DATA_TYPE, "get type");
  r.uid = d.get_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, "get uid");
  // CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT cannot be read back (cuDNN 9.19 answers NOT_SUPPORTED); the
  // alignment is checked on the spec the descriptor was finalized from, and cuDNN's own check of it
  // (alignment % element size) is exercised in test_errors.cpp.
  r.alignment = -1;
  r.is_virtual = d.get_bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, "get virtual");
  r.by_value = d.get_bool(CUDNN_ATTR_TENSOR_IS_BY_VALUE, "get by value");
  return r;
}

// fn() throws memfmt::error with `code` and a message containing `needle`, and creates no cuDNN
// descriptor first (validation happens before any cuDNN call).
template <class Fn>
void expect_error_before_cudnn(Fn&& fn, memfmt::errc code, const std::string& needle) {
  const std::int64_t before = memfmt::cudnn::descriptor::created_count();
  try {
    fn();
    ADD_FAILURE() << "no error thrown (expected one mentioning '" << needle << "')";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  EXPECT_EQ(memfmt::cudnn::descriptor::created_count(), before)
      << "a cuDNN descriptor was created before validation failed";
}

}  // namespace memfmt_test
