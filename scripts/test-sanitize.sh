#!/usr/bin/env bash
# Builds the unit tests and the MPI tests with AddressSanitizer and UBSan in their own build
# directory and runs them: any finding fails. The CLI tests are left to the normal build (they
# measure times, and MPI_Abort ends processes mid-flight), and so are the Slurm and cluster
# tests, which launch the CLI too.
#
# The build is clang's with the fuzzers' flags (MPIDDP_FUZZ=ON: ASan, UBSan and libFuzzer's
# coverage instrumentation), for two reasons measured on the 2-core CI machine: GCC 12 took
# 930 s for this build at -O3 with ASan (72 s for one test file, against 22 s with clang), and
# with the same flags as scripts/fuzz.sh's build every library object the fuzzers need comes
# out of ccache there. Only the test programs are built, not the tools or benchmarks. A unity
# build (CMAKE_UNITY_BUILD, as scripts/fuzz.sh's and scripts/test-valgrind.sh's): the headers
# are compiled once per batch of sources instead of once per source, which halves the build
# (docs/reliability.md, "Cost in CI"); the Release build stays one object per source.
# Usage: scripts/test-sanitize.sh ; MPIDDP_SANITIZE_BUILD_DIR overrides build-sanitize/,
# CLANGXX the compiler (default clang++-14, from scripts/install-deps.sh --with-fuzz).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MPIDDP_SANITIZE_BUILD_DIR:-$root/build-sanitize}
clang=${CLANGXX:-clang++-14}
command -v "$clang" > /dev/null ||
  { echo "test-sanitize.sh: $clang not found (scripts/install-deps.sh --with-fuzz)" >&2; exit 1; }
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$clang" -DMPIDDP_FUZZ=ON \
  -DCMAKE_UNITY_BUILD=ON > "$build/cmake.log" 2>&1 || { cat "$build/cmake.log" >&2; exit 1; }
# Every unit test and MPI test program of tests/CMakeLists.txt.
mapfile -t tests < <(sed -nE 's/^mpiddp_add_(mpi_)?test\(([a-z0-9_]+)[ )].*/\2/p' "$root/tests/CMakeLists.txt")
cmake --build "$build" -j "$(nproc)" --target "${tests[@]}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd "$build"
# Unit tests (no MPI): ASan, UBSan and LeakSanitizer.
ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:check_initialization_order=1" \
  ctest --output-on-failure -j "$(nproc)" -LE "cli|mpi|slurm|cluster" --timeout 900
# MPI tests: ASan and UBSan. Leak checking is off here: Open MPI's components allocate for the
# life of the process and are dlclose'd at MPI_Finalize, so their allocations show up as
# leaks from "<unknown module>" that no suppression can name; our code is leak-checked above.
ASAN_OPTIONS="abort_on_error=1:detect_leaks=0" \
  ctest --output-on-failure -j "$(nproc)" -L mpi --timeout 900
