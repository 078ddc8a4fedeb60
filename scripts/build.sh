#!/usr/bin/env bash
# Configures and builds mpiddp in build/ (Release, tests included). Extra arguments go to cmake.
# Usage: scripts/build.sh [TARGET] ; MPIDDP_BUILD_DIR overrides the build directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MPIDDP_BUILD_DIR:-$root/build}
target=${1:-all}
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release > "$build/configure.log" 2>&1 \
  || { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" --target "$target" -j "$(nproc)"
