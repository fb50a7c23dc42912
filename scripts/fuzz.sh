#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang under ASan + UBSan, then either runs each for a
# while, in parallel on the cores there are, printing each target's executions and findings, or
# (--ctest, what scripts/test.sh runs) replays each seed corpus plus a fixed number of inputs.
#   scripts/fuzz.sh [seconds per target, default 600]
#   scripts/fuzz.sh --ctest
# Environment: MEMFMT_FUZZ_BUILD_DIR (default build-fuzz); MEMFMT_WERROR=ON makes warnings errors (test.sh). Finds (crashing inputs) are written to
# $MEMFMT_FUZZ_BUILD_DIR/fuzz/findings/<target>/; new corpus inputs to .../fuzz/corpus/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
memfmt_ensure_deps
memfmt_prefer_ninja

seconds=${1:-600}
case "$seconds" in --ctest) ;; ''|*[!0-9]*) echo "usage: scripts/fuzz.sh [seconds per target | --ctest]" >&2; exit 2 ;; esac
dir=${MEMFMT_FUZZ_BUILD_DIR:-build-fuzz}
jobs=$(memfmt_jobs)
# Its own build folder: the fuzzers need clang, and no other target is built there.
# -O1 with line tables: file:line in the reports, and half the compile time of -O2 -g under ASan.
cmake -S . -B "$dir" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DMEMFMT_BUILD_FUZZERS=ON -DMEMFMT_WERROR="${MEMFMT_WERROR:-OFF}" \
      -DMEMFMT_BUILD_TESTS=OFF -DMEMFMT_BUILD_BENCHMARKS=OFF -DMEMFMT_BUILD_EXAMPLES=OFF -DMEMFMT_BUILD_TOOLS=OFF \
      -DMEMFMT_WITH_OPENMP=OFF -DMEMFMT_ENABLE_CUDA=OFF -DMEMFMT_ENABLE_CUDNN=OFF -DMEMFMT_ENABLE_ONEDNN=OFF >/dev/null
cmake --build "$dir" -j "$jobs"
if [ "$seconds" = --ctest ]; then
  exec ctest --test-dir "$dir" -L fuzz -j "$jobs" --output-on-failure
fi

names=()
while read -r name seeds; do
  [ -n "$name" ] || continue
  work="$dir/fuzz/corpus/$name"
  findings="$dir/fuzz/findings/$name"  # this run's finds only
  rm -rf "$findings"
  mkdir -p "$work" "$findings"
  # One process per target; with fewer cores than targets they share them.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$dir/fuzz/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$findings/" "$work" "$seeds" >"$dir/fuzz/$name.log" 2>&1 &
  names+=("$name")
  # At most $jobs targets at once.
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
done <"$dir/fuzz_targets.txt"
wait || true

# A clean run ends with libFuzzer's "Done N runs" line and leaves no finding behind.
status=0
for name in "${names[@]}"; do
  log="$dir/fuzz/$name.log"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  crashes=$(find "$dir/fuzz/findings/$name" -type f | wc -l)
  if grep -q '^Done [0-9]* runs' "$log"; then
    echo "memfmt fuzz: $name: ${runs:-?} executions in ${seconds} s, $crashes finding(s) (log: $log)"
  else
    crashes=$((crashes > 0 ? crashes : 1))
    echo "memfmt fuzz: $name: stopped by a finding after ${runs:-?} executions (log: $log)"
  fi
  [ "$crashes" = 0 ] || status=1
done
exit $status
