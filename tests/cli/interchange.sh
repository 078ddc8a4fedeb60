#!/usr/bin/env bash
# Weights interchange from the command line, at np=2: --save-weights writes the final
# parameters, `mpiddp export` extracts the same bytes from the final checkpoint, the file
# loads back as init.weights; bad weights and bad orders end every rank cleanly with exit 3.
source "$(dirname "$0")/lib.sh"

run_np 2 train --quiet --save-weights "$WORK/final.safetensors" --set checkpoint.dir="$WORK/ck" \
  --set 'optimizer={"type":"adam","lr":0.01}' --log "$WORK/run.jsonl"
"$MPIDDP" export "$WORK/ck" "$WORK/exported.safetensors" > /dev/null
# The default model has 2737 float32 parameters: the last 2737*4 bytes of both files are the
# data sections, which must be the same parameters in the same order.
cmp <(tail -c 10948 "$WORK/final.safetensors") <(tail -c 10948 "$WORK/exported.safetensors") ||
  fail "exported checkpoint parameters differ from save_weights"
[ "$(stat -c %s "$WORK/exported.safetensors")" -lt "$(stat -c %s "$WORK/ck/step-000000000016.safetensors")" ] ||
  fail "export kept the optimizer tensors"
run_np 2 train --quiet --set init.weights="$WORK/exported.safetensors" --set epochs=1 ||
  fail "the exported weights do not load as init.weights"

# expect_error NP CODE TEXT ARGS...
expect_error() {
  local np=$1 code=$2 text=$3; shift 3
  local rc=0
  timeout 60 "$MPIEXEC" -n "$np" $MPIEXEC_FLAGS "$MPIDDP" train --quiet "$@" > /dev/null 2> "$WORK/err" || rc=$?
  [ "$rc" -eq "$code" ] || { cat "$WORK/err"; fail "'$*': exit $rc, expected $code"; }
  grep -qF -- "$text" "$WORK/err" || { cat "$WORK/err"; fail "'$*': message lacks '$text'"; }
  # Every rank ends cleanly and only rank 0 prints: no abort, no "rank 1:" message.
  [ "$(grep -c '^mpiddp: ' "$WORK/err")" -eq 1 ] && ! grep -q '^rank [0-9]' "$WORK/err" ||
    { cat "$WORK/err"; fail "'$*': not one clean message"; }
}
expect_error 2 3 "tensor '2.weight' has shape [48, 48] in the file but the model needs [32, 48]" \
  --set init.weights="$WORK/final.safetensors" --set model.layers.2.out=32
expect_error 2 3 "init.weights: cannot open '$WORK/none.safetensors'" --set init.weights="$WORK/none.safetensors"
head -c 100 "$WORK/final.safetensors" > "$WORK/cut.safetensors"
expect_error 2 3 "truncated" --set init.weights="$WORK/cut.safetensors"
printf 'not an npy file at all' > "$WORK/order.npy"
expect_error 2 3 "sampler.order" --set sampler.order="$WORK/order.npy"
expect_error 2 3 "cannot open" --set sampler.order="$WORK/missing.npy"
echo "cli interchange: save_weights = export of the final checkpoint, loads as init.weights; errors exit 3 cleanly"
