// memfmt/graph/detail/residual_cut.hpp - a minimum s-t cut that answers "what if these vertices
// were forced to one side" from its residual graph.
//
// solve() needs, besides the optimum, the optimum with each layer flipped (plan's flip_delta) and
// with each conversion's value and consumers kept in the producer's format (conversion::saves).
// Re-solving from scratch per question is quadratic in the network. After a maximum flow f, forcing
// a set X onto the source side adds infinite edges s -> x; every new augmenting path then starts at
// some x and, since nothing leaves the set R reachable from s, runs inside the vertices that reach
// t. So the extra cut is the maximum flow from X to t in the residual graph, which is local to X in a
// layered network (Kohli & Torr, "dynamic graph cuts"); the sink side is symmetric (flow from s
// into X, searched backwards). Each question is answered with a journal of the capacities it
// changed and rolled back, so the residual graph, and R, stay those of the optimum.
// Maximum flow by Dinic's algorithm with stamped level arrays (a local question touches only what
// it explores) and an explicit path stack (a deep network must not exhaust the thread's stack).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace memfmt::graph::detail {

class residual_cut {
 public:
  explicit residual_cut(std::size_t vertices)
      : out_(vertices), level_(vertices, 0), stamp_(vertices, 0), next_(vertices, 0) {}

  std::size_t add_edge(std::size_t from, std::size_t to, std::int64_t capacity) {
    out_[from].push_back(capacity_.size());
    to_.push_back(to);
    capacity_.push_back(capacity);
    out_[to].push_back(capacity_.size());
    to_.push_back(from);
    capacity_.push_back(0);
    return capacity_.size() - 2;
  }

  // The maximum flow from s to t; afterwards source_side() is the inclusion-minimal minimum cut's
  // source side (the same for every maximum flow, so independent of edge order).
  std::int64_t run(std::size_t s, std::size_t t) {
    s_ = s;
    t_ = t;
    std::vector<char> everywhere(out_.size(), 1);
    const std::int64_t flow = augment({s}, t, true, everywhere, std::numeric_limits<std::int64_t>::max());
    source_side_ = reachable(s, true);
    reaches_sink_ = reachable(t, false);
    return flow;
  }

  const std::vector<char>& source_side() const noexcept { return source_side_; }

  // How much the minimum cut grows when every vertex of `forced` must lie on the source side
  // (to_source) or on the sink side; the residual graph is left as run() left it. A result >= limit
  // means the cut needs at least `limit` more (used with the solver's "infinite"). nullopt: the
  // question explored more than `budget` vertices and edges before it was answered. A question is
  // local where the forced vertices lie near the source or sink (a layered network), but one inside
  // a long run of vertices joined to neither (thousands of tied memory-bound layers in a chain)
  // walks the run, so answering every node's question would be quadratic.
  std::optional<std::int64_t> extra_cut(const std::vector<std::size_t>& forced, bool to_source, std::int64_t limit,
                                        std::size_t budget = std::numeric_limits<std::size_t>::max()) {
    // New paths run inside the vertices that reach t (towards the source side) or that s reaches.
    const std::vector<char>& region = to_source ? reaches_sink_ : source_side_;
    std::vector<std::size_t> starts;
    for (std::size_t v : forced)
      if (region[v]) starts.push_back(v);
    if (starts.empty()) return 0;
    journal_on_ = true;
    budget_ = budget;
    const std::int64_t extra = augment(starts, to_source ? t_ : s_, to_source, region, limit);
    for (auto it = journal_.rbegin(); it != journal_.rend(); ++it) capacity_[it->first] = it->second;
    journal_.clear();
    journal_on_ = false;
    const bool exhausted = budget_ == 0;
    budget_ = std::numeric_limits<std::size_t>::max();
    if (exhausted) return std::nullopt;
    return extra;
  }

 private:
  // Residual capacity of edge e walked forwards, or of the edge that ends where e starts walked
  // backwards (e's reverse: a backward search follows edges into the vertex).
  std::int64_t usable(std::size_t e, bool forward) const { return capacity_[forward ? e : e ^ 1]; }
  void push(std::size_t e, bool forward, std::int64_t amount) {
    const std::size_t along = forward ? e : e ^ 1;
    record(along);
    record(along ^ 1);
    capacity_[along] -= amount;
    capacity_[along ^ 1] += amount;
  }
  void record(std::size_t e) {
    if (journal_on_) journal_.emplace_back(e, capacity_[e]);
  }
  long level(std::size_t v) const { return stamp_[v] == round_ ? level_[v] : -1; }
  // One edge looked at; false once the question's budget is spent (then every search stops).
  bool spend() {
    if (budget_ == 0) return false;
    --budget_;
    return true;
  }

  // Breadth-first levels from `starts` within `region`, stopping at the target's level.
  bool levels(const std::vector<std::size_t>& starts, std::size_t target, bool forward,
              const std::vector<char>& region) {
    ++round_;
    queue_.clear();
    for (std::size_t v : starts) {
      if (stamp_[v] == round_) continue;
      stamp_[v] = round_;
      level_[v] = 0;
      next_[v] = 0;
      queue_.push_back(v);
    }
    long target_level = -1;
    for (std::size_t head = 0; head < queue_.size(); ++head) {
      const std::size_t v = queue_[head];
      if (target_level >= 0 && level_[v] >= target_level) break;
      for (std::size_t e : out_[v]) {
        if (!spend()) return false;
        const std::size_t w = to_[e];
        if (usable(e, forward) <= 0 || stamp_[w] == round_ || (!region[w] && w != target)) continue;
        stamp_[w] = round_;
        level_[w] = level_[v] + 1;
        next_[w] = 0;
        if (w == target) target_level = level_[w];
        queue_.push_back(w);
      }
    }
    return target_level >= 0;
  }

  // Dinic: level graphs from `starts` (a super source of unlimited capacity) until the target is
  // unreachable or `limit` is reached.
  std::int64_t augment(const std::vector<std::size_t>& starts, std::size_t target, bool forward,
                       const std::vector<char>& region, std::int64_t limit) {
    std::int64_t flow = 0;
    while (flow < limit && levels(starts, target, forward, region)) {
      for (std::size_t start : starts)
        while (flow < limit) {
          const std::int64_t pushed = blocking_path(start, target, forward);
          if (pushed == 0) break;
          flow += std::min(pushed, limit - flow);
        }
    }
    return flow;
  }

  // One augmenting path in the level graph, depth first from `start`, each vertex resuming at its
  // current edge: advance along a usable edge one level down, retreat from a dead end and skip it.
  std::int64_t blocking_path(std::size_t start, std::size_t target, bool forward) {
    if (level(start) != 0) return 0;
    path_.clear();
    std::size_t v = start;
    for (;;) {
      std::size_t& i = next_[v];
      while (i < out_[v].size()) {
        if (!spend()) return 0;
        const std::size_t e = out_[v][i];
        if (usable(e, forward) > 0 && level(to_[e]) == level_[v] + 1) break;
        ++i;
      }
      if (i < out_[v].size()) {
        path_.push_back(out_[v][i]);
        v = to_[out_[v][i]];
        if (v != target) continue;
        std::int64_t pushed = std::numeric_limits<std::int64_t>::max();
        for (std::size_t e : path_) pushed = std::min(pushed, usable(e, forward));
        for (std::size_t e : path_) push(e, forward, pushed);
        return pushed;
      }
      if (path_.empty()) return 0;
      v = to_[path_.back() ^ 1];  // the dead end's predecessor
      path_.pop_back();
      ++next_[v];
    }
  }

  // Vertices reachable from v along residual edges (forward), or that reach v (backward).
  std::vector<char> reachable(std::size_t v, bool forward) const {
    std::vector<char> seen(out_.size(), 0);
    std::vector<std::size_t> stack{v};
    seen[v] = 1;
    while (!stack.empty()) {
      const std::size_t u = stack.back();
      stack.pop_back();
      for (std::size_t e : out_[u])
        if (usable(e, forward) > 0 && !seen[to_[e]]) {
          seen[to_[e]] = 1;
          stack.push_back(to_[e]);
        }
    }
    return seen;
  }

  std::vector<std::vector<std::size_t>> out_;
  std::vector<std::size_t> to_;
  std::vector<std::int64_t> capacity_;  // residual
  std::vector<long> level_;
  std::vector<std::size_t> stamp_;
  std::vector<std::size_t> next_;
  std::vector<std::size_t> queue_;
  std::vector<std::size_t> path_;
  std::vector<std::pair<std::size_t, std::int64_t>> journal_;
  std::vector<char> source_side_, reaches_sink_;
  std::size_t round_ = 0, s_ = 0, t_ = 0;
  std::size_t budget_ = std::numeric_limits<std::size_t>::max();  // edges a question may still look at
  bool journal_on_ = false;
};

}  // namespace memfmt::graph::detail
