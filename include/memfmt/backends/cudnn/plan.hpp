// memfmt/backends/cudnn/plan.hpp - engine heuristics, execution plans and the plan cache.
//
// A plan is chosen once per distinct problem: heuristics (CUDNN_HEUR_MODE_A, then FALLBACK) rank
// engine configs for the graph and the first config that finalizes into an execution plan wins.
// plan_cache keys plans like oneDNN's primitive cache: op kind, shapes, strides, dtypes, alignment
// and attributes (conv params, fusions), so a second call with the same problem skips all of it.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "descriptor.hpp"
#include "graph.hpp"

namespace memfmt::cudnn {

struct execution_plan {
  graph_builder graph;  // keeps tensors, operations and the graph alive as long as the plan
  std::vector<descriptor> configs;
  descriptor plan;
  std::int64_t workspace_bytes = 0;
  std::string engine_name;  // "eng<global index>" plus "+tc" when cuDNN notes tensor-core use
  std::string unsupported;  // why no engine runs the graph (then `plan` is empty); cached too, so
                            // an unsupported fusion is tried once and its reason is kept
};

namespace detail {

inline std::string engine_name_of(const descriptor& config) {
  try {
    auto engines = config.get_descs(CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_BACKEND_ENGINE_DESCRIPTOR, 1,
                                    "get CUDNN_ATTR_ENGINECFG_ENGINE");
    if (engines.empty()) return "eng?";
    std::string name = "eng" + std::to_string(engines[0].get_int64(CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                                                   "get CUDNN_ATTR_ENGINE_GLOBAL_INDEX"));
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    std::int64_t n = 0;
    if (cudnnBackendGetAttribute(engines[0].get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS)
      for (std::int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; ++i)
        if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE) name += "+tc";
    return name;
  } catch (const memfmt::error&) {
    return "eng?";
  }
}

}  // namespace detail

// The finalized device-properties descriptor of the GPU behind `handle` (cuDNN >= 9.8). cuDNN 9
// deprecates the handle attributes of the operation graph and the plan; without this descriptor
// heuristics and plans know no device at all: they rank engines for "SM 0", and execution then
// fails with CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH (seen on an H100 with cuDNN 9.19).
inline descriptor device_properties(cudnnHandle_t handle) {
  descriptor d(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR);
  d.set(CUDNN_ATTR_DEVICEPROP_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "set CUDNN_ATTR_DEVICEPROP_HANDLE");
  d.finalize("finalize the device-properties descriptor");
  return d;
}

// Ranks engine configs for the finalized graph of `g` with heuristics and builds the first plan that
// finalizes, both for the device that `device` (from device_properties) describes. Throws
// memfmt::error(unsupported) naming the graph when no engine supports it.
inline std::unique_ptr<execution_plan> build_plan(graph_builder&& g, const descriptor& device,
                                                  const std::string& what) {
  auto p = std::make_unique<execution_plan>();
  p->graph = std::move(g);
  descriptor& graph = p->graph.finalize_graph();
  std::string last_reason;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "set CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH");
    heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "set CUDNN_ATTR_ENGINEHEUR_MODE");
    heur.set_desc(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, device, "set CUDNN_ATTR_ENGINEHEUR_DEVICEPROP");
    if (heur.try_finalize() != CUDNN_STATUS_SUCCESS) {
      last_reason = memfmt::cudnn::detail::last_cudnn_error_string();
      continue;
    }
    std::int64_t count = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr) != CUDNN_STATUS_SUCCESS ||
        count <= 0)
      continue;
    auto configs = heur.get_descs(CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, count,
                                  "get CUDNN_ATTR_ENGINEHEUR_RESULTS");
    for (auto& cfg : configs) {
      descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg, "set CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG");
      plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, device, "set CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP");
      if (plan.try_finalize() != CUDNN_STATUS_SUCCESS) {
        last_reason = memfmt::cudnn::detail::last_cudnn_error_string();
        continue;
      }
      p->workspace_bytes =
          plan.get_int64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, "get EXECUTION_PLAN_WORKSPACE_SIZE");
      p->engine_name = detail::engine_name_of(cfg);
      p->plan = std::move(plan);
      p->configs.push_back(std::move(cfg));
      return p;
    }
  }
  memfmt::detail::fail(errc::unsupported,
                       "cuDNN: no engine supports " + what +
                           (last_reason.empty() ? std::string() : "; last cuDNN message: " + last_reason));
}

// A least-recently-used map from key to value; `capacity` 0 means unbounded.
template <class V>
class plan_cache {
 public:
  explicit plan_cache(std::size_t capacity = 1024) : capacity_(capacity) {}

  // The cached value or nullptr; a hit becomes the most recently used.
  V* find(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++misses_;
      return nullptr;
    }
    ++hits_;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }
  V& insert(const std::string& key, V value) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      return it->second->second;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    if (capacity_ > 0 && order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return order_.front().second;
  }
  std::size_t size() const noexcept { return order_.size(); }
  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t hits() const noexcept { return hits_; }
  std::size_t misses() const noexcept { return misses_; }
  void clear() noexcept {
    order_.clear();
    index_.clear();
  }

 private:
  std::size_t capacity_;
  std::list<std::pair<std::string, V>> order_;  // most recent first
  std::unordered_map<std::string, typename std::list<std::pair<std::string, V>>::iterator> index_;
  std::size_t hits_ = 0, misses_ = 0;
};

}  // namespace memfmt::cudnn
