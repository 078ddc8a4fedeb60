#!/usr/bin/env bash
# Evaluations every N steps, early stopping, the best checkpoint and the CSV and TensorBoard
# logs from the command line:
#  - early stopping ends every rank after the same step at np = 1, 2, 3, with exit 0, an
#    early_stop record and the end record; `timeout` and the watchdog are the stall detector
#    that turns a hang into a failure;
#  - in deterministic mode the eval records are the same bits at np = 1, 2, 3 (mpiddp compare);
#  - the best checkpoint survives a kill -9 at each point of writing, keeping and deleting:
#    the best's temporary file complete but not renamed, a checkpoint's likewise, a new
#    checkpoint in place before the old ones are deleted; each time a loadable best and a
#    latest remain, and the resumed run ends with the uninterrupted run's parameters and best;
#  - --resume best and `mpiddp export DIR/best`;
#  - the average of the weights (ema.decay): eval_loss_ema, the best by it, its weights files;
#  - log.csv's rows and log.tensorboard's event file; exit 8 before the first step for a
#    TensorBoard directory that cannot be created; exit 2 for a metric the run does not compute.
source "$(dirname "$0")/lib.sh"

EVAL=(--set eval.every_steps=2 --set eval.max_samples=96 --set epochs=8 --set 'batch={"global":48}' --set watchdog.timeout_s=60)
STOP=(--set 'early_stopping={"patience":2,"min_delta":0.02}')
field() { sed -E "s/.*\"$1\":([^,}]*).*/\1/"; }

# Early stopping at np = 1, 2, 3: the same step, exit 0, every rank done.
for np in 1 2 3; do
  timeout 120 "$MPIEXEC" -n "$np" $MPIEXEC_FLAGS "$MPIDDP" train --quiet "${EVAL[@]}" "${STOP[@]}" \
    --log "$WORK/stop$np.jsonl" --set log.csv="$WORK/stop$np.csv" --set log.tensorboard="$WORK/tb$np" ||
    fail "np=$np: the early-stopped run did not end with exit 0 within 120 s (exit $?)"
  grep -q '"kind":"early_stop"' "$WORK/stop$np.jsonl" || fail "np=$np: no early_stop record"
  stop=$(grep '"kind":"early_stop"' "$WORK/stop$np.jsonl" | field step)
  end=$(grep '"kind":"end"' "$WORK/stop$np.jsonl" | field steps)
  [ "$stop" = "$end" ] || fail "np=$np: stopped after step $stop but the end record says $end steps"
  [ "$np" = 1 ] && first_stop=$stop
  [ "$stop" = "$first_stop" ] || fail "np=$np stopped after step $stop, np=1 after $first_stop"
done
[ "$first_stop" -lt 48 ] || fail "the example did not stop early (step $first_stop of 48)"
evals=$(grep -c '"kind":"eval"' "$WORK/stop1.jsonl")
[ "$evals" -eq $((first_stop / 2)) ] || fail "$evals eval records for $first_stop steps at every 2"

# The CSV: a header and one row per step, eval and epoch record of the JSON log.
head -1 "$WORK/stop2.csv" | grep -q '^kind,epoch,step,loss,lr,grad_norm,eval_loss,eval_accuracy' ||
  fail "log.csv's header: $(head -1 "$WORK/stop2.csv")"
rows=$(($(wc -l < "$WORK/stop2.csv") - 1))
records=$(grep -cE '"kind":"(step|eval|epoch)"' "$WORK/stop2.jsonl")
[ "$rows" -eq "$records" ] || fail "log.csv has $rows rows for $records records"
grep "^eval,.*,$first_stop," "$WORK/stop2.csv" > /dev/null || fail "log.csv lacks the eval row of step $first_stop"
# The TensorBoard directory holds one event file, its records framed and checksummed
# (tests/record/log_formats_test.cpp decodes them).
events=$(ls "$WORK/tb2"/events.out.tfevents.* | wc -l)
[ "$events" -eq 1 ] || fail "log.tensorboard holds $events event files"
[ "$(stat -c %s "$WORK"/tb2/events.out.tfevents.*)" -gt 1000 ] || fail "the event file is nearly empty"

# Deterministic mode: the eval records the same bits at every world size.
for np in 1 2 3; do
  run_np "$np" train --quiet --deterministic "${EVAL[@]}" --set epochs=2 --set data.train.samples=240 \
    --log "$WORK/det$np.jsonl"
done
for np in 2 3; do
  "$MPIDDP" compare "$WORK/det1.jsonl" "$WORK/det$np.jsonl" > "$WORK/compare.txt" ||
    { cat "$WORK/compare.txt"; fail "deterministic np=$np differs from np=1"; }
  diff <(grep '"kind":"eval"' "$WORK/det1.jsonl" | sed -E 's/,"time_s":[^,}]*//') \
       <(grep '"kind":"eval"' "$WORK/det$np.jsonl" | sed -E 's/,"time_s":[^,}]*//') > /dev/null ||
    fail "deterministic np=$np: the eval records differ from np=1's"
done

# The best checkpoint: an uninterrupted run, then a kill -9 at each point.
# The optimizer sharded: writing a checkpoint is then a collective that every rank enters.
BEST=(--set checkpoint.keep_best=eval_loss --set checkpoint.every_steps=2 --set checkpoint.keep=2
      --set reduce.shard_optimizer=true --set 'optimizer={"type":"adam","lr":0.01}')
run_np 2 train --quiet "${EVAL[@]}" "${BEST[@]}" --set checkpoint.dir="$WORK/whole" --log "$WORK/whole.jsonl"
[ -f "$WORK/whole/best" ] || fail "no best checkpoint"
[ "$(ls "$WORK/whole"/step-*.safetensors | wc -l)" -eq 2 ] || fail "checkpoint.keep 2 is not kept"
best_step=$(grep '"best":{' "$WORK/whole.jsonl" | tail -1 | field step)
for kind in kill_writing_best kill_writing_checkpoint kill_pruning; do
  dir="$WORK/$kind"
  if run_np 2 train --quiet "${EVAL[@]}" "${BEST[@]}" --set checkpoint.dir="$dir" --log "$dir.jsonl" \
       --set debug.fail_rank=0 --set debug.fail_kind="$kind" --set debug.fail_step=10 2> "$WORK/err"; then
    fail "$kind: the run was not killed"
  fi
  # What the kill left: the best loads (export reads and checks it), and so does the latest.
  "$MPIDDP" export "$dir/best" "$WORK/best.safetensors" > /dev/null || fail "$kind: the best does not load"
  latest=$(ls "$dir"/step-*.safetensors | tail -1)
  "$MPIDDP" export "$latest" "$WORK/latest.safetensors" > /dev/null || fail "$kind: $latest does not load"
  case $kind in
    kill_writing_best) [ -f "$dir/.best.tmp" ] || fail "$kind: no temporary file of the best" ;;
    kill_writing_checkpoint) [ -f "$dir/.step-000000000010.safetensors.tmp" ] || fail "$kind: no temporary file" ;;
    kill_pruning) [ "$(ls "$dir"/step-*.safetensors | wc -l)" -eq 3 ] || fail "$kind: expected 3 checkpoints before pruning" ;;
  esac
  run_np 2 train --quiet "${EVAL[@]}" "${BEST[@]}" --set checkpoint.dir="$dir" --resume latest \
    --log "$dir.resumed.jsonl" 2> "$WORK/err" || { cat "$WORK/err"; fail "$kind: the resume failed"; }
  [ "$(checksum_of "$dir.resumed.jsonl")" = "$(checksum_of "$WORK/whole.jsonl")" ] ||
    fail "$kind: the resumed run's parameters differ from the uninterrupted run's"
  cmp -s "$dir/best" "$WORK/whole/best" || fail "$kind: the best checkpoint differs from the uninterrupted run's"
  [ ! -e "$dir/.best.tmp" ] || fail "$kind: the stale temporary file was not removed"
done

# --resume best continues from the best evaluation's step; export gives its weights.
run_np 1 train --quiet "${EVAL[@]}" "${BEST[@]}" --set checkpoint.dir="$WORK/whole" --set epochs=9 --resume best \
  --log "$WORK/from_best.jsonl"
grep -q "\"resumed_from\":{\"path\":\"$WORK/whole/best\",[^}]*\"step\":$best_step}" "$WORK/from_best.jsonl" ||
  fail "--resume best did not resume from the best checkpoint (step $best_step)"
"$MPIDDP" export "$WORK/whole/best" "$WORK/best_weights.safetensors" > /dev/null
run_np 1 train --quiet --set epochs=1 --set init.weights="$WORK/best_weights.safetensors" > /dev/null ||
  fail "the best checkpoint's exported weights do not load as init.weights"

# The average of the weights: its loss in the eval and epoch records and the CSV, the best by
# it kept, and its weights beside save_weights' and export's, loadable as init.weights.
run_np 2 train --quiet "${EVAL[@]}" --set epochs=2 --set ema.decay=0.9 --set checkpoint.dir="$WORK/ema" \
  --set checkpoint.keep_best=eval_loss_ema --set save_weights="$WORK/final.safetensors" \
  --set log.csv="$WORK/ema.csv" --log "$WORK/ema.jsonl"
[ "$(grep -c '"kind":"eval",.*"eval_loss_ema":' "$WORK/ema.jsonl")" -eq "$(grep -c '"kind":"eval"' "$WORK/ema.jsonl")" ] ||
  fail "an eval record lacks eval_loss_ema"
grep -q '"kind":"epoch",.*"eval_loss_ema":' "$WORK/ema.jsonl" || fail "the epoch record lacks eval_loss_ema"
grep -q '"best":{"metric":"eval_loss_ema"' "$WORK/ema.jsonl" || fail "no best checkpoint by eval_loss_ema"
[ -n "$(awk -F, 'NR > 1 && $1 == "eval" && $9 != ""' "$WORK/ema.csv")" ] || fail "log.csv's eval_loss_ema column is empty"
"$MPIDDP" export "$WORK/ema/best" "$WORK/exported.safetensors" > /dev/null
for weights in "$WORK/final.ema.safetensors" "$WORK/exported.ema.safetensors"; do
  [ -f "$weights" ] || fail "no $weights"
  run_np 1 train --quiet --set epochs=1 --set init.weights="$weights" > /dev/null ||
    fail "$weights does not load as init.weights"
done
! cmp -s "$WORK/final.safetensors" "$WORK/final.ema.safetensors" || fail "the average's file holds the weights"

# Bad input: a TensorBoard directory under a regular file (exit 8, before the first step: no
# log published), a metric the run does not compute (exit 2).
touch "$WORK/file"
set +e
run_np 2 train --quiet --set log.tensorboard="$WORK/file/tb" --log "$WORK/bad.jsonl" 2> "$WORK/err"
code=$?
run_np 1 train --quiet --set checkpoint.dir="$WORK/ck" --set checkpoint.keep_best=eval_accuracy 2> "$WORK/err2"
code2=$?
run_np 1 train --quiet --set early_stopping.metric=eval_loss_ema 2> "$WORK/err3"
code3=$?
run_np 1 train --quiet --set ema.decay=1 2> "$WORK/err4"
code4=$?
set -e
[ "$code" -eq 8 ] || { cat "$WORK/err"; fail "an uncreatable log.tensorboard gave exit $code, not 8"; }
grep -q "$WORK/file/tb" "$WORK/err" || fail "the message does not name the directory: $(cat "$WORK/err")"
[ ! -e "$WORK/bad.jsonl" ] || fail "a step ran before the TensorBoard directory failed"
[ "$code2" -eq 2 ] || fail "keep_best on eval_accuracy of a regression gave exit $code2, not 2"
grep -q "checkpoint.keep_best" "$WORK/err2" || fail "the message does not name checkpoint.keep_best"
[ "$code3" -eq 2 ] && grep -q "early_stopping.metric.*ema.decay" "$WORK/err3" ||
  fail "eval_loss_ema without ema.decay: exit $code3, $(cat "$WORK/err3")"
[ "$code4" -eq 2 ] && grep -q "ema.decay" "$WORK/err4" || fail "ema.decay 1: exit $code4, $(cat "$WORK/err4")"

echo "early stop after step $first_stop at np 1 2 3, deterministic eval records equal, best at step $best_step survives 3 kill points"
