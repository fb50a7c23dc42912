// Fuzz target: typed views from raw strided data (tensor/from_strided.hpp) and from DLPack
// (interop/dlpack.hpp). Properties: view_as throws only memfmt::error and exactly when try_view_as
// answers nullopt; a view it returns has non-negative, packed strides whose numel and span fit; for
// small tensors every element lies where the caller's strides say (DLPack: NULL strides mean
// row-major), and is_dense_in agrees with enumerating the offsets in the format's order; a view
// exported with to_dlpack imports back to the same addresses.
#include <dlpack/dlpack.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "fuzz_check.hpp"
#include "memfmt/interop/dlpack.hpp"
#include "memfmt/tensor/from_strided.hpp"

namespace {

using memfmt_fuzz::dims;
using memfmt_fuzz::require;

constexpr std::int64_t brute_limit = 4096;

const std::int64_t large_values[] = {
    std::int64_t{1} << 30, std::int64_t{1} << 31, std::int64_t{1} << 40, std::int64_t{1} << 62, INT64_MAX, -1};

std::int64_t pick(FuzzedDataProvider& in, std::int64_t lo, std::int64_t hi) {
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) return in.PickValueInArray(large_values);
  return in.ConsumeIntegralInRange<std::int64_t>(lo, hi);
}

// The format's memory order, outermost first (a row-major walk over it gives dense offsets).
template <class Format>
std::vector<std::size_t> order_of() {
  std::vector<std::size_t> o;
  for (int d : Format::order) o.push_back(static_cast<std::size_t>(d));
  return o;
}

bool enumerable(const dims& sizes, const dims& strides, std::int64_t* n) {
  *n = memfmt_fuzz::small_numel(sizes, brute_limit);
  if (*n < 0) return false;
  for (auto s : strides)
    if (s <= -(std::int64_t{1} << 40) || s >= (std::int64_t{1} << 40)) return false;
  return true;
}

// The view addresses element c at base + sum(c * strides) for every c.
template <class View, class T>
void expect_addresses(const View& v, const T* base, const dims& sizes, const dims& strides, const char* what) {
  memfmt_fuzz::for_each_offset(sizes, strides, [&](const dims& c, std::int64_t off) {
    typename View::extents_type e{};
    for (std::size_t d = 0; d < c.size(); ++d) e[d] = c[d];
    if (&v(e) != base + off)
      memfmt_fuzz::property_failed(std::string(what) + ": element at the wrong address, " +
                                   memfmt_fuzz::describe(sizes, strides));
  });
}

template <class View>
void expect_sound_view(const View& v, const dims& sizes) {
  for (int d = 0; d < View::rank; ++d) {
    require(v.extent(d) == sizes[static_cast<std::size_t>(d)], "view extents differ from the sizes");
    require(v.stride(d) >= 0, "view has a negative stride");
  }
  require(v.is_packed(), "view is not packed");
  require(memfmt::detail::checked_numel(sizes, "fuzz") == v.numel(), "numel differs");
  require(v.mapping().required_span_size() == v.numel(), "a packed view's span is not its numel");
}

template <class Format, class T>
void check_raw(FuzzedDataProvider& in, T* buffer) {
  dims sizes(Format::rank), strides(Format::rank);
  for (auto& s : sizes) s = pick(in, 0, 6);
  if (in.ConsumeBool()) {
    for (auto& s : strides) s = pick(in, -3, 80);
  } else {  // dense in this format or the other one, sometimes padded
    const auto order = in.ConsumeBool() ? order_of<Format>() : order_of<memfmt::transposed_format_t<Format>>();
    std::int64_t next = 1;
    for (std::size_t i = order.size(); i-- > 0;) {
      strides[order[i]] = next;
      const std::int64_t pad = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? 1 : 0;
      if (memfmt::detail::mul_overflows(next, std::max<std::int64_t>(sizes[order[i]], 1), &next) ||
          memfmt::detail::add_overflows(next, pad, &next))
        next = 1;
    }
  }
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) strides.pop_back();
  const bool dense = memfmt::is_dense_in<Format>(sizes, strides);
  const auto maybe = memfmt::try_view_as<Format>(buffer, sizes, strides);
  std::optional<memfmt::tensor_view<T, Format>> thrown;
  try {
    thrown = memfmt::view_as<Format>(buffer, sizes, strides);
  } catch (const memfmt::error&) {
  }
  require(maybe.has_value() == thrown.has_value(), "try_view_as and view_as disagree");
  if (!maybe) return;
  require(dense, "view_as succeeded where is_dense_in is false");
  expect_sound_view(*maybe, sizes);
  std::int64_t n = 0;
  if (!enumerable(sizes, strides, &n) || n == 0) return;
  expect_addresses(*maybe, buffer, sizes, strides, "view_as");
  // Independent density: the offsets are the row-major walk over the format's order.
  const auto order = order_of<Format>();
  bool in_order = true;
  memfmt_fuzz::for_each_offset(sizes, strides, [&](const dims& c, std::int64_t off) {
    in_order = in_order && off == memfmt_fuzz::linear_index(sizes, c, order);
  });
  require(in_order, "view_as accepted strides that are not dense in its format");

  // Export and import again: the same addresses.
  memfmt::dlpack::unique_managed m(memfmt::to_dlpack(*maybe));
  const auto back = memfmt::view_as<Format, T>(*m, kDLCPU);
  expect_addresses(back, buffer, sizes, strides, "to_dlpack round trip");
}

template <class Format, class T>
void check_dlpack(FuzzedDataProvider& in, T* buffer) {
  dims shape(Format::rank), strides;
  for (auto& s : shape) s = pick(in, 0, 6);
  const bool null_strides = in.ConsumeBool();
  if (!null_strides)
    for (std::size_t i = 0; i < shape.size(); ++i) strides.push_back(pick(in, -2, 80));
  DLTensor t{};
  t.data = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? nullptr : static_cast<void*>(buffer);
  t.device = DLDevice{in.ConsumeIntegralInRange<int>(0, 7) == 0 ? kDLCUDA : kDLCPU, 0};
  t.ndim = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? in.ConsumeIntegralInRange<int>(-1, 6) : Format::rank;
  t.dtype = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? DLDataType{kDLFloat, 16, 1} : memfmt::dlpack::dtype_for<T>();
  t.shape = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? nullptr : shape.data();
  if (t.ndim > Format::rank) t.shape = nullptr;  // the array has Format::rank entries
  t.strides = null_strides ? nullptr : strides.data();
  t.byte_offset = in.ConsumeIntegralInRange<int>(0, 3) == 0
                      ? (in.ConsumeBool() ? in.ConsumeIntegral<std::uint64_t>()
                                          : sizeof(T) * in.ConsumeIntegralInRange<std::uint64_t>(0, 3))
                      : 0;
  std::optional<memfmt::tensor_view<T, Format>> v;
  try {
    v = memfmt::view_as<Format, T>(t, in.ConsumeBool() ? std::optional<DLDeviceType>(kDLCPU) : std::nullopt);
  } catch (const memfmt::error&) {
  }
  if (!v) return;
  expect_sound_view(*v, shape);
  if (null_strides) {
    strides.assign(shape.size(), 1);
    for (std::size_t i = shape.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * shape[i + 1];
  }
  std::int64_t n = 0;
  if (!enumerable(shape, strides, &n) || n == 0) return;
  const T* base = reinterpret_cast<const T*>(static_cast<const char*>(t.data) + t.byte_offset);
  expect_addresses(*v, base, shape, strides, "DLPack view_as");
}

template <class T>
void check_type(FuzzedDataProvider& in, T* buffer) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: check_raw<memfmt::nchw>(in, buffer); break;
    case 1: check_raw<memfmt::nhwc>(in, buffer); break;
    case 2: check_raw<memfmt::ncdhw>(in, buffer); break;
    case 3: check_raw<memfmt::ndhwc>(in, buffer); break;
    case 4: check_dlpack<memfmt::nchw>(in, buffer); break;
    case 5: check_dlpack<memfmt::nhwc>(in, buffer); break;
    case 6: check_dlpack<memfmt::ncdhw>(in, buffer); break;
    default: check_dlpack<memfmt::ndhwc>(in, buffer); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  // Views never read through the pointer here; addresses are compared, so one aligned buffer does.
  alignas(64) static double storage[8];
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: check_type(in, reinterpret_cast<float*>(storage)); break;
    case 1: check_type(in, reinterpret_cast<double*>(storage)); break;
    default: check_type(in, reinterpret_cast<std::uint8_t*>(storage) + in.ConsumeIntegralInRange<int>(0, 1)); break;
  }
  return 0;
}
