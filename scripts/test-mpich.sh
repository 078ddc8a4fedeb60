#!/usr/bin/env bash
# Builds mpiddp against MPICH in a build directory of its own and runs the tests that launch
# ranks there (labels mpi, cli, slurm and cluster), so the code is checked against a second MPI library.
# Usage: scripts/test-mpich.sh [CTEST ARGS...]; MPIDDP_MPICH_BUILD_DIR overrides build-mpich/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MPIDDP_MPICH_BUILD_DIR:-$root/build-mpich}
"$root/scripts/install-deps.sh" --with-mpich
# -DMPIDDP_MPI=mpich picks mpicxx.mpich and mpiexec.mpich (cmake/select_mpi.cmake).
mkdir -p "$build"
# The Release build's flags, so that every MPI-free object comes out of ccache (the portable
# build that checks cli_deterministic_golden is scripts/test-valgrind.sh's).
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMPIDDP_MPI=mpich > "$build/configure.log" 2>&1 \
  || { cat "$build/configure.log" >&2; exit 1; }
grep -q 'libmpich' "$build/CMakeCache.txt" \
  || { echo "test-mpich.sh: $build is not configured against MPICH" >&2; exit 1; }
cmake --build "$build" -j "$(nproc)"
cd "$build"
# Not the Fashion-MNIST smoke run, nor the King James recipes' short runs and the tokenizer's
# test: they test the data pipeline, the tokenizer and learning, not MPI (their ranks make the
# training loop's calls that the other cli tests make), and took 436 of the 1,746 s of tests.
# Nor deterministic mode's chunked pass and libraries: their ranks make cli_deterministic's
# MPI calls, and what they add (a layer's pass, a matrix-product library) is MPI-free; under
# MPICH, whose waiting ranks spin, their np 6 and 8 runs on 2 cores took 44 s each. Nor
# cli_shard_deterministic, for the same reason: ten runs at np 6 and 8, whose calls are
# cli_deterministic's exact sums and cli_shard_parameters' gathers, both run here.
# Nor the tests of instruction sets (cli_isa*, on QEMU and objdump too: one rank or none) and
# of the plots drawn in a browser (their runs are cli_plot's and cli_trace's).
skipped='cli_fashion_mnist|cli_kjv_gpt_short|cli_kjv_gpt_bpe_short|cli_tokenize|cli_deterministic_chunked'
skipped+='|cli_shard_deterministic'
skipped+='|cli_deterministic_library|cli_isa|cli_isa_objdump|cli_isa_qemu|cli_plot_render|cli_timeline_render'
ctest --output-on-failure -j "$(nproc)" --timeout 900 -L 'mpi|cli|slurm|cluster' -E "^($skipped)\$" "$@"
