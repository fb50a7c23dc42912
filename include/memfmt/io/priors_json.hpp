// memfmt/io/priors_json.hpp - a backend family's prior table as a JSON file (docs/formats.md,
// "memfmt.priors" version 1). Part of memfmt::graph_io.
//
// data/priors/onednn_cpu.json and data/priors/cudnn_gpu.json are graph::onednn_cpu_priors() and
// graph::cudnn_gpu_priors() as files: edit a file and plan with read_priors_file(path) (memfmt plan
// --priors FILE) to change a prior without touching code. Every row names the benchmark case
// behind its numbers; a missing, repeated or unknown row, or a number the cost model refuses, is
// an error naming the row and key.
#pragma once

#include <array>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "../graph/cost_model.hpp"
#include "network_json.hpp"

namespace memfmt::io {

inline constexpr int priors_format_version = 1;

namespace detail {

// The rows that hold two numbers under their own key names, and where they live in cost_priors.
struct rate_row {
  const char* prior;
  const char* first_key;
  double graph::cost_priors::*first;
  const char* second_key;
  double graph::cost_priors::*second;
  std::string graph::cost_priors::*benchmark;
};
inline const std::array<rate_row, 3>& rate_rows() {
  using P = graph::cost_priors;
  static const std::array<rate_row, 3> rows{{
      {"bandwidth", "conversion_bytes_per_ns", &P::conversion_bytes_per_ns, "memory_bytes_per_ns",
       &P::memory_bytes_per_ns, &P::bandwidth_benchmark},
      {"throughput", "fp32_flops_per_ns", &P::fp32_flops_per_ns, "low_precision_flops_per_ns",
       &P::low_precision_flops_per_ns, &P::throughput_benchmark},
      {"batch_norm", "fp32", &P::batch_norm_channels_last_speedup_fp32, "low_precision",
       &P::batch_norm_channels_last_speedup_low_precision, &P::batch_norm_benchmark},
  }};
  return rows;
}
// The conv shape classes: {fp32, low_precision, benchmark} each.
inline const std::array<std::pair<const char*, graph::conv_class_prior graph::cost_priors::*>, 6>& conv_rows() {
  using P = graph::cost_priors;
  static const std::array<std::pair<const char*, graph::conv_class_prior P::*>, 6> rows{{
      {"depthwise_conv", &P::depthwise_conv},
      {"wide_grouped_conv", &P::wide_grouped_conv},
      {"grouped_conv", &P::grouped_conv},
      {"conv3d", &P::conv3d},
      {"pointwise_conv", &P::pointwise_conv},
      {"kxk_conv", &P::kxk_conv},
  }};
  return rows;
}

}  // namespace detail

// `backend_family` names the table ("onednn_cpu", "cudnn_gpu").
inline nlohmann::json priors_to_json(const graph::cost_priors& p, std::string_view backend_family) {
  using detail::json;
  json rows = json::array();
  for (const auto& r : detail::rate_rows())
    rows.push_back(
        {{"prior", r.prior}, {r.first_key, p.*r.first}, {r.second_key, p.*r.second}, {"benchmark", p.*r.benchmark}});
  for (const auto& [name, field] : detail::conv_rows())
    rows.push_back({{"prior", name},
                    {"fp32", (p.*field).fp32},
                    {"low_precision", (p.*field).low_precision},
                    {"benchmark", (p.*field).benchmark}});
  return {{"format", "memfmt.priors"},
          {"version", priors_format_version},
          {"backend_family", std::string(backend_family)},
          {"preferred_pin_unit_ns", p.preferred_pin_unit},
          {"rows", rows}};
}

inline graph::cost_priors priors_from_json(const nlohmann::json& j) {
  using detail::json;
  const std::string what = "priors file";
  detail::check_header(j, "memfmt.priors", priors_format_version, what);
  detail::text(j, "backend_family", what);
  graph::cost_priors p;
  p.preferred_pin_unit = detail::integer(j, "preferred_pin_unit_ns", what);
  const json& rows = detail::member(j, "rows", what);
  if (!rows.is_array()) detail::bad(what, "key 'rows' must be an array");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string where = what + ": rows[" + std::to_string(i) + "]";
    const std::string name = detail::text(rows[i], "prior", where);
    if (!seen.insert(name).second) detail::bad(where, "prior '" + name + "' is listed twice");
    bool known = false;
    for (const auto& r : detail::rate_rows())
      if (name == r.prior) {
        p.*r.first = detail::number(rows[i], r.first_key, where);
        p.*r.second = detail::number(rows[i], r.second_key, where);
        p.*r.benchmark = detail::text(rows[i], "benchmark", where);
        known = true;
      }
    for (const auto& [conv, field] : detail::conv_rows())
      if (name == conv) {
        p.*field = {detail::number(rows[i], "fp32", where), detail::number(rows[i], "low_precision", where),
                    detail::text(rows[i], "benchmark", where)};
        known = true;
      }
    if (!known) detail::bad(where, "key 'prior' is '" + name + "', which is no prior of this memfmt");
  }
  for (const auto& r : detail::rate_rows())
    if (!seen.count(r.prior)) detail::bad(what, std::string("no row for prior '") + r.prior + "'");
  for (const auto& [conv, field] : detail::conv_rows())
    if (!seen.count(conv)) detail::bad(what, std::string("no row for prior '") + conv + "'");
  graph::cost_model check(p);  // every number positive and finite, or an error naming it
  return p;
}

inline std::string save_priors(const graph::cost_priors& p, std::string_view backend_family) {
  return io::dump_json(priors_to_json(p, backend_family), 1, "priors file") + "\n";
}
inline graph::cost_priors load_priors(std::string_view text) {
  return priors_from_json(detail::parse(text, "priors file"));
}
inline graph::cost_priors read_priors_file(const std::string& path) {
  return priors_from_json(detail::parse(detail::read_file(path, "priors file"), "priors file '" + path + "'"));
}

}  // namespace memfmt::io
