// DLPack in (view_as from a DLTensor) and out (to_dlpack), against the DLPack rules, brute-force
// addressing, and the properties PyTorch 1.13's from_dlpack needs (found by experiment with the
// installed torch; see the top of memfmt/interop/dlpack.hpp and torch_roundtrip.py).
#include <memfmt/interop/dlpack.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <memfmt/tensor/host_tensor.hpp>
#include "../common/coords.hpp"
#include "../common/expect_error.hpp"

using memfmt_test::for_each_coord;

namespace {

using memfmt::errc;
using dims = std::vector<std::int64_t>;

using memfmt_test::error_message;

void expect_contains(const std::string& msg, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
}

// A DLTensor over caller-owned shape/strides vectors (strides empty = NULL).
struct dl_fixture {
  dims shape, strides;
  DLTensor t{};
  dl_fixture(void* data, dims shape_, dims strides_, DLDataType dt, DLDevice dev = DLDevice{kDLCPU, 0},
             std::uint64_t byte_offset = 0)
      : shape(std::move(shape_)), strides(std::move(strides_)) {
    t.data = data;
    t.device = dev;
    t.ndim = static_cast<std::int32_t>(shape.size());
    t.dtype = dt;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.byte_offset = byte_offset;
  }
};

// Every element of v lies at base + sum(coord * strides) (strides of the DLTensor, in elements).
template <class V>
std::int64_t address_mismatches(const V& v, const typename V::element_type* base, const dims& strides) {
  std::int64_t bad = 0;
  for_each_coord<V::rank>(v.extents(), [&](const typename V::extents_type& c) {
    std::int64_t off = 0;
    for (int d = 0; d < V::rank; ++d) off += c[static_cast<std::size_t>(d)] * strides[static_cast<std::size_t>(d)];
    if (&v(c) != base + off) ++bad;
  });
  return bad;
}

// ---- dtypes ---------------------------------------------------------------------------------

// (code, bits) as torch 1.13's to_dlpack reports them (probed with the installed torch).
TEST(DlpackDtype, MatchesTorchEncoding) {
  struct row {
    DLDataType got;
    std::uint8_t code, bits;
    const char* name;
  };
  const row rows[] = {
      {memfmt::dlpack::dtype_for<float>(), 2, 32, "float32"},
      {memfmt::dlpack::dtype_for<double>(), 2, 64, "float64"},
      {memfmt::dlpack::dtype_for<memfmt::half>(), 2, 16, "float16"},
      {memfmt::dlpack::dtype_for<memfmt::bfloat16>(), 4, 16, "bfloat16"},
      {memfmt::dlpack::dtype_for<std::int8_t>(), 0, 8, "int8"},
      {memfmt::dlpack::dtype_for<std::uint8_t>(), 1, 8, "uint8"},
      {memfmt::dlpack::dtype_for<std::int16_t>(), 0, 16, "int16"},
      {memfmt::dlpack::dtype_for<std::int32_t>(), 0, 32, "int32"},
      {memfmt::dlpack::dtype_for<std::int64_t>(), 0, 64, "int64"},
      {memfmt::dlpack::dtype_for<bool>(), 6, 8, "bool"},  // kDLBool (DLPack >= 0.8)
  };
  for (const auto& r : rows) {
    EXPECT_EQ(r.got.code, r.code) << r.name;
    EXPECT_EQ(r.got.bits, r.bits) << r.name;
    EXPECT_EQ(r.got.lanes, 1) << r.name;
    EXPECT_EQ(memfmt::dlpack::to_string(r.got), r.name);
  }
  EXPECT_TRUE(memfmt::dlpack::same_dtype(memfmt::dlpack::dtype_for<const float>(), memfmt::dlpack::dtype_for<float>()));
  EXPECT_EQ(memfmt::dlpack::to_string(DLDataType{2, 32, 4}), "code 2 bits 32 lanes 4");
}

template <class T>
void accepts_own_dtype() {
  std::unique_ptr<T[]> buf(new T[2 * 3 * 4 * 5]());
  dl_fixture f(buf.get(), {2, 3, 4, 5}, {60, 1, 15, 3}, memfmt::dlpack::dtype_for<T>());
  const auto v = memfmt::view_as<memfmt::nhwc, T>(f.t);
  EXPECT_EQ(v.data(), buf.get());
  EXPECT_EQ(address_mismatches(v, buf.get(), f.strides), 0);
}

TEST(DlpackIn, EveryDtype) {
  accepts_own_dtype<float>();
  accepts_own_dtype<double>();
  accepts_own_dtype<memfmt::half>();
  accepts_own_dtype<memfmt::bfloat16>();
  accepts_own_dtype<std::int8_t>();
  accepts_own_dtype<std::uint8_t>();
  accepts_own_dtype<std::int16_t>();
  accepts_own_dtype<std::int32_t>();
  accepts_own_dtype<std::int64_t>();
  accepts_own_dtype<bool>();
}

TEST(DlpackIn, DtypeMismatch) {
  std::vector<double> buf(120);
  dl_fixture f(buf.data(), {2, 3, 4, 5}, {60, 20, 5, 1}, DLDataType{kDLFloat, 64, 1});
  std::string m = error_message([&] { memfmt::view_as<memfmt::nchw, float>(f.t); }, errc::unsupported_dtype);
  expect_contains(m, {"dtype float64", "element type float32", "cpu:0"});
  // Same width, different code: bfloat16 is not float16.
  f.t.dtype = DLDataType{kDLBfloat, 16, 1};
  m = error_message([&] { memfmt::view_as<memfmt::nchw, memfmt::half>(f.t); }, errc::unsupported_dtype);
  expect_contains(m, {"dtype bfloat16", "element type float16"});
  // Vector lanes are not an element type.
  f.t.dtype = DLDataType{kDLFloat, 32, 4};
  m = error_message([&] { memfmt::view_as<memfmt::nchw, float>(f.t); }, errc::unsupported_dtype);
  expect_contains(m, {"code 2 bits 32 lanes 4"});
  // uint8 is not bool, even though torch 1.13 has no other 8-bit unsigned code.
  f.t.dtype = DLDataType{kDLUInt, 8, 1};
  m = error_message([&] { memfmt::view_as<memfmt::nchw, bool>(f.t); }, errc::unsupported_dtype);
  expect_contains(m, {"dtype uint8", "element type bool"});
}

// ---- ndim, shape, device ----------------------------------------------------------------------

TEST(DlpackIn, WrongNdimAndNullShape) {
  std::vector<float> buf(120);
  dl_fixture f(buf.data(), {2, 3, 20}, {60, 20, 1}, memfmt::dlpack::dtype_for<float>());
  std::string m = error_message([&] { memfmt::view_as<memfmt::nchw, float>(f.t); }, errc::invalid_argument);
  expect_contains(m, {"needs ndim 4", "got ndim 3", "[2, 3, 20]"});
  m = error_message([&] { memfmt::view_as<memfmt::ndhwc, float>(f.t); }, errc::invalid_argument);
  expect_contains(m, {"needs ndim 5", "got ndim 3"});
  dl_fixture g(buf.data(), {2, 3, 4, 5}, {60, 20, 5, 1}, memfmt::dlpack::dtype_for<float>());
  g.t.shape = nullptr;
  m = error_message([&] { memfmt::view_as<memfmt::nchw, float>(g.t); }, errc::invalid_argument);
  expect_contains(m, {"shape is NULL", "ndim 4"});
}

TEST(DlpackIn, DeviceIsReportedAndCanBeRequired) {
  // A device pointer is never dereferenced: any aligned address stands in for one.
  alignas(16) static float fake_device_memory[4];
  dl_fixture f(fake_device_memory, {1, 1, 2, 2}, {4, 4, 2, 1}, memfmt::dlpack::dtype_for<float>(),
               DLDevice{kDLCUDA, 1});
  EXPECT_EQ((memfmt::view_as<memfmt::nchw, float>(f.t).data()), fake_device_memory);  // no requirement
  EXPECT_EQ((memfmt::view_as<memfmt::nchw, float>(f.t, kDLCUDA).data()), fake_device_memory);
  const std::string m =
      error_message([&] { memfmt::view_as<memfmt::nchw, float>(f.t, kDLCPU); }, errc::invalid_argument);
  expect_contains(m, {"needs device cpu:0", "on cuda:1", "[1, 1, 2, 2]"});
  // Errors about the data name the device too.
  f.t.strides = nullptr;
  f.shape = {1, 2, 2, 2};
  f.t.shape = f.shape.data();
  const std::string m2 = error_message([&] { memfmt::view_as<memfmt::nhwc, float>(f.t); }, errc::format_mismatch);
  expect_contains(m2, {"cuda:1", "strides NULL", "[1, 2, 2, 2]", "[8, 4, 2, 1]", "dense in nchw"});
  EXPECT_EQ(memfmt::dlpack::to_string(DLDevice{kDLOpenCL, 2}), "device_type 4:2");
}

// ---- strides, byte_offset, density --------------------------------------------------------------

TEST(DlpackIn, NullStridesMeanRowMajor) {
  std::vector<float> buf(2 * 3 * 2 * 3 * 4);
  dl_fixture f(buf.data(), {2, 3, 2, 3, 4}, {}, memfmt::dlpack::dtype_for<float>());
  const auto v = memfmt::view_as<memfmt::ncdhw, float>(f.t);
  EXPECT_EQ(address_mismatches(v, buf.data(), {72, 24, 12, 4, 1}), 0);
  const std::string m = error_message([&] { memfmt::view_as<memfmt::ndhwc, float>(f.t); }, errc::format_mismatch);
  expect_contains(m, {"strides NULL", "[72, 24, 12, 4, 1]", "not dense in ndhwc", "dense in ncdhw"});
  // An ambiguous shape is dense in both formats, NULL strides included.
  dl_fixture g(buf.data(), {3, 4, 1, 1}, {}, memfmt::dlpack::dtype_for<float>());
  const auto a = memfmt::view_as<memfmt::nchw, float>(g.t);
  const auto b = memfmt::view_as<memfmt::nhwc, float>(g.t);
  for_each_coord<4>(a.extents(), [&](const std::array<std::int64_t, 4>& c) { EXPECT_EQ(&a(c), &b(c)); });
  // Negative sizes and overflow are caught before the row-major strides are computed.
  dl_fixture h(buf.data(), {2, -3, 4, 5}, {}, memfmt::dlpack::dtype_for<float>());
  expect_contains(error_message([&] { memfmt::view_as<memfmt::nchw, float>(h.t); }, errc::invalid_argument),
                  {"negative size", "[2, -3, 4, 5]"});
  const std::int64_t big = std::int64_t{1} << 40;
  dl_fixture o(buf.data(), {big, big, 1, 1}, {}, memfmt::dlpack::dtype_for<float>());
  expect_contains(error_message([&] { memfmt::view_as<memfmt::nchw, float>(o.t); }, errc::overflow),
                  {"overflows 64 bits"});
}

TEST(DlpackIn, ByteOffsetIsApplied) {
  std::vector<float> buf(200);
  dl_fixture f(buf.data(), {2, 3, 4, 5}, {60, 1, 15, 3}, memfmt::dlpack::dtype_for<float>(), DLDevice{kDLCPU, 0},
               7 * sizeof(float));
  const auto v = memfmt::view_as<memfmt::nhwc, float>(f.t);
  EXPECT_EQ(v.data(), buf.data() + 7);
  EXPECT_EQ(address_mismatches(v, buf.data() + 7, f.strides), 0);
  f.t.byte_offset = 2;  // not a multiple of sizeof(float)
  const std::string m = error_message([&] { memfmt::view_as<memfmt::nhwc, float>(f.t); }, errc::misaligned);
  expect_contains(m, {"not aligned to 4 bytes", "[2, 3, 4, 5]"});
}

// strides == NULL on an empty tensor of huge extents: the row-major strides would wrap.
TEST(DlpackIn, NullStridesOfAnEmptyHugeTensorAreRefused) {
  float f = 0;
  const std::int64_t q = std::int64_t{1} << 62;
  dl_fixture e(&f, {0, q, q, q}, {}, memfmt::dlpack::dtype_for<float>());
  expect_contains(
      error_message([&] { memfmt::view_as<memfmt::nchw, float>(e.t); }, errc::overflow),
      {"strides NULL", "[0, 4611686018427387904, 4611686018427387904, 4611686018427387904]", "overflows 64 bits"});
  // An address past the end of the address space is refused too.
  dl_fixture a(reinterpret_cast<void*>(~std::uintptr_t{0} - 15), {1, 1, 1, 1}, {}, memfmt::dlpack::dtype_for<float>(),
               DLDevice{kDLCPU, 0}, 64);
  expect_contains(error_message([&] { memfmt::view_as<memfmt::nchw, float>(a.t); }, errc::overflow),
                  {"byte_offset 64", "overflows the address space"});
}

TEST(DlpackIn, RejectsNonDenseAndNullData) {
  std::vector<float> buf(400);
  const auto dt = memfmt::dlpack::dtype_for<float>();
  const dims bad_strides[] = {{96, 32, 8, 1}, {60, 20, 1, 4}, {0, 20, 5, 1}, {48, 16, 4, 1}};
  for (const auto& s : bad_strides) {
    dl_fixture f(buf.data(), {2, 3, 4, 5}, s, dt);
    EXPECT_EQ(error_message([&] { memfmt::view_as<memfmt::nchw, float>(f.t); }, errc::format_mismatch)
                      .find(memfmt::detail::dims_to_string(s)) != std::string::npos,
              true);
    error_message([&] { memfmt::view_as<memfmt::nhwc, float>(f.t); }, errc::format_mismatch);
  }
  dl_fixture n(nullptr, {2, 3, 4, 5}, {60, 20, 5, 1}, dt);
  expect_contains(error_message([&] { memfmt::view_as<memfmt::nchw, float>(n.t); }, errc::null_pointer),
                  {"null data", "[2, 3, 4, 5]", "cpu:0"});
  dl_fixture e(nullptr, {2, 0, 4, 5}, {0, 0, 0, 0}, dt);  // empty: null is fine, in both formats
  EXPECT_EQ((memfmt::view_as<memfmt::nchw, float>(e.t).numel()), 0);
  EXPECT_EQ((memfmt::view_as<memfmt::nhwc, float>(e.t).numel()), 0);
}

// ---- out: to_dlpack -------------------------------------------------------------------------

// What torch 1.13's from_dlpack needs of a DLManagedTensor (see dlpack.hpp), plus the basic
// promises: the arrays hold the view's extents and element strides in logical order.
template <class V>
void expect_torch_acceptable(const DLManagedTensor* m, const V& v, DLDevice dev) {
  ASSERT_NE(m, nullptr);
  const DLTensor& t = m->dl_tensor;
  EXPECT_NE(m->deleter, nullptr);
  EXPECT_NE(m->manager_ctx, nullptr);
  ASSERT_NE(t.data, nullptr) << "torch 1.13 never calls the deleter of a NULL-data tensor";
  if (v.data() != nullptr) {
    EXPECT_EQ(t.data, static_cast<const void*>(v.data()));  // element 0 itself ...
  }
  EXPECT_EQ(t.byte_offset, 0u);  // ... because torch ignores byte_offset
  EXPECT_EQ(t.ndim, V::rank);
  EXPECT_EQ(t.device.device_type, dev.device_type);
  EXPECT_EQ(t.device.device_id, dev.device_id);
  EXPECT_TRUE(t.device.device_type == kDLCPU || t.device.device_type == kDLCUDA);
  EXPECT_EQ(t.dtype.lanes, 1);
  ASSERT_NE(t.shape, nullptr);
  ASSERT_NE(t.strides, nullptr);
  for (int d = 0; d < V::rank; ++d) {
    EXPECT_EQ(t.shape[d], v.extent(d)) << "dim " << d;
    EXPECT_EQ(t.strides[d], v.stride(d)) << "dim " << d;
    EXPECT_GE(t.strides[d], 0) << "torch aborts on negative strides";
  }
  using U = std::remove_cv_t<typename V::element_type>;
  if (!std::is_same_v<U, bool>) {  // torch 1.13 accepts exactly these (code, bits)
    const bool ok = (t.dtype.code == kDLFloat && (t.dtype.bits == 16 || t.dtype.bits == 32 || t.dtype.bits == 64)) ||
                    (t.dtype.code == kDLBfloat && t.dtype.bits == 16) ||
                    (t.dtype.code == kDLInt &&
                     (t.dtype.bits == 8 || t.dtype.bits == 16 || t.dtype.bits == 32 || t.dtype.bits == 64)) ||
                    (t.dtype.code == kDLUInt && t.dtype.bits == 8);
    EXPECT_TRUE(ok) << memfmt::dlpack::to_string(t.dtype);
  }
}

template <class F, class T = float>
void round_trip_packed(const typename memfmt::layout<F>::extents_type& e) {
  memfmt::host_tensor<T, F> h(e);
  const auto v = h.view();
  memfmt::dlpack::unique_managed m(memfmt::to_dlpack(v));
  expect_torch_acceptable(m.get(), v, DLDevice{kDLCPU, 0});
  const auto back = memfmt::view_as<F, T>(*m, kDLCPU);
  EXPECT_EQ(back.data(), v.data());
  EXPECT_EQ(back.extents(), v.extents());
  EXPECT_EQ(back.strides(), v.strides());
  EXPECT_TRUE(back.mapping() == v.mapping());
}

TEST(DlpackOut, RoundTripDenseViews) {
  round_trip_packed<memfmt::nchw>({2, 3, 4, 5});
  round_trip_packed<memfmt::nhwc>({2, 3, 4, 5});
  round_trip_packed<memfmt::ncdhw>({2, 3, 2, 3, 4});
  round_trip_packed<memfmt::ndhwc>({2, 3, 2, 3, 4});
  round_trip_packed<memfmt::nhwc>({2, 1, 4, 5});  // ambiguous
  round_trip_packed<memfmt::nhwc>({1, 3, 1, 1});
  round_trip_packed<memfmt::ndhwc, memfmt::half>({1, 8, 2, 2, 2});
  round_trip_packed<memfmt::nchw, memfmt::bfloat16>({1, 2, 3, 4});
  round_trip_packed<memfmt::nhwc, std::int8_t>({3, 5, 7, 2});
  round_trip_packed<memfmt::nchw, std::int64_t>({3, 5, 7, 2});
  round_trip_packed<memfmt::nhwc, bool>({2, 3, 2, 2});
}

TEST(DlpackOut, EmptyViewRoundTrips) {
  const memfmt::nhwc_view<float> v(nullptr, {0, 3, 4, 5});
  memfmt::dlpack::unique_managed m(memfmt::to_dlpack(v));
  expect_torch_acceptable(m.get(), v, DLDevice{kDLCPU, 0});
  const auto back = memfmt::view_as<memfmt::nhwc, float>(*m);
  EXPECT_EQ(back.numel(), 0);
  EXPECT_EQ(back.extents(), v.extents());
  // An empty view with real data keeps its pointer.
  float x = 0;
  const memfmt::nchw_view<float> w(&x, {2, 0, 3, 3});
  memfmt::dlpack::unique_managed mw(memfmt::to_dlpack(w));
  expect_torch_acceptable(mw.get(), w, DLDevice{kDLCPU, 0});
  EXPECT_EQ((memfmt::view_as<memfmt::nchw, float>(*mw).data()), &x);
}

TEST(DlpackOut, PaddedViewExportsItsStridesButIsNotDense) {
  std::vector<float> buf(2 * 40 * 4 * 5);
  // An NHWC slice: 3 of 8 channels, rows padded.
  const auto lay = memfmt::layout<memfmt::nhwc>::strided({2, 3, 4, 5}, {8 * 5 * 4 * 2, 1, 5 * 8 * 2, 8});
  const memfmt::nhwc_view<float> v(buf.data() + 3, lay);
  memfmt::dlpack::unique_managed m(memfmt::to_dlpack(v));
  expect_torch_acceptable(m.get(), v, DLDevice{kDLCPU, 0});
  const std::string msg = error_message([&] { memfmt::view_as<memfmt::nhwc, float>(*m); }, errc::format_mismatch);
  expect_contains(msg, {"[2, 3, 4, 5]", "[320, 1, 80, 8]", "not dense in nhwc"});
}

TEST(DlpackOut, CudaDeviceAndConstView) {
  alignas(64) static float pretend_device[2 * 3 * 4 * 5];
  const memfmt::nchw_view<const float> v(pretend_device, {2, 3, 4, 5});
  memfmt::dlpack::unique_managed m(memfmt::to_dlpack(v, DLDevice{kDLCUDA, 3}));
  expect_torch_acceptable(m.get(), v, DLDevice{kDLCUDA, 3});
  const auto back = memfmt::view_as<memfmt::nchw, const float>(*m, kDLCUDA);
  EXPECT_EQ(back.data(), pretend_device);
  expect_contains(
      error_message([&] { memfmt::view_as<memfmt::nchw, const float>(*m, kDLCPU); }, errc::invalid_argument),
      {"on cuda:3"});
}

TEST(DlpackOut, DeleterReleasesOwnerExactlyThen) {
  bool released = false;
  auto owner = std::shared_ptr<std::vector<float>>(new std::vector<float>(120), [&released](std::vector<float>* p) {
    released = true;
    delete p;
  });
  const memfmt::nhwc_view<float> v(owner->data(), {2, 3, 4, 5});
  DLManagedTensor* m = memfmt::to_dlpack(v, DLDevice{kDLCPU, 0}, owner);
  EXPECT_EQ(owner.use_count(), 2);
  owner.reset();
  EXPECT_FALSE(released) << "the DLPack tensor must keep the owner alive";
  // The consumer may read everything until it calls the deleter.
  EXPECT_EQ(m->dl_tensor.shape[3], 5);
  static_cast<float*>(m->dl_tensor.data)[119] = 42.f;
  m->deleter(m);  // frees the holder (ASan's leak check covers the arrays) and drops the owner
  EXPECT_TRUE(released);
}

TEST(DlpackOut, IndependentExportsDoNotShareArrays) {
  memfmt::host_tensor<float, memfmt::nchw> h({1, 2, 3, 4});
  memfmt::dlpack::unique_managed a(memfmt::to_dlpack(h.view()));
  memfmt::dlpack::unique_managed b(memfmt::to_dlpack(h.view()));
  EXPECT_NE(a->dl_tensor.shape, b->dl_tensor.shape);
  EXPECT_NE(a->dl_tensor.strides, b->dl_tensor.strides);
  a.reset();  // b stays valid after a is deleted
  EXPECT_EQ(b->dl_tensor.shape[1], 2);
  EXPECT_EQ(b->dl_tensor.strides[0], 24);
}

TEST(DlpackOut, Errors) {
  std::vector<float> buf(120);
  const memfmt::nhwc_view<float> v(buf.data(), {2, 3, 4, 5});
  std::string m = error_message([&] { memfmt::to_dlpack(v, DLDevice{kDLOpenCL, 0}); }, errc::invalid_argument);
  expect_contains(m, {"to_dlpack(nhwc", "float32", "[2, 3, 4, 5]", "device_type 4:0", "cpu or cuda"});
  m = error_message([&] { memfmt::to_dlpack(v, DLDevice{kDLCPU, 1}); }, errc::invalid_argument);
  expect_contains(m, {"bad device_id 1", "cpu:1"});
  m = error_message([&] { memfmt::to_dlpack(v, DLDevice{kDLCUDA, -1}); }, errc::invalid_argument);
  expect_contains(m, {"bad device_id -1"});
  const memfmt::nhwc_view<float> null_view(nullptr, {2, 3, 4, 5});
  m = error_message([&] { memfmt::to_dlpack(null_view); }, errc::null_pointer);
  expect_contains(m, {"null data", "[2, 3, 4, 5]", "[60, 1, 15, 3]"});
}

}  // namespace
