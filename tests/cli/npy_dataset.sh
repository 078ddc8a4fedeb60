#!/usr/bin/env bash
# Training on .npy files: np=1 and np=2 give the same per-epoch eval_loss (regression and
# classification), and a bad data file ends the run with exit code 3 naming file and sample.
source "$(dirname "$0")/lib.sh"

# write_npy PATH DESCR SHAPE PACK VALUES...: a version 1.0 .npy file, header padded to 64.
write_npy() {
  perl -e '
    my ($path, $descr, $shape, $pack, @values) = @ARGV;
    my $dict = "{\x27descr\x27: \x27$descr\x27, \x27fortran_order\x27: False, \x27shape\x27: $shape, }";
    $dict .= " " while (10 + length($dict) + 1) % 64;
    $dict .= "\n";
    open(my $f, ">:raw", $path) or die "$path: $!";
    print $f "\x93NUMPY\x01\x00", pack("v", length $dict), $dict, pack("$pack*", @values);
    close $f or die;' "$@"
}

# 96 samples of 3 features; a smooth regression target and a 3-class label from it.
n=96
mapfile -t x < <(awk -v n=$n 'BEGIN { for (i = 0; i < n; i++) for (j = 0; j < 3; j++) printf "%.6f\n", sin(0.7 * i + 1.3 * j) }')
mapfile -t y < <(awk -v n=$n 'BEGIN { for (i = 0; i < n; i++) { a = sin(0.7 * i); b = sin(0.7 * i + 1.3); c = sin(0.7 * i + 2.6);
                                      printf "%.6f\n", a - 2 * b + 0.5 * c } }')
mapfile -t labels < <(printf '%s\n' "${y[@]}" | awk '{ print ($1 < -0.5) ? 0 : ($1 < 0.5 ? 1 : 2) }')
write_npy "$WORK/x.npy" '<f4' "($n, 3)" 'f<' "${x[@]}"
write_npy "$WORK/y.npy" '<f8' "($n, 1)" 'd<' "${y[@]}"
write_npy "$WORK/labels.npy" '<i8' "($n,)" 'q<' "${labels[@]}"

cat > "$WORK/regression.json" <<JSON
{"seed": 3, "model": {"inputs": 3, "layers": [{"type": "linear", "out": 16}, {"type": "tanh"},
                                              {"type": "linear", "out": 1}]},
 "loss": "mse",
 "data": {"train": {"source": "npy", "features": "$WORK/x.npy", "targets": "$WORK/y.npy"},
          "eval": {"source": "npy", "features": "$WORK/x.npy", "targets": "$WORK/y.npy"}},
 "batch": {"global": 16}, "optimizer": {"type": "sgd", "lr": 0.05}, "epochs": 3}
JSON
cat > "$WORK/classes.json" <<JSON
{"seed": 3, "model": {"inputs": 3, "layers": [{"type": "linear", "out": 16}, {"type": "tanh"},
                                              {"type": "linear", "out": 3}]},
 "loss": "cross_entropy",
 "data": {"train": {"source": "npy", "features": "$WORK/x.npy", "targets": "$WORK/labels.npy", "classes": 3}},
 "batch": {"global": 16}, "optimizer": {"type": "adam", "lr": 0.01}, "epochs": 3}
JSON

for task in regression classes; do
  for np in 1 2; do
    run_np "$np" train "$WORK/$task.json" --quiet --log "$WORK/$task$np.jsonl"
    epoch_field eval_loss "$WORK/$task$np.jsonl" > "$WORK/$task$np.loss"
    [ "$(wc -l < "$WORK/$task$np.loss")" -eq 3 ] || fail "$task np=$np: expected 3 epoch records"
  done
  expect_close "$WORK/${task}2.loss" "$WORK/${task}1.loss" 1e-5 || fail "$task: np=2 differs from np=1"
  # Training learned something: the last epoch's loss is below the first's.
  awk 'NR == 1 { first = $1 } END { exit !($1 < first) }' "$WORK/${task}1.loss" ||
    fail "$task: eval_loss did not decrease"
done

# expect_data_error NP TEXT... : the run exits 3 and stderr holds every TEXT.
expect_data_error() {
  local np=$1; shift
  local rc=0
  timeout 60 "$MPIEXEC" -n "$np" $MPIEXEC_FLAGS "$MPIDDP" train "$WORK/regression.json" --quiet \
    > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 3 ] || { cat "$WORK/err"; fail "np=$np: exit code $rc, expected 3"; }
  for text in "$@"; do
    grep -qF -- "$text" "$WORK/err" || { cat "$WORK/err"; fail "np=$np: message lacks '$text'"; }
  done
}

x[7]=nan  # sample 2, feature 1
write_npy "$WORK/x.npy" '<f4' "($n, 3)" 'f<' "${x[@]}"
expect_data_error 2 "$WORK/x.npy" "sample 2" "NaN"
head -c 300 "$WORK/y.npy" > "$WORK/y_cut.npy" && mv "$WORK/y_cut.npy" "$WORK/y.npy"
x[7]=0
write_npy "$WORK/x.npy" '<f4' "($n, 3)" 'f<' "${x[@]}"
expect_data_error 1 "$WORK/y.npy" "truncated"
echo "cli npy dataset: np=1 and np=2 agree (regression, classification); bad files exit 3"
