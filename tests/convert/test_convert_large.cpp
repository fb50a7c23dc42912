// One conversion of more than 2^31 elements (int8, about 2.15 GB each side): 64-bit indexing.
// The expected values come from a closed-form pattern, not from the code under test.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "memfmt/convert/convert.hpp"

using namespace memfmt;

namespace {

// Value of logical element (n, c, s) (s = h * W + w): a mix that any index error changes.
inline std::int8_t value_at(std::int64_t n, std::int64_t c, std::int64_t s) {
  const std::uint64_t x = static_cast<std::uint64_t>(s) * 0x9E3779B1u + static_cast<std::uint64_t>(c) * 131u +
                          static_cast<std::uint64_t>(n) * 7919u;
  return static_cast<std::int8_t>((x >> 8) ^ x);
}

struct free_deleter {
  void operator()(void* p) const noexcept { std::free(p); }
};

TEST(ConvertLarge, MoreThan2Pow31Elements) {
  const std::int64_t N = 2, C = 8, H = 16384, W = 8200, S = H * W;
  const std::int64_t numel = N * C * S;
  ASSERT_GT(numel, std::int64_t{1} << 31);
  std::unique_ptr<std::int8_t, free_deleter> src(
      static_cast<std::int8_t*>(std::malloc(static_cast<std::size_t>(numel))));
  std::unique_ptr<std::int8_t, free_deleter> dst(
      static_cast<std::int8_t*>(std::malloc(static_cast<std::size_t>(numel))));
  if (!src || !dst) GTEST_SKIP() << "not enough memory for 2 x " << numel << " bytes";
  std::int8_t* s = src.get();
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t p = 0; p < S; ++p) s[(n * C + c) * S + p] = value_at(n, c, p);

  convert(tensor_view<const std::int8_t, nchw>(s, {N, C, H, W}),
          tensor_view<std::int8_t, nhwc>(dst.get(), {N, C, H, W}));

  // Sparse probes, including the last element and positions past 2^31 and 2^32 / C.
  const std::int8_t* d = dst.get();
  const std::int64_t probes[] = {
      0, 1, S - 1, S, (std::int64_t{1} << 31) / C, (std::int64_t{1} << 31) / C + 5, S + 12345, 2 * S - 1};
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t p : probes) {
      if (p >= S) continue;
      for (std::int64_t c = 0; c < C; ++c)
        ASSERT_EQ(d[(n * S + p) * C + c], value_at(n, c, p)) << "n " << n << " pixel " << p << " c " << c;
    }
  // Position-weighted checksum over the whole destination against the closed form.
  std::uint64_t got = 0, want = 0;
  for (std::int64_t k = 0; k < numel; ++k)
    got += static_cast<std::uint64_t>(static_cast<std::uint8_t>(d[k])) * static_cast<std::uint64_t>(k % 65521 + 1);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t p = 0; p < S; ++p)
      for (std::int64_t c = 0; c < C; ++c) {
        const std::int64_t k = (n * S + p) * C + c;
        want += static_cast<std::uint64_t>(static_cast<std::uint8_t>(value_at(n, c, p))) *
                static_cast<std::uint64_t>(k % 65521 + 1);
      }
  EXPECT_EQ(got, want);
}

}  // namespace
