// memfmt::cuda::convert on a GPU, compared element by element with a naive host mapping
// (dst[layout<To>(n, c, ...)] == src[layout<From>(n, c, ...)]) and byte for byte with the CPU
// conversion (memfmt::convert), for every element size, odd and ambiguous shapes, padded views
// and round trips. Tests that need a device skip without one; the
// argument checks (which run before any CUDA call) run everywhere.
#include "memfmt/convert/cuda/convert.cuh"  // first: the header compiles on its own

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "memfmt/convert/convert.hpp"
#include "memfmt/dtype.hpp"
#include "memfmt/format/layout.hpp"
#include "memfmt/tensor/tensor_view.hpp"
#include "../common/coords.hpp"

using memfmt_test::for_each_coord;
using memfmt_test::padded_layout;

namespace {

using namespace memfmt;

std::string device_problem() {
  int count = 0;
  const cudaError_t st = cudaGetDeviceCount(&count);
  if (st != cudaSuccess) return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(st);
  if (count == 0) return "cudaGetDeviceCount reports no CUDA device";
  return {};
}

#define REQUIRE_GPU()                                                                \
  do {                                                                               \
    static const std::string problem = device_problem();                             \
    if (!problem.empty()) GTEST_SKIP() << "needs a CUDA device (" << problem << ")"; \
  } while (0)

void check_cuda(cudaError_t st, const char* what) {
  ASSERT_EQ(st, cudaSuccess) << what << ": " << cudaGetErrorString(st);
}

struct device_bytes {
  explicit device_bytes(std::size_t n) : size(n) {
    if (cudaMalloc(&ptr, n == 0 ? 1 : n) != cudaSuccess) ptr = nullptr;
  }
  ~device_bytes() { cudaFree(ptr); }
  device_bytes(const device_bytes&) = delete;
  device_bytes& operator=(const device_bytes&) = delete;
  void* ptr = nullptr;
  std::size_t size;
};

constexpr unsigned char sentinel = 0xA5;

// Host image of a device tensor: `offset_elems` elements past the allocation (to steer the
// kernel's vector-width choice), span elements, sentinel bytes elsewhere.
template <class T, class F>
struct tensor_pair {
  tensor_pair(const layout<F>& m, int offset_elems)
      : map(m),
        offset(static_cast<std::size_t>(offset_elems) * sizeof(T)),
        bytes(offset + static_cast<std::size_t>(m.required_span_size()) * sizeof(T)),
        host(bytes, sentinel),
        dev(bytes) {}
  T* device_data() const { return reinterpret_cast<T*>(static_cast<unsigned char*>(dev.ptr) + offset); }
  const unsigned char* host_elem(std::int64_t off) const { return host.data() + offset + off * sizeof(T); }
  unsigned char* host_elem(std::int64_t off) { return host.data() + offset + off * sizeof(T); }
  void upload() { check_cuda(cudaMemcpy(dev.ptr, host.data(), bytes, cudaMemcpyHostToDevice), "upload"); }
  void download() { check_cuda(cudaMemcpy(host.data(), dev.ptr, bytes, cudaMemcpyDeviceToHost), "download"); }
  layout<F> map;
  std::size_t offset;
  std::size_t bytes;
  std::vector<unsigned char> host;
  device_bytes dev;
};

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Every logical element of `to` holds the bytes of the same element of `from`; padding of `to`
// still holds the sentinel.
template <class T, class A, class B>
void expect_same_elements(const tensor_pair<T, A>& from, const tensor_pair<T, B>& to, const std::string& name) {
  std::vector<bool> logical(to.bytes, false);
  int bad = 0;
  for_each_coord(from.map.extents(), [&](const auto& c) {
    const std::int64_t d = to.map(c);
    for (std::size_t b = 0; b < sizeof(T); ++b) logical[to.offset + d * sizeof(T) + b] = true;
    if (std::memcmp(to.host_elem(d), from.host_elem(from.map(c)), sizeof(T)) != 0 && bad++ < 5)
      ADD_FAILURE() << name << ": element " << memfmt::detail::dims_to_string(c) << " differs";
  });
  for (std::size_t i = 0; i < to.bytes; ++i)
    if (!logical[i] && to.host[i] != sentinel && bad++ < 5)
      ADD_FAILURE() << name << ": byte " << i << " outside the tensor was written";
}

// src (From, padded by src_pad) -> dst (To, padded by dst_pad) -> back (From, packed), on a stream.
template <class T, class From, class To>
void check_convert(const typename layout<From>::extents_type& e, int src_pad, int dst_pad, int src_off, int dst_off) {
  const std::string name = std::string(From::name) + " -> " + To::name + " sizes " + memfmt::detail::dims_to_string(e) +
                           " elem " + std::to_string(sizeof(T)) + " pads " + std::to_string(src_pad) + "/" +
                           std::to_string(dst_pad) + " offsets " + std::to_string(src_off) + "/" +
                           std::to_string(dst_off);
  SCOPED_TRACE(name);
  tensor_pair<T, From> src(padded_layout<From>(e, src_pad), src_off);
  tensor_pair<T, To> dst(padded_layout<To>(e, dst_pad), dst_off);
  tensor_pair<T, From> back(layout<From>::packed(e), 0);
  ASSERT_TRUE(src.dev.ptr && dst.dev.ptr && back.dev.ptr) << "cudaMalloc failed";
  for (std::size_t i = 0; i < src.bytes; ++i) src.host[i] = static_cast<unsigned char>(mix(i) >> 11);
  src.upload();
  dst.upload();
  back.upload();
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  cuda::convert(tensor_view<const T, From>(src.device_data(), src.map), tensor_view<T, To>(dst.device_data(), dst.map),
                stream);
  // Mutable source view: the convenience overload.
  cuda::convert(tensor_view<T, To>(dst.device_data(), dst.map), tensor_view<T, From>(back.device_data(), back.map),
                stream);
  check_cuda(cudaStreamSynchronize(stream), "kernel execution");
  check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
  dst.download();
  back.download();
  expect_same_elements(src, dst, name + " (forward)");
  // The CPU conversion into an identical image: every byte (padding included) must agree.
  std::vector<unsigned char> cpu(dst.bytes, sentinel);
  memfmt::convert(tensor_view<const T, From>(reinterpret_cast<const T*>(src.host_elem(0)), src.map),
                  tensor_view<T, To>(reinterpret_cast<T*>(cpu.data() + dst.offset), dst.map));
  EXPECT_TRUE(cpu == dst.host) << name << ": GPU and CPU conversions differ";
  expect_same_elements(src, back, name + " (round trip)");
}

constexpr std::array<std::array<std::int64_t, 4>, 23> shapes_4d = {{
    {2, 12, 3, 20},  // 4-element groups for every size
    {1, 6, 3, 10},   // 2-element groups
    {1, 1, 1, 1},
    {1, 3, 7, 7},
    {2, 17, 5, 9},
    {3, 33, 1, 63},
    {1, 64, 8, 8},
    {2, 7, 17, 33},
    {1, 1, 13, 17},  // C == 1: ambiguous
    {3, 65, 1, 1},   // spatial 1x1: ambiguous
    {2, 16, 2, 32},
    {1, 63, 33, 2},
    {0, 3, 4, 4},    // empty
    {1, 130, 5, 1},  // W == 1
    {4, 67, 33, 65},
    {2, 256, 28, 28},
    {2, 3, 45, 67},    // C = 3: the narrow path, 3015 positions over 3 blocks, the
                       // last one partial
    {2, 3, 64, 96},    // C = 3, 6144 positions: 16-byte vectors for 1 and 2 bytes, 2-6 blocks an image
    {2, 48, 2, 2},     // 4 positions, 48 channels: the same, the other way round
    {2, 15, 16, 69},   // 1 byte, N = 15: 69 units an image, full warps and a partial last one
    {1, 1104, 1, 11},  // N = 11 positions, 1104 channels: the same, the other way round
    {2, 200, 7, 7},    // 49 positions: runs of short rows (dense_mode), the last tile partial
    {3, 200, 8, 8},    // 64 positions: runs towards channels-first for 1- and 2-byte elements
}};
constexpr std::array<std::array<std::int64_t, 5>, 10> shapes_5d = {{
    {1, 12, 2, 3, 20},
    {1, 3, 2, 5, 7},
    {2, 17, 3, 3, 3},
    {1, 64, 2, 4, 8},
    {1, 1, 3, 7, 17},
    {2, 33, 1, 1, 1},
    {1, 40, 1, 3, 32},
    {2, 48, 5, 9, 16},
    {2, 32, 3, 3, 3},   // D*H*W = 27: whole-tile runs, wider than the lines allow
    {1, 5, 4, 16, 16},  // 5 channels, 1024 positions: the narrow path's vectors in 3-D
}};

template <class T, class From, class To, std::size_t N, std::size_t R>
void check_shapes(const std::array<std::array<std::int64_t, R>, N>& shapes) {
  for (const auto& e : shapes) {
    check_convert<T, From, To>(e, 0, 0, 0, 0);  // packed, aligned
    check_convert<T, From, To>(e, 2, 0, 0, 1);  // padded source, destination one element off
    check_convert<T, From, To>(e, 0, 3, 1, 0);  // padded destination, source one element off
    if (::testing::Test::HasFatalFailure()) return;
  }
}

template <class T>
void check_all_pairs() {
  check_shapes<T, nchw, nhwc>(shapes_4d);
  check_shapes<T, nhwc, nchw>(shapes_4d);
  check_shapes<T, nchw, nchw>(shapes_4d);
  check_shapes<T, nhwc, nhwc>(shapes_4d);
  check_shapes<T, ncdhw, ndhwc>(shapes_5d);
  check_shapes<T, ndhwc, ncdhw>(shapes_5d);
  check_shapes<T, ncdhw, ncdhw>(shapes_5d);
  check_shapes<T, ndhwc, ndhwc>(shapes_5d);
}

TEST(CudaConvert, OneByteElements) {
  REQUIRE_GPU();
  check_all_pairs<std::int8_t>();
}
TEST(CudaConvert, TwoByteElements) {
  REQUIRE_GPU();
  check_all_pairs<half>();
  check_shapes<bfloat16, nchw, nhwc>(shapes_4d);
}
TEST(CudaConvert, FourByteElements) {
  REQUIRE_GPU();
  check_all_pairs<float>();
}
TEST(CudaConvert, EightByteElements) {
  REQUIRE_GPU();
  check_all_pairs<double>();
}

// Argument checks happen on the host before any CUDA call, so these run without a GPU too.
TEST(CudaConvert, RejectsBadArgumentsBeforeLaunch) {
  float* fake = reinterpret_cast<float*>(std::uintptr_t{0x10000});  // never dereferenced
  const tensor_view<const float, nchw> src(fake, {{1, 3, 4, 5}});
  try {
    cuda::convert(src, tensor_view<float, nhwc>(fake + 1000, {{1, 3, 5, 4}}));
    ADD_FAILURE() << "shape mismatch not detected";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
    EXPECT_NE(std::string(e.what()).find("[1, 3, 5, 4]"), std::string::npos) << e.what();
  }
  try {
    cuda::convert(src, tensor_view<float, nhwc>(nullptr, {{1, 3, 4, 5}}));
    ADD_FAILURE() << "null destination not detected";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), errc::null_pointer);
  }
  try {
    auto* odd = reinterpret_cast<float*>(std::uintptr_t{0x20002});
    cuda::convert(src, tensor_view<float, nhwc>(odd, {{1, 3, 4, 5}}));
    ADD_FAILURE() << "misaligned destination not detected";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), errc::misaligned);
  }
  // Empty: nothing to check or launch.
  EXPECT_NO_THROW(cuda::convert(tensor_view<const float, nchw>(nullptr, {{0, 3, 4, 5}}),
                                tensor_view<float, nhwc>(nullptr, {{0, 3, 4, 5}})));
}

}  // namespace
