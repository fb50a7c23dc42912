// memfmt/graph/detail/max_flow.hpp - Dinic's maximum flow on integer capacities.
//
// The solver needs the minimum s-t cut; after run(), source_side() is the set reachable from s in
// the residual graph, which is the same for every maximum flow (the unique inclusion-minimal
// minimum cut), so the answer does not depend on edge order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <queue>
#include <vector>

namespace memfmt::graph::detail {

class max_flow {
 public:
  explicit max_flow(std::size_t vertices) : out_(vertices), level_(vertices), next_(vertices) {}

  void add_edge(std::size_t from, std::size_t to, std::int64_t capacity) {
    out_[from].push_back(edges_.size());
    edges_.push_back({to, capacity});
    out_[to].push_back(edges_.size());
    edges_.push_back({from, 0});
  }

  std::int64_t run(std::size_t s, std::size_t t) {
    std::int64_t flow = 0;
    while (levels_from(s), level_[t] >= 0) {
      std::fill(next_.begin(), next_.end(), 0);
      while (std::int64_t pushed = augment(s, t, std::numeric_limits<std::int64_t>::max())) flow += pushed;
    }
    return flow;
  }

  std::vector<bool> source_side(std::size_t s) {
    levels_from(s);
    std::vector<bool> side(out_.size());
    for (std::size_t v = 0; v < out_.size(); ++v) side[v] = level_[v] >= 0;
    return side;
  }

 private:
  struct edge {
    std::size_t to;
    std::int64_t capacity;  // residual
  };

  void levels_from(std::size_t s) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<std::size_t> q;
    level_[s] = 0;
    q.push(s);
    while (!q.empty()) {
      const std::size_t v = q.front();
      q.pop();
      for (std::size_t e : out_[v])
        if (edges_[e].capacity > 0 && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[v] + 1;
          q.push(edges_[e].to);
        }
    }
  }

  std::int64_t augment(std::size_t v, std::size_t t, std::int64_t limit) {
    if (v == t) return limit;
    for (std::size_t& i = next_[v]; i < out_[v].size(); ++i) {
      edge& e = edges_[out_[v][i]];
      if (e.capacity <= 0 || level_[e.to] != level_[v] + 1) continue;
      if (std::int64_t pushed = augment(e.to, t, std::min(limit, e.capacity))) {
        e.capacity -= pushed;
        edges_[out_[v][i] ^ 1].capacity += pushed;
        return pushed;
      }
    }
    return 0;
  }

  std::vector<edge> edges_;
  std::vector<std::vector<std::size_t>> out_;
  std::vector<long> level_;
  std::vector<std::size_t> next_;
};

}  // namespace memfmt::graph::detail
