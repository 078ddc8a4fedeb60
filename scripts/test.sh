#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# --with-data: Fashion-MNIST, so its smoke test runs instead of skipping (~30 MB package).
# --with-slurm: the slurm_sbatch test (docs/launching.md); --with-mpich: the MPICH run below.
"$root/scripts/install-deps.sh" --with-data --with-slurm --with-mpich
"$root/scripts/build.sh"
cd "${MPIDDP_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" --timeout 900
# The tests that launch ranks again, built against MPICH in build-mpich/.
"$root/scripts/test-mpich.sh"
