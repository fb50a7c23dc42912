// Brute-force truths for the classification, on random small tensors of ranks 0-6:
//  - contiguous (in a format) <=> walking the elements in that format's order visits offsets
//    0, 1, 2, ... (for a non-empty tensor);
//  - non-overlapping and dense <=> the offsets of all elements are a permutation of 0..numel-1;
//  - whatever empty_like/clone/.contiguous allocate is dense, and contiguous in the format asked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "memfmt/strided/classify.hpp"
#include "memfmt/strided/format_requests.hpp"

namespace {

using memfmt::memory_format;
using memfmt::strided_desc;
using dims = std::vector<std::int64_t>;

// Offsets of every element, visiting dimensions in `order` (outermost first).
std::vector<std::int64_t> offsets_in_order(const strided_desc& t, const std::vector<std::size_t>& order) {
  std::vector<std::int64_t> out;
  if (t.numel() == 0) return out;
  std::vector<std::int64_t> idx(t.sizes.size(), 0);
  while (true) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides[d];
    out.push_back(off);
    std::size_t k = order.size();
    while (k > 0) {
      const auto d = order[k - 1];
      if (++idx[d] < t.sizes[d]) break;
      idx[d] = 0;
      --k;
    }
    if (k == 0) return out;
  }
}

std::vector<std::size_t> identity_order(std::size_t n) {
  std::vector<std::size_t> o(n);
  std::iota(o.begin(), o.end(), 0);
  return o;
}

bool visits_in_sequence(const strided_desc& t, const std::vector<std::size_t>& order) {
  const auto off = offsets_in_order(t, order);
  for (std::size_t i = 0; i < off.size(); ++i)
    if (off[i] != static_cast<std::int64_t>(i)) return false;
  return true;
}

bool brute_non_overlapping_and_dense(const strided_desc& t) {
  auto off = offsets_in_order(t, identity_order(t.sizes.size()));
  std::sort(off.begin(), off.end());
  for (std::size_t i = 0; i < off.size(); ++i)
    if (off[i] != static_cast<std::int64_t>(i)) return false;
  return true;
}

strided_desc random_tensor(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> rank_d(0, 6), size_d(0, 4), pct(0, 99), small_stride(0, 12);
  const auto rank = static_cast<std::size_t>(rank_d(rng));
  strided_desc t;
  for (std::size_t d = 0; d < rank; ++d)
    t.sizes.push_back(pct(rng) < 8 ? 0 : size_d(rng) % 4 + (pct(rng) < 30 ? 0 : 1));
  // Dense in a random order, then perturbed: sliced, broadcast, or a free stride on a size-1 dim.
  auto order = identity_order(rank);
  std::shuffle(order.begin(), order.end(), rng);
  t.strides.assign(rank, 0);
  std::int64_t s = 1;
  for (auto d : order) {
    t.strides[d] = s;
    s *= std::max<std::int64_t>(t.sizes[d], 1);
  }
  const int kind = pct(rng);
  for (std::size_t d = 0; d < rank; ++d) {
    if (kind < 20 && pct(rng) < 30) t.strides[d] *= 2;
    else if (kind < 35 && pct(rng) < 30) t.strides[d] = 0;
    else if (kind < 60 && t.sizes[d] == 1) t.strides[d] = small_stride(rng);
    else if (kind < 75) t.strides[d] = small_stride(rng);
  }
  return t;
}

TEST(classify_property, matches_brute_force_on_random_tensors) {
  std::mt19937_64 rng(20240613);
  const std::vector<std::size_t> nhwc = {0, 2, 3, 1}, ndhwc = {0, 2, 3, 4, 1};
  int dense = 0, contiguous = 0, channels_last = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const auto t = random_tensor(rng);
    const bool empty = t.numel() == 0;
    SCOPED_TRACE("sizes " + memfmt::detail::dims_to_string(t.sizes) + " strides " +
                 memfmt::detail::dims_to_string(t.strides));
    const bool nod = memfmt::is_non_overlapping_and_dense(t);
    ASSERT_EQ(nod, empty || brute_non_overlapping_and_dense(t));
    ASSERT_EQ(memfmt::is_contiguous(t), empty || visits_in_sequence(t, identity_order(t.sizes.size())));
    if (t.sizes.size() == 4 && !empty) {
      ASSERT_EQ(memfmt::is_contiguous(t, memory_format::channels_last), visits_in_sequence(t, nhwc));
    }
    if (t.sizes.size() == 5 && !empty) {
      ASSERT_EQ(memfmt::is_contiguous(t, memory_format::channels_last_3d), visits_in_sequence(t, ndhwc));
    }
    dense += nod;
    contiguous += memfmt::is_contiguous(t);
    channels_last += memfmt::is_contiguous(t, memory_format::channels_last);

    // empty_like(preserve) is dense, and keeps t's strides exactly when t is dense.
    const auto preserved = memfmt::empty_like_strides(t, memory_format::preserve);
    ASSERT_TRUE(brute_non_overlapping_and_dense(strided_desc{t.sizes, preserved}));
    if (nod) {
      ASSERT_EQ(preserved, t.strides);
    }
    // Every allocation in a named format is contiguous in it, and .contiguous of it aliases.
    for (auto f : {memory_format::contiguous, memory_format::channels_last, memory_format::channels_last_3d}) {
      const bool right_rank = f == memory_format::contiguous ||
                              (f == memory_format::channels_last && t.sizes.size() == 4) ||
                              (f == memory_format::channels_last_3d && t.sizes.size() == 5);
      if (!right_rank) {
        ASSERT_THROW(memfmt::empty_like_strides(t, f), memfmt::error);
        continue;
      }
      const strided_desc fresh{t.sizes, memfmt::empty_like_strides(t, f)};
      ASSERT_TRUE(memfmt::is_contiguous(fresh, f));
      ASSERT_TRUE(memfmt::is_non_overlapping_and_dense(fresh));
      ASSERT_TRUE(memfmt::contiguous_format(fresh, f).alias);
      // A copy made by .contiguous(f) is contiguous in f.
      const auto cont = memfmt::contiguous_format(t, f);
      if (!cont.alias) {
        ASSERT_TRUE(memfmt::is_contiguous(strided_desc{t.sizes, cont.strides}, f));
      }
    }
  }
  // The generator must reach every class, or the checks above prove little.
  EXPECT_GT(dense, 2000);
  EXPECT_GT(contiguous, 1000);
  EXPECT_GT(channels_last, 100);
}

}  // namespace
