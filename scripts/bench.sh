#!/usr/bin/env bash
# The main job: NCHW vs NHWC. Builds the benchmarks (Release, -march=native) and runs
#   bench_conv        per-layer convolution / batch norm, NCHW vs NHWC, oneDNN on the CPU
#   bench_convert     NCHW<->NHWC conversion speed against the same run's memcpy
#   bench_network     whole networks (models.hpp) end to end on oneDNN, one plan per format policy
#   bench_conv_cudnn  the same layers on the GPU through cuDNN (only where a GPU is present)
#   bench_convert_cuda  memfmt::cuda::convert against the GPU's device-to-device copy (likewise)
# then prints a table (layer, NCHW, NHWC, ratio, winner) and writes JSON, Markdown and an SVG chart.
# A case this CPU cannot run (oneDNN's bfloat16 without AVX-512) keeps its row, marked e.g.
# "unsupported on this CPU (needs avx512_core)" (DNNL_MAX_CPU_ISA=AVX2 shows an AVX2-only CPU's table).
#   scripts/bench.sh [--full] [--out DIR]
# Default is a quick mode (a few minutes on 2 cores); --full runs longer, larger batches.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
memfmt_ensure_deps

mode=quick
out=out/bench
while [ $# -gt 0 ]; do
  case "$1" in
    --full) mode=full ;;
    --out) out="$2"; shift ;;
    *) echo "usage: scripts/bench.sh [--full] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
build=${MEMFMT_BENCH_BUILD_DIR:-build-bench}
jobs=$(memfmt_jobs)
# On a GPU machine the CUDA parts are built for that GPU (machine code, not PTX compiled at load).
cuda_arch=()
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  cuda_arch=(-DCMAKE_CUDA_ARCHITECTURES=native)
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMEMFMT_BUILD_TESTS=OFF -DMEMFMT_BUILD_BENCHMARKS=ON \
      -DMEMFMT_BUILD_EXAMPLES=OFF -DMEMFMT_BUILD_TOOLS=OFF "${cuda_arch[@]}" >/dev/null
cmake --build "$build" -j "$jobs" --target all
mkdir -p "$out"
# (bench_convert always times 21 repetitions per case; MEMFMT_BENCH_QUICK=1 would cut that to 9.)
if [ "$mode" = full ]; then
  export MEMFMT_BENCH_BATCH=${MEMFMT_BENCH_BATCH:-16} MEMFMT_BENCH_MIN_TIME=${MEMFMT_BENCH_MIN_TIME:-0.5}
fi
export OMP_PROC_BIND=${OMP_PROC_BIND:-close}

run_bench() {  # name binary [args...]
  local name=$1 bin=$2
  shift 2
  if [ ! -x "$bin" ]; then
    echo "memfmt: $name not built (its backend was not found); skipped"
    return 0
  fi
  echo "== $name ($mode)"
  "$bin" --benchmark_out="$out/$name.json" --benchmark_out_format=json "$@"
}

run_bench bench_conv "$build/benchmarks/conv/bench_conv"
run_bench bench_convert "$build/benchmarks/convert/bench_convert"
run_bench bench_network "$build/benchmarks/network/bench_network"
if [ -x "$build/benchmarks/cudnn/bench_conv_cudnn" ]; then
  run_bench bench_conv_cudnn "$build/benchmarks/cudnn/bench_conv_cudnn"
fi
if [ -x "$build/benchmarks/cuda/bench_convert_cuda" ]; then
  run_bench bench_convert_cuda "$build/benchmarks/cuda/bench_convert_cuda"
fi
python3 benchmarks/summarize.py --out "$out" "$out"/*.json
