#!/usr/bin/env bash
# The device check: what this project can only test on a GPU, in one run of at most 5 minutes on a
# rented machine (one GPU, 16 cores; the repository copied there; CUDA and cuDNN installed, the
# Debian packages of scripts/deps.sh perhaps not, and no network to fetch them).
#   GPU_CHECK_BUNDLE=build-gpu-bundle/bundle.tar.xz scripts/gpu_check.sh OUTDIR   (built here by
#       scripts/gpu_bundle.sh: no build on the GPU machine; the usual way, docs/building.md)
#   scripts/gpu_check.sh OUTDIR                                                   (builds there)
# The last line it prints is "N passed, N failed, N skipped" over the GPU tests' cases.
# 1. notes the machine (nvidia-smi, nvcc, cuDNN, compilers) in OUTDIR/env.txt; where gtest or
#    Google Benchmark is missing it tries scripts/deps.sh (as root, bounded) and otherwise builds
#    what it can, saying what it left out;
# 2. configures build-gpu/ (Release, CMAKE_CUDA_ARCHITECTURES=native, cuDNN and CUDA required, no
#    oneDNN) and builds only the GPU targets with -j16: cudnn_gpu_tests, test_cuda_convert,
#    memfmt_cli_streams_test (where CLI11 is installed), the run_network_cudnn example,
#    bench_network_cudnn, bench_conv_cudnn, bench_convert_cuda (build.log);
# 3. runs the GPU tests (ctest -L cuda, those executables: ctest.log, ctest_junit.xml; of the CLI
#    test, `memfmt plan --calibrate cudnn` and `memfmt run --backend cudnn` with memfmt's kernels),
#    the example (the executor on cuDNN against the reference backend), and
#    where libonnx-dev and libonnx-testdata are installed ONNX's backend tests on the reference and
#    cuDNN backends with TF32 off (test_onnx_backend, onnx_conformance.log);
# 4. runs the GPU benchmarks in quick settings, each with its JSON and console log:
#    bench_network_cudnn_b32 (ResNet-50 and MobileNetV2, f32/f16/bf16, fwd and train, ResNet-50
#    calibrated; 224x224), bench_conv_cudnn, bench_convert_cuda, bench_network_cudnn_b1 (ResNet-50);
# 5. summarizes the JSON with benchmarks/summarize.py (summary.md, summary.json).
# GPU_CHECK_CUDA_ARCH overrides native (e.g. 90; a dry run on a machine without a GPU needs it).
# GPU_CHECK_BUNDLE=FILE unpacks that bundle (into GPU_CHECK_BUNDLE_DIR, default
# /tmp/memfmt-gpu-bundle) and runs from it as GPU_CHECK_PREBUILT=1 does, with its libraries and its
# copy of ONNX's backend test data.
# GPU_CHECK_PREBUILT=1 skips steps 1's installs and 2: the build folder already holds those targets,
# built on another x86-64 machine for this GPU (configure as in step 2 with the GPU's architecture
# and -DMEMFMT_NATIVE=OFF). The tests then run as executables, since ctest needs the build tree at
# the path it was configured in; libraries the machine lacks can sit in GPU_CHECK_LIBS (a folder
# put on LD_LIBRARY_PATH), and cuDNN is looked for there, under /usr and /usr/local/cuda, and in
# Python's nvidia-cudnn wheel. MEMFMT_ONNX_BACKEND_TESTS names the ONNX backend test data.
# GPU_CHECK_STEPS picks steps by name (default all): tests onnx bench_network_cudnn_b32
# bench_peers_cuda (PyTorch on the same GPU, bench_peers.py --device cuda, the b32 cases of the
# models in GPU_CHECK_PEER_MODELS, default resnet50,mobilenet_v2)
# bench_conv_cudnn bench_convert_cuda bench_network_cudnn_b1.
# Every step has a time cap inside one overall budget (GPU_CHECK_SECONDS, default 290 s), so that
# two runs fit in 15 minutes of GPU time, machine start included; OUTDIR/steps.txt lists each step's
# exit status (124: stopped at its cap) and seconds. A killed benchmark leaves its console log.
# Exit status: 0 when the build and the tests passed, 1 otherwise (the benchmarks never fail it).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu_check.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${GPU_CHECK_BUILD_DIR:-build-gpu}
start=$(date +%s)
deadline=$((start + ${GPU_CHECK_SECONDS:-290}))
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

prebuilt=${GPU_CHECK_PREBUILT:-0}
ld_path_before=${LD_LIBRARY_PATH:-}
if [ -n "${GPU_CHECK_BUNDLE:-}" ]; then
  build=${GPU_CHECK_BUNDLE_DIR:-/tmp/memfmt-gpu-bundle}
  rm -rf "$build" && mkdir -p "$build"
  if ! xz -dc "$GPU_CHECK_BUNDLE" | tar -C "$build" -xf -; then
    echo "gpu_check: cannot unpack $GPU_CHECK_BUNDLE" >&2
    exit 1
  fi
  prebuilt=1
  GPU_CHECK_LIBS=$build/lib
  [ -d "$build/onnx-testdata" ] && export MEMFMT_ONNX_BACKEND_TESTS="$build/onnx-testdata"
  echo "gpu_check: from the bundle of $(head -n 1 "$build/COMMIT") ($(tail -n 1 "$build/COMMIT"))"
fi
steps=" ${GPU_CHECK_STEPS:-tests onnx bench_network_cudnn_b32 bench_peers_cuda bench_conv_cudnn bench_convert_cuda bench_network_cudnn_b1} "
wants() { [[ "$steps" == *" $1 "* ]]; }
if [ -n "${GPU_CHECK_LIBS:-}" ]; then
  export LD_LIBRARY_PATH="$(cd "$GPU_CHECK_LIBS" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ "$prebuilt" = 1 ] && ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9' &&
   [ ! -e /usr/local/cuda/lib64/libcudnn.so.9 ]; then
  # PyTorch's cuDNN wheel (nvidia-cudnn-cu*), where the machine has no system cuDNN.
  wheel=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$wheel" ] && [ -d "$wheel" ] && export LD_LIBRARY_PATH="$wheel:${LD_LIBRARY_PATH:-}"
fi
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64"

{
  date -u
  nvidia-smi || echo "nvidia-smi failed"
  nvcc --version || echo "no nvcc on PATH"
  grep -h -m 3 "define CUDNN_M" /usr/include/cudnn_version*.h /usr/local/cuda/include/cudnn_version*.h 2>/dev/null
  g++ --version | head -n 1
  cmake --version | head -n 1
  nproc
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  [ "$prebuilt" = 1 ] && ldd "$build/tests/cudnn/cudnn_gpu_tests" 2>&1 | grep -E 'cudnn|not found'
} >"$out/env.txt" 2>&1
: >"$out/steps.txt"

have() {  # a header under the usual include folders
  [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]
}
tests=ON benches=ON onnx_tests=0 tools=OFF
if [ "$prebuilt" = 1 ]; then
  [ -x "$build/tests/cudnn/cudnn_gpu_tests" ] || tests=OFF
  [ -x "$build/benchmarks/network/bench_network_cudnn" ] || benches=OFF
  [ -x "$build/tests/onnx/test_onnx_backend" ] && onnx_tests=1
else
  if ! have gtest/gtest.h || ! have benchmark/benchmark.h || ! have nlohmann/json.hpp; then
    if [ "$(id -u)" = 0 ]; then
      step deps 120 bash -c 'source scripts/deps.sh && memfmt_ensure_deps'
    fi
  fi
  if ! have gtest/gtest.h; then tests=OFF; echo "no gtest (libgtest-dev): the GPU tests are not built" | tee -a "$out/steps.txt"; fi
  if ! have benchmark/benchmark.h; then benches=OFF; echo "no Google Benchmark (libbenchmark-dev): no benchmarks" | tee -a "$out/steps.txt"; fi
  targets=()
  [ "$tests" = ON ] && targets+=(cudnn_gpu_tests test_cuda_convert run_network_cudnn)
  # The command line's GPU paths, where its libraries are installed (CLI11, nlohmann-json).
  if [ "$tests" = ON ] && have CLI/CLI.hpp && have nlohmann/json.hpp; then
    tools=ON
    targets+=(memfmt_cli_streams_test)
  fi
  [ "$benches" = ON ] && targets+=(bench_network_cudnn bench_conv_cudnn bench_convert_cuda)
  # ONNX's backend tests need libonnx-dev and libonnx-testdata
  if [ "$tests" = ON ] && have onnx/onnx_pb.h && [ -d /usr/share/libonnx-testdata/data/node ]; then
    onnx_tests=1
    targets+=(test_onnx_backend)
  fi
  if ! step configure 90 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${GPU_CHECK_CUDA_ARCH:-native}" \
       -DMEMFMT_ENABLE_CUDA=ON -DMEMFMT_ENABLE_CUDNN=ON -DMEMFMT_ENABLE_ONEDNN=OFF -DMEMFMT_BUILD_TESTS=$tests \
       -DMEMFMT_BUILD_BENCHMARKS=$benches -DMEMFMT_BUILD_EXAMPLES=$tests -DMEMFMT_BUILD_TOOLS=$tools; then
    echo "gpu_check: configure failed; see $out/configure.log"
    exit 1
  fi
  [ ${#targets[@]} -gt 0 ] || exit 1
  # Keep going: a target that fails leaves the others built and run (make -k; ninja -k 0).
  keep_going=(-k)
  [ -f "$build/build.ninja" ] && keep_going=(-k 0)
  step build 270 cmake --build "$build" -j 16 --target "${targets[@]}" -- "${keep_going[@]}" || failed=1
fi
[ "$onnx_tests" = 1 ] || echo "no libonnx-dev or libonnx-testdata: the ONNX backend tests on cuDNN are not run" | tee -a "$out/steps.txt"

# gtest NAME CAP BINARY [args...]: one test executable, its results in OUTDIR/NAME.xml.
gtest() {
  local name=$1 cap=$2 bin=$3
  shift 3
  step "$name" "$cap" "$bin" --gtest_output="xml:$out/$name.xml" "$@"
  local rc=$?
  # A binary stopped at its cap (or crashed) writes no report: one failed case stands for it.
  if [ "$rc" != 0 ] && [ ! -s "$out/$name.xml" ]; then
    printf '<testsuites><testsuite name="%s"><testcase name="finished (exit %s)"><failure/></testcase></testsuite></testsuites>\n' \
      "$name" "$rc" >"$out/$name.xml"
  fi
  return $rc
}
if [ "$tests" = ON ] && wants tests; then
  if [ "$prebuilt" = 1 ]; then
    gtest cudnn_gpu_tests 120 "$build/tests/cudnn/cudnn_gpu_tests" || failed=1
    gtest test_cuda_convert 40 "$build/tests/cuda/test_cuda_convert" || failed=1
    if [ -x "$build/tools/memfmt_cli_streams_test" ]; then
      gtest cli_cudnn 40 "$build/tools/memfmt_cli_streams_test" --gtest_filter='*Cudnn*' || failed=1
    fi
    if [ -x "$build/examples/run_network_cudnn" ]; then
      step example_run_network_cudnn 30 "$build/examples/run_network_cudnn" || failed=1
    fi
  else
    # By name, not by label: the command line's test is labelled cpu, and its cuDNN cases are
    # what this machine is for.
    step ctest 150 ctest --test-dir "$build" \
      -R '^(cudnn_gpu_tests\.|test_cuda_convert\.|memfmt_cli_streams_test\..*Cudnn|example_run_network_cudnn$)' \
      --output-on-failure --output-junit "$out/ctest_junit.xml" -j 4 || failed=1
  fi
fi
# ONNX's tolerances are float32's: TF32 off (cuDNN and cuBLAS read NVIDIA_TF32_OVERRIDE).
if [ "$onnx_tests" = 1 ] && wants onnx; then
  if [ "$prebuilt" = 1 ]; then
    # Its 12 suite-and-plan cases in 12 processes (gtest shards), as ctest -j 12 would run them.
    NVIDIA_TF32_OVERRIDE=0 step onnx_conformance 60 bash -c 'pids=()
      for i in $(seq 0 11); do
        GTEST_TOTAL_SHARDS=12 GTEST_SHARD_INDEX=$i "$1" --gtest_filter="*RunEverySupportedTest*" \
          --gtest_output="xml:$2/onnx_conformance_$i.xml" >"$2/onnx_conformance_$i.log" 2>&1 & pids+=($!)
      done
      rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done
      cat "$2"/onnx_conformance_*.log; exit $rc' _ "$build/tests/onnx/test_onnx_backend" "$out" || failed=1
  else
    NVIDIA_TF32_OVERRIDE=0 step onnx_conformance 90 ctest --test-dir "$build" \
      -R '^test_onnx_backend\..*RunEverySupportedTest' --output-on-failure -j 12 || failed=1
  fi
fi

bench() {  # NAME CAP BINARY [args...]: JSON into OUTDIR/NAME.json, console into OUTDIR/NAME.log
  local name=$1 cap=$2 bin=$build/benchmarks/$3
  shift 3
  wants "$name" || return 0
  if [ ! -x "$bin" ]; then
    echo "$name: $bin not built" | tee -a "$out/steps.txt"
    return 0
  fi
  step "$name" "$cap" "$bin" --benchmark_out="$out/$name.json" --benchmark_out_format=json "$@" || true
}
if [ "$benches" = ON ]; then
  export MEMFMT_BENCH_MIN_TIME=0.1 MEMFMT_BENCH_RESOLUTION=224 MEMFMT_BENCH_TRAIN=all
  MEMFMT_BENCH_BATCH=32 MEMFMT_BENCH_CALIBRATED=resnet50 MEMFMT_BENCH_TIMING_CACHE="$out/timing_cache_cudnn.json" \
    bench bench_network_cudnn_b32 240 network/bench_network_cudnn \
    --benchmark_filter="${GPU_CHECK_B32_FILTER:-^BM_network_cudnn/(resnet50|mobilenet_v2)/}"
  # PyTorch on the same GPU, the same cases (model, dtype, pass, batch) as the rows above.
  if wants bench_peers_cuda && [ -s "$out/bench_network_cudnn_b32.json" ]; then
    # Without GPU_CHECK_LIBS' libraries: PyTorch loads its own CUDA and cuDNN.
    step bench_peers_cuda 120 env LD_LIBRARY_PATH="$ld_path_before" python3 benchmarks/peers/bench_peers.py --device cuda \
      --match "$out/bench_network_cudnn_b32.json" --dtypes float32,float16,bfloat16 \
      --models "${GPU_CHECK_PEER_MODELS:-resnet50,mobilenet_v2}" \
      --warmup 3 --reps 20 --case-seconds 1 --time-limit 100 --out "$out/bench_peers_cuda.json" || true
  fi
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
# The cases of every test report written above (gtest's XML and ctest's JUnit alike): a case with a
# failure element (or ctest's status "fail") failed, one with a skipped element, gtest's result
# "skipped" or ctest's status "notrun" was skipped, any other passed.
python3 - "$out" <<'PY' || echo "0 passed, 1 failed, 0 skipped"
import glob, os, sys
import xml.etree.ElementTree as ET
passed = failed = skipped = 0
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.xml"))):
    try:
        cases = ET.parse(path).getroot().iter("testcase")
    except ET.ParseError:
        failed += 1  # a report cut off by a step's time cap
        continue
    for c in cases:
        if c.find("failure") is not None or c.find("error") is not None or c.get("status") == "fail":
            failed += 1
        elif c.find("skipped") is not None or c.get("result") == "skipped" or c.get("status") in ("notrun", "disabled"):
            skipped += 1
        else:
            passed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $failed
