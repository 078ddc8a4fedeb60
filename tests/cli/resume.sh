#!/usr/bin/env bash
# Checkpoint and resume from the command line: a run stopped after epoch 2 (or mid-epoch)
# and resumed writes byte-identical step and epoch records (times aside) and ends with the
# same parameters as a straight run, at np=1 and np=2; another world size matches within
# float tolerance; damaged or foreign checkpoints are refused; a run killed with SIGKILL
# while checkpointing leaves a loadable latest checkpoint.
source "$(dirname "$0")/lib.sh"

# records FILE...: the step and epoch records, time fields removed.
records() {
  cat "$@" | grep -E '"kind":"(step|epoch)"' | sed -E 's/,"time_s":[^,}]*//; s/,"samples_per_s":[^,}]*//'
}
checksum_of() { grep '"kind":"end"' "$1" | sed -E 's/.*"param_checksum":"([0-9a-f]+)".*/\1/'; }

ADAM=(--set 'optimizer={"type":"adam","lr":0.01}')

for np in 1 2; do
  d="$WORK/np$np"
  run_np "$np" train --quiet "${ADAM[@]}" --log "$d.straight.jsonl" --set checkpoint.dir="$d/straight" \
    --set checkpoint.every_steps=3 --set checkpoint.keep=0
  # Stopped after epoch 2, then resumed with the config's 4 epochs.
  run_np "$np" train --quiet "${ADAM[@]}" --set epochs=2 --log "$d.first.jsonl" --set checkpoint.dir="$d/run"
  run_np "$np" train --quiet "${ADAM[@]}" --resume latest --log "$d.second.jsonl" --set checkpoint.dir="$d/run"
  records "$d.first.jsonl" "$d.second.jsonl" > "$d.resumed.records"
  records "$d.straight.jsonl" > "$d.straight.records"
  [ "$(grep -c '"kind":"step"' "$d.straight.records")" -eq 16 ] || fail "np=$np: expected 16 step records"
  cmp -s "$d.straight.records" "$d.resumed.records" ||
    { diff "$d.straight.records" "$d.resumed.records" | head; fail "np=$np: epoch-2 resume records differ"; }
  [ "$(checksum_of "$d.straight.jsonl")" = "$(checksum_of "$d.second.jsonl")" ] ||
    fail "np=$np: final parameters differ after resume"
  grep -q '"resumed_from":{"path":"[^"]*step-000000000008.safetensors","epoch":3,"batch":0,"step":8}' \
    "$d.second.jsonl" || fail "np=$np: run record lacks resumed_from"

  # Mid-epoch: resume from step 6 (batch 2 of epoch 2).
  run_np "$np" train --quiet "${ADAM[@]}" --resume "$d/straight/step-000000000006.safetensors" \
    --log "$d.mid.jsonl"
  records "$d.mid.jsonl" > "$d.mid.records"
  grep -A1000 '"step":7,' "$d.straight.records" > "$d.after6.records"
  cmp -s "$d.after6.records" "$d.mid.records" || fail "np=$np: mid-epoch resume records differ"
  [ "$(checksum_of "$d.straight.jsonl")" = "$(checksum_of "$d.mid.jsonl")" ] ||
    fail "np=$np: final parameters differ after mid-epoch resume"
done

# Another world size: np=1's epoch-2 checkpoint resumed at np=2 matches np=1 within tolerance.
run_np 2 train --quiet "${ADAM[@]}" --resume "$WORK/np1/run/step-000000000008.safetensors" --log "$WORK/cross.jsonl"
epoch_field eval_loss "$WORK/cross.jsonl" > "$WORK/cross.loss"
epoch_field eval_loss "$WORK/np1.straight.jsonl" | tail -2 > "$WORK/np1.tail.loss"
expect_close "$WORK/cross.loss" "$WORK/np1.tail.loss" 1e-5 || fail "np=2 resume of an np=1 checkpoint"

# expect_refusal CODE TEXT ARGS...: exit code CODE and TEXT on stderr.
expect_refusal() {
  local code=$1 text=$2; shift 2
  local rc=0
  timeout 60 "$MPIEXEC" -n 2 $MPIEXEC_FLAGS "$MPIDDP" train --quiet "$@" > /dev/null 2> "$WORK/err" || rc=$?
  [ "$rc" -eq "$code" ] || { cat "$WORK/err"; fail "'$*': exit $rc, expected $code"; }
  grep -qF -- "$text" "$WORK/err" || { cat "$WORK/err"; fail "'$*': message lacks '$text'"; }
}
good="$WORK/np1/run/step-000000000008.safetensors"
head -c 5000 "$good" > "$WORK/truncated.safetensors"
expect_refusal 6 "truncated" "${ADAM[@]}" --resume "$WORK/truncated.safetensors"
cp "$good" "$WORK/flipped.safetensors"
printf '\x55' | dd of="$WORK/flipped.safetensors" bs=1 seek=$(( $(stat -c %s "$good") - 7 )) conv=notrunc 2>/dev/null
expect_refusal 6 "corrupt: the data checksum" "${ADAM[@]}" --resume "$WORK/flipped.safetensors"
expect_refusal 6 "another model shape" "${ADAM[@]}" --set model.layers.2.out=40 --resume "$good"
expect_refusal 6 "another config: optimizer.lr: 0.01 in the checkpoint, 0.02 now" \
  --set 'optimizer={"type":"adam","lr":0.02}' --resume "$good"
expect_refusal 6 "no checkpoint" --resume latest --set checkpoint.dir="$WORK/empty"

# A half-written temporary file (what a kill during a write leaves) is never "latest".
printf 'partial' > "$WORK/np1/run/.step-000000000099.safetensors.tmp"
run_np 1 train --quiet "${ADAM[@]}" --set epochs=5 --resume latest --set checkpoint.dir="$WORK/np1/run" \
  --log "$WORK/after_tmp.jsonl"
grep -q '"resumed_from":{"path":"[^"]*step-000000000016.safetensors"' "$WORK/after_tmp.jsonl" ||
  fail "latest did not skip the temporary file"

# SIGKILL while checkpointing after every step: the newest complete checkpoint still loads.
big=(--set data.train.samples=4096 --set model.layers.0.out=256 --set model.layers.2.out=256
     --set batch.global=256 --set epochs=1000 --set checkpoint.dir="$WORK/killed"
     --set checkpoint.every_steps=1 --set checkpoint.keep=2)
"$MPIDDP" train --quiet "${big[@]}" > /dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do
  [ "$(ls "$WORK/killed" 2>/dev/null | grep -c '^step-')" -ge 2 ] && break
  sleep 0.1
done
sleep 0.$((RANDOM % 10))
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
ls -a "$WORK/killed" > "$WORK/killed.list"
latest=$(grep -E '^step-[0-9]+\.safetensors$' "$WORK/killed.list" | tail -1)
[ -n "$latest" ] || fail "no checkpoint before the kill"
step=$(echo "$latest" | sed -E 's/step-0*([0-9]+)\.safetensors/\1/')
# 16 steps per epoch: the checkpoint's epoch is the last one to train, so the check is short.
if ! run_np 1 train --quiet "${big[@]}" --set epochs=$(( step / 16 + 1 )) --resume latest \
       --log "$WORK/killed.jsonl" 2> "$WORK/err"; then
  cat "$WORK/err"; fail "resume after SIGKILL failed"
fi
grep -q "\"resumed_from\":{\"path\":\"[^\"]*$latest\"" "$WORK/killed.jsonl" || fail "did not resume from $latest"
echo "cli resume: bitwise equal at np=1,2 (epoch and mid-epoch), np=1->2 within 1e-5," \
     "refusals ok, SIGKILL after step $step left $(grep -c '\.tmp$' "$WORK/killed.list") temporary file(s), latest loads"

# BatchNorm's running statistics and num_batches_tracked travel in the checkpoint, and
# dropout's masks are a function of (seed, epoch, step, position): a mid-epoch resume of a
# model with both gives the straight run's records (evaluation uses the running statistics)
# and parameters, bit for bit.
BN=(--set 'model.layers=[{"type":"linear","out":32},{"type":"batchnorm1d"},{"type":"relu"},
                         {"type":"dropout","p":0.3},{"type":"linear","out":1}]')
for np in 1 2; do
  d="$WORK/bn$np"
  run_np "$np" train --quiet "${ADAM[@]}" "${BN[@]}" --log "$d.straight.jsonl" \
    --set checkpoint.dir="$d/straight" --set checkpoint.every_steps=3 --set checkpoint.keep=0
  run_np "$np" train --quiet "${ADAM[@]}" "${BN[@]}" --log "$d.mid.jsonl" \
    --resume "$d/straight/step-000000000006.safetensors"
  records "$d.straight.jsonl" | grep -A1000 '"step":7,' > "$d.after6.records"
  records "$d.mid.jsonl" > "$d.mid.records"
  cmp -s "$d.after6.records" "$d.mid.records" ||
    { diff "$d.after6.records" "$d.mid.records" | head; fail "np=$np: BatchNorm/dropout resume records differ"; }
  [ "$(checksum_of "$d.straight.jsonl")" = "$(checksum_of "$d.mid.jsonl")" ] ||
    fail "np=$np: BatchNorm/dropout final parameters differ after resume"
done
echo "cli resume: a BatchNorm and dropout model resumes mid-epoch bit for bit at np=1,2"
