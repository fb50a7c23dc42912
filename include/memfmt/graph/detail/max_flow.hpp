// memfmt/graph/detail/max_flow.hpp - Dinic's maximum flow on integer capacities.
//
// The solver needs the minimum s-t cut; after run(), source_side() is the set reachable from s in
// the residual graph, which is the same for every maximum flow (the unique inclusion-minimal
// minimum cut), so the answer does not depend on edge order. The blocking-flow search keeps its
// path in a vector rather than on the call stack: a network's depth is the caller's, and a deep
// chain must not exhaust a thread's stack.
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
      while (std::int64_t pushed = augment(s, t)) flow += pushed;
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

  // One augmenting path in the level graph, depth first with each vertex's current edge next_[v]
  // (Dinic): advance along the first usable edge; at a dead end, retreat and move the parent's
  // current edge past it. Returns the flow pushed (the path's bottleneck), 0 when none is left.
  std::int64_t augment(std::size_t s, std::size_t t) {
    if (s == t) return std::numeric_limits<std::int64_t>::max();
    path_.clear();  // edge indices from s
    std::size_t v = s;
    while (true) {
      std::size_t& i = next_[v];
      while (i < out_[v].size()) {
        const edge& e = edges_[out_[v][i]];
        if (e.capacity > 0 && level_[e.to] == level_[v] + 1) break;
        ++i;
      }
      if (i < out_[v].size()) {
        path_.push_back(out_[v][i]);
        v = edges_[out_[v][i]].to;
        if (v != t) continue;
        std::int64_t pushed = std::numeric_limits<std::int64_t>::max();
        for (std::size_t e : path_) pushed = std::min(pushed, edges_[e].capacity);
        for (std::size_t e : path_) {
          edges_[e].capacity -= pushed;
          edges_[e ^ 1].capacity += pushed;
        }
        return pushed;
      }
      if (path_.empty()) return 0;  // s itself is exhausted
      v = edges_[path_.back() ^ 1].to;  // the dead end's parent
      path_.pop_back();
      ++next_[v];
    }
  }

  std::vector<edge> edges_;
  std::vector<std::vector<std::size_t>> out_;
  std::vector<long> level_;
  std::vector<std::size_t> next_;
  std::vector<std::size_t> path_;
};

}  // namespace memfmt::graph::detail
