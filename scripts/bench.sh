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
#   engines           benchmarks/peers/bench_peers.py: memfmt against today's engines on the same ONNX files
#                     (torchvision's ResNet-50, MobileNetV2, EfficientNet-B0, ConvNeXt-T, RegNetY-800MF and
#                     ResNeXt-50 32x4d, 224x224, batch 1 and 8, float32 and bfloat16, inference): `memfmt run`
#                     (build/tools/memfmt, the ONNX import in the plan it picks on oneDNN), PyTorch 2.x eager
#                     NCHW and channels_last, torch.compile (--full), ONNX Runtime and OpenVINO; every engine
#                     in its own process with the same threads and its own default thread waiting and
#                     placement, rounds taken in turns, medians; every row names the engine's version
#                     (engines.json). A bf16 case an engine has no kernels for on this CPU keeps its row
#                     with the reason.
#                     --omp-passive adds memfmt again with OMP_WAIT_POLICY=PASSIVE in the same turns.
#   --full only: bench_peers on bench_network's own cases (PyTorch 2.x eager, NCHW and channels_last,
#                     inference and training; peers.json) and bench_network onnx (the ONNX files imported
#                     by memfmt and run per policy: BM_network/onnx:<model>/f32/fwd/<policy>)
#   bench_conv_cudnn  the same layers on the GPU through cuDNN (only where a GPU is present)
#   bench_convert_cuda  memfmt::cuda::convert against the GPU's device-to-device copy (likewise)
#   bench_network_cudnn  bench_network's networks on the GPU through cuDNN (likewise; rows
#                     BM_network_cudnn/<model>/<f32|f16|bf16>/<pass>/<policy>) at batch 1 and 32,
#                     224x224 (MEMFMT_BENCH_RESOLUTION), its calibration in DIR/timing_cache_cudnn.json;
#                     quick mode: ResNet-50 and MobileNetV2, calibrated at batch 32
# then prints the tables (per layer; the planner's time per network size; per network with memfmt /
# peer ratios; memfmt against each engine per dtype; memfmt's default OpenMP waiting against PASSIVE
# with --omp-passive; the calibrated plan against the priors' plan and all channels_last; the goals
# against PyTorch channels_last and ONNX Runtime) and writes summary.json, summary.md and matplotlib
# charts (ratios.png, networks.png, engines.png) into the output folder, and the UNet's plans under
# pytorch_eager and optimal as Graphviz pictures (unet_*.png).
# A case this CPU cannot run (oneDNN's bfloat16 without AVX-512) keeps its row, marked e.g.
# "unsupported on this CPU (needs avx512_core)" (DNNL_MAX_CPU_ISA=AVX2 shows an AVX2-only CPU's table).
# The engines come from PyPI into a venv made once and reused ($MEMFMT_PEERS_VENV, default
# build-bench/peers-venv): PyTorch 2.x (its Linux wheels bring CUDA libraries: about 6 GB in all),
# torchvision, onnx, onnxruntime, openvino, matplotlib; pip shows its progress. --no-peers skips the
# venv and every engine (the charts then need Debian's python3-matplotlib). Debian's PyTorch 1.13 is
# not used here: it is the reference for memfmt's stride rules only (tests/strided).
# The ONNX files are DIR/onnx/<model>_224x224.onnx (tools/export_onnx.py, opset 17, batch symbolic;
# written once per DIR).
#   scripts/bench.sh [--full] [--out DIR] [--no-peers] [--omp-passive]
# Default is a quick mode (under 15 minutes on 2 cores once the venv exists; the engines stage stops
# starting cases after 6 minutes and names the ones it left); --full runs longer, larger batches,
# more rounds and reps, torch.compile.
# Environment: MEMFMT_BENCH_THREADS (default: all cores; every engine uses the same count).
# OpenMP waiting: leave OMP_WAIT_POLICY unset (docs/performance.md, "Thread waiting", says why and when to
# set PASSIVE); the engines start without it whatever this shell has, each with its own default.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
memfmt_ensure_deps
memfmt_prefer_ninja

mode=quick
out=out/bench
peers=1
omp_passive=0
while [ $# -gt 0 ]; do
  case "$1" in
    --full) mode=full ;;
    --out) out="$2"; shift ;;
    --no-peers) peers=0 ;;
    --omp-passive) omp_passive=1 ;;
    *) echo "usage: scripts/bench.sh [--full] [--out DIR] [--no-peers] [--omp-passive]" >&2; exit 2 ;;
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
      -DMEMFMT_BUILD_EXAMPLES=ON -DMEMFMT_BUILD_TOOLS=ON "${cuda_arch[@]}" >/dev/null
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
# The engines table: rounds in turns; a round is --warmup untimed passes, then timed ones until
# --case-seconds (at least --min-reps, at most --reps). Quick mode: about 6 minutes on 2 cores (AVX2).
engine_models=resnet50,mobilenet_v2,efficientnet_b0,convnext_tiny,regnet_y_800mf,resnext50_32x4d
engine_runners=memfmt
[ "$omp_passive" = 1 ] && engine_runners=$engine_runners,memfmt_passive
if [ "$mode" = full ]; then
  net_batches=(1 8 32); peer_args=(--reps 20 --warmup 3 --case-seconds 20 --dtypes float32,bfloat16)
  engine_runners=$engine_runners,pytorch_nchw,pytorch_channels_last,pytorch_compile,onnxruntime,openvino
  engine_args=(--rounds 5 --warmup 2 --min-reps 5 --reps 50 --case-seconds 3)
else
  net_batches=(1 8)
  engine_runners=$engine_runners,pytorch_nchw,pytorch_channels_last,onnxruntime,openvino
  # memfmt run plans over its layer timings (kept in the cache) without timing three whole plans.
  engine_args=(--rounds 3 --warmup 1 --min-reps 3 --reps 20 --case-seconds 1 --time-limit 360 --no-memfmt-calibrate)
fi
# Models that get optimal_calibrated and train rows, per batch (bench_network's environment).
if [ "$mode" = full ]; then
  calibrated_b1=all train_b1=all
else
  calibrated_b1=resnet50,mobilenet_v2 train_b1=none
fi
export MEMFMT_BENCH_TIMING_CACHE="$out/timing_cache.json"
gpu_suites=0
for bin in cudnn/bench_conv_cudnn cuda/bench_convert_cuda network/bench_network_cudnn; do
  if [ "$have_gpu" = 1 ] && [ -x "$build/benchmarks/$bin" ]; then gpu_suites=1; fi
done
stages=$((5 + gpu_suites))
[ "$mode" = full ] && stages=$((stages + 2))
stage=0
# This script's earlier results (bench_network.json was the single-batch name) would join stale rows.
rm -f "$out"/bench_network.json "$out"/bench_network_b*.json "$out"/bench_network_onnx_b*.json "$out"/peers.json \
      "$out"/engines.json "$out"/bench_network_cudnn_b*.json
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

# The engines: a venv of PyPI packages, made once and reused. One that an earlier bench.sh made on
# top of Debian's python3-torch (--system-site-packages, onnxruntime alone) is made anew.
venv=${MEMFMT_PEERS_VENV:-$build/peers-venv}
peer_pkgs=("torch>=2,<3" torchvision onnx onnxruntime openvino matplotlib numpy)
peers_ready() {
  "$venv/bin/python" -c "import torch, torchvision, onnx, onnxruntime, openvino, matplotlib, numpy
assert int(torch.__version__.split('.')[0]) >= 2, torch.__version__" >/dev/null 2>&1
}
peers_setup() {
  peer_py=
  if peers_ready; then peer_py="$venv/bin/python"; return 0; fi
  local missing
  missing=$(memfmt_missing_debs python3-venv)
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
      export DEBIAN_FRONTEND=noninteractive
      { apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null; } ||
        echo "memfmt: apt-get could not install$missing"
    else
      echo "memfmt: not root, so not installing$missing (python3 -m venv needs it)"
    fi
  fi
  if [ -f "$venv/pyvenv.cfg" ] && grep -q '^include-system-site-packages *= *true' "$venv/pyvenv.cfg"; then
    echo "memfmt: $venv sees the system's packages (an earlier bench.sh's); making it anew"
    rm -rf "$venv"
  fi
  local log="$build/peers-pip.log"
  echo "memfmt: installing the engines from PyPI into $venv, once (later runs reuse it; --no-peers skips it):"
  echo "        ${peer_pkgs[*]}"
  echo "        about 6 GB of downloads and disk: PyTorch's Linux wheels bring its CUDA libraries. pip's log: $log"
  if [ ! -x "$venv/bin/pip" ] && ! "$py" -m venv "$venv"; then
    echo "memfmt: engines skipped: $py -m venv $venv failed (Debian: python3-venv)"
    return 0
  fi
  if ! "$venv/bin/pip" install --disable-pip-version-check --progress-bar on --log "$log" "${peer_pkgs[@]}"; then
    echo "memfmt: engines skipped: pip could not install them into $venv (see $log); rerun to retry"
    return 0
  fi
  if peers_ready; then
    peer_py="$venv/bin/python"
  else
    echo "memfmt: engines skipped: $venv/bin/python cannot import them after the install (see $log)"
  fi
}

progress "engines: memfmt vs PyTorch, ONNX Runtime, OpenVINO on the same ONNX files, $threads threads"
peer_py=
if [ "$peers" = 0 ]; then
  echo "   skipped (--no-peers)"
  if [ -n "$(memfmt_missing_debs python3-matplotlib)" ] && [ "$(id -u)" = 0 ]; then
    echo "memfmt: installing python3-matplotlib for the charts"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-matplotlib >/dev/null ||
      echo "memfmt: apt-get could not install python3-matplotlib; the charts are skipped"
  fi
else
  peers_setup
fi
memfmt_cli="$build/tools/memfmt"
if [ -n "$peer_py" ]; then
  if [ ! -x "$memfmt_cli" ]; then
    echo "   $memfmt_cli was not built (memfmt::onnx needs libonnx-dev): the engines run without memfmt's rows"
  fi
  # The bf16 rows run where the engine has bf16 kernels on this CPU; elsewhere they name the reason.
  "$peer_py" benchmarks/peers/bench_peers.py --models "$engine_models" --batches 1,8 --passes inference \
    --dtypes float32,bfloat16 --runners "$engine_runners" --threads "$threads" \
    --resolution "${MEMFMT_BENCH_RESOLUTION:-224}" --onnx-dir "$out/onnx" --memfmt "$memfmt_cli" \
    --memfmt-cache "$out/timing_cache_run.json" --inductor-cache "$build/torchinductor-cache" \
    --log-dir "$out/peers_logs" --out "$out/engines.json" "${engine_args[@]}" ||
    echo "memfmt: bench_peers.py failed (exit $?); the engines table is missing"
fi

if [ "$mode" = full ]; then
  progress "bench_peers: PyTorch eager on bench_network's own cases, $threads threads"
  if [ -n "$peer_py" ]; then
    match=()
    for f in "$out"/bench_network_b*.json; do [ -s "$f" ] && match+=(--match "$f"); done
    if [ ${#match[@]} -eq 0 ]; then
      echo "   no bench_network results to match: resnet50 and mobilenet_v2 at batch ${net_batches[*]}"
      match=(--models resnet50,mobilenet_v2 --batches "$(IFS=,; echo "${net_batches[*]}")")
    fi
    "$peer_py" benchmarks/peers/bench_peers.py "${match[@]}" --runners pytorch_nchw,pytorch_channels_last \
      --threads "$threads" --resolution "${MEMFMT_BENCH_RESOLUTION:-224}" --onnx-dir "$out/onnx" \
      --log-dir "$out/peers_logs" --out "$out/peers.json" "${peer_args[@]}" ||
      echo "memfmt: bench_peers.py failed (exit $?); the per-network peer rows are missing"
  else
    echo "   skipped: no engines venv"
  fi

  progress "bench_network onnx: the ONNX files of bench_network's cases, through memfmt's importer"
  if [ -z "$peer_py" ]; then
    echo "   skipped: the ONNX files are exported with PyTorch, from the engines venv"
  else
    "$peer_py" benchmarks/peers/bench_peers.py "${match[@]}" --resolution "${MEMFMT_BENCH_RESOLUTION:-224}" \
      --onnx-dir "$out/onnx" --export-only ||
      echo "memfmt: the ONNX export failed (exit $?); the ONNX rows of the models it did not write are missing"
    for n in "${net_batches[@]}"; do
      echo "   batch $n"
      MEMFMT_BENCH_BATCH=$n MEMFMT_BENCH_ONNX_DIR="$out/onnx" MEMFMT_BENCH_CALIBRATED=all \
        run_bench "bench_network_onnx_b$n" "$build/benchmarks/network/bench_network" --benchmark_filter="^BM_network/onnx:" ||
        echo "memfmt: bench_network's ONNX rows at batch $n failed (exit $?); they are missing"
    done
  fi
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
# The venv has matplotlib for the charts; without it, the system's python3 (Debian python3-matplotlib).
"${peer_py:-$py}" benchmarks/summarize.py --out "$out" "$out"/*.json
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
