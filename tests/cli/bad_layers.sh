#!/usr/bin/env bash
# Bad layer configs of image and residual models: exit code 2 on every rank, a message naming
# the key path (nested inside residuals) and what was expected, within seconds, at np 1 and 2.
source "$(dirname "$0")/lib.sh"

# A small CNN on 2 x 6 x 6 "images" (72 features of synthetic_classification).
cat > "$WORK/cnn.json" <<'JSON'
{"model": {"input_shape": [2, 6, 6], "layers": [
   {"type": "conv2d", "out": 4, "kernel": 3, "padding": 1},
   {"type": "batchnorm2d"},
   {"type": "relu"},
   {"type": "residual", "layers": [{"type": "conv2d", "out": 4, "kernel": 3, "padding": 1},
                                   {"type": "relu"}]},
   {"type": "maxpool2d", "kernel": 2},
   {"type": "dropout", "p": 0.2},
   {"type": "flatten"},
   {"type": "linear", "out": 3}]},
 "loss": "cross_entropy",
 "data": {"train": {"source": "synthetic_classification", "samples": 48, "features": 72, "classes": 3}},
 "batch": {"global": 8},
 "epochs": 1}
JSON

# expect_error NP TEXT ARGS...: exit 2 on every rank (the launcher reports the first non-zero
# exit), stderr names TEXT, nothing trained.
expect_error() {
  local np=$1 text=$2; shift 2
  local rc=0
  timeout 60 "$MPIEXEC" -n "$np" $MPIEXEC_FLAGS "$MPIDDP" train "$WORK/cnn.json" "$@" \
    > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] || { cat "$WORK/err"; fail "'$*' at np=$np: exit code $rc, expected 2"; }
  grep -qF -- "$text" "$WORK/err" || { cat "$WORK/err"; fail "'$*' at np=$np: no '$text' in the message"; }
  [ ! -s "$WORK/out" ] || fail "'$*': printed a table although the config is bad"
}

# The good config trains, so every error below is the one change it names.
run_np 2 train "$WORK/cnn.json" --quiet || fail "the base config does not train"

for np in 1 2; do
  expect_error "$np" "model.input_shape: (2, 5, 5) does not fit data.train" --set 'model.input_shape=[2,5,5]'
  expect_error "$np" "model.layers[0].kernel" --set model.layers.0.kernel=9
  expect_error "$np" "model.layers[0].padding" --set model.layers.0.padding=-1
  expect_error "$np" "model.layers[5].p" --set model.layers.5.p=1
  expect_error "$np" "model.layers[5].p" --set model.layers.5.p=-0.1
  expect_error "$np" "model.layers[3]: the residual's body maps (4, 6, 6) to (8, 6, 6)" \
    --set model.layers.3.layers.0.out=8
  expect_error "$np" "model.layers[3].layers[0].out" --set model.layers.3.layers.0.out=0
  expect_error "$np" "model.layers[3].layers[1].type" --set model.layers.3.layers.1.type=swish
  expect_error "$np" "model.layers[7]: linear needs a flat input" --set model.layers.6.type=relu
  expect_error "$np" "model.layers[4].kernel" --set 'model.layers.4.kernel=[2,0]'
  expect_error "$np" "model.layers[0].recompute: unknown key of a conv2d layer: recompute belongs to a residual" \
    --set model.layers.0.recompute=true
  expect_error "$np" "model.layers[3].recompute: the body's layer model.layers[3].layers[1] (batchnorm2d)" \
    --set model.layers.3.recompute=true --set model.layers.3.layers.1.type=batchnorm2d
done
# One value per channel in training: one sample per step on one rank, or per rank without sync.
expect_error 1 "model.layers[1]: batchnorm2d would normalise over 1 value" \
  --set 'model.input_shape=[72,1,1]' --set model.layers.0.padding=0 --set model.layers.0.kernel=1 \
  --set model.layers.3.layers.0.kernel=1 --set model.layers.3.layers.0.padding=0 \
  --set model.layers.4.kernel=1 --set batch.global=1
expect_error 2 "model.layers[1]: batchnorm2d would normalise over 1 value" \
  --set 'model.input_shape=[72,1,1]' --set model.layers.0.padding=0 --set model.layers.0.kernel=1 \
  --set model.layers.3.layers.0.kernel=1 --set model.layers.3.layers.0.padding=0 \
  --set model.layers.4.kernel=1 --set batch.global=2 --set batchnorm.sync=false
# ... while with synchronised statistics the 2 ranks' samples together are 2 values: it trains.
run_np 2 train "$WORK/cnn.json" --quiet --set 'model.input_shape=[72,1,1]' \
  --set model.layers.0.padding=0 --set model.layers.0.kernel=1 --set model.layers.3.layers.0.kernel=1 \
  --set model.layers.3.layers.0.padding=0 --set model.layers.4.kernel=1 --set batch.global=2 \
  || fail "batch 2 over 2 ranks with batchnorm.sync should train"
echo "cli bad layers: every layer error exits 2 and names its key path"
