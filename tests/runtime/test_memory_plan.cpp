// The liveness memory plan against brute force: no two simultaneously live values share a byte
// (checked pairwise and by running the plan with poison), the arena lies between the live-sum lower
// bound and allocating everything, and bad lifetimes are errors naming the value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "../common/expect_error.hpp"
#include "memfmt/runtime/memory_plan.hpp"

namespace {

using memfmt::runtime::memory_plan;
using memfmt::runtime::plan_memory;
using memfmt::runtime::value_lifetime;

std::vector<value_lifetime> random_values(std::mt19937& rng, int n, int steps) {
  std::vector<value_lifetime> v;
  std::uniform_int_distribution<int> step(0, steps - 1), len(0, 6), bytes(0, 5000);
  for (int i = 0; i < n; ++i) {
    const int first = step(rng);
    v.push_back({"v" + std::to_string(i), bytes(rng) == 0 ? 0 : bytes(rng), first, first + len(rng)});
  }
  return v;
}

// The largest sum of aligned sizes live at one step, by walking every step.
std::int64_t max_live(const std::vector<value_lifetime>& v, std::int64_t alignment) {
  std::int64_t steps = 0, best = 0;
  for (const auto& x : v) steps = std::max(steps, x.last + 1);
  for (std::int64_t s = 0; s < steps; ++s) {
    std::int64_t live = 0;
    for (const auto& x : v)
      if (x.first <= s && s <= x.last) live += (x.bytes + alignment - 1) / alignment * alignment;
    best = std::max(best, live);
  }
  return best;
}

TEST(MemoryPlan, RandomInstancesNeverOverlapLiveValues) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const std::int64_t alignment = std::int64_t{1} << (trial % 7);
    const auto values = random_values(rng, 1 + trial % 40, 1 + trial % 25);
    const memory_plan p = plan_memory(values, alignment);
    ASSERT_EQ(p.offsets.size(), values.size());
    std::int64_t total = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(p.offsets[i] % alignment, 0);
      EXPECT_LE(p.offsets[i] + values[i].bytes, p.arena_bytes) << values[i].name;
      total += (values[i].bytes + alignment - 1) / alignment * alignment;
      for (std::size_t j = 0; j < i; ++j) {
        if (!memfmt::runtime::lifetimes_overlap(values[i], values[j]) || values[i].bytes == 0 || values[j].bytes == 0)
          continue;
        const bool disjoint =
            p.offsets[i] + values[i].bytes <= p.offsets[j] || p.offsets[j] + values[j].bytes <= p.offsets[i];
        EXPECT_TRUE(disjoint) << "trial " << trial << ": " << values[i].name << " and " << values[j].name;
      }
    }
    EXPECT_EQ(p.total_bytes, total);
    EXPECT_EQ(p.live_peak_bytes, max_live(values, alignment)) << "trial " << trial;
    EXPECT_GE(p.arena_bytes, p.live_peak_bytes);
    EXPECT_LE(p.arena_bytes, p.total_bytes);
  }
}

// The greedy-by-size placement written plainly: every placed value checked for each new one
// (quadratic). plan_memory finds the same overlapping values through its index by first step.
std::vector<std::int64_t> plain_greedy(const std::vector<value_lifetime>& v, std::int64_t alignment) {
  std::vector<std::int64_t> size(v.size()), offsets(v.size(), 0);
  for (std::size_t i = 0; i < v.size(); ++i) size[i] = (v[i].bytes + alignment - 1) / alignment * alignment;
  std::vector<std::size_t> order(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return size[a] > size[b]; });
  std::vector<std::size_t> placed;
  for (std::size_t i : order) {
    if (size[i] == 0) continue;
    std::vector<std::pair<std::int64_t, std::int64_t>> busy;
    for (std::size_t j : placed)
      if (memfmt::runtime::lifetimes_overlap(v[i], v[j])) busy.emplace_back(offsets[j], offsets[j] + size[j]);
    std::sort(busy.begin(), busy.end());
    std::int64_t at = 0;
    for (const auto& [b, e] : busy) {
      if (b - at >= size[i]) break;
      at = std::max(at, e);
    }
    offsets[i] = at;
    placed.push_back(i);
  }
  return offsets;
}

// Lifetimes short and long (past the index's 64-step span), dense and sparse steps.
TEST(MemoryPlan, PlacesAsThePlainGreedyDoes) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<value_lifetime> values;
    std::uniform_int_distribution<int> step(0, 20 + trial * 10), bytes(0, 4000), coin(0, 9);
    for (int i = 0; i < 5 + trial; ++i) {
      const int first = step(rng);
      const int len = coin(rng) == 0 ? std::uniform_int_distribution<int>(60, 400)(rng)
                                     : std::uniform_int_distribution<int>(0, 8)(rng);
      values.push_back({"v" + std::to_string(i), bytes(rng), first, first + len});
    }
    const memory_plan p = plan_memory(values, 64);
    EXPECT_EQ(p.offsets, plain_greedy(values, 64)) << "trial " << trial;
    EXPECT_EQ(p.live_peak_bytes, max_live(values, 64)) << "trial " << trial;
  }
}

// A chain (each value read only by the next step) needs two buffers, whatever its length.
TEST(MemoryPlan, AChainReusesTwoBuffers) {
  std::vector<value_lifetime> chain;
  for (int i = 0; i < 20; ++i) chain.push_back({"x" + std::to_string(i), 1000, i, i + 1});
  const memory_plan p = plan_memory(chain, 64);
  EXPECT_EQ(p.arena_bytes, 2 * 1024);
  EXPECT_EQ(p.total_bytes, 20 * 1024);
}

// Runs the plan as an executor would: each value is written when it starts, checked at every step
// it is live, and poisoned when its liveness ends. Overlapping live values would corrupt each other.
TEST(MemoryPlan, PoisonModeLeavesLiveValuesIntact) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    const auto values = random_values(rng, 30, 20);
    const memory_plan p = plan_memory(values, 16);
    std::vector<std::byte> arena(static_cast<std::size_t>(p.arena_bytes));
    std::int64_t steps = 0;
    for (const auto& v : values) steps = std::max(steps, v.last + 1);
    const auto pattern = [](std::size_t i, std::int64_t k) {
      return static_cast<std::byte>((i * 31 + static_cast<std::size_t>(k)) % 251);
    };
    for (std::int64_t s = 0; s < steps; ++s) {
      for (std::size_t i = 0; i < values.size(); ++i)
        if (values[i].first == s)
          for (std::int64_t k = 0; k < values[i].bytes; ++k)
            arena[static_cast<std::size_t>(p.offsets[i] + k)] = pattern(i, k);
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (values[i].first > s || s > values[i].last) continue;
        for (std::int64_t k = 0; k < values[i].bytes; ++k)
          ASSERT_EQ(arena[static_cast<std::size_t>(p.offsets[i] + k)], pattern(i, k))
              << "trial " << trial << " step " << s << ": " << values[i].name << " byte " << k;
      }
      for (std::size_t i : p.ending_at(s)) {
        p.poison(arena.data(), i);
        for (std::int64_t k = 0; k < values[i].bytes; ++k)
          ASSERT_EQ(arena[static_cast<std::size_t>(p.offsets[i] + k)], std::byte{memory_plan::poison_byte});
      }
    }
  }
}

TEST(MemoryPlan, PoisonIsNaNInEveryFloatType) {
  float f;
  double d;
  std::memset(&f, memory_plan::poison_byte, sizeof f);
  std::memset(&d, memory_plan::poison_byte, sizeof d);
  EXPECT_TRUE(std::isnan(f));
  EXPECT_TRUE(std::isnan(d));
}

TEST(MemoryPlanErrors, BadLifetimesAndAlignment) {
  using memfmt::errc;
  memfmt_test::expect_error(
      [] {
        plan_memory({{"a", 8, 0, 1}, {"b", 8, 3, 2}});
      },
      errc::invalid_argument, {"value 1 'b'", "[3, 2]"});
  memfmt_test::expect_error([] { plan_memory({{"a", -8, 0, 1}}); }, errc::invalid_argument, {"'a'", "-8 bytes"});
  memfmt_test::expect_error([] { plan_memory({{"a", 8, 0, 1}}, 48); }, errc::invalid_argument, {"alignment 48"});
  memfmt_test::expect_error([] { plan_memory({{"a", INT64_MAX - 3, 0, 1}}); }, errc::overflow, {"'a'"});
  memfmt_test::expect_error(
      [] {
        plan_memory({{"a", INT64_MAX / 2, 0, 1}, {"b", INT64_MAX / 2 + 1 - 63, 0, 1}}, 64);
      },
      errc::overflow, {"memory plan"});
}

}  // namespace
