#!/usr/bin/env bash
# A Conv2d-BatchNorm2d-ReLU-MaxPool2d-Flatten-Linear network trained by PyTorch in one process
# (tests/golden/cnn_replay, made by tools/torch_crosscheck.py --model cnn --export) is
# reproduced by mpiddp at np = 1, 2 and 4 with synchronised BatchNorm: the same initial
# weights and buffers, the same order, evaluation in eval mode. Per-epoch eval_loss within
# 1e-5 relative in float32 and 1e-10 in float64; accuracies equal.
source "$(dirname "$0")/lib.sh"
golden="$SOURCE_DIR/tests/golden/cnn_replay"

expected_field() {  # DTYPE FIELD: PyTorch's per-epoch values, one per line
  /usr/bin/python3 -c "import json,sys; print('\n'.join(repr(v) for v in json.load(open(sys.argv[1]))[sys.argv[2]][sys.argv[3]]))" \
    "$golden/expected.json" "$1" "$2"
}

cat > "$WORK/cnn.json" <<JSON
{"seed": 0,
 "model": {"layers": [{"type": "conv2d", "out": 4, "kernel": 3, "padding": 1}, {"type": "batchnorm2d"},
                      {"type": "relu"}, {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"},
                      {"type": "linear", "out": 3}]},
 "loss": "cross_entropy",
 "data": {"train": {"source": "npy", "features": "$golden/x.npy", "targets": "$golden/y.npy", "classes": 3}},
 "sampler": {"order": "$golden/order.npy"},
 "batch": {"global": 16},
 "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},
 "epochs": 3,
 "init": {"weights": "$golden/init.safetensors"}}
JSON

for dtype in float32 float64; do
  rtol=1e-5; [ "$dtype" = float64 ] && rtol=1e-10
  expected_field "$dtype" eval_loss > "$WORK/torch_loss"
  expected_field "$dtype" eval_accuracy > "$WORK/torch_acc"
  for np in 1 2 4; do
    log="$WORK/$dtype.np$np.jsonl"
    run_np "$np" train "$WORK/cnn.json" --set dtype=$dtype --log "$log" --quiet \
      || fail "np=$np $dtype: mpiddp train failed"
    epoch_field eval_loss "$log" > "$WORK/loss"
    expect_close "$WORK/loss" "$WORK/torch_loss" "$rtol" || fail "np=$np $dtype: eval_loss differs from PyTorch's"
    epoch_field eval_accuracy "$log" > "$WORK/acc"
    expect_close "$WORK/acc" "$WORK/torch_acc" 1e-12 || fail "np=$np $dtype: eval_accuracy differs from PyTorch's"
    grep -q '"replicas_identical":true' "$log" || fail "np=$np $dtype: replicas differ"
    echo "np=$np $dtype: per-epoch eval_loss matches PyTorch within $rtol"
  done
done
