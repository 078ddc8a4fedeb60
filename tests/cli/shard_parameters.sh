#!/usr/bin/env bash
# reduce.shard "parameters" (ZeRO-3) from the command line, on a GPT whose head is tied to its
# token table (the table's unit pinned, gathered once a step: Note [parameters gathered by
# unit]), with AdamW, decay groups and clipping (the norm from the parts), and an evaluation
# set whose last round leaves some ranks without a batch (they gather every unit all the same):
# at np 1, 2, 3 and 4 on one node, and as 2 nodes of 2 and 4 nodes of 1, the run writes the
# unsharded run's step, epoch and evaluation records and final parameters bit for bit; without
# the overlap too; its checkpoints in parts export to the unsharded run's weights and resume at
# other world sizes, sharded or not, as the unsharded run's do, and the unsharded run's resume
# sharded; with accumulate_steps 2 in
# float64 it agrees with the unsharded run to float64's rounding; with ema the averages'
# evaluations are the unsharded run's too, also where ranks hold empty parts; the run record says
# "parameters" and what a rank holds; the combinations it cannot serve exit 2 naming the key.
source "$(dirname "$0")/lib.sh"

tied_gpt "$WORK"
# 792 bytes of the text: 49 windows of 16. At np 4 (12 a rank, 48 a round) the second round
# has one window, rank 0's: ranks 1 to 3 gather without a batch.
EVAL=(--set data.eval="{\"source\": \"text\", \"path\": \"$WORK/text.txt\", \"encoding\": \"bytes\", \"block\": 16, \"range\": [0.89, 1]}")
BASE=(--quiet "$WORK/gpt.json" "${EVAL[@]}")
SHARD=(--set reduce.shard='"parameters"')

# same_run A B WHAT: A.jsonl and B.jsonl hold the same 18 step records (9 steps an epoch), the
# same epoch and evaluation records (an evaluation in each) and the same final parameters.
same_run() {
  expect_same_records "$1.jsonl" "$2.jsonl" 18 "$3" 'step|epoch|eval'
  grep -q '"eval_loss":' "$1.jsonl.records" || fail "$3: no evaluation"
}

for np in 1 2 3 4; do
  d="$WORK/np$np"
  run_np "$np" train "${BASE[@]}" --log "$d.whole.jsonl"
  run_np "$np" train "${BASE[@]}" "${SHARD[@]}" --log "$d.sharded.jsonl"
  same_run "$d.whole" "$d.sharded" "np=$np"
done
run=$(grep '"kind":"run"' "$WORK/np2.sharded.jsonl")
echo "$run" | grep -q '"reduce_shard":"parameters"' || fail "run record: reduce_shard"
echo "$run" | grep -q '"reduce_shard_across":"world"' || fail "run record: reduce_shard_across"
# The units and slots are ZeRO-2's (shard_gradients.sh works them out): P = 17,312; the slots
# hold 4,288 and 4,256 values, the table (8,192) is pinned; each rank's part is 8,656.
echo "$run" | grep -q '"parameter_staging":{"unit":"block","units":5,"slot_values":\[4288,4256\],"pinned_values":8192,"part_values":8656}' ||
  { echo "$run" | grep -o '"parameter_staging":{[^}]*}'; fail "run record: parameter_staging"; }
# What a rank holds of the parameters: its part and the staging, (8,656 + 16,736) · 4 bytes =
# 0.09686 MiB, in place of 17,312 · 4 (more on this toy, whose table is half of it; on a model
# of many blocks the part dominates: docs/benchmarks.md).
echo "$run" | grep -qE '"parameters":0\.096862[0-9]*,' || { echo "$run" | grep -o '"memory":{[^}]*}[^}]*}'; fail "run record: memory of the parameters"; }

# The emulated nodes: the gathers among the world's parts, across and within the nodes.
for rpn in 2 1; do
  d="$WORK/nodes$rpn"
  MPIDDP_TEST_RANKS_PER_NODE=$rpn run_np 4 train "${BASE[@]}" --log "$d.whole.jsonl"
  MPIDDP_TEST_RANKS_PER_NODE=$rpn run_np 4 train "${BASE[@]}" "${SHARD[@]}" --log "$d.sharded.jsonl"
  same_run "$d.whole" "$d.sharded" "4 ranks as nodes of $rpn"
done
run_np 2 train "${BASE[@]}" "${SHARD[@]}" --set reduce.overlap=false --log "$WORK/blocking.jsonl"
same_run "$WORK/np2.whole" "$WORK/blocking" "reduce.overlap false"
# ema: the average evaluated in the parts' place, and the parameters back bit for bit.
run_np 3 train "${BASE[@]}" --set ema.decay=0.9 --log "$WORK/ema.whole.jsonl"
run_np 3 train "${BASE[@]}" "${SHARD[@]}" --set ema.decay=0.9 --log "$WORK/ema.sharded.jsonl"
same_run "$WORK/ema.whole" "$WORK/ema.sharded" "ema"
grep -q '"eval_loss_ema":' "$WORK/ema.sharded.jsonl.records" || fail "ema: no evaluation of the average"
# A model smaller than the ranks' cache lines (7 parameters, 16 floats a line): at np 4 ranks 1
# to 3 hold empty parts, and still take part in every gather and in ema's evaluations (a rank
# that skipped them would leave the others waiting: the timeout).
TINY=(--quiet --set model.layers='[{"type": "linear", "out": 1}]' --set ema.decay=0.9 --set epochs=2)
timeout 120 "$MPIEXEC" -n 4 $MPIEXEC_FLAGS "$MPIDDP" train "${TINY[@]}" --log "$WORK/tiny.whole.jsonl"
timeout 120 "$MPIEXEC" -n 4 $MPIEXEC_FLAGS "$MPIDDP" train "${TINY[@]}" "${SHARD[@]}" --log "$WORK/tiny.sharded.jsonl" ||
  fail "empty parts with ema: exit code $?"
expect_same_records "$WORK/tiny.whole.jsonl" "$WORK/tiny.sharded.jsonl" 8 "empty parts" 'step|epoch|eval'
grep -q '"eval_loss_ema":' "$WORK/tiny.sharded.jsonl.records" || fail "empty parts: no evaluation of the average"
# A checkpoint file written unsharded resumes at np 4 with empty parts: their ranks hold no
# optimizer buffers (ema's average, here), and the file's are still theirs to expect.
timeout 120 "$MPIEXEC" -n 2 $MPIEXEC_FLAGS "$MPIDDP" train "${TINY[@]}" --set checkpoint.every_steps=4 \
  --set checkpoint.dir="\"$WORK/ck.tiny\"" --log "$WORK/tiny.ck.jsonl"
for sharding in whole sharded; do
  extra=(); [ "$sharding" = sharded ] && extra=("${SHARD[@]}")
  timeout 120 "$MPIEXEC" -n 4 $MPIEXEC_FLAGS "$MPIDDP" train "${TINY[@]}" "${extra[@]}" \
    --resume "$WORK/ck.tiny/$(printf 'step-%012d.safetensors' 4)" --log "$WORK/tiny.resumed.$sharding.jsonl" ||
    fail "empty parts resumed from a file ($sharding): exit code $?"
done
expect_same_records "$WORK/tiny.resumed.whole.jsonl" "$WORK/tiny.resumed.sharded.jsonl" 4 \
  "empty parts resumed from a file" 'step|epoch|eval'

# Checkpoints in parts: each rank writes its own part of the parameters.
PARTS=(--set checkpoint.format='"parts"' --set checkpoint.every_steps=6 --set checkpoint.keep=0)
run_np 3 train "${BASE[@]}" "${PARTS[@]}" --set checkpoint.dir="\"$WORK/ck.whole\"" --log "$WORK/ck.whole.jsonl"
run_np 3 train "${BASE[@]}" "${SHARD[@]}" "${PARTS[@]}" --set checkpoint.dir="\"$WORK/ck.sharded\"" \
  --log "$WORK/ck.sharded.jsonl"
ck=step-000000000006.parts
[ "$(ls "$WORK/ck.sharded/$ck" | grep -c '^part-')" -eq 3 ] || fail "checkpoint: expected 3 part files"
for step in 6 12 18; do
  ck_step=$(printf 'step-%012d.parts' "$step")
  "$MPIDDP" export "$WORK/ck.whole/$ck_step" "$WORK/whole.$step.safetensors" > /dev/null
  "$MPIDDP" export "$WORK/ck.sharded/$ck_step" "$WORK/sharded.$step.safetensors" > /dev/null
  cmp -s <(tensor_bytes "$WORK/whole.$step.safetensors") <(tensor_bytes "$WORK/sharded.$step.safetensors") ||
    fail "checkpoint of step $step: the weights differ from the unsharded run's"
done
# Step 6's resumed at M ranks, sharded or not, runs as the unsharded checkpoint resumed at M
# unsharded; and an unsharded checkpoint resumes sharded.
for how in "3 sharded sharded" "1 sharded sharded" "2 sharded whole" "2 whole sharded"; do
  set -- $how
  extra=(); [ "$3" = sharded ] && extra=("${SHARD[@]}")
  [ -e "$WORK/from_whole.$1.jsonl" ] ||
    run_np "$1" train "${BASE[@]}" --resume "$WORK/ck.whole/$ck" --log "$WORK/from_whole.$1.jsonl"
  run_np "$1" train "${BASE[@]}" "${extra[@]}" --resume "$WORK/ck.$2/$ck" --log "$WORK/from.$how.jsonl"
  expect_same_records "$WORK/from_whole.$1.jsonl" "$WORK/from.$how.jsonl" 12 "resumed ($how)" 'step|epoch|eval'
done

# A whole model's files, read by each rank a slice at a time (mapped, never whole): a
# checkpoint file written unsharded resumes sharded at np 3 as it resumes unsharded, and the
# exported weights of step 6 start a sharded run as they start an unsharded one.
run_np 2 train "${BASE[@]}" --set checkpoint.every_steps=6 --set checkpoint.keep=0 \
  --set checkpoint.dir="\"$WORK/ck.file\"" --log "$WORK/ck.file.jsonl"
ck_file=$WORK/ck.file/$(printf 'step-%012d.safetensors' 6)
[ -f "$ck_file" ] || fail "no checkpoint file $ck_file"
for sharding in whole sharded; do
  extra=(); [ "$sharding" = sharded ] && extra=("${SHARD[@]}")
  run_np 3 train "${BASE[@]}" "${extra[@]}" --resume "$ck_file" --log "$WORK/file.$sharding.jsonl"
  run_np 3 train "${BASE[@]}" "${extra[@]}" --set init.weights="\"$WORK/whole.6.safetensors\"" \
    --log "$WORK/init.$sharding.jsonl"
done
expect_same_records "$WORK/file.whole.jsonl" "$WORK/file.sharded.jsonl" 12 "a checkpoint file resumed at np 3" \
  'step|epoch|eval'
same_run "$WORK/init.whole" "$WORK/init.sharded" "init.weights at np 3"

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
expect_refusal checkpoint.format run_np 2 train "${BASE[@]}" "${SHARD[@]}" --set checkpoint.dir="\"$WORK/ck.refused\""
expect_refusal save_weights run_np 2 train "${BASE[@]}" "${SHARD[@]}" --set save_weights="\"$WORK/w.safetensors\""
expect_refusal compute.precision run_np 2 train "${BASE[@]}" "${SHARD[@]}" --set compute.precision='"bf16_reference"'
expect_refusal reduce.algorithm run_np 2 train "${BASE[@]}" "${SHARD[@]}" --set reduce.algorithm='"mpi"'
expect_refusal debug.fail_kind run_np 2 train "${BASE[@]}" "${SHARD[@]}" --set debug.fail_kind='"nan"' \
  --set debug.fail_rank=0 --set debug.fail_step=2
[ ! -e "$WORK/ck.refused" ] && [ ! -e "$WORK/w.safetensors" ] || fail "a refused run wrote something"
echo "PASS"
