// memfmt/graph/priors.hpp - the prior tables of the backend families, as compiled in.
//
// A prior is what the planner assumes where nothing was measured (calibrate measures). Each
// backend family has its own table, every row naming the benchmark case that produced it;
// data/priors/<family>.json ships the same tables as files (io/priors_json.hpp reads them), and a
// test checks that each file equals its compiled-in table, so editing a file is the way to change
// a prior without touching code.
#pragma once

#include <string>

#include "cost_model.hpp"

namespace memfmt::graph {

// oneDNN on x86-64 CPUs: docs/performance.md's per-layer table (AMD EPYC Zen 5, oneDNN 2.6, batch 4).
inline cost_priors onednn_cpu_priors() { return cost_priors{}; }

// cuDNN on NVIDIA GPUs: bench_conv_cudnn on an H100 (cuDNN 9.19, batch 32). Only the kxk and 1x1
// classes have their own cases; the other conv classes take the forward median of all 13 layers.
inline cost_priors cudnn_gpu_priors() {
  cost_priors p;
  p.conversion_bytes_per_ns = 2900.0;  // H100 HBM3: conversion at 0.9-1.0 of cudaMemcpyAsync
  p.memory_bytes_per_ns = 2900.0;
  p.bandwidth_benchmark = "bench_convert_cuda --benchmark_filter=BM_convert_cuda/";
  p.fp32_flops_per_ns = 40000.0;
  p.low_precision_flops_per_ns = 300000.0;
  p.throughput_benchmark = "bench_conv_cudnn --benchmark_filter=/fwd/";
  p.batch_norm_channels_last_speedup_fp32 = 1.0;  // no cuDNN batch-norm case: format-neutral
  p.batch_norm_channels_last_speedup_low_precision = 1.0;
  p.batch_norm_benchmark = "none (no cuDNN batch-norm case; format-neutral)";
  const std::string median = "bench_conv_cudnn --benchmark_filter=/fwd/ (median of the 13 layers)";
  p.depthwise_conv = {1.33, 1.41, median};
  p.wide_grouped_conv = {1.33, 1.41, median};
  p.grouped_conv = {1.33, 1.41, median};
  p.conv3d = {1.33, 1.41, median};
  p.pointwise_conv = {0.69, 0.87, "bench_conv_cudnn --benchmark_filter='^(1x1_|mbv2_pw).*/fwd/'"};
  p.kxk_conv = {1.33, 1.41, "bench_conv_cudnn --benchmark_filter='^(resnet50_stem|3x3_).*/fwd/'"};
  return p;
}

}  // namespace memfmt::graph
