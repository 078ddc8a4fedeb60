#!/usr/bin/env bash
# Deterministic mode under every reduce.shard mode ("optimizer", "gradients", "parameters"): the
# same bits as one unsharded process at np 1, 2, 3, 4, 6 and 8, on one node, on emulated nodes
# of 2 (the world's parts exchanged through a node's shared copy of the parameters, for the
# gradient in parts; the node's parts for the optimizer's) and of 1 (the leaders' parts); in
# both of its passes (chunk by chunk: an MLP with AdamW, decay, clipping and ema; the chunked
# pass: tests/golden/deterministic_chunked.json, whose 50 evaluation blocks some ranks lack in
# the last round); on a CNN with BatchNorm (its buffers averaged exactly) and a residual; on a
# model of 33 parameters at np 8 (five ranks with empty parts); on a GPT whose head is tied to
# its token table (its table's unit pinned under "parameters"); and through checkpoints in
# parts written at np 3 and resumed at other world sizes and modes (Note [the exact mean in
# parts], Note [the deterministic pass gathering units]). The run record says which step ran:
# part_values, the values of rank 0's part of the mean.
source "$(dirname "$0")/lib.sh"

det_records() { timeless_records "$1" 'step|epoch|end'; }
# same_bits BASELINE RUN WHAT: the same step, epoch and end records, times aside.
same_bits() {
  cmp -s <(det_records "$1") <(det_records "$2") || { diff <(det_records "$1") <(det_records "$2") | head -4; fail "$3: not np 1's unsharded bits"; }
}
# every_layout BASELINE NAME MODE ARGS...: under reduce.shard MODE at np 1, 2, 3, 4, 6 and 8 on
# one node, and at np 4 as nodes of 2 and of 1, BASELINE's bits; logs $WORK/NAME_MODE<layout>.jsonl.
every_layout() {
  local baseline=$1 name=$2 mode=$3; shift 3
  local np rpn
  for np in 1 2 3 4 6 8; do
    run_np "$np" train "$@" --set reduce.shard="\"$mode\"" --log "$WORK/${name}_$mode$np.jsonl"
    same_bits "$baseline" "$WORK/${name}_$mode$np.jsonl" "$name, $mode at np $np"
  done
  for rpn in 2 1; do
    MPIDDP_TEST_RANKS_PER_NODE=$rpn run_np 4 train "$@" --set reduce.shard="\"$mode\"" \
      --log "$WORK/${name}_${mode}_nodes$rpn.jsonl"
    same_bits "$baseline" "$WORK/${name}_${mode}_nodes$rpn.jsonl" "$name, $mode on nodes of $rpn"
  done
}

# Chunk by chunk.
DET=(--quiet --deterministic --set batch.global=48 --set data.train.samples=240 --set epochs=2 --set ema.decay=0.9
     --set 'optimizer={"type":"adamw","lr":0.01,"weight_decay":0.1,"clip_grad_norm":0.5}')
run_np 1 train "${DET[@]}" --log "$WORK/det.jsonl"
grep -q '"pass":"chunk_by_chunk"' "$WORK/det.jsonl" || fail "the MLP: not chunk by chunk"
for mode in optimizer gradients parameters; do every_layout "$WORK/det.jsonl" det "$mode" "${DET[@]}"; done
grep -q '"reduce_shard_across":"node"' "$WORK/det_optimizer_nodes2.jsonl" || fail "optimizer on nodes of 2: not the node's parts"
grep -q '"reduce_shard_across":"world"' "$WORK/det_optimizer_nodes1.jsonl" || fail "optimizer on nodes of 1: not the leaders' parts"
for mode in gradients parameters; do
  for rpn in 2 1; do
    grep -q '"reduce_shard_across":"world"' "$WORK/det_${mode}_nodes$rpn.jsonl" || fail "$mode on nodes of $rpn: not the world's parts"
  done
done
grep -q '"parameter_staging":{"unit":"block","units":' "$WORK/det_parameters2.jsonl" || fail "parameters: no parameter_staging"
# Rank 0's part of the mean: all P at np 1, less at np 2; no ZeRO-2 staging.
P=$(grep -o '"parameters":[0-9]*' "$WORK/det.jsonl" | head -1 | cut -d: -f2)
for mode in gradients parameters; do
  grep -q "\"part_values\":$P}" "$WORK/det_${mode}1.jsonl" || fail "$mode at np 1: part_values is not P = $P"
  part=$(grep -o '"part_values":[0-9]*}' "$WORK/det_${mode}2.jsonl" | head -1 | tr -dc 0-9)
  [ -n "$part" ] && [ "$part" -lt "$P" ] || fail "$mode at np 2: part_values '$part' is not below P = $P"
  ! grep -q '"gradient_staging"' "$WORK/det_${mode}2.jsonl" || fail "$mode: deterministic mode stages no gradients"
done
! grep -q '"part_values"' "$WORK/det_optimizer2.jsonl" || fail "optimizer: the whole mean is every rank's"

# BatchNorm in a residual (chunk by chunk, its running statistics averaged exactly), and 33
# parameters at np 8: parts of whole cache lines, [0, 16), [16, 32), [32, 33), then five empty.
run_np 1 train --quiet "$SOURCE_DIR/tests/golden/deterministic_cnn.json" --log "$WORK/cnn.jsonl"
TINY=(--quiet --deterministic --set batch.global=48 --set data.train.samples=240
      --set 'model.layers=[{"type":"linear","out":4},{"type":"tanh"},{"type":"linear","out":1}]')
run_np 1 train "${TINY[@]}" --log "$WORK/tiny.jsonl"
for mode in gradients parameters; do
  for np in 2 3; do
    run_np "$np" train --quiet "$SOURCE_DIR/tests/golden/deterministic_cnn.json" --set reduce.shard="\"$mode\"" \
      --log "$WORK/cnn_$mode$np.jsonl"
    same_bits "$WORK/cnn.jsonl" "$WORK/cnn_$mode$np.jsonl" "the CNN, $mode at np $np"
  done
  run_np 8 train "${TINY[@]}" --set reduce.shard="\"$mode\"" --log "$WORK/tiny_$mode.jsonl"
  same_bits "$WORK/tiny.jsonl" "$WORK/tiny_$mode.jsonl" "33 parameters, $mode at np 8"
done

# The chunked pass: its int64 sums summed whole, each rank converting its part alone; under
# "parameters" the units gathered once per pass over a rank's chunks side by side.
CHUNKED=(--quiet "$SOURCE_DIR/tests/golden/deterministic_chunked.json" --deterministic --set ema.decay=0.9
         --set 'optimizer={"type":"adamw","lr":0.01,"weight_decay":0.1,"clip_grad_norm":0.5}')
run_np 1 train "${CHUNKED[@]}" --log "$WORK/chunked.jsonl"
grep -q '"pass":"chunked"' "$WORK/chunked.jsonl" || fail "deterministic_chunked.json: not the chunked pass"
for mode in gradients parameters; do
  every_layout "$WORK/chunked.jsonl" chunked "$mode" "${CHUNKED[@]}"
  MPIDDP_TEST_RANKS_PER_NODE=1 run_np 4 train "${CHUNKED[@]}" --set reduce.shard="\"$mode\"" \
    --set reduce.algorithm='"mpi"' --log "$WORK/chunked_${mode}_mpi.jsonl"
  same_bits "$WORK/chunked.jsonl" "$WORK/chunked_${mode}_mpi.jsonl" "the chunked pass, $mode on the mpi path"
done

# The tied GPT (its head's gradient added into the table's): 6 chunks divide its 402 windows.
tied_gpt "$WORK"
GPT=(--quiet "$WORK/gpt.json" --deterministic --set deterministic.chunks=6)
run_np 1 train "${GPT[@]}" --log "$WORK/gpt.jsonl"
for mode in optimizer gradients parameters; do
  for np in 2 3; do
    run_np "$np" train "${GPT[@]}" --set reduce.shard="\"$mode\"" --log "$WORK/gpt_$mode$np.jsonl"
    same_bits "$WORK/gpt.jsonl" "$WORK/gpt_$mode$np.jsonl" "deterministic GPT, $mode at np $np"
  done
done

# Written in parts at np 3, resumed at other world sizes and modes: the uninterrupted run's bits.
CK=(--set checkpoint.every_steps=6 --set checkpoint.keep=0 --set checkpoint.format='"parts"' --set epochs=1)
for written in gradients parameters; do
  run_np 3 train "${GPT[@]}" --set reduce.shard="\"$written\"" "${CK[@]}" --set checkpoint.dir="\"$WORK/ck_$written\"" \
    --log "$WORK/gpt_ck_$written.jsonl"
  ck="$WORK/ck_$written/step-000000000006.parts"
  [ -f "$ck/index.json" ] || fail "$written: no checkpoint in parts at step 6"
  for resumed in "2 parameters" "2 gradients" "1 none"; do
    set -- $resumed
    run_np "$1" train "${GPT[@]}" --set reduce.shard="\"$2\"" --resume "$ck" --log "$WORK/gpt_resumed_$written$1$2.jsonl"
    [ "$(checksum_of "$WORK/gpt_resumed_$written$1$2.jsonl")" = "$(checksum_of "$WORK/gpt.jsonl")" ] ||
      fail "written at np 3 ($written), resumed at np $1 ($2): not np 1's bits"
  done
done
echo "deterministic mode under reduce.shard: np 1's unsharded bits everywhere"
