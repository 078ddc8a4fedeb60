#!/usr/bin/env bash
# The flight recorder, end to end: a stalled rank, a killed rank and a mismatched collective
# each leave <log>.flight.rank<R>.json files, and `mpiddp flight` on them names the right
# rank and collective number, consistent with what the files say. Also its errors.
source "$(dirname "$0")/lib.sh"

long=(--set epochs=50)
inject() { echo --set debug.fail_rank="$1" --set debug.fail_step="$2" --set debug.fail_kind="$3"; }
# train NP ARGS...: the job under a timeout (a hang must not block CI); sets $rc.
train() {
  local np=$1; shift
  rc=0
  # shellcheck disable=SC2086  # MPIEXEC_FLAGS is a list of flags
  timeout 120 "$MPIEXEC" -n "$np" $MPIEXEC_FLAGS "$MPIDDP" train --quiet "$@" \
    > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" -ne 124 ] || { cat "$WORK/err"; fail "'$*' hung (killed by timeout after 120 s)"; }
}
# last_entry FILE FIELD: FIELD of the newest entry of a flight file (one entry per line).
last_entry() {
  grep '"seq"' "$1" | tail -n 1 | sed -E "s/.*\"$2\":(\"[^\"]*\"|[-0-9]+|null).*/\1/"
}
# flight FILES...: mpiddp flight --json; sets $frc and $json.
flight() {
  frc=0
  json=$("$MPIDDP" flight --json "$@" 2> "$WORK/flight_err") || frc=$?
}
json_field() { echo "$json" | sed -E "s/.*\"$1\":(\"[^\"]*\"|\[[^]]*\]|[-0-9]+).*/\1/"; }
expect_json() {
  [ "$(json_field "$1")" = "$2" ] || fail "$3: mpiddp flight says $1 = $(json_field "$1"), expected $2 ($json)"
}

# A stall: rank 1's main thread sleeps at step 5 outside MPI; rank 0 waits in the gradient
# sum until the watchdog ends the job (exit 7). Both ranks write: rank 0 on its own timeout,
# rank 1 when rank 0's watchdog asks for its status.
# shellcheck disable=SC2046
train 2 "${long[@]}" $(inject 1 5 stall) --set watchdog.timeout_s=2 --log "$WORK/stall.jsonl"
[ "$rc" -eq 7 ] || { cat "$WORK/err"; fail "stall: exit code $rc, expected 7"; }
for r in 0 1; do
  [ -s "$WORK/stall.jsonl.flight.rank$r.json" ] || { cat "$WORK/err"; fail "stall: no flight file of rank $r"; }
done
grep -q "rank 1: flight recorder: wrote $WORK/stall.jsonl.flight.rank1.json" "$WORK/err" \
  || { cat "$WORK/err"; fail "stall: rank 1 did not say it wrote its flight file"; }
s0=$(last_entry "$WORK/stall.jsonl.flight.rank0.json" seq)
s1=$(last_entry "$WORK/stall.jsonl.flight.rank1.json" seq)
[ "$(last_entry "$WORK/stall.jsonl.flight.rank0.json" end_us)" = null ] || fail "stall: rank 0 not inside its last collective"
[ "$(last_entry "$WORK/stall.jsonl.flight.rank1.json" end_us)" != null ] || fail "stall: rank 1 inside a collective"
[ "$s0" -eq $((s1 + 1)) ] || fail "stall: rank 0 is in #$s0, rank 1 left #$s1: expected one apart"
[ "$(last_entry "$WORK/stall.jsonl.flight.rank0.json" kind)" = '"allreduce_sum_float"' ] \
  || fail "stall: rank 0 waits in $(last_entry "$WORK/stall.jsonl.flight.rank0.json" kind), not the gradient sum"
flight "$WORK"/stall.jsonl.flight.rank*.json
[ "$frc" -eq 1 ] || fail "stall: mpiddp flight exit $frc, expected 1 (a disagreement)"
expect_json verdict '"progress"' stall
expect_json ranks '[1]' stall
expect_json seq "$s0" stall
expect_json summary "\"rank 0 waits in allreduce_sum_float #$s0 at step 5; rank 1 is outside MPI at step 5, after $(last_entry "$WORK/stall.jsonl.flight.rank1.json" kind | tr -d '"') #$s1\"" stall
# The table: both rings side by side, the row of the disagreement marked.
"$MPIDDP" flight "$WORK"/stall.jsonl.flight.rank*.json > "$WORK/table" || true
grep -qE "^>> +$s0  allreduce_sum_float [0-9]+B step 5 IN IT" "$WORK/table" \
  || { cat "$WORK/table"; fail "stall: the table does not mark #$s0"; }

# A kill: rank 1 SIGKILLs itself at step 5. Open MPI's mpirun then sends SIGTERM to rank 0,
# stuck in the gradient sum, 1 s before SIGKILL: its watchdog thread writes the file; rank 1
# writes none. (MPICH's Hydra sends SIGKILL at once: nobody can write, nothing to check.)
# debug.flight_dir puts the files in a directory of their own (created).
if "$MPIEXEC" --version 2>&1 | grep -Eq "Open MPI|OpenRTE"; then
  # shellcheck disable=SC2046
  train 2 "${long[@]}" $(inject 1 5 kill) --set debug.flight_dir="\"$WORK/kill\""
  [ "$rc" -ne 0 ] || fail "kill: the job exited 0"
  [ -s "$WORK/kill/flight.rank0.json" ] || { cat "$WORK/err"; ls -la "$WORK/kill" || true; fail "kill: rank 0 wrote no flight file"; }
  [ ! -e "$WORK/kill/flight.rank1.json" ] || fail "kill: a killed rank wrote a flight file"
  k0=$(last_entry "$WORK/kill/flight.rank0.json" seq)
  [ "$(last_entry "$WORK/kill/flight.rank0.json" step)" -eq 5 ] || fail "kill: rank 0's last collective is not of step 5"
  flight "$WORK/kill/flight.rank0.json" "$WORK/kill/flight.rank1.json"
  [ "$frc" -eq 1 ] || fail "kill: mpiddp flight exit $frc, expected 1"
  expect_json verdict '"missing"' kill
  expect_json missing '[1]' kill
  expect_json ranks '[1]' kill
  expect_json seq "$k0" kill
  expect_json summary "\"rank 1 has no flight file (killed, or it could not write one); rank 0 waits in allreduce_sum_float #$k0 at step 5\"" kill
  grep -qF "no file '$WORK/kill/flight.rank1.json' (its rank is listed as missing)" "$WORK/flight_err" \
    || fail "kill: the missing file is not named"
else
  echo "cli flight: the kill case SKIPPED (not Open MPI: the launcher kills the survivors with SIGKILL)"
fi

# A mismatched collective: at step 5 rank 1 enters a barrier where ranks 0 and 2 enter the
# gradient sum; the same collective number, different kinds. Every rank writes.
# shellcheck disable=SC2046
train 3 "${long[@]}" --set batch.global=66 $(inject 1 5 mismatch) --set watchdog.timeout_s=2 \
  --log "$WORK/mismatch.jsonl"
[ "$rc" -eq 7 ] || { cat "$WORK/err"; fail "mismatch: exit code $rc, expected 7"; }
for r in 0 1 2; do
  [ -s "$WORK/mismatch.jsonl.flight.rank$r.json" ] || { cat "$WORK/err"; fail "mismatch: no flight file of rank $r"; }
done
m0=$(last_entry "$WORK/mismatch.jsonl.flight.rank0.json" seq)
for r in 1 2; do
  [ "$(last_entry "$WORK/mismatch.jsonl.flight.rank$r.json" seq)" -eq "$m0" ] \
    || fail "mismatch: rank $r's last collective is not #$m0"
done
[ "$(last_entry "$WORK/mismatch.jsonl.flight.rank1.json" kind)" = '"barrier"' ] || fail "mismatch: rank 1 not in the barrier"
flight "$WORK"/mismatch.jsonl.flight.rank*.json
[ "$frc" -eq 1 ] || fail "mismatch: mpiddp flight exit $frc, expected 1"
expect_json verdict '"mismatch"' mismatch
expect_json ranks '[1]' mismatch
expect_json seq "$m0" mismatch
echo "$json" | grep -qF "mismatched collective #$m0: ranks 0, 2 are in allreduce_sum_float of" \
  || fail "mismatch: summary '$json'"
echo "$json" | grep -qF "rank 1 is in barrier of 0 bytes at step 5" || fail "mismatch: summary '$json'"

# An exception on one rank: it aborts (MPI_Abort), after asking rank 0's watchdog to write.
# shellcheck disable=SC2046
train 2 "${long[@]}" $(inject 1 5 throw) --log "$WORK/throw.jsonl"
[ "$rc" -eq 1 ] || { cat "$WORK/err"; fail "throw: exit code $rc, expected 1"; }
grep -q '"reason":"abort, exit code 1"' "$WORK/throw.jsonl.flight.rank1.json" \
  || { cat "$WORK/err"; fail "throw: rank 1 wrote no flight file before MPI_Abort"; }
[ -s "$WORK/throw.jsonl.flight.rank0.json" ] || { cat "$WORK/err"; fail "throw: rank 0 wrote no flight file"; }
flight "$WORK"/throw.jsonl.flight.rank*.json
expect_json ranks '[1]' throw  # rank 1 threw before the gradient sum rank 0 waits in

# SIGTERM to the ranks of a job that hangs with the watchdog off: rank 0 is stuck in the
# gradient sum, rank 1's main thread asleep, neither reaches a step boundary; each one's
# watchdog thread writes its file on the signal. (The job is then killed by the test.)
# shellcheck disable=SC2086,SC2046
"$MPIEXEC" -n 2 $MPIEXEC_FLAGS "$MPIDDP" train --quiet "${long[@]}" $(inject 1 5 stall) \
  --set watchdog.timeout_s=0 --log "$WORK/term.jsonl" > /dev/null 2> "$WORK/err" &
launcher=$!
# Step 4's record is the last one written: step 5 never completes.
for _ in $(seq 300); do grep -q '"kind":"step","epoch":1,"step":4' "$WORK/term.jsonl" 2> /dev/null && break; sleep 0.1; done
sleep 1  # and rank 0 is in the sum of step 5 by then
ranks=$(rank_pids "$launcher")
# shellcheck disable=SC2086
kill -TERM $ranks
for _ in $(seq 100); do
  [ -s "$WORK/term.jsonl.flight.rank0.json" ] && [ -s "$WORK/term.jsonl.flight.rank1.json" ] && break
  sleep 0.1
done
# shellcheck disable=SC2086
kill -9 $ranks 2> /dev/null || true
wait "$launcher" 2> /dev/null || true
for r in 0 1; do
  grep -q '"reason":"signal 15"' "$WORK/term.jsonl.flight.rank$r.json" 2> /dev/null \
    || { cat "$WORK/err"; fail "SIGTERM: rank $r wrote no flight file for the signal"; }
done
flight "$WORK"/term.jsonl.flight.rank*.json
expect_json verdict '"progress"' SIGTERM
expect_json ranks '[1]' SIGTERM

# A flight file that cannot be written (its temporary name is a FIFO nobody reads: fopen
# blocks, as on a hung file system) holds up neither the watchdog's report nor the abort.
mkdir "$WORK/stuck"
mkfifo "$WORK/stuck/.flight.rank0.json.tmp"
# shellcheck disable=SC2046
train 2 "${long[@]}" $(inject 1 5 stall) --set watchdog.timeout_s=2 --set debug.flight_dir="\"$WORK/stuck\""
[ "$rc" -eq 7 ] || { cat "$WORK/err"; fail "stuck file system: exit code $rc, expected 7"; }
grep -q "rank 0: watchdog: waited" "$WORK/err" || { cat "$WORK/err"; fail "stuck file system: no watchdog report"; }
grep -q "rank 0: flight recorder: $WORK/stuck/flight.rank0.json not written within 2 s" "$WORK/err" \
  || { cat "$WORK/err"; fail "stuck file system: the stuck write is not reported"; }
[ -s "$WORK/stuck/flight.rank1.json" ] || fail "stuck file system: rank 1's own file is missing"

# A healthy run writes no flight file.
train 2 --set epochs=2 --log "$WORK/healthy.jsonl"
[ "$rc" -eq 0 ] || { cat "$WORK/err"; fail "healthy run: exit $rc"; }
! ls "$WORK"/healthy.jsonl.flight.* 2> /dev/null || fail "a healthy run wrote flight files"

# Bad input: exit 2 naming the file.
echo '{"kind":"run"}' > "$WORK/not_flight.json"
flight "$WORK/not_flight.json"
[ "$frc" -eq 2 ] || fail "bad file: exit $frc, expected 2"
grep -qF "mpiddp flight: flight file '$WORK/not_flight.json': not a flight recorder file" "$WORK/flight_err" \
  || { cat "$WORK/flight_err"; fail "bad file: message"; }
flight "$WORK/none.json"
[ "$frc" -eq 2 ] || fail "no file at all: exit $frc, expected 2"

echo "cli flight: a stall, a kill and a mismatch each leave flight files; mpiddp flight names rank 1 and the collective"
