#!/usr/bin/env bash
# The progress line: on rank 0's stderr only, never in the log or on stdout; --quiet turns
# it off. MPIDDP_PROGRESS=terminal stands in for a terminal (launch/mpirun.sh sets it when
# its stderr is one), which always ends with a final line.
source "$(dirname "$0")/lib.sh"

MPIDDP_PROGRESS=terminal run_np 2 train --log "$WORK/np2.jsonl" > "$WORK/out" 2> "$WORK/err"
# 4 epochs x 4 steps; the final line: step 16/16 and no time left.
grep -qF $'\r\033[Kepoch 4/4  step 16/16  ' "$WORK/err" || { cat -A "$WORK/err" >&2; fail "no final progress line"; }
grep -qE 'ETA 0:00$' "$WORK/err" || fail "final line has no ETA 0:00"
[ "$(grep -c 'step 16/16' "$WORK/err")" -eq 1 ] || fail "progress from more than rank 0"
grep -q 'ETA\|samples/s  loss' "$WORK/np2.jsonl" && fail "progress went into the log"
grep -q 'ETA' "$WORK/out" && fail "progress went to stdout"

MPIDDP_PROGRESS=terminal run_np 2 train --quiet > "$WORK/out" 2> "$WORK/err"
grep -q 'ETA' "$WORK/err" && fail "--quiet still shows progress"
# Not a terminal and shorter than 10 s: no plain line at all.
run_np 1 train > "$WORK/out" 2> "$WORK/err"
grep -q 'progress:' "$WORK/err" && fail "a plain progress line in a 4-step run"
echo "cli progress: rank 0 stderr only, not in the log, off with --quiet"
