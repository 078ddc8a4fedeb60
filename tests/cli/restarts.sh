#!/usr/bin/env bash
# launch/mpirun.sh --max-restarts: a run whose rank is killed (kill -9) twice restarts twice
# from its newest checkpoint and ends with the uninterrupted run's parameters bit for bit,
# one log holding the whole run with two `restart` records (`mpiddp compare` passes); with
# --min-np, a failure that recurs at one world size moves the run to fewer ranks, with the
# same global batch, and it still compares within tolerance; errors a restart cannot fix are
# not restarted.
source "$(dirname "$0")/lib.sh"

export MPIRUN="$MPIEXEC"
launch="$SOURCE_DIR/launch/mpirun.sh"
# newest_checkpoint_step LOG: the step of the newest checkpoint record, 0 when none.
newest_checkpoint_step() {
  { grep -o '"kind":"checkpoint","path":"[^"]*","epoch":[0-9]*,"batch":[0-9]*,"step":[0-9]*' "$1" 2> /dev/null || true; } |
    tail -n 1 | sed -nE 's/.*"step":([0-9]+)$/\1/p' | grep . || echo 0
}

# MPICH's Hydra reports a rank killed by SIGKILL with exit code 9, an interrupted run's, so
# launch/mpirun.sh does not restart it there (docs/launching.md): only part 3 applies.
if [[ "$("$MPIEXEC" --version 2>&1)" == *HYDRA* ]]; then
  echo "parts 1 and 2 SKIPPED under MPICH: Hydra's exit code for a rank killed by SIGKILL is 9"
  kills=0
else
  kills=1
fi

if [ "$kills" -eq 1 ]; then
# 1. Two kills at the same world size. 500 epochs of 4 steps, a checkpoint every 20 steps,
# rank 1 paced to at least 2 ms a step: a fast machine ran 800 epochs unpaced before the second
# kill could land. The uninterrupted run below is paced too (common holds the flags).
# shellcheck disable=SC2207  # pace_flags prints a list of flags
common=(--quiet --set 'optimizer={"type":"adam","lr":0.01}' --set epochs=500
        --set checkpoint.every_steps=20 $(pace_flags 1 0.002))
log="$WORK/run.jsonl"
"$launch" --max-restarts 2 2 default "${common[@]}" --set checkpoint.dir="$WORK/ck" --log "$log" \
  > "$WORK/run.out" 2>&1 &
script=$!
kill_rank_after() {  # kill_rank_after STEP: kill -9 one rank once a checkpoint past STEP exists
  local ranks=""
  for _ in $(seq 1200); do
    ranks=$(rank_pids "$script")
    [ "$(wc -w <<< "$ranks")" -eq 2 ] && [ "$(newest_checkpoint_step "$log")" -ge "$1" ] && break
    sleep 0.05
  done
  [ "$(wc -w <<< "$ranks")" -eq 2 ] || { cat "$WORK/run.out"; fail "no 2 ranks running"; }
  kill -9 "$(head -n 1 <<< "$ranks")"
  newest_checkpoint_step "$log"
}
# restart_from N: the step the N-th restart record resumed from (rank 0 may write one more
# checkpoint between the kill of another rank and its own end).
restart_from() { grep '"kind":"restart","attempt":'"$1"',' "$log" | sed -nE 's/.*"from":\{[^}]*"step":([0-9]+)\}.*/\1/p'; }
kill_rank_after 40 > /dev/null
for _ in $(seq 600); do grep -q '"kind":"restart"' "$log" 2> /dev/null && break; sleep 0.05; done
first=$(restart_from 1)
[ -n "$first" ] || { cat "$WORK/run.out"; fail "no first restart record"; }
kill_rank_after $((first + 40)) > /dev/null
rc=0
wait "$script" || rc=$?
[ "$rc" -eq 0 ] || { cat "$WORK/run.out"; fail "two kills, --max-restarts 2: exit code $rc"; }
[ "$(grep -c '"kind":"restart"' "$log")" -eq 2 ] || fail "not two restart records"
second=$(restart_from 2)
[ "$second" -ge $((first + 40)) ] || fail "the second restart resumed from step $second, before the second kill"
grep -qE '"kind":"restart","attempt":1,"exit_code":137,"reason":"attempt 0 at 2 ranks ended with exit code 137 \(SIGKILL\)","from":\{"path":"[^"]*step-0*'"$first"'.safetensors"' "$log" ||
  { grep restart "$log"; fail "the first restart record is not from step $first after SIGKILL"; }
grep -qE '"kind":"restart","attempt":2,.*"step":'"$second"'\},"previous_world_size":2,"world_size":2' "$log" ||
  { grep restart "$log"; fail "the second restart record is not from step $second at 2 ranks"; }
grep -q "restart 2 of 2 at 2 ranks" "$WORK/run.out" || fail "the script did not say it restarted"
run_np 2 train "${common[@]}" --set checkpoint.dir="$WORK/ck_straight" --log "$WORK/straight.jsonl"
expect_same_run "$WORK/straight.jsonl" "$log" "the restarted run"
echo "two kills (after the checkpoints of steps $first and $second), two restarts: parameters" \
     "$(checksum_of "$log") as uninterrupted; compare: $(tail -n 1 "$WORK/compare.txt")"

# 2. --min-np: rank 1 kills itself at step 7 (after the checkpoint of step 5), again in the
# restart at 2 ranks from step 5; the second restart runs at 1 rank, where there is no rank 1.
# The baseline is one process with the same (never firing) debug settings.
kill7=(--quiet --set epochs=6 --set checkpoint.every_steps=5 --set debug.fail_rank=1
       --set debug.fail_step=7 --set debug.fail_kind=kill)
rc=0
"$launch" --max-restarts 2 --min-np 1 2 default "${kill7[@]}" --set checkpoint.dir="$WORK/ck7" \
  --log "$WORK/min.jsonl" > "$WORK/min.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { cat "$WORK/min.out"; fail "--min-np 1: exit code $rc"; }
grep -q "restart 2 of 2 at 1 ranks" "$WORK/min.out" || { cat "$WORK/min.out"; fail "--min-np: not restarted at 1 rank"; }
grep -qE '"kind":"restart","attempt":2,.*"from":\{"path":"[^"]*step-000000000005.safetensors","epoch":2,"batch":1,"step":5\},"previous_world_size":2,"world_size":1' "$WORK/min.jsonl" ||
  { grep restart "$WORK/min.jsonl"; fail "--min-np: the second restart record is not at 1 rank from step 5"; }
run_np 1 train "${kill7[@]}" --set checkpoint.dir="$WORK/ck_baseline" --log "$WORK/min_baseline.jsonl"
"$MPIDDP" compare "$WORK/min_baseline.jsonl" "$WORK/min.jsonl" > "$WORK/min_compare.txt" ||
  { cat "$WORK/min_compare.txt"; fail "--min-np: the run at fewer ranks is outside the tolerance"; }
echo "--min-np 1: two failures at 2 ranks, finished at 1 rank; compare: $(tail -n 1 "$WORK/min_compare.txt")"
fi

# 3. Not restarted: a config error (2) and a non-finite step (5) end the run at once.
for case in "2 --set optimizer.lr=-1" "5 --set debug.fail_rank=0 --set debug.fail_kind=nan"; do
  read -r want args <<< "$case"
  rc=0
  # shellcheck disable=SC2086  # args is a list of arguments
  "$launch" --max-restarts 3 2 default --quiet $args > "$WORK/no.out" 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] || { cat "$WORK/no.out"; fail "'$args': exit code $rc, expected $want"; }
  grep -q "not restarting after exit code $want" "$WORK/no.out" || { cat "$WORK/no.out"; fail "'$args': no message"; }
  [ "$(grep -c 'launch/mpirun.sh: running:' "$WORK/no.out")" -eq 1 ] || fail "'$args' was restarted"
done
echo "exit codes 2 and 5: not restarted"
