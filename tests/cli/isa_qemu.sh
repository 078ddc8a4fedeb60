#!/usr/bin/env bash
# The portable binary on other CPUs than this one, emulated by QEMU's user mode (Debian's
# qemu-user; skipped, 77, without it):
#  - on a Westmere (SSE4.2, no AVX): the start-up check says what the CPU lacks and exits 10,
#    before any code of the x86-64-v3 baseline runs (no SIGILL);
#  - on a Haswell (AVX2, no AVX-512): `--version` says the CPU runs baseline and avx2, the
#    kernels' tests pass there at those levels with avx512 skipped, whatever this host has, and
#    deterministic mode computes tests/golden/deterministic.json's bits there (one process, an
#    MPI singleton under the emulator: another CPU's CPUID, caches and kernels, the same bits).
source "$(dirname "$0")/lib.sh"
command -v qemu-x86_64 > /dev/null || { echo "skipped: no qemu-x86_64 (scripts/install-deps.sh --with-qemu)"; exit 77; }
built_for=$("$MPIDDP" --version | sed -n 's/^built for: *\([^ ]*\).*/\1/p')
[ "$built_for" = x86-64-v3 ] || { echo "skipped: this build is for $built_for, not the portable x86-64-v3"; exit 77; }

status=0
qemu-x86_64 -cpu Westmere "$MPIDDP" --version > "$WORK/westmere.out" 2> "$WORK/westmere.err" || status=$?
[ "$status" -eq 10 ] || { cat "$WORK/westmere.err"; fail "Westmere: exit $status, not 10"; }
grep -q "^mpiddp: this CPU lacks avx, avx2, fma, .* which this build needs: it was compiled for x86-64-v3" \
  "$WORK/westmere.err" || { cat "$WORK/westmere.err"; fail "Westmere: the message"; }
[ ! -s "$WORK/westmere.out" ] || fail "Westmere: printed before the check: $(cat "$WORK/westmere.out")"
echo "  Westmere: exit 10: $(grep '^mpiddp:' "$WORK/westmere.err" | cut -c1-100)..."

qemu-x86_64 -cpu Haswell "$MPIDDP" --version 2> /dev/null > "$WORK/haswell.out" || fail "Haswell: --version failed"
grep -q '^this CPU runs: *baseline avx2$' "$WORK/haswell.out" || { cat "$WORK/haswell.out"; fail "Haswell: the CPU's levels"; }
grep -q '^kernels use: *avx2 ' "$WORK/haswell.out" || { cat "$WORK/haswell.out"; fail "Haswell: the level used"; }
echo "  Haswell: $(grep '^this CPU runs' "$WORK/haswell.out")"
qemu-x86_64 -cpu Haswell "$KERNELS_TEST" 2> /dev/null > "$WORK/kernels.out" ||
  { tail -30 "$WORK/kernels.out"; fail "Haswell: kernels_test failed"; }
grep -q '^\[       OK \] Level/KernelLevels.SumsAddTheRanksInOrderAndScaleOnce/avx2' "$WORK/kernels.out" ||
  fail "Haswell: the avx2 level did not run"
grep -q '^\[  SKIPPED \] Level/KernelLevels.SumsAddTheRanksInOrderAndScaleOnce/avx512' "$WORK/kernels.out" ||
  fail "Haswell: the avx512 level was not skipped"
qemu-x86_64 -cpu Haswell "$NN_TEST" --gtest_filter='Level/GridProduct.*' 2> /dev/null > "$WORK/grid.out" ||
  { tail -30 "$WORK/grid.out"; fail "Haswell: the grid product's tests failed"; }
echo "  Haswell: kernels_test $(grep -o '[0-9]* tests\?\.' "$WORK/kernels.out" | head -1 | tr -d .) passed, avx512 levels skipped; grid product: $(grep -c '^\[       OK \]' "$WORK/grid.out") passed"
cd "$SOURCE_DIR"  # the golden args name files relative to the repository
golden=tests/golden/deterministic.json
for name in default cnn chunked; do
  mapfile -t args < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))[sys.argv[2]]["args"]))' "$golden" "$name")
  expected=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["param_checksum"])' "$golden" "$name")
  qemu-x86_64 -cpu Haswell "$MPIDDP" train --quiet "${args[@]}" --log "$WORK/$name.jsonl" > "$WORK/$name.out" 2>&1 ||
    { tail -5 "$WORK/$name.out"; fail "Haswell: golden $name failed"; }
  grep -q '"isa":{"cpu":\["baseline","avx2"\],"used":"avx2"}' "$WORK/$name.jsonl" || fail "Haswell: golden $name did not run at avx2"
  [ "$(checksum_of "$WORK/$name.jsonl")" = "$expected" ] ||
    fail "Haswell: golden $name: param_checksum $(checksum_of "$WORK/$name.jsonl"), golden $expected"
  echo "  Haswell: golden $name: param_checksum $expected, as golden"
done
echo "isa qemu: the portable binary refuses a Westmere with exit 10, and on a Haswell runs its avx2 kernels and computes the golden bits"
