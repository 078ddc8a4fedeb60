#!/usr/bin/env bash
# mpiddp compare on real logs: exit 0 within tolerance, 1 outside, 2 when the logs cannot
# be compared (and which config keys differ); --json for scripts. No launcher needed.
source "$(dirname "$0")/lib.sh"

# expect CODE CMD...: runs CMD, keeps stdout in $WORK/out and stderr in $WORK/err.
expect() {
  local want=$1; shift
  local got=0
  "$@" > "$WORK/out" 2> "$WORK/err" || got=$?
  [ "$got" -eq "$want" ] || { cat "$WORK/out" "$WORK/err" >&2; fail "exit $got, expected $want: $*"; }
}
has() { grep -qF -- "$2" "$WORK/$1" || { cat "$WORK/$1" >&2; fail "$1 lacks: $2"; }; }

run_np 1 train --quiet --log "$WORK/np1.jsonl"
run_np 2 train --quiet --log "$WORK/np2.jsonl"
grep -q '"launcher":"mpirun","hosts":\["[^"]*","[^"]*"\]' "$WORK/np2.jsonl" || fail "run record lacks launcher/hosts"

# The same config at np=1 and np=2: within the float32 defaults. world_size and log.path differ.
expect 0 "$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/np2.jsonl"
has out "tolerance: |run - baseline| <= 1e-07 + 0.0001 * |baseline|"
has out "replicas_identical: baseline true, run true"
has out "PASS: all 20 compared values"  # 4 eval_loss + 16 step losses
[ "$(grep -cE '^ +[1-4] +-  eval_loss ' "$WORK/out")" -eq 4 ] || fail "expected 4 eval_loss rows"
expect 0 "$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/np2.jsonl" --metric loss
[ "$(grep -cE '^ +[1-4] +[0-9]+  loss  ' "$WORK/out")" -eq 16 ] || fail "--metric loss: expected 16 step rows"

# Epoch 1's eval_loss made 10x larger: outside tolerance (exit 1) unless the tolerance allows it.
sed -E '0,/"kind":"epoch"/ s/("kind":"epoch","epoch":1,"eval_loss":)([-0-9.eE+]+)/\1\2e1/' \
  "$WORK/np2.jsonl" > "$WORK/off.jsonl"
cmp -s "$WORK/np2.jsonl" "$WORK/off.jsonl" && fail "the edit did not change the log"
expect 1 "$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/off.jsonl"
has out "FAIL: 1 of 20 compared values are outside tolerance (largest: eval_loss at epoch 1"
has out "OUTSIDE"
expect 0 "$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/off.jsonl" --rtol 10 --atol 0
expect 0 "$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/off.jsonl" --metric loss

# --json: one object on one line, for scripts.
expect 1 "$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/off.jsonl" --json
[ "$(wc -l < "$WORK/out")" -eq 1 ] || fail "--json: expected one line"
has out '{"verdict":"fail","exit_code":1,'
has out '"eval_loss":{"compared":4,"outside":1,'
if [ -x /usr/bin/python3 ]; then  # a real JSON parser, when there is one
  /usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["metrics"]["loss"]["compared"] == 16, j' "$WORK/out" \
    || fail "--json output does not parse"
fi

# Logs that cannot be compared: exit 2, and why.
expect 2 "$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/missing.jsonl"
has err "cannot open the run log '$WORK/missing.jsonl'"
expect 2 "$MPIDDP" compare "$SOURCE_DIR/configs/default.json" "$WORK/np2.jsonl"
has err "not an mpiddp run log"
grep -v '"kind":"epoch","epoch":4,' "$WORK/np2.jsonl" > "$WORK/short.jsonl"
expect 2 "$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/short.jsonl"
has err "different number of epochs: the baseline has 4, the run 3"
run_np 2 train --quiet --set optimizer.lr=0.05 --set sampler.shuffle=false --log "$WORK/lr.jsonl"
expect 2 "$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/lr.jsonl" --json
has err "optimizer.lr (0.03 vs 0.05), sampler.shuffle (true vs false)"
has out '"differing_keys":["optimizer.lr","sampler.shuffle"]'
has out '"verdict":"incomparable","exit_code":2'

# A bad command line is exit 2 too.
expect 2 "$MPIDDP" compare "$WORK/np1.jsonl"
has err "expected two logs"
expect 2 "$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/np2.jsonl" --metric accuracy
has err "unknown metric 'accuracy'"
expect 2 "$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/np2.jsonl" --rtol -1
echo "cli compare: exit codes 0/1/2, table, --json and differing keys as expected"
