#!/usr/bin/env bash
# mpiddp train --trace: a Chrome trace file whose ranks, tracks, nesting, step sums and
# step times trace_check verifies against the run's log (see tests/support/trace_check.cpp);
# the trace config's errors; and mpiddp timeline's figure and errors.
source "$(dirname "$0")/lib.sh"

# Hidden layers of 128 make a step a few hundred microseconds, so the few tens of
# nanoseconds between its spans (function calls) stay far below the 5 % checked.
wide=(--set model.layers.0.out=128 --set model.layers.2.out=128)

# np=2 over MPI with 4 KiB buckets, so buckets start during backward (overlap); 6 epochs of
# 4 steps, so the default selection (steps 2-21) leaves steps 1, 22, 23 and 24 out.
# Checkpoints every 5 steps and the epochs' evaluations add their spans.
run_np 2 train --quiet "${wide[@]}" --set epochs=6 --log "$WORK/np2.jsonl" --trace "$WORK/np2.json" \
  --set reduce.algorithm=mpi --set reduce.first_bucket_mb=0.004 --set reduce.bucket_cap_mb=0.004 \
  --set checkpoint.dir="$WORK/ck" --set checkpoint.every_steps=5
"$TRACE_CHECK" "$WORK/np2.json" "$WORK/np2.jsonl" 2 21 2 --expect-overlap || fail "np=2 trace"
for part in '"name":"evaluation"' '"name":"checkpoint"' '"path":"mpi"' '"name":"reduction bucket 1"' \
            '"displayTimeUnit":"ms"'; do
  grep -qF -- "$part" "$WORK/np2.json" || fail "the np=2 trace lacks $part"
done
[ ! -e "$WORK/.np2.json.tmp" ] || fail "a temporary trace file was left behind"

# np=3 with the default reduction (shared memory on one node) and trace.steps [3, 7].
run_np 3 train --quiet "${wide[@]}" --set batch.global=48 --log "$WORK/np3.jsonl" --trace "$WORK/np3.json" \
  --set 'trace.steps=[3,7]'
"$TRACE_CHECK" "$WORK/np3.json" "$WORK/np3.jsonl" 3 7 3 || fail "np=3 trace"
grep -qF '"path":"shm"' "$WORK/np3.json" || fail "the np=3 trace names no shm path"

# ZeRO-3 at np=2: each unit's gather on its own track, each with its wait on the compute track,
# and in every step a gather that travelled before its wait began (the prefetch).
run_np 2 train --quiet "${wide[@]}" --set reduce.shard='"parameters"' --log "$WORK/zero3.jsonl" \
  --trace "$WORK/zero3.json" --set 'trace.steps=[2,9]'
"$TRACE_CHECK" "$WORK/zero3.json" "$WORK/zero3.jsonl" 2 9 2 --expect-gathers > "$WORK/zero3.out" ||
  fail "ZeRO-3 trace"
cat "$WORK/zero3.out"
grep -qF "gathers, " "$WORK/zero3.out" || fail "trace_check counted no gathers"
for part in '"name":"parameter gather unit 0"' '"name":"gather_wait"' '"unit":1,'; do
  grep -qF -- "$part" "$WORK/zero3.json" || fail "the ZeRO-3 trace lacks $part"
done
"$MPIDDP" timeline "$WORK/zero3.json" -o "$WORK/zero3.svg" > /dev/null
for part in ">parameter gather (in flight)</text>" ">waiting for a parameter gather</text>" \
            ">parameter gather unit 0</text>"; do
  grep -qF -- "$part" "$WORK/zero3.svg" || fail "the ZeRO-3 timeline lacks $part"
done

# One rank: no reduction at all, still a valid trace (config key instead of the option).
run_np 1 train --quiet "${wide[@]}" --log "$WORK/np1.jsonl" --set trace.path="$WORK/np1.json"
"$TRACE_CHECK" "$WORK/np1.json" "$WORK/np1.jsonl" 2 16 1 || fail "np=1 trace"

# Config errors name the key (exit 2); an unwritable file is exit 8 before any step.
expect_exit() {  # CODE TEXT ARGS...: train fails with CODE and a message containing TEXT
  local code=$1 text=$2 rc=0; shift 2
  run_np 2 train --quiet "$@" 2> "$WORK/err" || rc=$?
  [ "$rc" -eq "$code" ] && grep -qF -- "$text" "$WORK/err" \
    || { cat "$WORK/err"; fail "train $*: exit $rc, expected $code with '$text'"; }
}
expect_exit 2 "config: trace.steps: expected [FIRST, LAST]" --trace "$WORK/t.json" --set trace.steps=5
expect_exit 2 "config: trace.steps: expected 1 <= FIRST <= LAST" --trace "$WORK/t.json" --set 'trace.steps=[9,3]'
expect_exit 2 "config: trace.steps: a trace needs a file" --set 'trace.steps=[2,4]'
expect_exit 2 "config: trace.colour: unknown key" --trace "$WORK/t.json" --set trace.colour=1
expect_exit 8 "cannot write the trace file '$WORK/no/such/dir/t.json'" \
  --trace "$WORK/no/such/dir/t.json" --log "$WORK/never.jsonl"
[ ! -e "$WORK/never.jsonl" ] || fail "training started although the trace cannot be written"

# mpiddp timeline: one row per rank and track, a legend, a time axis.
"$MPIDDP" timeline "$WORK/np2.json" -o "$WORK/timeline.svg" > "$WORK/out"
grep -qF "wrote $WORK/timeline.svg (2 processes)" "$WORK/out" || fail "no confirmation"
svg=$WORK/timeline.svg
if command -v xmllint > /dev/null; then xmllint --noout "$svg" || fail "not well-formed XML"; fi
for part in '<g id="timeline">' '<g id="rank-0">' '<g id="rank-1">' '<g id="legend">' \
            '<g id="time-axis">' ">compute</text>" ">reduction bucket 0</text>" \
            ">waiting for other ranks (reduction)</text>" ">backward</text>" \
            "(ms)</text>" 'fill="#e8141c"'; do
  grep -qF -- "$part" "$svg" || fail "the timeline lacks $part"
done
# At least one bar per span of the file (and the rows' backgrounds).
spans=$(grep -o '"ph":"X"' "$WORK/np2.json" | wc -l)
bars=$(grep -c '<rect' "$svg")
[ "$bars" -gt "$spans" ] || fail "$bars rectangles for $spans spans"

# Its errors: bad input is exit 3 naming the file; no -o is 2; an unwritable output is 8.
timeline_fails() {  # CODE TEXT ARGS...
  local code=$1 text=$2 rc=0; shift 2
  "$MPIDDP" timeline "$@" 2> "$WORK/err" || rc=$?
  [ "$rc" -eq "$code" ] && grep -qF -- "$text" "$WORK/err" \
    || { cat "$WORK/err"; fail "timeline $*: exit $rc, expected $code with '$text'"; }
}
echo 'not json {' > "$WORK/bad.json"
timeline_fails 3 "'$WORK/bad.json' is not JSON" "$WORK/bad.json" -o "$WORK/x.svg"
timeline_fails 3 "'$SOURCE_DIR/configs/default.json' is not a Chrome trace" \
  "$SOURCE_DIR/configs/default.json" -o "$WORK/x.svg"
timeline_fails 3 "cannot open '$WORK/missing.json'" "$WORK/missing.json" -o "$WORK/x.svg"
timeline_fails 2 "give the output file" "$WORK/np2.json"
timeline_fails 8 "cannot create" "$WORK/np2.json" -o "$WORK/no/such/dir/x.svg"
echo "cli trace: np=1,2,3 traces check out against their logs; timeline drawn; errors named"
