# Sourced by scripts/test.sh and scripts/bench.sh: makes sure the Debian packages are there.
# As root it installs what is missing (one apt-get update first); otherwise it names what is missing.

MEMFMT_DEBS_REQUIRED="cmake g++ make libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libdlpack-dev python3"
MEMFMT_DEBS_REQUIRED="$MEMFMT_DEBS_REQUIRED clang libclang-rt-dev"   # the libFuzzer targets (scripts/fuzz.sh)
MEMFMT_DEBS_OPTIONAL="libdnnl-dev ocl-icd-opencl-dev opencl-headers"   # the oneDNN backend (its CMake config needs OpenCL); skipped when absent
MEMFMT_DEBS_OPTIONAL="$MEMFMT_DEBS_OPTIONAL ninja-build"   # faster builds on few cores (memfmt_prefer_ninja); Makefiles without it
MEMFMT_DEBS_OPTIONAL="$MEMFMT_DEBS_OPTIONAL libonnx-dev libprotobuf-dev libonnx-testdata graphviz"   # ONNX import (memfmt::onnx) and the ONNX backend test data

memfmt_missing_debs() {
  local missing=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  echo "$missing"
}

memfmt_ensure_deps() {
  local missing
  missing=$(memfmt_missing_debs $MEMFMT_DEBS_REQUIRED $MEMFMT_DEBS_OPTIONAL)
  if [ -z "$missing" ]; then return 0; fi
  if [ "$(id -u)" = "0" ]; then
    echo "memfmt: installing Debian packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
  else
    local req
    req=$(memfmt_missing_debs $MEMFMT_DEBS_REQUIRED)
    if [ -n "$req" ]; then
      echo "memfmt: missing Debian packages:$req" >&2
      echo "memfmt: run this script as root, or: sudo apt-get install$missing" >&2
      return 1
    fi
    echo "memfmt: optional packages missing (their parts are skipped):$missing" >&2
  fi
}

memfmt_jobs() { nproc 2>/dev/null || echo 2; }

# New build folders use Ninja where it is installed (an existing folder keeps its generator): unlike
# Makefiles, it compiles a target's objects while the libraries it links are still being built,
# which keeps both cores busy through the instance libraries. CMAKE_GENERATOR set by the caller wins.
memfmt_prefer_ninja() {
  if [ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja >/dev/null 2>&1; then export CMAKE_GENERATOR=Ninja; fi
}
