#!/usr/bin/env bash
# The main job: NCHW vs NHWC, and memfmt against what people use today. Builds the benchmarks
# (Release, -march=native) and runs, with a progress line per stage:
#   bench_conv        per-layer convolution / batch norm, NCHW vs NHWC, oneDNN on the CPU
#   bench_convert     NCHW<->NHWC conversion speed against the same run's memcpy
#   bench_planner     the format planner's own time: graph::solve + explain on models::bottleneck_chain
#                     networks of 102 .. 10,002 nodes (quick) or up to 100,002 (--full), with the
#                     default priors and with batch norm indifferent (the harder family)
#   bench_network     whole networks of graph/models.hpp through the executor on oneDNN, one plan
#                     per format policy (BM_network/<model>/<dtype>/<pass>/<policy>) at batch 1 and a
#                     larger batch: every network at batch 1; at the larger batch ResNet-50 and
#                     MobileNetV2 (quick) or every network (--full). Beside the priors' plans, the
#                     plan solved with costs calibrated on oneDNN (optimal_calibrated; timings kept
#                     in DIR/timing_cache.json and reused by later runs on this machine) and the
#                     training step (train/<policy>, runtime::trainer): quick mode calibrates and
#                     trains ResNet-50 and MobileNetV2 only, and trains at the larger batch in float32 only
#   bench_peers       benchmarks/peers/bench_peers.py: PyTorch (NCHW, channels_last) and ONNX Runtime
#                     on the cases bench_network ran, same threads (peers.json)
#   bench_network onnx  the ONNX files ONNX Runtime ran, imported by memfmt (onnx/import.hpp) and run
#                     as BM_network/onnx:<model>/f32/fwd/<policy>: memfmt and ONNX Runtime on one file
#                     (quick mode: ResNet-50 and MobileNetV2, the all_channels_last, optimal and
#                     optimal_calibrated plans; needs PyTorch to export the files)
#   bench_conv_cudnn  the same layers on the GPU through cuDNN (only where a GPU is present)
#   bench_convert_cuda  memfmt::cuda::convert against the GPU's device-to-device copy (likewise)
#   bench_network_cudnn  bench_network's networks on the GPU through cuDNN (likewise; rows
#                     BM_network_cudnn/<model>/<f32|f16|bf16>/<pass>/<policy>) at batch 1 and 32,
#                     224x224 (MEMFMT_BENCH_RESOLUTION), its calibration in DIR/timing_cache_cudnn.json;
#                     quick mode: ResNet-50 and MobileNetV2, calibrated at batch 32
# then prints the tables (per layer; the planner's time per network size; per network with memfmt /
# peer ratios; the calibrated plan against the priors' plan and all channels_last; the goals against
# PyTorch and ONNX Runtime) and writes
# summary.json, summary.md and matplotlib charts (ratios.png, networks.png) into the output folder,
# and the UNet's plans under pytorch_eager and optimal as Graphviz pictures (unet_*.png).
# A case this CPU cannot run (oneDNN's bfloat16 without AVX-512) keeps its row, marked e.g.
# "unsupported on this CPU (needs avx512_core)" (DNNL_MAX_CPU_ISA=AVX2 shows an AVX2-only CPU's table).
# Peers: as root the Debian packages python3-torch, python3-torchvision, python3-matplotlib are
# installed when missing, and ONNX Runtime (PyPI onnxruntime) into a venv under the build folder
# that sees the system's torch; a peer that cannot be had is named with the reason and left out.
# ONNX Runtime runs DIR/onnx/<model>_<R>x<R>.onnx (tools/export_onnx.py, batch symbolic; written once).
#   scripts/bench.sh [--full] [--out DIR]
# Default is a quick mode (about 10 minutes on 2 cores); --full runs longer, larger batches, more reps.
# Environment: MEMFMT_BENCH_THREADS (default: all cores; the peers use the same count);
# OMP_WAIT_POLICY=PASSIVE on a shared machine (waiting threads sleep instead of spinning, in memfmt,
# PyTorch and ONNX Runtime alike; spinning there can make a pass 10x slower).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
memfmt_ensure_deps
memfmt_prefer_ninja

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
have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  cuda_arch=(-DCMAKE_CUDA_ARCHITECTURES=native)
  have_gpu=1
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMEMFMT_BUILD_TESTS=OFF -DMEMFMT_BUILD_BENCHMARKS=ON \
      -DMEMFMT_BUILD_EXAMPLES=ON -DMEMFMT_BUILD_TOOLS=OFF "${cuda_arch[@]}" >/dev/null
cmake --build "$build" -j "$jobs" --target all
mkdir -p "$out"
# bench_convert times 21 repetitions per case, 9 in quick mode (MEMFMT_BENCH_QUICK): at 21 it took
# about 8 of the quick run's minutes on 2 cores.
if [ "$mode" = full ]; then
  export MEMFMT_BENCH_BATCH=${MEMFMT_BENCH_BATCH:-16} MEMFMT_BENCH_MIN_TIME=${MEMFMT_BENCH_MIN_TIME:-0.5}
else
  export MEMFMT_BENCH_QUICK=${MEMFMT_BENCH_QUICK:-1}
fi
export OMP_PROC_BIND=${OMP_PROC_BIND:-close}

run_bench() {  # name binary [args...]
  local name=$1 bin=$2
  shift 2
  rm -f "$out/$name.json"  # an earlier run's rows must not join this run's summary
  if [ ! -x "$bin" ]; then
    echo "memfmt: $name not built (its backend was not found); skipped"
    return 0
  fi
  echo "== $name ($mode)"
  "$bin" --benchmark_out="$out/$name.json" --benchmark_out_format=json "$@"
}

py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
threads=${MEMFMT_BENCH_THREADS:-$jobs}
export OMP_NUM_THREADS=$threads
if [ "$mode" = full ]; then
  net_batches=(1 8 32); peer_args=(--reps 20 --warmup 3 --case-seconds 20 --dtypes float32,bfloat16,float16)
else
  net_batches=(1 8); peer_args=(--reps 5 --warmup 1 --case-seconds 3 --time-limit 150 --dtypes float32)
fi
# Models that get optimal_calibrated and train rows, per batch (bench_network's environment).
if [ "$mode" = full ]; then
  calibrated_b1=all train_b1=all onnx_models=
else
  calibrated_b1=resnet50,mobilenet_v2 train_b1=none onnx_models=resnet50,mobilenet_v2
fi
export MEMFMT_BENCH_TIMING_CACHE="$out/timing_cache.json"
gpu_suites=0
for bin in cudnn/bench_conv_cudnn cuda/bench_convert_cuda network/bench_network_cudnn; do
  if [ "$have_gpu" = 1 ] && [ -x "$build/benchmarks/$bin" ]; then gpu_suites=1; fi
done
stages=$((6 + gpu_suites))
stage=0
# This script's earlier results (bench_network.json was the single-batch name) would join stale rows.
rm -f "$out"/bench_network.json "$out"/bench_network_b*.json "$out"/bench_network_onnx_b*.json "$out"/peers.json \
      "$out"/bench_network_cudnn_b*.json
# The machine's load per stage: the share of all cores' time that other processes used (a build,
# another job) and the share the hypervisor stole, from /proc/stat against this script's own
# children. A busy stage makes its numbers, and ratios against stages run at another time, noise;
# summarize.py flags the ratios that rest on such a stage. Written to machine_load.json.
cpu_sample() {  # prints: busy_ticks total_ticks steal_ticks own_ticks
  local own
  own=$(cat "/proc/$$/stat")
  own=${own##*) }  # fields from the 3rd on; the 2nd (the command name) may hold spaces
  read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
  awk -v b=$((user + nice + system + irq + softirq)) -v i=$((idle + iowait)) -v st="${steal:-0}" \
    '{ printf "%d %d %d %d\n", b, b + i + st, st, $12 + $13 + $14 + $15 }' <<<"$own"
}
load_rows=()
stage_name= stage_start= stage_sample=
stage_end() {
  [ -n "$stage_name" ] || return 0
  local now busy total steal own
  now=$(date +%s.%N)
  read -r busy total steal own < <(cpu_sample)
  load_rows+=("$(awk -v name="$stage_name" -v t0="$stage_start" -v t1="$now" -v s0="$stage_sample" \
    -v b="$busy" -v tot="$total" -v st="$steal" -v o="$own" -v cores="$(nproc)" 'BEGIN {
      split(s0, a, " "); db = b - a[1]; dt = tot - a[2]; ds = st - a[3]; dob = o - a[4]
      others = (dt > 0 ? (db - dob) / dt : 0); if (others < 0) others = 0
      gsub(/"/, "", name)
      printf "{\"stage\": \"%s\", \"seconds\": %.1f, \"cores\": %d, \"others_cpu_share\": %.3f, \"steal_share\": %.3f}",
             name, t1 - t0, cores, others, (dt > 0 ? ds / dt : 0) }')")
  stage_name=
}
write_machine_load() {
  stage_end
  local IFS=,
  echo "{\"format\": \"memfmt.machine_load\", \"machine_load\": [${load_rows[*]}]}" >"$out/machine_load.json"
}
progress() {
  stage_end
  stage=$((stage + 1))
  echo "== [$stage/$stages $(date +%H:%M:%S)] $*"
  stage_name=${1%%:*} stage_start=$(date +%s.%N) stage_sample=$(cpu_sample)
}

progress "bench_conv: per-layer NCHW vs NHWC"
run_bench bench_conv "$build/benchmarks/conv/bench_conv"
progress "bench_convert: conversion vs memcpy"
run_bench bench_convert "$build/benchmarks/convert/bench_convert"
# The planner is single-threaded and its cases grow tenfold: quick mode stops at 10,002 nodes (about
# 20 s on 2 cores), --full adds the 100,002-node networks.
planner_filter=()
planner_sizes="102 .. 10,002"
if [ "$mode" = full ]; then planner_sizes="102 .. 100,002"; else planner_filter=(--benchmark_filter='^BM_[a-z_]+/(10|100|1000)(/|$)'); fi
progress "bench_planner: solve + explain at $planner_sizes nodes"
run_bench bench_planner "$build/benchmarks/planner/bench_planner" "${planner_filter[@]}" ||
  echo "memfmt: bench_planner failed (exit $?); the Planner table is missing"
progress "bench_network: whole networks at batch ${net_batches[*]}"
for n in "${net_batches[@]}"; do
  filter=()
  # Quick mode at the larger batch: ResNet-50 and MobileNetV2, training steps in float32 only.
  if [ "$mode" = quick ] && [ "$n" != 1 ]; then filter=(--benchmark_filter='^BM_network/(resnet50|mobilenet_v2)/(f32|bf16/fwd)/'); fi
  calibrated=$calibrated_b1 train=$train_b1
  if [ "$n" != 1 ]; then calibrated=all train=all; fi
  echo "   batch $n"
  MEMFMT_BENCH_BATCH=$n MEMFMT_BENCH_CALIBRATED=$calibrated MEMFMT_BENCH_TRAIN=$train \
    run_bench "bench_network_b$n" "$build/benchmarks/network/bench_network" "${filter[@]}" ||
    echo "memfmt: bench_network at batch $n failed (exit $?); its rows are missing"
done

# The peers: PyTorch from Debian, ONNX Runtime from PyPI in a venv that also sees the system's torch.
peers_setup() {
  local missing
  missing=$(memfmt_missing_debs python3-torch python3-torchvision python3-matplotlib python3-venv)
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
      echo "memfmt: installing for the peers and charts:$missing"
      export DEBIAN_FRONTEND=noninteractive
      { apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null; } ||
        echo "memfmt: apt-get could not install$missing; the peers or charts that need them are skipped"
    else
      echo "memfmt: not root, so not installing$missing; the peers or charts that need them are skipped"
    fi
  fi
  peer_py=$py
  if ! "$py" -c "import torch, torchvision" 2>/dev/null; then
    echo "memfmt: PyTorch peers skipped: $py cannot import torch and torchvision (python3-torch, python3-torchvision)"
    peer_py=
    return 0
  fi
  local venv="$build/peers-venv"
  if ! "$venv/bin/python" -c "import onnxruntime" 2>/dev/null; then
    local log="$build/peers-pip.log"
    if ! "$py" -m venv --system-site-packages "$venv" >"$log" 2>&1; then
      echo "memfmt: ONNX Runtime peer skipped: $py -m venv failed ($(tail -n 1 "$log"); Debian: python3-venv)"
    elif "$venv/bin/pip" install --quiet --disable-pip-version-check --timeout 20 --retries 1 onnxruntime >"$log" 2>&1; then
      echo "memfmt: onnxruntime installed into $venv"
    else
      echo "memfmt: ONNX Runtime peer skipped: pip could not install onnxruntime from PyPI into $venv ($(grep -m 1 '^ERROR' "$log" || tail -n 1 "$log"); see $log)"
    fi
  fi
  if "$venv/bin/python" -c "import torch, torchvision, onnxruntime" 2>/dev/null; then peer_py="$venv/bin/python"; fi
}

progress "bench_peers: PyTorch and ONNX Runtime on the same networks, $threads threads"
peers_setup
if [ -n "$peer_py" ]; then
  match=()
  for f in "$out"/bench_network_b*.json; do [ -s "$f" ] && match+=(--match "$f"); done
  if [ ${#match[@]} -eq 0 ]; then
    echo "   no bench_network results to match: resnet50 and mobilenet_v2 at batch ${net_batches[*]}"
    match=(--models resnet50,mobilenet_v2 --batches "$(IFS=,; echo "${net_batches[*]}")")
  fi
  "$peer_py" benchmarks/peers/bench_peers.py "${match[@]}" --threads "$threads" \
    --resolution "${MEMFMT_BENCH_RESOLUTION:-224}" --onnx-dir "$out/onnx" --out "$out/peers.json" "${peer_args[@]}" ||
    echo "memfmt: bench_peers.py failed (exit $?); the table has no peer rows"
fi

progress "bench_network onnx: the ONNX files ONNX Runtime runs, through memfmt's importer"
if [ -z "$peer_py" ]; then
  echo "   skipped: the ONNX files are exported with PyTorch, which $py cannot import"
else
  # The files of the cases bench_network ran (bench_peers.py already wrote those ONNX Runtime ran).
  "$peer_py" benchmarks/peers/bench_peers.py "${match[@]}" ${onnx_models:+--models "$onnx_models"} \
    --resolution "${MEMFMT_BENCH_RESOLUTION:-224}" --onnx-dir "$out/onnx" --export-only ||
    echo "memfmt: the ONNX export failed (exit $?); the ONNX rows of the models it did not write are missing"
  # Quick mode: the plans summarize.py compares (goals, calibration check); every policy still runs
  # once in bench_network's correctness check.
  onnx_filter="^BM_network/onnx:"
  [ -n "$onnx_models" ] && onnx_filter="^BM_network/onnx:(${onnx_models//,/|})/f32/fwd/(all_channels_last|optimal|optimal_calibrated)/"
  for n in "${net_batches[@]}"; do
    echo "   batch $n"
    MEMFMT_BENCH_BATCH=$n MEMFMT_BENCH_ONNX_DIR="$out/onnx" MEMFMT_BENCH_CALIBRATED=${onnx_models:-all} \
      run_bench "bench_network_onnx_b$n" "$build/benchmarks/network/bench_network" --benchmark_filter="$onnx_filter" ||
      echo "memfmt: bench_network's ONNX rows at batch $n failed (exit $?); they are missing"
  done
fi

if [ "$gpu_suites" = 1 ]; then
  progress "GPU suites: cuDNN layers, CUDA conversion, whole networks on cuDNN"
  if [ -x "$build/benchmarks/cudnn/bench_conv_cudnn" ]; then
    run_bench bench_conv_cudnn "$build/benchmarks/cudnn/bench_conv_cudnn"
  fi
  if [ -x "$build/benchmarks/cuda/bench_convert_cuda" ]; then
    run_bench bench_convert_cuda "$build/benchmarks/cuda/bench_convert_cuda"
  fi
  if [ -x "$build/benchmarks/network/bench_network_cudnn" ]; then
    # The CPU's timing cache is another device's: the GPU's calibration has its own file.
    gpu_filter=()
    if [ "$mode" = quick ]; then gpu_filter=(--benchmark_filter='^BM_network_cudnn/(resnet50|mobilenet_v2)/'); fi
    for n in 1 32; do
      gpu_calibrated=all
      if [ "$mode" = quick ]; then
        gpu_calibrated=none
        if [ "$n" != 1 ]; then gpu_calibrated=resnet50,mobilenet_v2; fi
      fi
      echo "   bench_network_cudnn batch $n"
      MEMFMT_BENCH_BATCH=$n MEMFMT_BENCH_RESOLUTION=${MEMFMT_BENCH_RESOLUTION:-224} \
        MEMFMT_BENCH_CALIBRATED=$gpu_calibrated MEMFMT_BENCH_TRAIN=all \
        MEMFMT_BENCH_TIMING_CACHE="$out/timing_cache_cudnn.json" \
        run_bench "bench_network_cudnn_b$n" "$build/benchmarks/network/bench_network_cudnn" "${gpu_filter[@]}" ||
        echo "memfmt: bench_network_cudnn at batch $n failed (exit $?); its rows are missing"
    done
  fi
fi
write_machine_load
"$py" benchmarks/summarize.py --out "$out" "$out"/*.json
# The UNet's plans as pictures: PyTorch eager after model.to(channels_last) beside the solved plan.
if "$build/examples/unet_plans" "$out" >"$out/unet_plans.txt"; then
  if command -v dot >/dev/null 2>&1; then
    for p in pytorch_eager optimal; do dot -Tpng "$out/unet_$p.dot" -o "$out/unet_$p.png"; done
    echo "written: $out/unet_plans.txt, unet_pytorch_eager.png, unet_optimal.png"
  else
    echo "written: $out/unet_plans.txt and the DOT files (no Graphviz 'dot' to draw them)"
  fi
else
  echo "memfmt: examples/unet_plans failed; no UNet plan pictures"
fi
