#!/usr/bin/env bash
# reduce.compress "bf16" end to end (docs/compression.md): at 2 emulated nodes x 2 ranks
# the run record says bf16, replicas stay identical and the losses drift a little from the
# uncompressed run, never more than a bf16 rounding's worth; on one node it changes nothing
# (bitwise) and says so; bad values and float64 models exit 2 naming the key.
source "$(dirname "$0")/lib.sh"

# The launcher passes its environment on to ranks on the same machine.
two_nodes() { MPIDDP_TEST_RANKS_PER_NODE=2 run_np 4 "$@"; }

for c in none bf16; do
  two_nodes train --quiet --set reduce.compress=$c --log "$WORK/$c.jsonl" 2> "$WORK/$c.err" \
    || { cat "$WORK/$c.err"; fail "2 nodes x 2, compress $c"; }
done
grep -q '"reduce_compress":"bf16"' "$WORK/bf16.jsonl" || fail "the run record does not say bf16"
grep -q '"reduce_compress":"none"' "$WORK/none.jsonl" || fail "the run record does not say none"
for c in none bf16; do
  grep -q '"replicas_identical":true' "$WORK/$c.jsonl" || fail "$c: replicas differ"
done
epoch_field eval_loss "$WORK/none.jsonl" > "$WORK/none.loss"
epoch_field eval_loss "$WORK/bf16.jsonl" > "$WORK/bf16.loss"
# Not bit-equivalent (the losses differ) but close (relative 1e-2, against ~1e-4 measured).
cmp -s "$WORK/none.loss" "$WORK/bf16.loss" && fail "bf16 gave the uncompressed losses bit for bit"
expect_close "$WORK/bf16.loss" "$WORK/none.loss" 1e-2 || fail "bf16 drifted too far"

# One node: nothing crosses between nodes; the run is the uncompressed one, and says so.
run_np 2 train --quiet --set reduce.compress=bf16 --log "$WORK/one.jsonl" 2> "$WORK/one.err" \
  || { cat "$WORK/one.err"; fail "one node, bf16"; }
grep -q 'reduce.compress "bf16" changes nothing here: one node' "$WORK/one.err" || fail "no note on stderr"
grep -q '"reduce_compress_note":"one node' "$WORK/one.jsonl" || fail "no note in the run record"
run_np 2 train --quiet --log "$WORK/one_none.jsonl"
[ "$(epoch_field eval_loss "$WORK/one.jsonl")" = "$(epoch_field eval_loss "$WORK/one_none.jsonl")" ] \
  || fail "on one node bf16 changed the losses"

for args in "--set reduce.compress=fp16" "--set reduce.compress=bf16 --set dtype=float64"; do
  rc=0
  # shellcheck disable=SC2086  # args is a list
  timeout 60 "$MPIDDP" train --quiet $args > /dev/null 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] || { cat "$WORK/err"; fail "'$args': exit $rc, expected 2"; }
  grep -qF "reduce.compress" "$WORK/err" || { cat "$WORK/err"; fail "'$args' does not name the key"; }
done
echo "compress: ok"
