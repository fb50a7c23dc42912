#!/usr/bin/env bash
# Builds everything and runs every test: the regular build (with the CUDA/cuDNN/oneDNN parts that are
# found, and their tests), the oneDNN tests again as on an AVX2-only CPU, the CPU tests under
# AddressSanitizer + UndefinedBehaviorSanitizer, then the conversion tests built for AVX-512, AVX2
# and baseline x86-64 (the kernels' other paths). Each ctest run ends with the tests that did not
# run and why. With --no-sanitize, the regular build compiles and runs the CPU tests instead.
#   scripts/test.sh [--no-sanitize]
# Environment: MEMFMT_BUILD_DIR (default build), MEMFMT_ASAN_BUILD_DIR (default build-asan).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
memfmt_ensure_deps
memfmt_prefer_ninja

# A stage's heading with the elapsed time, so that a CI log shows where its minutes went.
stage() { echo "== memfmt [$((SECONDS / 60))m$((SECONDS % 60))s]: $*"; }

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

# With the sanitizer stage below, the regular build compiles only the tests it cannot run (those
# of oneDNN and CUDA/cuDNN, which it leaves out, and the >2^31-element one, too slow there): each
# CPU test is compiled once, instrumented (MEMFMT_TEST_SET in cmake/memfmt_warnings.cmake).
test_set=all
if [ "$sanitize" = 1 ]; then test_set=unsanitized; fi
# Warnings are errors in every build here (MEMFMT_WERROR; users' builds keep them warnings).
export MEMFMT_WERROR=ON
stage "build ($build, tests: $test_set)"
# This build is also the README's other two: it has scripts/bench.sh's flags (Release at CMake's
# -O3, -march=native), so the benchmarks, examples and instance libraries it compiles are the main
# job's, and it builds the CLI as a plain `cmake -S . -B build && cmake --build build` does. GCC
# warns at -O3 where it does not at -O2, so that code is built at -O3 here; the tests' own files,
# which the main job does not build, at -O1 (MEMFMT_TEST_CXX_FLAGS): half the compile time.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O3 -DNDEBUG" -DMEMFMT_WERROR=ON -DMEMFMT_BUILD_TESTS=ON -DMEMFMT_BUILD_BENCHMARKS=ON \
      -DMEMFMT_BUILD_EXAMPLES=ON -DMEMFMT_BUILD_TOOLS=ON -DMEMFMT_TEST_SET="$test_set" -DMEMFMT_TEST_CXX_FLAGS=-O1
cmake --build "$build" -j "$jobs"
# The tests a ctest run in build dir $1 skipped, each with the reason its output gave (a GTEST_SKIP
# message, or the last line a skipping script printed).
report_skips() {
  awk '
    /^[0-9]+\/[0-9]+ Test: / { name = $0; sub(/^[0-9]+\/[0-9]+ Test: /, "", name); why = ""; last = ""; grab = 0; next }
    /^<end of output>$/ { grab = 0; next }
    grab && /^\[/ { grab = 0 }
    grab { why = why (why == "" ? "" : " ") $0; next }
    /: Skipped$/ { grab = 1; next }
    /^Skip (regular expression found|return code)/ { n++; printf "   %s: %s\n", name, why != "" ? why : last; next }
    NF { last = $0 }
    END { if (n) printf "   (%d skipped)\n", n; else print "   none" }
  ' "$1/Testing/Temporary/LastTest.log"
}

run_ctest() {  # build dir, then ctest arguments
  local dir=$1
  shift
  ctest --test-dir "$dir" -j "$jobs" --output-on-failure --timeout 1800 "$@"
  stage "not run in $dir $*:"
  report_skips "$dir"
}

has_cpu_flags() { for f in "$@"; do grep -qw "$f" /proc/cpuinfo || return 1; done; }
avx512=(avx512f avx512bw avx512cd avx512dq avx512vl)  # x86-64-v4, and what oneDNN calls avx512_core

stage "tests ($build)"
run_ctest "$build"
# Where oneDNN has AVX-512, its tests ran that path; the AVX2 path (no bfloat16: clear errors and
# skips) is what AMD Zen 3 and other AVX2-only CPUs take. DNNL_MAX_CPU_ISA makes oneDNN behave so.
if has_cpu_flags "${avx512[@]}"; then
  stage "oneDNN tests as on an AVX2-only CPU (DNNL_MAX_CPU_ISA=AVX2)"
  DNNL_MAX_CPU_ISA=AVX2 run_ctest "$build" -L onednn
fi

if [ "$sanitize" = 1 ]; then
  stage "AddressSanitizer + UndefinedBehaviorSanitizer build of the CPU tests ($asan)"
  # Without oneDNN and the examples: the oneDNN wrappers and the examples ran above (oneDNN twice),
  # its kernels are not instrumented anyway, and compiling them again under the sanitizers would
  # double this build. The build without oneDNN is also what a user without it gets.
  # -Og with line tables only (file:line in the sanitizers' reports, no variable info): under the
  # sanitizers it compiles in about half the time of -O1 (the reference instance library, the
  # layer fixture test), and the tests run about as fast.
  cmake -S . -B "$asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMFMT_WERROR=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-Og -g1 -DNDEBUG" \
        -DMEMFMT_SANITIZE=ON -DMEMFMT_BUILD_TESTS=ON -DMEMFMT_TEST_SET=all \
        -DMEMFMT_BUILD_BENCHMARKS=OFF -DMEMFMT_BUILD_EXAMPLES=OFF -DMEMFMT_BUILD_TOOLS=ON -DMEMFMT_ENABLE_ONEDNN=OFF
  cmake --build "$asan" -j "$jobs"
  # The >2^31-element test ran in the regular build; under ASan it would only repeat it slowly.
  run_ctest "$asan" -LE "large|compile|package"
fi
# The conversion kernels pick their paths by instruction set at compile time, and the build above
# takes the ones of this CPU. Every path is compiled here whatever the CPU (so a change cannot break
# the AVX-512 kernels unseen on an AVX2 machine) and run where the CPU has its instructions.
if [ "$(uname -m)" = x86_64 ]; then
  variants=("x86-64-v4:${avx512[*]}" "x86-64-v3:avx2 bmi1 bmi2 f16c fma movbe" "x86-64:")
  # The byte-permute (VBMI) kernels: the native build compiled them where the CPU has VBMI.
  has_cpu_flags avx512vbmi || variants=("x86-64-v4 -mavx512vbmi:${avx512[*]} avx512vbmi" "${variants[@]}")
  # Each folder is mostly one long test file, so the folders are built side by side rather than
  # one after the other with a core idle. Neither CUDA nor oneDNN is needed for these tests.
  dirs=()
  for v in "${variants[@]}"; do
    flags=${v%%:*}
    dir="${build}-${flags// /}"
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMEMFMT_WERROR=ON -DMEMFMT_NATIVE=OFF -DCMAKE_CXX_FLAGS="-march=$flags" \
          -DMEMFMT_BUILD_TESTS=ON -DMEMFMT_BUILD_BENCHMARKS=OFF -DMEMFMT_BUILD_EXAMPLES=OFF \
          -DMEMFMT_BUILD_TOOLS=OFF -DMEMFMT_ENABLE_CUDA=OFF -DMEMFMT_ENABLE_CUDNN=OFF -DMEMFMT_ENABLE_ONEDNN=OFF >/dev/null
    dirs+=("$dir")
  done
  stage "conversion tests built for -march=$(IFS=,; echo "${variants[*]%%:*}" | sed 's/,/, -march=/g')"
  pids=()
  for dir in "${dirs[@]}"; do
    cmake --build "$dir" -j 1 --target test_convert >"$dir/variant-build.log" 2>&1 &
    pids+=($!)
  done
  # Every build is waited for before a failure stops the command, so none is left running.
  failed=()
  for i in "${!dirs[@]}"; do
    wait "${pids[$i]}" || failed+=("${dirs[$i]}")
  done
  for dir in "${failed[@]}"; do
    cat "$dir/variant-build.log"
    echo "memfmt: building the conversion tests in $dir failed" >&2
  done
  [ ${#failed[@]} = 0 ] || exit 1
  for i in "${!variants[@]}"; do
    v=${variants[$i]}
    flags=${v%%:*}
    needs=${v#*:}
    read -ra need_list <<<"$needs"
    if has_cpu_flags "${need_list[@]}"; then
      echo "memfmt: conversion tests for -march=$flags"
      "${dirs[$i]}/tests/convert/test_convert" --gtest_brief=1
    else
      echo "memfmt: compiled for -march=$flags, not run: this CPU lacks some of: $needs"
    fi
  done
fi
# ---- fuzz targets (fuzz/): each replays its seed corpus and a fixed number of new inputs under
# ASan + UBSan, built with clang in its own folder (MEMFMT_FUZZ_BUILD_DIR, default build-fuzz);
# a long run is `scripts/fuzz.sh [seconds]`.
stage "fuzz targets (clang, ASan + UBSan, fixed runs; ${MEMFMT_FUZZ_BUILD_DIR:-build-fuzz})"
scripts/fuzz.sh --ctest
# ---- end of the fuzz stage
stage "all tests passed"
