# Shared by the tests that submit Slurm jobs, kill or cut them off and resume them
# (slurm_kill, the cluster tests): a job's fields, the newest checkpoint, and the check that a
# resumed job continues exactly as an uninterrupted run does. Sourced after tests/cli/lib.sh.

# tear_down_cluster_on_exit STOP_SCRIPT: on every exit of the test, stop the cluster in $state
# while $cluster_up is 1 (its Slurm logs shown when the test failed) and remove $WORK and
# $state; SIGTERM and SIGINT (a ctest timeout, Ctrl-C) become exits, so they tear down too.
tear_down_cluster_on_exit() {
  cluster_stop=$1 cluster_up=0
  teardown() {
    local rc=$?
    if [ "$cluster_up" -eq 1 ]; then
      [ "$rc" -eq 0 ] || tail -n 30 "$state"/log/slurm*.log >&2 || true
      "$cluster_stop" "$state" || true
    fi
    rm -rf "$WORK" "$state"
    exit "$rc"
  }
  trap teardown EXIT
  trap 'exit 143' TERM INT
}

# job_field JOB FIELD: a field of `scontrol show job`, such as JobState or ExitCode.
job_field() { scontrol show job "$1" | grep -oE "(^| )$2=[^ ]*" | cut -d= -f2; }

# records FILE: the step records, time fields removed.
records() { grep '"kind":"step"' "$1" | sed -E 's/,"time_s":[^,}]*//'; }
checksum_of() { grep '"kind":"end"' "$1" | sed -E 's/.*"param_checksum":"([0-9a-f]+)".*/\1/'; }

# latest_checkpoint DIR: the newest complete checkpoint's file name (fails when there is none).
latest_checkpoint() {
  local latest
  latest=$(ls "$1" | grep -E '^step-[0-9]+\.safetensors$' | tail -n 1)
  [ -n "$latest" ] || fail "no complete checkpoint in $1"
  echo "$latest"
}
# checkpoint_step NAME: the step count of a checkpoint file name.
checkpoint_step() { echo $((10#$(sed -E 's/step-([0-9]+)\.safetensors/\1/' <<< "$1"))); }

# expect_resume_exact STEP STEPS_PER_EPOCH EPOCHS RESUMED_LOG TRAIN_ARGS...: the uninterrupted
# run (the tests' launcher, 2 ranks, TRAIN_ARGS, EPOCHS epochs) logs the same steps after STEP
# as RESUMED_LOG, bit for bit; mpiddp compare passes on the matching tail; the same final
# parameters. Prints one line saying so.
expect_resume_exact() {
  local step=$1 per_epoch=$2 epochs=$3 resumed=$4
  shift 4
  run_np 2 train --quiet "$@" --set epochs="$epochs" --log "$WORK/straight.jsonl"
  records "$WORK/straight.jsonl" | grep -A100000 "\"step\":$((step + 1))," > "$WORK/straight.records"
  records "$resumed" > "$WORK/resumed.records"
  [ -s "$WORK/resumed.records" ] || fail "the resumed job logged no steps"
  cmp -s "$WORK/straight.records" "$WORK/resumed.records" ||
    { diff "$WORK/straight.records" "$WORK/resumed.records" | head; fail "resumed steps differ from the uninterrupted run"; }
  # compare pairs epochs and steps from the first: the baseline is the uninterrupted run's
  # tail, from the epoch the resumed job started in (steps after the checkpoint's).
  awk -v s="$step" -v e0=$(( step / per_epoch + 1 )) '
    /"kind":"step"/ { match($0, /"step":[0-9]+/); if (substr($0, RSTART + 7, RLENGTH - 7) + 0 <= s) next }
    /"kind":"epoch"/ { match($0, /"epoch":[0-9]+/); if (substr($0, RSTART + 8, RLENGTH - 8) + 0 < e0) next }
    { print }' "$WORK/straight.jsonl" > "$WORK/straight_tail.jsonl"
  "$MPIDDP" compare "$WORK/straight_tail.jsonl" "$resumed" > "$WORK/compare.txt" ||
    { cat "$WORK/compare.txt"; fail "mpiddp compare: the resumed job does not match the uninterrupted run"; }
  [ "$(checksum_of "$WORK/straight.jsonl")" = "$(checksum_of "$resumed")" ] ||
    fail "the resumed job's final parameters differ from the uninterrupted run's"
  echo "resume from step $step: steps $((step + 1))..$(( epochs * per_epoch )) and final parameters" \
       "equal to the uninterrupted run's; compare: $(tail -n 1 "$WORK/compare.txt")"
}
