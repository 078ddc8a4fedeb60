#!/usr/bin/env bash
# Deterministic mode's chunked pass (docs/design.md, "The chunked pass"): a relu MLP with
# dropout, whose layers all support it, passes a rank's chunks through the model at once.
# Byte-identical records (times aside) and checksums at np 1, 2, 3, 4, 6 and 8, on the mpi,
# shm and two-level paths, with reduce.overlap on and off, accumulate_steps, 2 threads per
# rank, float64, an epoch whose last step has chunks too small for the chunked pass (that
# step goes chunk by chunk, at every np alike), and --resume at other world sizes from a
# mid-epoch checkpoint.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/deterministic_lib.sh"
# The model: tests/golden/deterministic_chunked.json (seed 3, 20 -> 32 -> 16 -> 5 with relu and
# dropout 0.2, 480 synthetic samples, batch 96, SGD with momentum, 2 epochs, 24 chunks), whose
# portable bits the golden file holds too.
MLP=("$SOURCE_DIR/tests/golden/deterministic_chunked.json")

det_run np1 1 "${MLP[@]}" --set checkpoint.dir="$WORK/ckpt1" --set checkpoint.every_steps=1 \
  --set checkpoint.keep=0
grep -q '"deterministic":{"chunks":24,"pass":"chunked","product_columns":[0-9]*,"weight_gradients":"[a-z_]*","widths":{"forward":[0-9]*,"input_gradient":[0-9]*}}' "$WORK/np1.jsonl" ||
  fail "np1: the run record does not say the chunked pass"
# The weight gradients by the grid product in float32, at every instruction-set level (Note
# [the grid product]); float64 by the library.
grep -q '"weight_gradients":"grid_product"' "$WORK/np1.jsonl" || fail "np1: float32 weight gradients not by the grid product"
echo "  np1: $(grep -o '"weight_gradients":"[a-z_]*"' "$WORK/np1.jsonl")"
det_run f64_np1 1 "${MLP[@]}" --set dtype=float64
grep -q '"weight_gradients":"library"' "$WORK/f64_np1.jsonl" || fail "float64: weight gradients not by the library"
grep -q '"eval_accuracy":' "$WORK/np1.jsonl" || fail "np1: no eval_accuracy"
[ "$(grep -c '"kind":"step"' "$WORK/np1.jsonl")" -eq 10 ] || fail "np1: expected 10 step records"
same_bits_everywhere "${MLP[@]}"
# 528 samples: five steps of 96, then one of 48, whose chunks of 2 samples go chunk by chunk.
SHORT=("${MLP[@]}" --set data.train.samples=528)
det_run short_np1 1 "${SHORT[@]}"
[ "$(grep -c '"kind":"step"' "$WORK/short_np1.jsonl")" -eq 12 ] || fail "short_np1: expected 12 step records"
for np in 3 8; do
  det_run "short_np$np" "$np" "${SHORT[@]}"
  same_bits short_np1 "short_np$np"
done
# Chunks of 2 samples throughout: chunk by chunk, other bits than the chunked pass's.
det_run by_chunk_np1 1 "${MLP[@]}" --set deterministic.chunks=48
grep -q '"pass":"chunk_by_chunk"' "$WORK/by_chunk_np1.jsonl" || fail "48 chunks of 2: not chunk by chunk"

# --resume at other world sizes from np=1's checkpoint after step 2, in the middle of epoch 1
# (5 steps per epoch): the rest of the run is byte-identical to the straight one.
for np in 4 6; do
  det_run "resumed_np$np" "$np" "${MLP[@]}" --resume "$WORK/ckpt1/step-000000000002.safetensors"
  grep -q '"resumed_from":{[^}]*"epoch":1,"batch":2,"step":2}' "$WORK/resumed_np$np.jsonl" ||
    fail "resumed_np$np: not resumed mid-epoch from step 2"
  cmp -s <(results "$WORK/np1.jsonl" | grep -v -E '"step":(1|2),') <(results "$WORK/resumed_np$np.jsonl") ||
    { diff <(results "$WORK/np1.jsonl" | grep -v -E '"step":(1|2),') <(results "$WORK/resumed_np$np.jsonl") | head -6;
      fail "resumed at np=$np: not bitwise identical to the straight np=1 run"; }
  echo "  resumed_np$np: bitwise identical to np1 after step 2"
done
echo "deterministic chunked pass: np 1 2 3 4 6 8, the paths, a short step and resume: bitwise identical"
