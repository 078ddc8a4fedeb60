#!/usr/bin/env bash
# Faults across ranks, end to end under the launcher, each injected with debug.* on one rank:
# the exit code, the message (naming the rank and the step) and the time the job took.
# docs/reliability.md lists which fault each case covers.
source "$(dirname "$0")/lib.sh"

# A run long enough that a fault at step 5 happens mid-run: 4 steps per epoch.
long=(--set epochs=50)

# fault NP MAX_SECONDS ARGS...: runs mpiddp train, sets $rc, $secs; stderr in $WORK/err.
fault() {
  local np=$1 max=$2; shift 2
  local start end
  start=$(date +%s%N)
  rc=0
  # The outer timeout only stops a hang from blocking CI; the bound checked is MAX_SECONDS.
  timeout 120 "$MPIEXEC" -n "$np" $MPIEXEC_FLAGS "$MPIDDP" train --quiet "$@" \
    > "$WORK/out" 2> "$WORK/err" || rc=$?
  end=$(date +%s%N)
  secs=$(( (end - start) / 1000000000 ))
  [ "$rc" -ne 124 ] || { cat "$WORK/err"; fail "'$*' hung (killed by timeout after 120 s)"; }
  [ "$secs" -le "$max" ] || { cat "$WORK/err"; fail "'$*' took $secs s, more than $max s"; }
}
expect_rc() { [ "$rc" -eq "$1" ] || { cat "$WORK/err"; fail "$2: exit code $rc, expected $1"; }; }
expect_err() { grep -qF -- "$1" "$WORK/err" || { cat "$WORK/err"; fail "$2: stderr lacks '$1'"; }; }
inject() { echo --set debug.fail_rank="$1" --set debug.fail_step="$2" --set debug.fail_kind="$3"; }
# expect_nonfinite_abort NAME ORIGIN RANKS_JSON: the run stopped at step 5 (epoch 2) with
# exit 5 on every rank together (no MPI_Abort), saying ORIGIN, and $WORK/NAME.jsonl holds
# the nonfinite record naming RANKS_JSON.
expect_nonfinite_abort() {
  expect_rc 5 "$1"
  expect_err "non-finite loss or gradient at step 5 (epoch 2), $2 (on_nonfinite = abort)" "$1"
  grep -qF "\"kind\":\"nonfinite\",\"epoch\":2,\"step\":5,\"ranks\":$3,\"action\":\"abort\"" \
    "$WORK/$1.jsonl" || fail "$1: no nonfinite record naming ranks $3 in the log"
  ! grep -q "MPI_ABORT" "$WORK/err" || fail "$1: used MPI_Abort although every rank agreed"
}

# An exception on one rank mid-run: that rank names itself, MPI_Abort ends everyone.
# shellcheck disable=SC2046
fault 2 20 "${long[@]}" $(inject 1 5 throw)
expect_rc 1 "throw"
expect_err "rank 1: injected failure (debug.fail_kind = throw) at step 5" "throw"

# A failure during setup on one rank only (a file only it cannot read): every rank returns
# together after one agreed collective, without MPI_Abort.
fault 2 20 "${long[@]}" $(inject 1 0 throw)
expect_rc 1 "setup throw"
expect_err "rank 1: injected failure (debug.fail_kind = throw) during setup" "setup throw"
grep -q "MPI_ABORT" "$WORK/err" && fail "setup throw: used MPI_Abort although every rank knew"

# A rank that exits without MPI_Finalize, and one killed by SIGKILL (what kill -9 sends).
fault 2 30 "${long[@]}" $(inject 1 5 exit)
[ "$rc" -ne 0 ] || fail "exit: the job exited 0"
expect_err "rank 1: injected exit (debug.fail_kind = exit) at step 5" "exit"
fault 2 30 "${long[@]}" $(inject 1 5 kill)
[ "$rc" -ne 0 ] || fail "kill: the job exited 0"

# kill -9 from outside, on one rank process of a running job: the job ends within 30 s.
"$MPIEXEC" -n 2 $MPIEXEC_FLAGS "$MPIDDP" train --quiet --set epochs=1000000 \
  > /dev/null 2> "$WORK/err" &
launcher=$!
ranks=""
for _ in $(seq 100); do
  ranks=$(rank_pids "$launcher")
  [ "$(echo "$ranks" | wc -w)" -ge 2 ] && break
  sleep 0.1
done
[ -n "$ranks" ] || fail "kill -9: no rank processes found under the launcher ($launcher)"
sleep 1
victim=$(echo "$ranks" | head -n 1)
start=$(date +%s)
kill -9 "$victim"
rc=0
for _ in $(seq 300); do kill -0 "$launcher" 2> /dev/null || break; sleep 0.1; done
if kill -0 "$launcher" 2> /dev/null; then kill -9 "$launcher"; fail "kill -9: job still running 30 s later"; fi
wait "$launcher" || rc=$?
[ "$rc" -ne 0 ] || fail "kill -9: the job exited 0"
echo "kill -9 of pid $victim: job ended in $(( $(date +%s) - start )) s with exit code $rc"

# A NaN in one rank's gradient: every rank stops in the same step (exit 5, a normal exit),
# and the message names the step and the rank.
fault 2 20 "${long[@]}" $(inject 1 5 nan) --log "$WORK/nan.jsonl"
expect_nonfinite_abort nan "first seen on rank 1" "[1]"

# skip: no update on any rank, counted in the log; the replicas stay identical.
fault 2 20 $(inject 0 5 nan) --set on_nonfinite=skip --log "$WORK/skip.jsonl"
expect_rc 0 "skip"
expect_err "skipped non-finite loss or gradient at step 5" "skip"
grep -q '"kind":"nonfinite","epoch":2,"step":5,"ranks":\[0\],"action":"skip"' "$WORK/skip.jsonl" \
  || fail "skip: no nonfinite record"
grep -q '"step":5,' <(grep '"kind":"step"' "$WORK/skip.jsonl") && fail "skip: step 5 was logged as a step"
grep -q '"kind":"end".*"replicas_identical":true.*"skipped_steps":1,' "$WORK/skip.jsonl" \
  || fail "skip: end record"
# More than max_skipped in a row: abort at the step that exceeds it.
fault 2 20 "${long[@]}" $(inject 1 5 nan) --set debug.fail_count=3 --set on_nonfinite=skip \
  --set max_skipped=2
expect_rc 5 "max_skipped"
expect_err "at step 7 (epoch 2), first seen on rank 1; 3 non-finite steps in a row, more than max_skipped = 2" "max_skipped"

# Finite values on every rank whose sum overflows: each rank's first gradient is the largest
# finite float (huge), so every rank's own buffer passes the scan but FLT_MAX + FLT_MAX is Inf
# in the reduced sum. Every rank stops at that step and no rank is blamed.
fault 2 20 "${long[@]}" $(inject 0 5 huge) --log "$WORK/huge.jsonl"
expect_nonfinite_abort huge "although every rank's own values were finite: their sum overflowed" "[]"

# Replica divergence (one ulp on one rank): reported with step, rank and difference...
fault 2 20 "${long[@]}" $(inject 1 5 perturb) --set check_every_steps=2
expect_rc 4 "divergence"
expect_err "replicas diverged at step 6: the parameters of rank 1 differ from rank 0's (max |difference|" "divergence"
# ... or repaired from rank 0, logged, and training continues with identical replicas.
fault 2 20 $(inject 1 5 perturb) --set check_every_steps=2 --set divergence.action=resync \
  --log "$WORK/resync.jsonl"
expect_rc 0 "resync"
grep -q '"kind":"resync","step":6,"ranks":\[1\]' "$WORK/resync.jsonl" || fail "resync record"
grep -q '"kind":"end".*"replicas_identical":true.*"resyncs":1' "$WORK/resync.jsonl" \
  || fail "resync: end record"
# ... also when the end-of-run check finds it. The check after the resync must read rank 0's
# parameters in pieces as the first one does: the scratch holds min(P, 2^20) values, so a model
# above 2^20 parameters (1100-wide layers: 1,219,901) overran it before. The default model
# (2,737) needs one piece. 1 epoch of 2 steps, rank 1 perturbed in the last one.
big=(--set model.layers.0.out=1100 --set model.layers.2.out=1100)
for np in 2 3; do
  for size in small big; do
    model=()
    [ "$size" = big ] && model=("${big[@]}")
    what="resync at the end ($size model, np=$np)"
    log="$WORK/resync_end_${size}_$np.jsonl"
    # shellcheck disable=SC2046
    fault "$np" 30 --set epochs=1 --set data.train.samples=96 --set batch.global=48 \
      "${model[@]}" $(inject 1 2 perturb) --set divergence.action=resync --log "$log"
    expect_rc 0 "$what"
    grep -q '"kind":"resync","step":2,"ranks":\[1\]' "$log" || fail "$what: no resync record"
    grep -q '"kind":"end".*"replicas_identical":true.*"resyncs":1' "$log" \
      || fail "$what: end record"
  done
done

# A stalled rank: the watchdog names it and its step, and ends the job (exit 7) within the
# timeout plus the 5 s it gives peers to answer. Three ranks: two wait, one reports.
fault 3 20 "${long[@]}" --set batch.global=66 $(inject 1 5 stall) --set watchdog.timeout_s=2
expect_rc 7 "stall"
expect_err "watchdog: waited" "stall"
expect_err "rank 1: at step 5, busy outside MPI" "stall"
expect_err "ranks waiting in this collective: 0, 2" "stall"
[ "$(grep -c 'watchdog: waited' "$WORK/err")" -eq 1 ] || fail "stall: more than one report"
# A rank stalled in setup (a hung file system while loading): the others wait for it in the
# setup agreement, and the watchdog names it at step 0.
fault 2 20 $(inject 1 0 stall) --set watchdog.timeout_s=2
expect_rc 7 "setup stall"
expect_err "rank 0: watchdog: waited" "setup stall"
expect_err "in MPI_Allgather (collective #1, step 0)" "setup stall"
expect_err "rank 1: at step 0, busy outside MPI" "setup stall"
# warn: the report, then the job finishes when the rank wakes up.
fault 2 30 $(inject 0 5 stall) --set debug.stall_s=3 --set watchdog.timeout_s=1 \
  --set watchdog.action=warn
expect_rc 0 "stall warn"
expect_err "rank 1: watchdog: waited" "stall warn"
expect_err "rank 0: at step 5, busy outside MPI" "stall warn"
expect_err "still waiting (watchdog.action = warn)" "stall warn"
# No false alarm: a normal run with a short timeout says nothing.
fault 2 30 "${long[@]}" --set watchdog.timeout_s=1
expect_rc 0 "no stall"
grep -q watchdog "$WORK/err" && fail "watchdog fired in a healthy run"

# Ranks started with different configs (an MPMD launch, one --set per program): the start-up
# hash check names the rank that differs; every rank ends normally with exit 2.
rc=0
# shellcheck disable=SC2086  # MPIEXEC_FLAGS is a list of flags
timeout 120 "$MPIEXEC" $MPIEXEC_FLAGS -n 1 "$MPIDDP" train --quiet --set optimizer.lr=0.05 \
  : -n 1 "$MPIDDP" train --quiet --set optimizer.lr=0.07 > "$WORK/out" 2> "$WORK/err" || rc=$?
expect_rc 2 "configs differ"
expect_err "mpiddp: rank 1's config or model differs from rank 0's (hash" "configs differ"
grep -q "MPI_ABORT" "$WORK/err" && fail "configs differ: used MPI_Abort although every rank knew"

echo "cli faults: every injected fault ends the job with its exit code and message, in time"
