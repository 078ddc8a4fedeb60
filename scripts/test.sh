#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through ctest; then the
# sanitizer build of the unit and MPI tests, valgrind over the unit tests and an np=2 run, and
# the fuzzers (docs/reliability.md), unless MPIDDP_TEST_QUICK=1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# --with-data: Fashion-MNIST, so its smoke test runs instead of skipping (~30 MB package).
# --with-slurm: the slurm and cluster tests (docs/launching.md); --with-mpich: the MPICH run below.
# --with-fuzz, --with-valgrind: clang and libFuzzer, valgrind, for the steps at the end.
# --with-chromium: the plot is rendered and checked in a real browser (cli_plot_render).
# --with-qemu: the portable binary on emulated older CPUs (cli_isa_qemu).
quick=${MPIDDP_TEST_QUICK:-0}
if [ "$quick" = 1 ]; then
  deps=(--with-data --with-slurm --with-mpich --with-chromium --with-qemu)
else
  deps=(--with-data --with-slurm --with-mpich --with-chromium --with-qemu --with-fuzz --with-valgrind)
fi

# stage NAME COMMAND...: runs one stage and prints how long it took, so a slow stage shows.
stages=""
stage() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  stages+="$(printf '  %-10s %5d s' "$name" $((SECONDS - start)))"$'\n'
  echo "test.sh: stage $name took $((SECONDS - start)) s" >&2
}

stage deps "$root/scripts/install-deps.sh" "${deps[@]}"
stage build "$root/scripts/build.sh"
# What an AVX-512 host's -march=native build compiles, compiled here whatever the host (not run).
stage compile-v4 "$root/scripts/test-compile-v4.sh"
run_ctest() { (cd "${MPIDDP_BUILD_DIR:-$root/build}" && ctest --output-on-failure -j "$(nproc)" --timeout 900); }
stage ctest run_ctest
# cmake --install, examples/custom_layer against it, the .deb through apt-get and purged again.
stage package "$root/scripts/test-package.sh"
# The tests that launch ranks again, built against MPICH in build-mpich/.
stage mpich "$root/scripts/test-mpich.sh"
if [ "$quick" != 1 ]; then
  stage sanitize "$root/scripts/test-sanitize.sh"
  stage valgrind "$root/scripts/test-valgrind.sh"
  stage fuzz "$root/scripts/fuzz.sh"
fi
printf 'test.sh: time per stage\n%s  %-10s %5d s\n' "$stages" total "$SECONDS" >&2
