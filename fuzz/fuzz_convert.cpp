// Fuzz target: memfmt::convert against an index-by-index reference. Random formats, element sizes,
// extents (some large enough for the vector kernels), source strides (padded, permuted, broadcast,
// negative) and padded destinations. Properties: every destination element equals the source
// element at the same logical coordinate; no byte of the destination buffer outside the
// destination's elements changes; an error is a memfmt::error and leaves the destination as it was.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.hpp"
#include "memfmt/convert/convert.hpp"
#include "memfmt/format/layout.hpp"

namespace {

using memfmt_fuzz::dims;
using memfmt_fuzz::require;

// Enough for the tiled kernels (a 64 x 64 plane of bytes), few enough for thousands of runs a second.
constexpr std::int64_t max_elements = 1 << 13;

template <class T>
T value_at(std::int64_t i) {
  T v{};
  const std::uint64_t x = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull + 1;
  std::memcpy(&v, &x, sizeof(T));
  return v;
}

template <class T, class To>
void run(FuzzedDataProvider& in) {
  constexpr int rank = To::rank;
  typename memfmt::layout<To>::extents_type e{};
  std::int64_t numel = 1;
  for (int d = 0; d < rank; ++d) {
    // Channel and spatial extents up to 80, the batch small: planes big enough for the tiled paths.
    const std::int64_t hi = d == 0 ? 3 : (d == 1 || d == rank - 1) ? 80 : 12;
    e[d] = in.ConsumeIntegralInRange<std::int64_t>(d == 0 ? 0 : 1, hi);
    if (numel * e[d] > max_elements) e[d] = std::max<std::int64_t>(1, max_elements / numel);
    numel *= e[d];
  }

  // Source: dense in a random dimension order with optional padding, then some strides replaced
  // by 0 (broadcast) or negated (a flipped view); the buffer covers the span either way.
  dims sizes(e.begin(), e.end()), strides(rank);
  std::vector<int> order(rank);
  for (int i = 0; i < rank; ++i) order[i] = i;
  for (int i = rank; i > 1; --i) std::swap(order[i - 1], order[in.ConsumeIntegralInRange<int>(0, i - 1)]);
  std::int64_t next = 1;
  for (int i = rank; i-- > 0;) {
    strides[order[i]] = next;
    next = next * std::max<std::int64_t>(e[order[i]], 1) + in.ConsumeIntegralInRange<std::int64_t>(0, 2);
  }
  for (int d = 0; d < rank; ++d) {
    const int kind = in.ConsumeIntegralInRange<int>(0, 9);
    if (kind == 0) strides[d] = 0;
    if (kind == 1) strides[d] = -strides[d];
  }
  std::int64_t lo = 0, hi = 0;  // offset range of the source from its element 0
  for (int d = 0; d < rank; ++d) {
    if (e[d] == 0) continue;
    const std::int64_t step = (e[d] - 1) * strides[d];
    (step < 0 ? lo : hi) += step;
  }
  std::vector<T> src(static_cast<std::size_t>(hi - lo + 1));
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = value_at<T>(static_cast<std::int64_t>(i));
  const T* src0 = src.data() - lo;

  // Destination: packed, or with padding between rows / channels / images.
  typename memfmt::layout<To>::strides_type ds{};
  memfmt::layout<To> dl = memfmt::layout<To>::packed(e);
  if (in.ConsumeBool()) {
    std::int64_t inner = 1;
    for (int i = rank; i-- > 0;) {
      const int d = To::order[static_cast<std::size_t>(i)];
      ds[static_cast<std::size_t>(d)] = i == rank - 1 ? 1 : inner + in.ConsumeIntegralInRange<std::int64_t>(0, 3);
      inner = ds[static_cast<std::size_t>(d)] * std::max<std::int64_t>(e[d], 1);
    }
    dl = memfmt::layout<To>::strided(e, ds);
  }
  const std::size_t dst_len = static_cast<std::size_t>(dl.required_span_size()) + 8;
  const T sentinel = value_at<T>(-7);
  std::vector<T> dst(dst_len, sentinel);
  memfmt::tensor_view<T, To> dv(dst.data() + 4, dl);

  memfmt::convert_options opt;
  opt.num_threads = 1;
  opt.allow_streaming_stores = in.ConsumeBool();
  opt.prefetch =
      in.PickValueInArray({memfmt::far_prefetch::automatic, memfmt::far_prefetch::l1, memfmt::far_prefetch::l2});
  opt.stage =
      in.PickValueInArray({memfmt::stage_stream::automatic, memfmt::stage_stream::burst, memfmt::stage_stream::slices});
  memfmt::strided_desc desc{sizes, strides, memfmt::dtype_of_v<T>};

  std::vector<char> written(dst_len, 0);
  const auto dst_strides = dl.strides();
  memfmt_fuzz::for_each_offset(sizes, dims(dst_strides.begin(), dst_strides.end()),
                               [&](const dims&, std::int64_t off) { written[static_cast<std::size_t>(off + 4)] = 1; });
  try {
    memfmt::convert(src0, desc, dv, opt);
  } catch (const memfmt::error&) {
    for (std::size_t i = 0; i < dst_len; ++i)
      require(std::memcmp(&dst[i], &sentinel, sizeof(T)) == 0, "a failed convert wrote to the destination");
    return;
  }
  memfmt_fuzz::for_each_offset(sizes, strides, [&](const dims& c, std::int64_t off) {
    typename memfmt::layout<To>::extents_type ce{};
    for (int d = 0; d < rank; ++d) ce[d] = c[static_cast<std::size_t>(d)];
    if (std::memcmp(&dv(ce), &src0[off], sizeof(T)) != 0)
      memfmt_fuzz::property_failed(std::string("convert to ") + To::name + ": wrong element, " +
                                   memfmt_fuzz::describe(sizes, strides));
  });
  for (std::size_t i = 0; i < dst_len; ++i)
    if (!written[i] && std::memcmp(&dst[i], &sentinel, sizeof(T)) != 0)
      memfmt_fuzz::property_failed(std::string("convert to ") + To::name + " wrote outside the destination's elements");
}

template <class T>
void run_type(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: run<T, memfmt::nchw>(in); break;
    case 1: run<T, memfmt::nhwc>(in); break;
    case 2: run<T, memfmt::ncdhw>(in); break;
    default: run<T, memfmt::ndhwc>(in); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: run_type<std::int8_t>(in); break;
    case 1: run_type<std::int16_t>(in); break;
    case 2: run_type<std::int32_t>(in); break;
    default: run_type<std::int64_t>(in); break;
  }
  return 0;
}
