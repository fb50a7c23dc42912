#!/usr/bin/env bash
# Builds everything and runs every test: the regular build (with the CUDA/cuDNN/oneDNN parts that are
# found), then the CPU tests again under AddressSanitizer + UndefinedBehaviorSanitizer, then the
# conversion tests built for AVX2 and for baseline x86-64 (the kernels' other paths).
#   scripts/test.sh [--no-sanitize]
# Environment: MEMFMT_BUILD_DIR (default build), MEMFMT_ASAN_BUILD_DIR (default build-asan).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
memfmt_ensure_deps

sanitize=1
for a in "$@"; do
  case "$a" in
    --no-sanitize) sanitize=0 ;;
    *) echo "usage: scripts/test.sh [--no-sanitize]" >&2; exit 2 ;;
  esac
done
jobs=$(memfmt_jobs)
build=${MEMFMT_BUILD_DIR:-build}
asan=${MEMFMT_ASAN_BUILD_DIR:-build-asan}

echo "== memfmt: build ($build)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMEMFMT_BUILD_TESTS=ON -DMEMFMT_BUILD_BENCHMARKS=ON \
      -DMEMFMT_BUILD_EXAMPLES=ON -DMEMFMT_BUILD_TOOLS=ON
cmake --build "$build" -j "$jobs"
echo "== memfmt: tests ($build)"
ctest --test-dir "$build" -j "$jobs" --output-on-failure --timeout 1800

if [ "$sanitize" = 1 ]; then
  echo "== memfmt: AddressSanitizer + UndefinedBehaviorSanitizer build of the CPU tests ($asan)"
  cmake -S . -B "$asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMFMT_SANITIZE=ON -DMEMFMT_BUILD_TESTS=ON \
        -DMEMFMT_BUILD_BENCHMARKS=OFF -DMEMFMT_BUILD_EXAMPLES=ON -DMEMFMT_BUILD_TOOLS=ON
  cmake --build "$asan" -j "$jobs"
  # The >2^31-element test ran in the regular build; under ASan it would only repeat it slowly.
  ctest --test-dir "$asan" -j "$jobs" --output-on-failure --timeout 1800 -LE "large|compile|package"
fi
# The conversion kernels pick their paths by instruction set at compile time, and the builds above
# take the AVX-512 ones. Every other x86-64 CPU takes the AVX2 path (or scalar code): build and run
# the conversion tests for those too.
if [ "$(uname -m)" = x86_64 ]; then
  for arch in x86-64-v3 x86-64; do
    if [ "$arch" = x86-64-v3 ] && ! grep -qw avx2 /proc/cpuinfo; then continue; fi
    dir="${build}-$arch"
    echo "== memfmt: conversion tests built for -march=$arch ($dir)"
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMEMFMT_NATIVE=OFF -DCMAKE_CXX_FLAGS="-march=$arch" \
          -DMEMFMT_BUILD_TESTS=ON -DMEMFMT_BUILD_BENCHMARKS=OFF -DMEMFMT_BUILD_EXAMPLES=OFF \
          -DMEMFMT_BUILD_TOOLS=OFF >/dev/null
    cmake --build "$dir" -j "$jobs" --target test_convert
    "$dir/tests/convert/test_convert" --gtest_brief=1
  done
fi
# ---- fuzz targets (fuzz/): each replays its seed corpus and a fixed number of new inputs under
# ASan + UBSan, built with clang in its own folder (MEMFMT_FUZZ_BUILD_DIR, default build-fuzz);
# a long run is `scripts/fuzz.sh [seconds]`.
echo "== memfmt: fuzz targets (clang, ASan + UBSan, fixed runs; ${MEMFMT_FUZZ_BUILD_DIR:-build-fuzz})"
scripts/fuzz.sh --ctest
# ---- end of the fuzz stage
echo "== memfmt: all tests passed"
