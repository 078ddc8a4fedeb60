#!/usr/bin/env bash
# reduce.shard "gradients" (ZeRO-2) from the command line, on a GPT whose head is tied to its
# token table (the table's unit pinned: Note [gradients staged by unit]), with AdamW, decay
# groups and clipping (the norm from the parts): at np 1, 2, 3 and 4 on one node, and as 2
# nodes of 2 and 4 nodes of 1, the run writes the unsharded run's step and epoch records and
# final parameters bit for bit; with ema, checkpoints and weights too (the checkpoints byte for
# byte); without the overlap too; a ZeRO-2 checkpoint resumes unsharded at another world size
# as the unsharded run's checkpoint does; with accumulate_steps 2 in float64 it agrees with the
# unsharded run to float64's rounding (each micro-batch is summed over the ranks before the
# micro-batches are added); the run record says "gradients" and what a rank holds; the
# combinations it cannot serve exit 2 naming the key.
source "$(dirname "$0")/lib.sh"

tied_gpt "$WORK"
BASE=(--quiet "$WORK/gpt.json")
SHARD=(--set reduce.shard='"gradients"')

# same_run A B WHAT: A.jsonl and B.jsonl hold the same 18 step records (9 steps an epoch), the
# same epoch records and the same final parameters.
same_run() { expect_same_records "$1.jsonl" "$2.jsonl" 18 "$3"; }

for np in 1 2 3 4; do
  d="$WORK/np$np"
  run_np "$np" train "${BASE[@]}" --log "$d.whole.jsonl"
  run_np "$np" train "${BASE[@]}" "${SHARD[@]}" --log "$d.sharded.jsonl"
  same_run "$d.whole" "$d.sharded" "np=$np"
done
run=$(grep '"kind":"run"' "$WORK/np2.sharded.jsonl")
echo "$run" | grep -q '"reduce_shard":"gradients"' || fail "run record: reduce_shard"
echo "$run" | grep -q '"reduce_shard_across":"world"' || fail "run record: reduce_shard_across"
# P = 8,192 (the table) + 512 (positions) + 4,288 (block 1: 64 + 32·96 + 96 + 32·32 + 32)
#   + 4,256 (block 2: 64 + 32·64 + 64 + 64·32 + 32) + 64 (the last norm) = 17,312. Backward meets
# the norm (slot 0), block 2 (slot 1), block 1 (slot 0), the positions (slot 1): the slots hold
# 4,288 and 4,256; the table is pinned; each rank's part is 8,656.
echo "$run" | grep -q '"gradient_staging":{"units":5,"slot_values":\[4288,4256\],"pinned_values":8192,"part_values":8656}' ||
  { echo "$run" | grep -o '"gradient_staging":{[^}]*}'; fail "run record: gradient_staging"; }
# What a rank holds of the gradients: the part and the staging with the loss and stop slots,
# (8,656 + 16,738) · 4 bytes = 0.0969 MiB (on one node the sums need no buffer of their own).
# More than the unsharded (17,314 · 4 bytes) on this toy, whose table is half of it and each
# block a quarter; on a model of many blocks the part dominates (docs/benchmarks.md).
echo "$run" | grep -qE '"gradients":0\.096870[0-9]*,' || { echo "$run" | grep -o '"memory":{[^}]*}[^}]*}'; fail "run record: memory of the gradients"; }

# The emulated nodes: across the world's parts, each node's ranks' units summed in its shared
# memory and then among the nodes.
for rpn in 2 1; do
  d="$WORK/nodes$rpn"
  MPIDDP_TEST_RANKS_PER_NODE=$rpn run_np 4 train "${BASE[@]}" --log "$d.whole.jsonl"
  MPIDDP_TEST_RANKS_PER_NODE=$rpn run_np 4 train "${BASE[@]}" "${SHARD[@]}" --log "$d.sharded.jsonl"
  same_run "$d.whole" "$d.sharded" "4 ranks as nodes of $rpn"
done

# ema, checkpoints and the weights; and a run without the overlap.
EXTRA=(--set ema.decay=0.9 --set checkpoint.every_steps=6 --set checkpoint.keep=0)
run_np 2 train "${BASE[@]}" "${EXTRA[@]}" --set checkpoint.dir="\"$WORK/ck.whole\"" \
  --set save_weights="\"$WORK/whole.safetensors\"" --log "$WORK/ema.whole.jsonl"
run_np 2 train "${BASE[@]}" "${SHARD[@]}" "${EXTRA[@]}" --set checkpoint.dir="\"$WORK/ck.sharded\"" \
  --set save_weights="\"$WORK/sharded.safetensors\"" --log "$WORK/ema.sharded.jsonl"
same_run "$WORK/ema.whole" "$WORK/ema.sharded" "ema"
for f in "$WORK"/ck.whole/step-*.safetensors; do
  cmp -s "$f" "$WORK/ck.sharded/$(basename "$f")" || fail "ema: checkpoint $(basename "$f") differs"
done
cmp -s <(tensor_bytes "$WORK/whole.safetensors") <(tensor_bytes "$WORK/sharded.safetensors") || fail "ema: the weights differ"
run_np 2 train "${BASE[@]}" "${SHARD[@]}" --set reduce.overlap=false --log "$WORK/blocking.jsonl"
same_run "$WORK/np2.whole" "$WORK/blocking" "reduce.overlap false"

# A ZeRO-2 checkpoint of step 6 resumed unsharded at np 3, as the unsharded one is.
ck=step-000000000006.safetensors
run_np 3 train "${BASE[@]}" "${EXTRA[@]}" --resume "$WORK/ck.sharded/$ck" --log "$WORK/from_sharded.jsonl" \
  --set checkpoint.dir="\"$WORK/ck.from_sharded\""
run_np 3 train "${BASE[@]}" "${EXTRA[@]}" --resume "$WORK/ck.whole/$ck" --log "$WORK/from_whole.jsonl" \
  --set checkpoint.dir="\"$WORK/ck.from_whole\""
expect_same_records "$WORK/from_whole.jsonl" "$WORK/from_sharded.jsonl" 12 "resumed from the two checkpoints"

# Micro-batches in float64: within float64's rounding of the unsharded run.
F64=(--set dtype='"float64"' --set accumulate_steps=2)
run_np 2 train "${BASE[@]}" "${F64[@]}" --log "$WORK/acc.whole.jsonl"
run_np 2 train "${BASE[@]}" "${SHARD[@]}" "${F64[@]}" --log "$WORK/acc.sharded.jsonl"
"$MPIDDP" compare "$WORK/acc.whole.jsonl" "$WORK/acc.sharded.jsonl" --rtol 1e-12 --atol 1e-12 > "$WORK/compare.txt" ||
  { cat "$WORK/compare.txt"; fail "accumulate_steps 2 in float64: not within 1e-12"; }

# What it cannot serve: exit 2 naming the key.
expect_refusal() {
  local key=$1; shift
  local rc=0
  "$@" > /dev/null 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] || { cat "$WORK/err"; fail "$key: exit code $rc, expected 2"; }
  grep -qF "config: $key:" "$WORK/err" || { cat "$WORK/err"; fail "$*: the refusal does not name $key"; }
}
expect_refusal reduce.algorithm run_np 2 train "${BASE[@]}" "${SHARD[@]}" --set reduce.algorithm='"mpi"'
expect_refusal reduce.shard run_np 2 train "${BASE[@]}" "${SHARD[@]}" --set sync=false
expect_refusal debug.fail_kind run_np 2 train "${BASE[@]}" "${SHARD[@]}" --set debug.fail_kind='"nan"' \
  --set debug.fail_rank=0 --set debug.fail_step=2
MPIDDP_TEST_RANKS_PER_NODE=1 expect_refusal reduce.compress run_np 2 train "${BASE[@]}" "${SHARD[@]}" \
  --set reduce.compress='"bf16"'
echo "PASS"
