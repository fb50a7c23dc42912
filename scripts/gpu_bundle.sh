#!/usr/bin/env bash
# Builds, on this CPU machine (CUDA and cuDNN in /usr/local/cuda, no GPU needed), what
# scripts/gpu_check.sh runs on a GPU machine, so that the GPU's time goes to running:
#   scripts/gpu_bundle.sh [DIR]          (default DIR: build-gpu-bundle)
# - configures GPU_BUNDLE_BUILD_DIR (default build-gpu-objects): Release, CUDA code for
#   GPU_BUNDLE_CUDA_ARCH (default 90: H100 and H200), host code for any x86-64 (MEMFMT_NATIVE off:
#   the GPU machine's CPU is not this one), cuDNN and CUDA required, no oneDNN;
# - builds the GPU tests (cudnn_gpu_tests, test_cuda_convert), the command line and its test
#   (memfmt, memfmt_cli_streams_test), the GPU example (run_network_cudnn), ONNX's backend tests
#   (test_onnx_backend, with the ONNX backend test data where libonnx-testdata is installed) and
#   the GPU benchmarks (bench_network_cudnn, bench_conv_cudnn, bench_convert_cuda);
# - strips them into DIR/bundle.tar.xz with the libraries they load that the GPU machine may lack
#   (libonnx, protobuf, Google Benchmark, the GCC runtime; not CUDA or cuDNN, which it has: CUDA 13,
#   and cuDNN 9 in PyTorch's wheel), and checks the bundle: at most 45 MiB (64 MiB travel to that
#   machine, the repository takes about 16), and every binary starts here and skips its GPU work
#   with the reason (no GPU here).
# scripts/gpu_check.sh OUTDIR takes it with GPU_CHECK_BUNDLE=DIR/bundle.tar.xz (docs/building.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
memfmt_ensure_deps
memfmt_prefer_ninja
dir=${1:-build-gpu-bundle}
work=${GPU_BUNDLE_BUILD_DIR:-build-gpu-objects}
arch=${GPU_BUNDLE_CUDA_ARCH:-90}
limit_mib=45
export PATH="/usr/local/cuda/bin:$PATH"

stage() { echo "== gpu_bundle [$((SECONDS / 60))m$((SECONDS % 60))s]: $*"; }

stage "configure $work (CUDA architectures $arch, host code for any x86-64)"
cmake -S . -B "$work" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" -DMEMFMT_NATIVE=OFF \
      -DMEMFMT_ENABLE_CUDA=ON -DMEMFMT_ENABLE_CUDNN=ON -DMEMFMT_ENABLE_ONEDNN=OFF -DMEMFMT_BUILD_TESTS=ON \
      -DMEMFMT_TEST_SET=all -DMEMFMT_BUILD_BENCHMARKS=ON -DMEMFMT_BUILD_EXAMPLES=ON -DMEMFMT_BUILD_TOOLS=ON >/dev/null
# path in the build folder = path in the bundle: gpu_check.sh finds them as in a build folder.
binaries=(tests/cudnn/cudnn_gpu_tests tests/cuda/test_cuda_convert tools/memfmt tools/memfmt_cli_streams_test
          examples/run_network_cudnn tests/onnx/test_onnx_backend benchmarks/network/bench_network_cudnn
          benchmarks/cudnn/bench_conv_cudnn benchmarks/cuda/bench_convert_cuda)
targets=()
for b in "${binaries[@]}"; do targets+=("$(basename "$b")"); done
stage "build ${targets[*]}"
cmake --build "$work" -j "$(memfmt_jobs)" --target "${targets[@]}"

stage "pack $dir/bundle.tar.xz"
stagedir=$(mktemp -d)
trap 'rm -rf "$stagedir"' EXIT
mkdir -p "$stagedir/lib"
for b in "${binaries[@]}"; do
  mkdir -p "$stagedir/$(dirname "$b")"
  strip -o "$stagedir/$b" "$work/$b"
done
# The libraries the binaries load, but not the C library, the loader, the driver, CUDA or cuDNN
# (the GPU machine has its own; a copy of cuDNN alone is over 500 MiB).
for b in "${binaries[@]}"; do ldd "$work/$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libcudart|libcudnn[^/]*|libcublas[^/]*|libnvrtc[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$stagedir/lib/"; done
# ONNX's backend tests, which test_onnx_backend reads (MEMFMT_ONNX_BACKEND_TESTS names the folder).
if [ -d /usr/share/libonnx-testdata/data/node ]; then
  cp -r /usr/share/libonnx-testdata/data "$stagedir/onnx-testdata"
fi
git rev-parse HEAD >"$stagedir/COMMIT" 2>/dev/null || echo unknown >"$stagedir/COMMIT"
echo "CUDA architectures $arch; built $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m)" >>"$stagedir/COMMIT"
mkdir -p "$dir"
tar -C "$stagedir" -cf - . | xz -T0 -6 >"$dir/bundle.tar.xz"
size=$(stat -c %s "$dir/bundle.tar.xz")
echo "gpu_bundle: $dir/bundle.tar.xz is $((size / 1024 / 1024)) MiB ($(du -sh "$stagedir" | cut -f1) unpacked):"
(cd "$stagedir" && find . -type f ! -path './onnx-testdata/*' -printf '  %p %s\n' | sort)
if [ "$size" -gt $((limit_mib * 1024 * 1024)) ]; then
  echo "gpu_bundle: the bundle is over $limit_mib MiB" >&2
  exit 1
fi

# Every binary starts from the unpacked bundle with only its libraries (as on the GPU machine) and,
# with no GPU here, skips its GPU work saying so.
stage "self-check: each binary starts from the bundle"
check=$(mktemp -d)
trap 'rm -rf "$stagedir" "$check"' EXIT
xz -dc "$dir/bundle.tar.xz" | tar -C "$check" -xf -
export LD_LIBRARY_PATH="$check/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib"
gpu_here=0
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && gpu_here=1
failed=0
for b in tests/cudnn/cudnn_gpu_tests tests/cuda/test_cuda_convert tools/memfmt_cli_streams_test; do
  if ! log=$("$check/$b" --gtest_brief=1 2>&1); then
    echo "$log" | tail -n 20
    echo "gpu_bundle: $b failed" >&2
    failed=1
  elif [ "$gpu_here" = 0 ] && [ "$b" != tools/memfmt_cli_streams_test ] && ! grep -q 'SKIPPED' <<<"$log"; then
    echo "gpu_bundle: $b ran without a GPU and skipped nothing" >&2
    failed=1
  else
    echo "  $b: $(grep -E '^\[  (PASSED|SKIPPED) ' <<<"$log" | tr '\n' ' ')"
  fi
done
"$check/tools/memfmt" --help >/dev/null || { echo "gpu_bundle: memfmt --help failed" >&2; failed=1; }
"$check/tests/onnx/test_onnx_backend" --gtest_list_tests >/dev/null || { echo "gpu_bundle: test_onnx_backend does not start" >&2; failed=1; }
"$check/examples/run_network_cudnn" >/dev/null 2>&1 || [ "$gpu_here" = 0 ] ||
  { echo "gpu_bundle: run_network_cudnn failed on this machine's GPU" >&2; failed=1; }
for b in benchmarks/network/bench_network_cudnn benchmarks/cudnn/bench_conv_cudnn benchmarks/cuda/bench_convert_cuda; do
  "$check/$b" --benchmark_list_tests=true >/dev/null 2>&1 || { echo "gpu_bundle: $b does not start" >&2; failed=1; }
done
[ "$failed" = 0 ] || exit 1
stage "done: $dir/bundle.tar.xz; on the GPU machine: GPU_CHECK_BUNDLE=$dir/bundle.tar.xz scripts/gpu_check.sh OUTDIR"
