#!/usr/bin/env bash
# The device check: what this project can only test on a GPU, in one run of about 8 minutes on a
# rented machine (one GPU, 16 cores; the repository copied there; CUDA and cuDNN installed, the
# Debian packages of scripts/deps.sh perhaps not, and no network to fetch them).
#   scripts/gpu_check.sh OUTDIR
# 1. notes the machine (nvidia-smi, nvcc, cuDNN, compilers) in OUTDIR/env.txt; where gtest or
#    Google Benchmark is missing it tries scripts/deps.sh (as root, bounded) and otherwise builds
#    what it can, saying what it left out;
# 2. configures build-gpu/ (Release, CMAKE_CUDA_ARCHITECTURES=native, cuDNN and CUDA required, no
#    oneDNN) and builds only the GPU targets with -j16: cudnn_gpu_tests, test_cuda_convert,
#    bench_network_cudnn, bench_conv_cudnn, bench_convert_cuda (build.log);
# 3. runs the GPU tests (ctest -L cuda, those two executables: ctest.log, ctest_junit.xml), and
#    where libonnx-dev and libonnx-testdata are installed ONNX's backend tests on the reference and
#    cuDNN backends with TF32 off (test_onnx_backend, onnx_conformance.log);
# 4. runs the GPU benchmarks in quick settings, each with its JSON and console log:
#    bench_network_cudnn_b32 (ResNet-50 and MobileNetV2, f32/f16/bf16, fwd and train, ResNet-50
#    calibrated; 224x224), bench_conv_cudnn, bench_convert_cuda, bench_network_cudnn_b1 (ResNet-50);
# 5. summarizes the JSON with benchmarks/summarize.py (summary.md, summary.json).
# GPU_CHECK_CUDA_ARCH overrides native (e.g. 90; a dry run on a machine without a GPU needs it).
# Every step has a time cap inside one overall budget (GPU_CHECK_SECONDS, default 480 s), so the
# run ends, with what it has, inside a 10-minute command limit; OUTDIR/steps.txt lists each step's
# exit status (124: stopped at its cap) and seconds. A killed benchmark leaves its console log.
# Exit status: 0 when the build and the tests passed, 1 otherwise (the benchmarks never fail it).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu_check.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${GPU_CHECK_BUILD_DIR:-build-gpu}
start=$(date +%s)
deadline=$((start + ${GPU_CHECK_SECONDS:-480}))
export PATH="/usr/local/cuda/bin:$PATH"
failed=0

# step NAME CAP_SECONDS command...: runs it with the smaller of CAP and the budget left, logs to
# OUTDIR/NAME.log, records rc and seconds in OUTDIR/steps.txt; returns the command's status.
step() {
  local name=$1 cap=$2
  shift 2
  local left=$((deadline - $(date +%s)))
  [ "$cap" -gt "$left" ] && cap=$left
  if [ "$cap" -lt 10 ]; then
    echo "$name skipped: the time budget is spent" | tee -a "$out/steps.txt"
    return 124
  fi
  local t0 rc
  t0=$(date +%s)
  echo "== $name (cap ${cap}s)"
  timeout -k 5 "$cap" "$@" >"$out/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc seconds=$(($(date +%s) - t0))" | tee -a "$out/steps.txt"
  tail -n 5 "$out/$name.log"
  return $rc
}

{
  date -u
  nvidia-smi || echo "nvidia-smi failed"
  nvcc --version || echo "no nvcc on PATH"
  grep -h -m 3 "define CUDNN_M" /usr/include/cudnn_version*.h /usr/local/cuda/include/cudnn_version*.h 2>/dev/null
  g++ --version | head -n 1
  cmake --version | head -n 1
  nproc
} >"$out/env.txt" 2>&1
: >"$out/steps.txt"

have() {  # a header under the usual include folders
  [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]
}
if ! have gtest/gtest.h || ! have benchmark/benchmark.h || ! have nlohmann/json.hpp; then
  if [ "$(id -u)" = 0 ]; then
    step deps 120 bash -c 'source scripts/deps.sh && memfmt_ensure_deps'
  fi
fi
tests=ON benches=ON
if ! have gtest/gtest.h; then tests=OFF; echo "no gtest (libgtest-dev): the GPU tests are not built" | tee -a "$out/steps.txt"; fi
if ! have benchmark/benchmark.h; then benches=OFF; echo "no Google Benchmark (libbenchmark-dev): no benchmarks" | tee -a "$out/steps.txt"; fi

targets=()
[ "$tests" = ON ] && targets+=(cudnn_gpu_tests test_cuda_convert)
[ "$benches" = ON ] && targets+=(bench_network_cudnn bench_conv_cudnn bench_convert_cuda)
onnx_tests=0  # ONNX's backend tests need libonnx-dev and libonnx-testdata
if [ "$tests" = ON ] && have onnx/onnx_pb.h && [ -d /usr/share/libonnx-testdata/data/node ]; then
  onnx_tests=1
  targets+=(test_onnx_backend)
else
  echo "no libonnx-dev or libonnx-testdata: the ONNX backend tests on cuDNN are not run" | tee -a "$out/steps.txt"
fi
if ! step configure 90 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${GPU_CHECK_CUDA_ARCH:-native}" \
     -DMEMFMT_ENABLE_CUDA=ON -DMEMFMT_ENABLE_CUDNN=ON -DMEMFMT_ENABLE_DNNL=OFF -DMEMFMT_BUILD_TESTS=$tests \
     -DMEMFMT_BUILD_BENCHMARKS=$benches -DMEMFMT_BUILD_EXAMPLES=OFF -DMEMFMT_BUILD_TOOLS=OFF; then
  echo "gpu_check: configure failed; see $out/configure.log"
  exit 1
fi
[ ${#targets[@]} -gt 0 ] || exit 1
# -k: a target that fails leaves the others built and run.
step build 270 cmake --build "$build" -j 16 --target "${targets[@]}" -- -k || failed=1

if [ "$tests" = ON ]; then
  step ctest 100 ctest --test-dir "$build" -L cuda -R '^(cudnn_gpu_tests|test_cuda_convert)\.' \
    --output-on-failure --output-junit "$out/ctest_junit.xml" -j 4 || failed=1
  # ONNX's tolerances are float32's: TF32 off (cuDNN and cuBLAS read NVIDIA_TF32_OVERRIDE).
  [ "$onnx_tests" = 1 ] && { NVIDIA_TF32_OVERRIDE=0 step onnx_conformance 90 ctest --test-dir "$build" \
    -R '^test_onnx_backend\..*RunEverySupportedTest' --output-on-failure -j 12 || failed=1; }
fi

bench() {  # NAME CAP BINARY [args...]: JSON into OUTDIR/NAME.json, console into OUTDIR/NAME.log
  local name=$1 cap=$2 bin=$build/benchmarks/$3
  shift 3
  if [ ! -x "$bin" ]; then
    echo "$name: $bin not built" | tee -a "$out/steps.txt"
    return 0
  fi
  step "$name" "$cap" "$bin" --benchmark_out="$out/$name.json" --benchmark_out_format=json "$@" || true
}
if [ "$benches" = ON ]; then
  export MEMFMT_BENCH_MIN_TIME=0.1 MEMFMT_BENCH_RESOLUTION=224 MEMFMT_BENCH_TRAIN=all
  MEMFMT_BENCH_BATCH=32 MEMFMT_BENCH_CALIBRATED=resnet50 MEMFMT_BENCH_TIMING_CACHE="$out/timing_cache_cudnn.json" \
    bench bench_network_cudnn_b32 150 network/bench_network_cudnn \
    --benchmark_filter='^BM_network_cudnn/(resnet50|mobilenet_v2)/'
  MEMFMT_BENCH_MIN_TIME=0.02 bench bench_conv_cudnn 50 cudnn/bench_conv_cudnn
  bench bench_convert_cuda 30 cuda/bench_convert_cuda
  MEMFMT_BENCH_BATCH=1 MEMFMT_BENCH_CALIBRATED=none \
    bench bench_network_cudnn_b1 50 network/bench_network_cudnn --benchmark_filter='^BM_network_cudnn/resnet50/'
  jsons=()
  for f in "$out"/bench_*.json; do [ -s "$f" ] && jsons+=("$f"); done
  if [ ${#jsons[@]} -gt 0 ]; then
    python3 benchmarks/summarize.py --out "$out" "${jsons[@]}" >"$out/summarize.log" 2>&1 ||
      echo "summarize.py failed: see $out/summarize.log" | tee -a "$out/steps.txt"
  fi
fi
echo "gpu_check: $(($(date +%s) - start)) s, build and tests $([ $failed = 0 ] && echo passed || echo FAILED); $out/steps.txt"
exit $failed
