// graph/detail/residual_cut.hpp (the planner's minimum cut) against brute force (every s-t cut of small random graphs)
// and on a chain deep enough that a recursive search would exhaust a small thread stack.
#include <gtest/gtest.h>
#include <pthread.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "memfmt/graph/detail/residual_cut.hpp"

namespace {

using memfmt::graph::detail::residual_cut;

std::vector<bool> as_bools(const std::vector<char>& v) { return std::vector<bool>(v.begin(), v.end()); }

struct arc {
  std::size_t from, to;
  std::int64_t capacity;
};

// Max-flow min-cut: the flow equals the cheapest cut, and source_side() is the smallest cheapest
// cut's source side (the intersection of all of them).
TEST(ResidualCut, MatchesEveryCutOfSmallRandomGraphs) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 2 + rng() % 8;  // s = 0, t = n - 1
    std::vector<arc> arcs;
    const std::size_t m = rng() % (3 * n);
    for (std::size_t i = 0; i < m; ++i) arcs.push_back({rng() % n, rng() % n, static_cast<std::int64_t>(rng() % 10)});
    residual_cut f(n);
    for (const auto& a : arcs) f.add_edge(a.from, a.to, a.capacity);
    const std::int64_t flow = f.run(0, n - 1);
    const std::vector<bool> side = as_bools(f.source_side());

    std::int64_t best = std::numeric_limits<std::int64_t>::max();
    std::vector<bool> smallest(n, true);
    for (std::uint32_t mask = 0; mask < (1u << (n - 2)); ++mask) {
      std::vector<bool> in(n, false);  // in the source side
      in[0] = true;
      for (std::size_t v = 1; v + 1 < n; ++v) in[v] = (mask >> (v - 1)) & 1u;
      std::int64_t cut = 0;
      for (const auto& a : arcs)
        if (in[a.from] && !in[a.to]) cut += a.capacity;
      if (cut < best) {
        best = cut;
        smallest = in;
      } else if (cut == best) {
        for (std::size_t v = 0; v < n; ++v) smallest[v] = smallest[v] && in[v];
      }
    }
    ASSERT_EQ(flow, best) << "trial " << trial;
    EXPECT_EQ(side, smallest) << "trial " << trial;
  }
}

constexpr std::size_t chain_layers = 100000;

struct chain_result {
  std::int64_t flow = -1;
  std::size_t source_side = 0;
};

// s -> 1 -> ... -> t with capacity 7, except one edge of capacity 3 in the middle, plus a bypass
// of capacity 2 around the middle: the flow is 5, and the only minimum cut has source side
// {0 .. middle} (the middle edge and the bypass).
void* run_chain(void* out) {
  const std::size_t n = chain_layers + 1, middle = chain_layers / 2;
  residual_cut f(n);
  for (std::size_t v = 0; v + 1 < n; ++v) f.add_edge(v, v + 1, v == middle ? 3 : 7);
  f.add_edge(middle - 10, middle + 10, 2);
  auto* r = static_cast<chain_result*>(out);
  r->flow = f.run(0, n - 1);
  const auto side = as_bools(f.source_side());
  for (bool b : side) r->source_side += b ? 1 : 0;
  return nullptr;
}

TEST(ResidualCut, DeepChainRunsOnASmallStack) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 256 * 1024), 0);
  chain_result r;
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, &attr, &run_chain, &r), 0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  pthread_attr_destroy(&attr);
  EXPECT_EQ(r.flow, 5);
  EXPECT_EQ(r.source_side, chain_layers / 2 + 1);
}

}  // namespace
