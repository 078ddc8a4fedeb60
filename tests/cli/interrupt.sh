#!/usr/bin/env bash
# SIGTERM, SIGINT or SIGUSR1 on any rank: every rank stops after the same step, rank 0 writes a
# checkpoint and an `interrupted` record, every rank exits 9, and `--resume latest` ends with
# the uninterrupted run's parameters bit for bit, on every reduction path (auto, mpi, shm,
# shm across two "nodes", overlap off, accumulate_steps, --no-sync) and at np=1. Without
# checkpoint.dir: the same stop, nothing saved, exit 128 + the signal. A storm of SIGTERMs
# while the checkpoint is written changes nothing; a SIGKILL during it leaves the previous
# checkpoint valid.
source "$(dirname "$0")/lib.sh"

ADAM=(--set 'optimizer={"type":"adam","lr":0.01}')
# Rank 1 (rank 0 at np=1) gets SIGTERM after backward of step 6 (debug.fail_kind=signal).
signal_at_6() { echo --set debug.fail_rank="$1" --set debug.fail_step=6 --set debug.fail_kind=signal; }

# interrupt_case NAME NP ARGS...: interrupted at step 6, resumed, compared with a straight run.
interrupt_case() {
  local name=$1 np=$2; shift 2
  local d="$WORK/$name" victim
  victim=$(( np > 1 ? 1 : 0 ))
  local rc=0
  # shellcheck disable=SC2046  # signal_at_6 is a list of arguments
  run_np "$np" train --quiet "${ADAM[@]}" "$@" $(signal_at_6 "$victim") --set checkpoint.dir="$d/ck" \
    --log "$d.first.jsonl" 2> "$d.err" || rc=$?
  [ "$rc" -eq 9 ] || { cat "$d.err"; fail "$name: exit code $rc, expected 9"; }
  grep -q "mpiddp: interrupted by SIGTERM (received by rank $victim) after step 6 (epoch 2): checkpoint '$d/ck/step-000000000006.safetensors' written; continue with --resume latest" "$d.err" ||
    { cat "$d.err"; fail "$name: no or wrong message"; }
  tail -n 1 "$d.first.jsonl" | grep -qx "{\"kind\":\"interrupted\",\"epoch\":2,\"step\":6,\"signal\":\"SIGTERM\",\"ranks\":\[$victim\],\"checkpoint\":\"$d/ck/step-000000000006.safetensors\"}" ||
    { tail -n 2 "$d.first.jsonl"; fail "$name: the last record is not the interrupted record"; }
  [ "$(grep -c '"kind":"step"' "$d.first.jsonl")" -eq 6 ] || fail "$name: not exactly 6 steps before the stop"
  run_np "$np" train --quiet "${ADAM[@]}" "$@" --set checkpoint.dir="$d/ck" --resume latest --log "$d.second.jsonl"
  run_np "$np" train --quiet "${ADAM[@]}" "$@" --log "$d.straight.jsonl"
  [ "$(checksum_of "$d.second.jsonl")" = "$(checksum_of "$d.straight.jsonl")" ] ||
    fail "$name: the resumed run's parameters differ from the straight run's"
  echo "$name (np=$np): stopped after step 6 with exit 9, resumed to the straight run's parameters $(checksum_of "$d.straight.jsonl")"
}
interrupt_case auto 2
interrupt_case mpi 2 --set reduce.algorithm=mpi
interrupt_case shm 2 --set reduce.algorithm=shm
interrupt_case no_overlap 2 --set reduce.overlap=false
interrupt_case accumulate 2 --set accumulate_steps=2
interrupt_case no_sync 2 --no-sync
interrupt_case np1 1
MPIDDP_TEST_RANKS_PER_NODE=2 interrupt_case two_level 4 --set reduce.algorithm=shm

# The overlapped reduction (fault injection turns overlap off): a real SIGUSR1 to one rank of a
# longer run, wherever it lands; the stop and the resume still give the straight run's result.
# 30,000 epochs of 4 steps: about 2 s on a Zen 5, where 1,000 epochs (63 ms) ended before
# the first step record was seen and the signal sent.
long=("${ADAM[@]}" --set epochs=30000)
d="$WORK/overlap"
run_np 2 train --quiet "${long[@]}" --set checkpoint.dir="$d/ck" --log "$d.first.jsonl" 2> "$d.err" &
launcher=$!
ranks=""
for _ in $(seq 1500); do
  ranks=$(rank_pids "$launcher")
  [ "$(wc -w <<< "$ranks")" -eq 2 ] && grep -q '"kind":"step"' "$d.first.jsonl" 2> /dev/null && break
  sleep 0.01
done
kill -USR1 "$(tail -n 1 <<< "$ranks")"
rc=0
wait "$launcher" || rc=$?
[ "$rc" -eq 9 ] || { cat "$d.err"; fail "overlap: exit code $rc, expected 9"; }
grep -q '"kind":"interrupted",.*"signal":"SIGUSR1","ranks":\[1\]' "$d.first.jsonl" || fail "overlap: no interrupted record naming rank 1"
run_np 2 train --quiet "${long[@]}" --set checkpoint.dir="$d/ck" --resume latest --log "$d.second.jsonl"
run_np 2 train --quiet "${long[@]}" --log "$d.straight.jsonl"
[ "$(checksum_of "$d.second.jsonl")" = "$(checksum_of "$d.straight.jsonl")" ] || fail "overlap: resumed parameters differ"
echo "overlap (np=2): SIGUSR1 to rank 1 stopped after step $(sed -nE 's/.*"interrupted","epoch":[0-9]+,"step":([0-9]+).*/\1/p' "$d.first.jsonl"), resumed bit for bit"

# No checkpoint.dir: the same stop, nothing saved, exit 128 + 15, the record says so.
rc=0
# shellcheck disable=SC2046
run_np 2 train --quiet $(signal_at_6 0) --log "$WORK/nodir.jsonl" 2> "$WORK/nodir.err" || rc=$?
[ "$rc" -eq 143 ] || { cat "$WORK/nodir.err"; fail "no checkpoint.dir: exit code $rc, expected 143"; }
grep -q "nothing saved: no checkpoint.dir is configured" "$WORK/nodir.err" || fail "no checkpoint.dir: message"
grep -q '"kind":"interrupted","epoch":2,"step":6,"signal":"SIGTERM","ranks":\[0\],"checkpoint":null' "$WORK/nodir.jsonl" ||
  fail "no checkpoint.dir: interrupted record"
echo "no checkpoint.dir: stopped after step 6, exit 143, checkpoint null"

# A big model (about 4.3 M parameters, a 52 MB checkpoint with Adam's moments), so that
# writing the checkpoint takes long enough to be hit.
big=("${ADAM[@]}" --set data.train.samples=512 --set model.layers.0.out=2048
     --set model.layers.2.out=2048 --set epochs=1000 --set checkpoint.every_epochs=1)
# With 8 steps per epoch, the first checkpoint is the one after step 8; the signal comes after
# it, and the stop's checkpoint is a new one (unless the stop falls on an epoch's end).

# A SIGTERM every few milliseconds from the first one until the process ends: many arrive
# while the checkpoint is written (SA_RESTART: no write fails with EINTR). Exit 9, the
# checkpoint loads, and each further signal was heard ("another terminating signal").
d="$WORK/storm"
"$MPIDDP" train --quiet "${big[@]}" --set checkpoint.dir="$d" > /dev/null 2> "$d.err" &
pid=$!
for _ in $(seq 600); do
  [ -n "$(ls "$d" 2> /dev/null | grep '^step-')" ] && break
  sleep 0.05
done
sent=0
while kill -TERM "$pid" 2> /dev/null; do sent=$((sent + 1)); sleep 0.002; done
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 9 ] || { cat "$d.err"; fail "storm: exit code $rc, expected 9"; }
repeats=$(grep -c "another terminating signal" "$d.err" || true)
[ "$repeats" -ge 1 ] || { cat "$d.err"; fail "storm: no repeated signal was reported"; }
latest=$(ls "$d" | grep -E '^step-[0-9]+\.safetensors$' | tail -n 1)
step=$((10#$(sed -E 's/step-([0-9]+)\.safetensors/\1/' <<< "$latest")))
grep -q "after step $step " "$d.err" || { cat "$d.err"; fail "storm: the newest checkpoint $latest is not the stop's"; }
[ $((step % 8)) -ne 0 ] || echo "(storm: the stop fell on an epoch's end, whose checkpoint was written before the signals)"
run_np 1 train --quiet "${big[@]}" --set epochs=$(( step / 8 + 1 )) --set checkpoint.dir="$d" --resume latest \
  --log "$d.resumed.jsonl" > /dev/null || fail "storm: the interruption checkpoint does not load"
echo "storm: $sent SIGTERMs ($repeats after the first, reported), exit 9, $latest loads"

# SIGKILL while the interruption checkpoint is written: the previous one stays the latest.
for try in 1 2 3 4 5; do
  d="$WORK/killed$try"
  "$MPIDDP" train --quiet "${big[@]}" --set checkpoint.dir="$d" > /dev/null 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    [ -n "$(ls "$d" 2> /dev/null | grep '^step-')" ] && break
    sleep 0.05
  done
  before=$(ls "$d" | grep -E '^step-[0-9]+\.safetensors$' | tail -n 1)
  kill -TERM "$pid"
  # The temporary file of the next checkpoint appears: kill -9 while it is being written.
  caught=0
  for _ in $(seq 200000); do
    if compgen -G "$d/.step-*.tmp" > /dev/null; then kill -9 "$pid"; caught=1; break; fi
    kill -0 "$pid" 2> /dev/null || break
  done
  wait "$pid" 2> /dev/null || true
  [ "$caught" -eq 1 ] && break
  echo "(try $try: the checkpoint was written before the kill; again)"
done
[ "$caught" -eq 1 ] || fail "could not catch the interruption checkpoint being written in 5 tries"
latest=$(ls "$d" | grep -E '^step-[0-9]+\.safetensors$' | tail -n 1)
[ "$latest" = "$before" ] || fail "kill -9: the latest checkpoint is $latest, expected the previous one, $before"
step=$((10#$(sed -E 's/step-([0-9]+)\.safetensors/\1/' <<< "$latest")))
run_np 1 train --quiet "${big[@]}" --set epochs=$(( step / 8 + 1 )) --set checkpoint.dir="$d" --resume latest \
  --log "$d.resumed.jsonl" > /dev/null || fail "kill -9: the previous checkpoint does not load"
grep -q "\"resumed_from\":{\"path\":\"[^\"]*$latest\"" "$d.resumed.jsonl" || fail "kill -9: did not resume from $latest"
echo "kill -9 during the interruption checkpoint: $(ls -a "$d" | grep -c '\.tmp$') temporary file left, $latest still the latest and loads"
