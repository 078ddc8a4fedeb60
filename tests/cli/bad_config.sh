#!/usr/bin/env bash
# Every kind of config error: exit code 2 and a message naming the key, on every rank count.
source "$(dirname "$0")/lib.sh"

# expect_config_error NP KEY ARGS...: exits 2 and names KEY on stderr, within seconds.
expect_config_error() {
  local np=$1 key=$2; shift 2
  local rc=0
  timeout 60 "$MPIEXEC" -n "$np" $MPIEXEC_FLAGS "$MPIDDP" train "$@" > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] || { cat "$WORK/err"; fail "'$*' at np=$np: exit code $rc, expected 2"; }
  grep -qF -- "$key" "$WORK/err" || { cat "$WORK/err"; fail "'$*': message does not name '$key'"; }
  [ ! -s "$WORK/out" ] || fail "'$*': printed a table although the config is bad"
}

expect_config_error 1 "bogus: unknown key" --set bogus=1
expect_config_error 2 "optimizer.lr" --set optimizer.lr=-1
expect_config_error 2 "optimizer.lr" --set 'optimizer.lr="fast"'
expect_config_error 1 "optimizer.type" --set optimizer.type=rmsprop
expect_config_error 1 "model.layers[1].type" --set model.layers.1.type=softplus
expect_config_error 1 "epochs" --set epochs=0
expect_config_error 2 "batch.global" --set batch.global=63
expect_config_error 1 "data.train.source" --set data.train.source=mnist
expect_config_error 1 "model.inputs" --set model.inputs=7
expect_config_error 1 "loss" --set loss=cross_entropy
expect_config_error 1 "--frobnicate" --frobnicate

printf '{"epochs": 3,\n "optimizer": {"lr": 0.1,}}\n' > "$WORK/broken.json"
expect_config_error 2 "broken.json" "$WORK/broken.json"
expect_config_error 1 "cannot open" "$WORK/missing.json"
expect_config_error 1 "larger than 16 MiB" /dev/zero
echo '{"model": {"layers": [{"type": "linear", "out": 1}]}}' > "$WORK/nodata.json"
expect_config_error 1 "data.train: required" "$WORK/nodata.json"
echo "cli bad config: all errors exit 2 and name their key"

# Ranks started with different configs (MPMD launch): the start-up hash check names the rank.
rc=0
# shellcheck disable=SC2086
timeout 60 "$MPIEXEC" -n 1 $MPIEXEC_FLAGS "$MPIDDP" train : -n 1 $MPIEXEC_FLAGS "$MPIDDP" train --set optimizer.lr=0.1 \
  > "$WORK/out" 2> "$WORK/err" || rc=$?
[ "$rc" -eq 2 ] || { cat "$WORK/err"; fail "mismatched ranks: exit code $rc, expected 2"; }
grep -q "rank 1's config or model differs from rank 0's" "$WORK/err" || { cat "$WORK/err"; fail "mismatch not named"; }
echo "cli bad config: mismatched ranks are refused"
