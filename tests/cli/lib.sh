# Shared helpers for the command-line tests. Sourced; expects $MPIDDP, $MPIEXEC, $MPIEXEC_FLAGS.
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# run_np N ARGS...: mpiddp under the launcher with N ranks.
run_np() {
  local n=$1; shift
  # shellcheck disable=SC2086  # MPIEXEC_FLAGS is a list of flags
  "$MPIEXEC" -n "$n" $MPIEXEC_FLAGS "$MPIDDP" "$@"
}

# field NAME FILE: the values of a numeric JSON field in the epoch records, one per line.
epoch_field() {
  grep '"kind":"epoch"' "$2" | sed -E "s/.*\"$1\":([-0-9.eE+]+).*/\1/"
}

# expect_close A_FILE B_FILE RTOL: two files of numbers, line by line, within relative RTOL.
expect_close() {
  paste "$1" "$2" | awk -v rtol="$3" '
    { d = $1 - $2; if (d < 0) d = -d; s = $2 < 0 ? -$2 : $2;
      if (d > rtol * s) { printf "line %d: %s vs %s (rel %g > %g)\n", NR, $1, $2, d / s, rtol; bad = 1 } }
    END { if (NR == 0) { print "no values"; exit 1 } exit bad }'
}

# pace_flags RANK SECONDS: the flags that make rank RANK stall SECONDS at every step, so that a
# run of a tiny model lasts long enough on a fast machine for a signal or a kill to land
# mid-run. A run compared with it needs them too: compare counts the debug keys as keys that
# change numbers.
pace_flags() {
  echo --set debug.fail_rank="$1" --set debug.fail_kind=stall --set debug.fail_step=1 \
    --set debug.fail_count=1000000 --set debug.stall_s="$2"
}

# is_mpiddp PID: whether process PID runs the $MPIDDP binary.
is_mpiddp() { [ "$(readlink "/proc/$1/exe" 2> /dev/null)" = "$(readlink -f "$MPIDDP")" ]; }

# rank_pids PID: the mpiddp processes below PID (Open MPI's mpirun starts them directly,
# MPICH's Hydra through a proxy process).
rank_pids() {
  local child
  for child in $(pgrep -P "$1" || true); do
    if is_mpiddp "$child"; then echo "$child"; else rank_pids "$child"; fi
  done
}

# checksum_of LOG: the param_checksum of the log's end record.
checksum_of() { grep '"kind":"end"' "$1" | sed -E 's/.*"param_checksum":"([0-9a-f]+)".*/\1/'; }

# timeless_records LOG [KINDS]: the log's records of KINDS (an ERE of kinds, default
# step|epoch) without the fields that time them, to compare two runs' records bit for bit.
timeless_records() {
  grep -E "\"kind\":\"(${2:-step|epoch})\"" "$1" | sed -E 's/,"time_s":[^,}]*//; s/,"samples_per_s":[^,}]*//'
}

# expect_same_records A B STEPS WHAT [KINDS]: logs A and B hold the same records of KINDS
# (timeless_records), A holds STEPS step records, and the final parameters are equal bit for bit.
expect_same_records() {
  local kinds=${5:-step|epoch}
  timeless_records "$1" "$kinds" > "$1.records"
  timeless_records "$2" "$kinds" > "$2.records"
  [ "$(grep -c '"kind":"step"' "$1.records")" -eq "$3" ] || fail "$4: expected $3 step records in $1"
  cmp -s "$1.records" "$2.records" || { diff "$1.records" "$2.records" | head -4 || true; fail "$4: records differ"; }
  [ "$(checksum_of "$1")" = "$(checksum_of "$2")" ] || fail "$4: final parameters differ"
}

# tensor_bytes FILE: a safetensors file's data section, its tensors' bytes (its header's
# metadata holds each run's config, which two runs to compare differ in).
tensor_bytes() { tail -c +$(($(od -An -tu8 -N8 "$1" | tr -d ' ') + 9)) "$1"; }

# expect_same_run BASELINE RUN WHAT: `mpiddp compare` passes (its verdict in $WORK/compare.txt)
# and the final parameters are equal bit for bit.
expect_same_run() {
  "$MPIDDP" compare "$1" "$2" > "$WORK/compare.txt" ||
    { cat "$WORK/compare.txt"; fail "$3: mpiddp compare fails against the uninterrupted run"; }
  [ "$(checksum_of "$1")" = "$(checksum_of "$2")" ] ||
    fail "$3: the final parameters differ from the uninterrupted run's"
}

# browser_or_skip: $BROWSER, headless Chromium, or exit 77 (the render tests' skip) when it is
# not installed (scripts/install-deps.sh --with-chromium installs it).
browser_or_skip() {
  BROWSER=$(command -v chromium || command -v chromium-browser || true)
  [ -n "$BROWSER" ] || { echo "chromium not installed: skipping the render test"; exit 77; }
}

# render_svg SVG PNG: screenshots the SVG at its own size (so the PNG holds all of it and
# nothing else) and prints png_stats' "WIDTH HEIGHT INK_FRACTION COLORS" of the PNG.
render_svg() {
  local size profile
  size=$(sed -nE 's/^<svg [^>]*width="([0-9]+)[.0-9]*" height="([0-9]+)[.0-9]*".*/\1,\2/p' "$1")
  [ -n "$size" ] || fail "no width/height in $1"
  profile=$(mktemp -d)
  timeout 120 "$BROWSER" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
    --hide-scrollbars --window-size="$size" --screenshot="$2" \
    "file://$1" > "$WORK/chromium.log" 2>&1 || { cat "$WORK/chromium.log" >&2; fail "chromium failed"; }
  rm -rf "$profile"
  [ -s "$2" ] || fail "no screenshot written"
  "$PNG_STATS" "$2" || fail "png_stats failed"
}

# kjv_text OUT: the King James Bible (scripts/get-kjv.sh) written to OUT, or the test skipped
# (exit 77) when Debian's bible-kjv is not installed.
kjv_text() {
  command -v bible > /dev/null || {
    echo "SKIP: bible-kjv is not installed (scripts/install-deps.sh --with-data)"
    exit 77
  }
  "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/get-kjv.sh" "$1" > /dev/null
}

# expect_same_bits_np1_np2 CONFIG TOKENS: deterministic mode at np 1 and 2 on the first 2,560
# windows of block 32 (81,921 tokens) of CONFIG's training source of TOKENS tokens, in 16 chunks
# of 4 (the chunks must divide the samples): 40 steps of 64 windows, and the same param_checksum.
expect_same_bits_np1_np2() {
  local end np
  end=$(awk -v n="$2" 'BEGIN { printf "%.12f", (2559 * 32 + 33 + 0.5) / n }')
  for np in 1 2; do
    run_np "$np" train "$1" --deterministic --set deterministic.chunks=16 \
      --set "data.train.range=[0, $end]" --quiet --log "$WORK/det$np.jsonl"
  done
  [ "$(grep -c '"kind":"step"' "$WORK/det1.jsonl")" -eq 40 ] || fail "deterministic: expected 40 steps of 64 windows"
  [ "$(checksum_of "$WORK/det1.jsonl")" = "$(checksum_of "$WORK/det2.jsonl")" ] ||
    fail "deterministic: np=2's parameters differ from np=1's"
}

# tied_gpt DIR: DIR/text.txt, 7,200 bytes of varied text (449 windows of 16 at stride 16), and
# DIR/gpt.json, a GPT training on it as bytes whose head is tied to its token table (pre-LayerNorm
# blocks of attention and an MLP, width 32), with AdamW, decay groups and clipping, 2 epochs of
# 9 steps of 48 windows.
tied_gpt() {
  local i
  for i in $(seq 150); do
    echo "line $i: $((i * 7 % 13)) foxes and $((i % 11)) dogs, then $((i * i % 17)) more."
  done | head -c 7200 > "$1/text.txt"
  cat > "$1/gpt.json" <<JSON
{"seed": 7,
 "model": {"layers": [
   {"type": "embedding", "vocab": 256, "dim": 32, "init_std": 0.02},
   {"type": "position_embedding", "positions": 16, "init_std": 0.02},
   {"type": "residual", "layers": [{"type": "layernorm"}, {"type": "attention", "heads": 2, "init_std": 0.02}]},
   {"type": "residual", "layers": [{"type": "layernorm"}, {"type": "linear", "out": 64, "init_std": 0.02},
                                   {"type": "gelu"}, {"type": "linear", "out": 32, "init_std": 0.02}]},
   {"type": "layernorm"},
   {"type": "linear", "out": 256, "bias": false, "tied_to": "0.weight"}]},
 "loss": "cross_entropy",
 "data": {"train": {"source": "text", "path": "$1/text.txt", "encoding": "bytes", "block": 16}},
 "sampler": {"shuffle": true, "drop_last": true},
 "batch": {"global": 48},
 "optimizer": {"type": "adamw", "lr": 0.003, "weight_decay": 0.1, "decay": "matrices", "clip_grad_norm": 0.5},
 "epochs": 2}
JSON
}
