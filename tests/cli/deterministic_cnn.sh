#!/usr/bin/env bash
# Deterministic mode on a CNN with every kind of layer (conv2d, batchnorm2d, relu, residual,
# maxpool2d, avgpool2d, dropout, flatten, linear; tests/golden/deterministic_cnn.json):
# byte-identical records at np 1, 2, 3, 4, 6 and 8 across the paths, and after --resume at
# another world size from a mid-epoch checkpoint.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/deterministic_lib.sh"
CNN=("$SOURCE_DIR/tests/golden/deterministic_cnn.json")

det_run np1 1 "${CNN[@]}" --set checkpoint.dir="$WORK/ckpt1" --set checkpoint.every_steps=1 \
  --set checkpoint.keep=0
grep -q '"eval_accuracy":' "$WORK/np1.jsonl" || fail "np1: no eval_accuracy"
det_run np2 2 "${CNN[@]}" --set reduce.algorithm=mpi --set reduce.overlap=false
same_bits np1 np2
det_run np3 3 "${CNN[@]}" --set accumulate_steps=2 --set reduce.algorithm=shm
same_bits np1 np3
MPIDDP_TEST_RANKS_PER_NODE=2 det_run np4_two_nodes 4 "${CNN[@]}" --set reduce.algorithm=shm
same_bits np1 np4_two_nodes
det_run np6 6 "${CNN[@]}" --set reduce.algorithm=mpi
same_bits np1 np6
det_run np8 8 "${CNN[@]}" --set reduce.overlap=false
same_bits np1 np8

# --resume at other world sizes from np=1's checkpoint after step 1, in the middle of
# epoch 1 (2 steps per epoch): the rest of the run is byte-identical to the straight one.
for np in 3 4; do
  det_run "resumed_np$np" "$np" "${CNN[@]}" --resume "$WORK/ckpt1/step-000000000001.safetensors"
  grep -q '"resumed_from":{[^}]*"epoch":1,"batch":1,"step":1}' "$WORK/resumed_np$np.jsonl" ||
    fail "resumed_np$np: not resumed mid-epoch from step 1"
  cmp -s <(results "$WORK/np1.jsonl" | grep -v '"step":1,') <(results "$WORK/resumed_np$np.jsonl") ||
    { diff <(results "$WORK/np1.jsonl" | grep -v '"step":1,') <(results "$WORK/resumed_np$np.jsonl") | head -6;
      fail "resumed at np=$np: not bitwise identical to the straight np=1 run"; }
  echo "  resumed_np$np: bitwise identical to np1 after step 1"
done
echo "deterministic cnn: np 1 2 3 4 6 8 and mid-epoch resume at np 3 and 4: bitwise identical"
