# Helpers of the deterministic-mode tests (tests/cli/deterministic*.sh). Sourced after lib.sh.

# results LOG: the step, epoch and end records with the wall-clock fields removed: what
# deterministic mode promises to be byte-identical at every world size.
results() {
  grep -E '"kind":"(step|epoch|end)"' "$1" |
    sed -E 's/,"(time_s|samples_per_s)":[-0-9.eE+]+//g'
}

# det_run NAME NP ARGS...: mpiddp train at NP ranks, its log in $WORK/NAME.jsonl; checks
# that the run record says deterministic and the replicas ended identical.
det_run() {
  local name=$1 np=$2; shift 2
  run_np "$np" train --quiet --log "$WORK/$name.jsonl" "$@" ||
    fail "$name: mpiddp train at np=$np failed"
  grep -q '"kind":"run".*"deterministic":{"chunks":' "$WORK/$name.jsonl" ||
    fail "$name: the run record does not say deterministic"
  grep -q '"replicas_identical":true' "$WORK/$name.jsonl" || fail "$name: replicas differ"
}

# library_np1 LIB ARGS...: ARGS at np=1 with compute.gemm=LIB, its log in $WORK/LIB_np1.jsonl;
# returns 1, saying SKIPPED, when LIB is not built into this mpiddp (any other failure fails).
library_np1() {
  local lib=$1; shift
  if ! run_np 1 train --quiet --log "$WORK/${lib}_np1.jsonl" "$@" --set compute.gemm="$lib" \
       2> "$WORK/$lib.err"; then
    grep -q "is not built into this mpiddp" "$WORK/$lib.err" || { cat "$WORK/$lib.err"; fail "$lib: np=1 failed"; }
    echo "  $lib: SKIPPED (not built in)"
    return 1
  fi
}

# same_bits BASE NAME: NAME's results are byte-identical to BASE's, and mpiddp compare says so.
same_bits() {
  if ! cmp -s <(results "$WORK/$1.jsonl") <(results "$WORK/$2.jsonl"); then
    diff <(results "$WORK/$1.jsonl") <(results "$WORK/$2.jsonl") | head -6 >&2
    fail "$2 is not bitwise identical to $1"
  fi
  "$MPIDDP" compare "$WORK/$1.jsonl" "$WORK/$2.jsonl" > "$WORK/compare.txt" ||
    { cat "$WORK/compare.txt" >&2; fail "mpiddp compare $1 $2 did not pass"; }
  grep -q "PASS: bitwise identical" "$WORK/compare.txt" || fail "compare $1 $2: no 'bitwise identical'"
  echo "  $2: bitwise identical to $1"
}

# same_bits_everywhere ARGS...: ARGS at np 2, 3, 4, 6 and 8, and over the paths at np 2, 4
# and 6 (mpi and shm, overlap on and off, accumulate_steps, 2 threads, two emulated nodes of 2
# and of 3 ranks), each byte-identical to $WORK/np1.jsonl (run first with ARGS); and float64
# at np 3 against np 1.
same_bits_everywhere() {
  for np in 2 3 4 6 8; do
    det_run "np$np" "$np" "$@"
    same_bits np1 "np$np"
  done
  det_run np4_mpi_blocking 4 "$@" --set reduce.algorithm=mpi --set reduce.overlap=false
  same_bits np1 np4_mpi_blocking
  det_run np4_shm_accumulate 4 "$@" --set reduce.algorithm=shm --set accumulate_steps=3
  same_bits np1 np4_shm_accumulate
  det_run np6_mpi_accumulate 6 "$@" --set reduce.algorithm=mpi --set accumulate_steps=2 \
    --set reduce.overlap=false
  same_bits np1 np6_mpi_accumulate
  det_run np2_threads 2 "$@" --set threads=2
  same_bits np1 np2_threads
  # Two "nodes" of 2 and of 3 ranks: the shared-memory sum within each, an allreduce between.
  MPIDDP_TEST_RANKS_PER_NODE=2 det_run np4_two_nodes 4 "$@" --set reduce.algorithm=shm
  same_bits np1 np4_two_nodes
  MPIDDP_TEST_RANKS_PER_NODE=3 det_run np6_two_nodes 6 "$@" --set reduce.algorithm=shm \
    --set reduce.overlap=false
  same_bits np1 np6_two_nodes
  det_run f64_np1 1 "$@" --set dtype=float64
  det_run f64_np3 3 "$@" --set dtype=float64
  same_bits f64_np1 f64_np3
}
