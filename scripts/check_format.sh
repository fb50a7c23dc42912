#!/usr/bin/env bash
# The C++ sources follow .clang-format, as clang-format 14 (Debian 12's) writes them. Exits 77
# (ctest's skip) where it cannot tell: no clang-format, another major version (whose output
# differs), or no git checkout to list the sources.
set -euo pipefail
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null 2>&1; then
  echo "skipped: no $cf (Debian: apt-get install clang-format)"
  exit 77
fi
version=$("$cf" --version | grep -o 'version [0-9]*' | cut -d' ' -f2)
if [ "$version" != 14 ]; then
  echo "skipped: $cf is version $version; the style is checked with clang-format 14"
  exit 77
fi
if ! files=$(git ls-files '*.hpp' '*.cpp' '*.cu' '*.cuh' '*.h' 2>/dev/null) || [ -z "$files" ]; then
  echo "skipped: not a git checkout (the sources are listed by git ls-files)"
  exit 77
fi
# -Werror names each line that differs; `clang-format -i FILE` rewrites it.
echo "$files" | xargs "$cf" --dry-run --Werror
echo "$(echo "$files" | wc -l) files follow .clang-format"
