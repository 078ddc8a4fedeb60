#!/usr/bin/env bash
# Builds the unit tests and the MPI tests with AddressSanitizer and UBSan (MPIDDP_SANITIZE)
# in their own build directory and runs them: any finding fails. The CLI tests are left to
# the normal build (they measure times, and MPI_Abort ends processes mid-flight), and so are
# the Slurm and cluster tests, which launch the CLI too.
# Usage: scripts/test-sanitize.sh ; MPIDDP_SANITIZE_BUILD_DIR overrides build-sanitize/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MPIDDP_SANITIZE_BUILD_DIR:-$root/build-sanitize}
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMPIDDP_SANITIZE=ON \
  > "$build/cmake.log" 2>&1 || { cat "$build/cmake.log" >&2; exit 1; }
cmake --build "$build" -j "$(nproc)"
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
