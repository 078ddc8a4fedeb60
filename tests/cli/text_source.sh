#!/usr/bin/env bash
# A character-level GPT on real text (the King James Bible from Debian's bible-kjv, written by
# scripts/get-kjv.sh), through the command line: token ids from the text source, an embedding,
# a position embedding, a pre-LayerNorm block (causal self-attention with dropout, then linear
# layers on every position with gelu's tanh form, each in a residual), a final layernorm and a
# head tied to the embedding that gives a class per position, trained by AdamW with nanoGPT's
# decay rule and clipping. np=2 reproduces np=1 (`mpiddp compare`), deterministic mode gives
# the same bits, the loss falls well below uniform guessing, `mpiddp generate` continues a
# prompt from the weights file, the checkpoint and an export alike, and bad input exits 2 or
# 3 with a message. Skipped (exit 77) without the bible-kjv package.
source "$(dirname "$0")/lib.sh"
kjv_text "$WORK/kjv.txt"
# The vocabulary: the file's distinct bytes (63 for Debian's text).
vocab=$(perl -0777 -ne 'my %seen = map { $_ => 1 } split //; print scalar keys %seen' "$WORK/kjv.txt")
[ "$vocab" -ge 30 ] || fail "the text has only $vocab distinct characters"

# 2 % of the text for training (about 2,600 windows of 32), the last 0.5 % for evaluation.
cat > "$WORK/chars.json" <<JSON
{"seed": 7,
 "model": {"layers": [{"type": "embedding", "vocab": $vocab, "dim": 32},
                      {"type": "position_embedding", "positions": 32},
                      {"type": "residual", "layers": [{"type": "layernorm"},
                                                      {"type": "attention", "heads": 4, "dropout": 0.1}]},
                      {"type": "residual", "layers": [{"type": "layernorm"}, {"type": "linear", "out": 128},
                                                      {"type": "gelu", "approximate": "tanh"},
                                                      {"type": "linear", "out": 32}]},
                      {"type": "layernorm"},
                      {"type": "linear", "out": $vocab, "bias": false, "tied_to": "0.weight"}]},
 "loss": "cross_entropy",
 "data": {"train": {"source": "text", "path": "$WORK/kjv.txt", "block": 32, "range": [0, 0.02]},
          "eval": {"source": "text", "path": "$WORK/kjv.txt", "block": 32, "range": [0.995, 1]}},
 "batch": {"global": 64}, "epochs": 1,
 "optimizer": {"type": "adamw", "lr": 0.01, "weight_decay": 0.1, "decay": "matrices", "clip_grad_norm": 1.0},
 "compute": {"gemm": "eigen"}}
JSON

run_np 1 train "$WORK/chars.json" --quiet --log "$WORK/chars1.jsonl"
run_np 2 train "$WORK/chars.json" --quiet --log "$WORK/chars2.jsonl" --save-weights "$WORK/chars.safetensors" \
  --set "checkpoint.dir=\"$WORK/ckpt\""
grep -q '"grad_norm":' "$WORK/chars2.jsonl" || fail "step records lack grad_norm with clipping on"
"$MPIDDP" compare "$WORK/chars1.jsonl" "$WORK/chars2.jsonl" > "$WORK/compare.txt" ||
  { cat "$WORK/compare.txt"; fail "np=2 differs from np=1"; }
loss=$(epoch_field eval_loss "$WORK/chars1.jsonl")
# Uniform guessing costs ln(vocab) (4.14 nats for 63 characters); a model of the previous
# character alone reaches about 2.5.
awk -v l="$loss" -v v="$vocab" 'BEGIN { exit !(l < log(v) - 1.0) }' ||
  fail "eval_loss $loss after one epoch: not below ln($vocab) - 1"
# Bits per byte: a character is a byte, so eval_bpb is eval_loss in bits, eval_loss / ln 2.
bpb=$(epoch_field eval_bpb "$WORK/chars1.jsonl")
awk -v l="$loss" -v b="$bpb" 'BEGIN { d = b - l / log(2); exit !(d < 1e-12 * b && -d < 1e-12 * b) }' ||
  fail "eval_bpb $bpb is not eval_loss $loss / ln 2"

# Generation: the same text for the same seed, from the weights file, the checkpoint directory
# and its export (which carry the config and the vocabulary), and from the weights with the
# config given; the prompt comes first, then --tokens characters.
generate() { "$MPIDDP" generate "$@" 2> "$WORK/gen.err" || { cat "$WORK/gen.err"; fail "generate $*"; }; }
generate "$WORK/chars.safetensors" --prompt "And God said" --tokens 80 --seed 5 --top-k 10 > "$WORK/gen1.txt"
[ "$(head -c 12 "$WORK/gen1.txt")" = "And God said" ] || fail "generate: the output does not start with the prompt"
[ "$(wc -c < "$WORK/gen1.txt")" -eq $((12 + 80 + 1)) ] || fail "generate: expected the prompt, 80 characters and a newline"
"$MPIDDP" export "$WORK/ckpt" "$WORK/exported.safetensors" > /dev/null
for source in "$WORK/chars.safetensors --config $WORK/chars.json" "$WORK/ckpt" "$WORK/exported.safetensors"; do
  generate $source --prompt "And God said" --tokens 80 --seed 5 --top-k 10 > "$WORK/gen2.txt"
  cmp -s "$WORK/gen1.txt" "$WORK/gen2.txt" || fail "generate from $source: another text for the same seed"
done
generate "$WORK/chars.safetensors" --prompt "And God said" --tokens 80 --seed 6 > "$WORK/gen3.txt"
cmp -s "$WORK/gen1.txt" "$WORK/gen3.txt" && fail "generate: seeds 5 and 6 gave the same text"
# expect_generate CODE TEXT ARGS...: `mpiddp generate` with ARGS exits CODE, stderr holds TEXT.
expect_generate() {
  local code=$1 text=$2 rc=0
  shift 2
  "$MPIDDP" generate "$@" > /dev/null 2> "$WORK/err" || rc=$?
  [ "$rc" -eq "$code" ] || { cat "$WORK/err"; fail "generate $*: exit code $rc, expected $code"; }
  grep -qF -- "$text" "$WORK/err" || { cat "$WORK/err"; fail "generate $*: message lacks '$text'"; }
}
expect_generate 2 "byte 3 of the prompt is character '~' (byte 126), which is not in the vocabulary of $vocab tokens" "$WORK/chars.safetensors" --prompt 'And~'
expect_generate 2 "the prompt has 33 tokens but the model reads at most 32" "$WORK/chars.safetensors" \
  --prompt "$(printf 'a%.0s' $(seq 33))"
run_np 1 train --quiet --save-weights "$WORK/mlp.safetensors" --set epochs=1
expect_generate 2 "not a language model" "$WORK/mlp.safetensors"
expect_generate 3 "cannot" "$WORK/missing.safetensors"

# Deterministic mode: the same bits at np 1 and 2.
expect_same_bits_np1_np2 "$WORK/chars.json" "$(wc -c < "$WORK/kjv.txt")"

# expect_exit CODE TEXT ARGS...: `mpiddp train` with ARGS exits CODE, and stderr holds TEXT.
expect_exit() {
  local code=$1 text=$2 rc=0
  shift 2
  timeout 60 "$MPIEXEC" -n 2 $MPIEXEC_FLAGS "$MPIDDP" train "$WORK/chars.json" --quiet "$@" \
    > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" -eq "$code" ] || { cat "$WORK/err"; fail "$*: exit code $rc, expected $code"; }
  grep -qF -- "$text" "$WORK/err" || { cat "$WORK/err"; fail "$*: message lacks '$text'"; }
}
expect_exit 3 "fewer than one window of block + 1 = 33" --set 'data.train.range=[0.999995, 1]'
: > "$WORK/empty.txt"
expect_exit 3 "the text is empty" --set "data.train.path=\"$WORK/empty.txt\"" --set "data.eval.path=\"$WORK/empty.txt\""
expect_exit 2 "data.eval.path" --set "data.eval.path=\"$WORK/empty.txt\""
expect_exit 2 "data.train.source" --set 'model.layers=[{"type": "linear", "out": 4}]'
expect_exit 2 "model.layers[1].positions" --set 'data.train.block=40' --set 'data.eval.block=40'
expect_exit 2 "the last layer has $((32 * (vocab + 1))) outputs" --set "model.layers[5]={\"type\": \"linear\", \"out\": $((vocab + 1))}"
expect_exit 2 "'0.weight' has shape [$vocab, 32] but the layer needs [$((vocab + 1)), 32]" --set "model.layers[5].out=$((vocab + 1))"
expect_exit 2 "model.layers[5].tied_to: '5.weight' names no tensor" --set 'model.layers[5].tied_to="5.weight"'
expect_exit 2 "model.layers[2].layers[1].heads: 5 heads do not divide the width 32" --set 'model.layers[2].layers[1].heads=5' 
echo "cli text source: np=1 and np=2 agree on the King James Bible (eval_loss $loss after one epoch), deterministic bits equal, generation repeats by seed, bad input exits 2 or 3"
