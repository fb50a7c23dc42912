// memfmt/runtime/memory_plan.hpp - one arena for many values, reused by liveness.
//
// Each value has a byte size and an inclusive range of steps [first, last] in which it is live
// (written at `first`, last read at `last`). Two values whose ranges intersect never share bytes;
// two that do not may. Placement is greedy by size: largest first, each at the lowest aligned
// offset where it overlaps no placed value that is live at the same time (the "greedy by size"
// strategy of TensorFlow Lite's arena planner and of Pisarchyk & Lee, "Efficient Memory Management
// for Deep Neural Net Inference", 2020). Not optimal in general (the problem is NP-hard), never
// below the largest sum of simultaneously live sizes, never above allocating everything.
//
// The plan knows nothing of graphs: the executor lists its values. For its poison mode, the plan
// names the values whose liveness ends at each step and fills their bytes with a pattern that is a
// NaN in every floating type, so a reader that should have been done finds garbage, not stale data.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "../detail/checked.hpp"
#include "../error.hpp"

namespace memfmt::runtime {

struct value_lifetime {
  std::string name;  // for messages
  std::int64_t bytes = 0;
  std::int64_t first = 0;  // step that writes it
  std::int64_t last = 0;   // last step that reads it (inclusive)
};

constexpr bool lifetimes_overlap(const value_lifetime& a, const value_lifetime& b) noexcept {
  return a.first <= b.last && b.first <= a.last;
}

struct memory_plan {
  std::vector<value_lifetime> values;
  std::vector<std::int64_t> offsets;  // per value, a multiple of `alignment`
  std::int64_t alignment = 64;
  std::int64_t arena_bytes = 0;      // the arena: max(offset + size)
  std::int64_t total_bytes = 0;      // allocate-everything: the sum of the aligned sizes
  std::int64_t live_peak_bytes = 0;  // max over steps of the aligned sizes live then (a lower bound)

  // All-ones bytes: a NaN in float16/bfloat16/float32/float64 and -1 in the integer types.
  static constexpr unsigned char poison_byte = 0xFF;

  // The values whose last step is `step`, in value order.
  std::vector<std::size_t> ending_at(std::int64_t step) const {
    std::vector<std::size_t> r;
    for (std::size_t i = 0; i < values.size(); ++i)
      if (values[i].last == step) r.push_back(i);
    return r;
  }

  // Fills value i's bytes in the arena at `base` with poison_byte.
  void poison(std::byte* base, std::size_t i) const {
    if (values[i].bytes > 0) std::memset(base + offsets[i], poison_byte, static_cast<std::size_t>(values[i].bytes));
  }
};

inline std::int64_t align_up(std::int64_t n, std::int64_t alignment, const std::string& what) {
  const std::int64_t r = memfmt::detail::checked_add(n, alignment - 1, what);
  return r / alignment * alignment;
}

// Places every value; an invalid value (negative size, last < first, first < 0) or an alignment that
// is not a positive power of two is an error naming it.
inline memory_plan plan_memory(std::vector<value_lifetime> values, std::int64_t alignment = 64) {
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
    memfmt::detail::fail(errc::invalid_argument,
                         "memory plan: alignment " + std::to_string(alignment) + " is not a positive power of two");
  memory_plan plan;
  plan.alignment = alignment;
  std::vector<std::int64_t> size(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const value_lifetime& v = values[i];
    if (v.bytes < 0 || v.first < 0 || v.last < v.first)
      memfmt::detail::fail(errc::invalid_argument, "memory plan: value " + std::to_string(i) + " '" + v.name +
                                                       "' has " + std::to_string(v.bytes) + " bytes live over steps [" +
                                                       std::to_string(v.first) + ", " + std::to_string(v.last) +
                                                       "] (need bytes >= 0, 0 <= first <= last)");
    size[i] = align_up(v.bytes, alignment, "memory plan: size of '" + v.name + "'");
    plan.total_bytes = memfmt::detail::checked_add(plan.total_bytes, size[i], "memory plan: total bytes");
  }
  // The lower bound: at each step where some value starts, the sum of the sizes live then (the live
  // set only grows at a start, so the maximum is reached at one). A sweep over starts and ends:
  // at one step, ends of the step before are taken out before the starts are added.
  std::vector<std::pair<std::int64_t, std::int64_t>> events;  // (step, +size at first, -size after last)
  for (std::size_t i = 0; i < values.size(); ++i) {
    events.emplace_back(values[i].first, size[i]);
    events.emplace_back(memfmt::detail::checked_add(values[i].last, std::int64_t{1}, "memory plan: step"), -size[i]);
  }
  std::sort(events.begin(), events.end());  // at one step, the negative (ending) sizes first
  std::int64_t live = 0;
  for (const auto& [step, delta] : events) {
    live += delta;
    plan.live_peak_bytes = std::max(plan.live_peak_bytes, live);
  }
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return size[a] > size[b]; });
  plan.offsets.assign(values.size(), 0);
  // The placed values by first step, so that those live at the same time as a new one are found
  // without scanning every placed value (a chain of 100,000 layers was quadratic here): a value
  // spanning at most `short_span` steps is indexed by its first step, a longer one kept in a list
  // that every search scans (few values live long: skip connections, graph inputs and outputs).
  constexpr std::int64_t short_span = 64;
  std::map<std::int64_t, std::vector<std::size_t>> short_by_first;
  std::vector<std::size_t> long_lived;
  std::vector<std::pair<std::int64_t, std::int64_t>> busy;
  for (std::size_t i : order) {
    if (size[i] == 0) continue;
    // The placed values live at the same time, by offset; take the first gap that holds size[i].
    busy.clear();
    const auto add_if_overlapping = [&](std::size_t j) {
      if (lifetimes_overlap(values[i], values[j])) busy.emplace_back(plan.offsets[j], plan.offsets[j] + size[j]);
    };
    const std::int64_t from = values[i].first - short_span;  // first >= 0: no overflow
    for (auto it = short_by_first.lower_bound(from); it != short_by_first.end() && it->first <= values[i].last; ++it)
      for (std::size_t j : it->second) add_if_overlapping(j);
    for (std::size_t j : long_lived) add_if_overlapping(j);
    std::sort(busy.begin(), busy.end());
    std::int64_t at = 0;
    for (const auto& [b, e] : busy) {
      if (b - at >= size[i]) break;
      at = std::max(at, e);
    }
    plan.offsets[i] = at;
    plan.arena_bytes = std::max(plan.arena_bytes, memfmt::detail::checked_add(at, size[i], "memory plan: arena bytes"));
    if (values[i].last - values[i].first <= short_span) short_by_first[values[i].first].push_back(i);
    else long_lived.push_back(i);
  }
  plan.values = std::move(values);
  return plan;
}

}  // namespace memfmt::runtime
