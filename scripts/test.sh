#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through ctest; then the
# sanitizer build of the unit and MPI tests, valgrind over the unit tests and an np=2 run, and
# the fuzzers (docs/reliability.md), unless MPIDDP_TEST_QUICK=1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# --with-data: Fashion-MNIST, so its smoke test runs instead of skipping (~30 MB package).
# --with-slurm: the slurm_sbatch test (docs/launching.md); --with-mpich: the MPICH run below.
# --with-fuzz, --with-valgrind: clang and libFuzzer, valgrind, for the steps at the end.
quick=${MPIDDP_TEST_QUICK:-0}
if [ "$quick" = 1 ]; then
  "$root/scripts/install-deps.sh" --with-data --with-slurm --with-mpich
else
  "$root/scripts/install-deps.sh" --with-data --with-slurm --with-mpich --with-fuzz --with-valgrind
fi
"$root/scripts/build.sh"
(cd "${MPIDDP_BUILD_DIR:-$root/build}" && ctest --output-on-failure -j "$(nproc)" --timeout 900)
# The tests that launch ranks again, built against MPICH in build-mpich/.
"$root/scripts/test-mpich.sh"
if [ "$quick" != 1 ]; then
  "$root/scripts/test-sanitize.sh"
  "$root/scripts/test-valgrind.sh"
  "$root/scripts/fuzz.sh"
fi
