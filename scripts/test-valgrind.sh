#!/usr/bin/env bash
# Valgrind memcheck over every unit test binary and a short np=2 `mpiddp train` run (replica
# checks and checkpoints included): any memory error, or a definite or indirect leak, fails.
# Then, in the same portable build, cli_deterministic_golden (not under valgrind).
# Open MPI's own suppressions and tests/valgrind/mpi.supp (MPI/PMIx internals only, never our
# code) keep the launcher's noise out. docs/reliability.md has the figures.
# Usage: scripts/test-valgrind.sh ; MPIDDP_VALGRIND_BUILD_DIR overrides build-valgrind/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MPIDDP_VALGRIND_BUILD_DIR:-$root/build-valgrind}
command -v valgrind > /dev/null ||
  { echo "test-valgrind.sh: valgrind not found (scripts/install-deps.sh --with-valgrind)" >&2; exit 1; }

# Every unit test binary of tests/CMakeLists.txt, and the mpiddp command.
mapfile -t unit_tests < <(sed -nE 's/^mpiddp_add_test\(([a-z0-9_]+) .*/\1/p' "$root/tests/CMakeLists.txt")
# Valgrind 3.19 does not decode AVX-512, which -march=native emits on AVX-512 machines: a
# portable build (MPIDDP_NATIVE=OFF), -O2 with line numbers in the reports (RelWithDebInfo).
# Eigen only (MPIDDP_GEMM=none): OpenBLAS and oneDNN pick their kernels from CPUID and oneDNN
# writes its own at run time, which valgrind reports on without telling us about our code.
# A unity build (CMAKE_UNITY_BUILD): 297 s instead of 566 s cold on 2 cores (docs/reliability.md).
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMPIDDP_NATIVE=OFF -DMPIDDP_GEMM=none \
  -DCMAKE_UNITY_BUILD=ON > "$build/cmake.log" 2>&1 || { cat "$build/cmake.log" >&2; exit 1; }
cmake --build "$build" -j "$(nproc)" --target "${unit_tests[@]}" mpiddp

logs="$build/valgrind"
rm -rf "$logs"
mkdir -p "$logs"
suppressions=(--suppressions="$root/tests/valgrind/mpi.supp")
openmpi_supp=/usr/share/openmpi/openmpi-valgrind.supp
[ ! -f "$openmpi_supp" ] || suppressions+=(--suppressions="$openmpi_supp")
memcheck=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full
          --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
          --num-callers=40 "${suppressions[@]}")
status=0
# check NAME: the verdict of log(s) $logs/NAME*.log, from valgrind's summary lines.
check() {
  local log errors
  for log in "$logs/$1"*.log; do
    errors=$(sed -nE 's/.*ERROR SUMMARY: ([0-9]+) errors.*/\1/p' "$log" 2> /dev/null | tail -n 1 || true)
    if [ "${errors:-missing}" != 0 ]; then
      echo "valgrind: $(basename "$log" .log): ${errors:-no} error summary; see $log" >&2
      status=1
    fi
  done
}

# Each unit test binary whole: one valgrind start each. One thread per process, as a training
# rank runs by default: Eigen's parallel product waits for its other thread by spinning on an
# atomic, and valgrind runs one thread at a time, so every wait lasts a whole time slice; with
# the two threads OpenMP gives by default, GemmColumnsTest alone had not finished after 10 min.
export OMP_NUM_THREADS=1
# One binary per core at a time (valgrind runs a process on one core). On CI's 2 vCPUs this
# gained nothing measurable (389 s against 394 s one after another, 2026-12-07; perhaps the two
# vCPUs share one physical core, not checked); on a machine of real cores it divides the time.
# A failure leaves a .failed file: a background job's exit status can be reaped unseen.
run_unit_test() {
  local t=$1 rc=0
  "${memcheck[@]}" --log-file="$logs/$t.log" "$build/tests/$t" --gtest_brief=1 > "$logs/$t.out" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || echo "valgrind: $t failed (exit $rc); see $logs/$t.out and $logs/$t.log" | tee "$logs/$t.failed" >&2
}
start=$(date +%s)
for t in "${unit_tests[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  run_unit_test "$t" &
done
wait
for t in "${unit_tests[@]}"; do
  [ ! -e "$logs/$t.failed" ] || status=1
  check "$t"
done
echo "valgrind: ${#unit_tests[@]} unit test binaries in $(( $(date +%s) - start )) s"

# A short training run at np=2 under Open MPI's mpirun, every rank under valgrind: the
# gradient reduction, replica checks, a checkpoint and its resume.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun -n 2 --oversubscribe)
start=$(date +%s)
for phase in train resume; do
  args=(--quiet --set epochs=2 --set check_every_steps=2 --set checkpoint.dir="$logs/checkpoints"
        --set checkpoint.every_steps=3 --log "$logs/$phase.jsonl")
  [ "$phase" = train ] || args+=(--set epochs=3 --resume latest)
  "${mpirun[@]}" "${memcheck[@]}" --log-file="$logs/$phase.rank%q{OMPI_COMM_WORLD_RANK}.log" \
    "$build/mpiddp" train "${args[@]}" > "$logs/$phase.out" 2>&1 ||
    { echo "valgrind: np=2 $phase failed; see $logs/$phase.out and $logs/$phase.rank*.log" >&2; status=1; }
  check "$phase.rank"
done
echo "valgrind: np=2 train and resume in $(( $(date +%s) - start )) s"

# Not under valgrind: deterministic mode's golden figures (tests/golden/deterministic.json) are
# a portable build's bits, and this is the portable build (MPIDDP_NATIVE=OFF) of the test
# suite; on a -march=native build the test skips. A skip here would hide a missing check, so
# it counts as a failure.
golden_out="$logs/golden.out"
(cd "$build" && ctest --output-on-failure -R '^cli_deterministic_golden$' --timeout 900) > "$golden_out" 2>&1 || true
if grep -qE 'cli_deterministic_golden \.+ +Passed' "$golden_out"; then
  echo "valgrind build: cli_deterministic_golden passed (portable build)"
else
  cat "$golden_out" >&2
  echo "valgrind build: cli_deterministic_golden did not pass; see $golden_out" >&2
  status=1
fi
[ "$status" -eq 0 ] && echo "valgrind: no error, no definite or indirect leak"
exit "$status"
