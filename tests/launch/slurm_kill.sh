#!/usr/bin/env bash
# kill -9 of one rank of a 2-task job of launch/slurm.sbatch, on a one-node cluster of
# launch/local-slurm: the job ends within 30 s in a failed state with a non-zero exit code; the
# newest complete checkpoint loads, and a job with --resume latest continues exactly as an
# uninterrupted run does (the same step records, mpiddp compare passes, the same parameters).
# Skips (exit 77) when Slurm and munge are not installed: scripts/install-deps.sh --with-slurm.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/slurm_cluster.sh"

# records FILE: the step records, time fields removed.
records() { grep '"kind":"step"' "$1" | sed -E 's/,"time_s":[^,}]*//'; }
checksum_of() { grep '"kind":"end"' "$1" | sed -E 's/.*"param_checksum":"([0-9a-f]+)".*/\1/'; }

# Adam has state a resume must restore; 4 steps per epoch, a checkpoint every 10 steps (so the
# newest is usually mid-epoch), the newest two kept.
ckpt="$WORK/checkpoints"
common=(--quiet --set 'optimizer={"type":"adam","lr":0.01}' --set checkpoint.dir="$ckpt"
        --set checkpoint.every_steps=10 --set checkpoint.keep=2)

# job_field JOB FIELD: a field of `scontrol show job`, such as JobState or ExitCode.
job_field() { scontrol show job "$1" | grep -oE "(^| )$2=[^ ]*" | cut -d= -f2; }

# A job far longer than the test, killed once two checkpoints exist.
job=$(submit --no-wait auto "" "${common[@]}" --set epochs=1000000 | cut -d';' -f1)
ranks=""
for _ in $(seq 600); do
  ranks=$(job_rank_pids "$job")
  [ "$(wc -w <<< "$ranks")" -ge 2 ] && [ "$(ls "$ckpt" 2> /dev/null | grep -c '^step-')" -ge 2 ] && break
  sleep 0.1
done
[ "$(wc -w <<< "$ranks")" -eq 2 ] || { cat "$WORK/job-$job.out"; fail "job $job: found ranks '$ranks', expected 2 processes"; }
[ "$(ls "$ckpt" | grep -c '^step-')" -ge 2 ] || fail "job $job: no two checkpoints in 60 s"
victim=$(head -n 1 <<< "$ranks")
start=$(date +%s.%N)
kill -9 "$victim"
deadline=$(( $(date +%s) + 30 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  case "$(job_field "$job" JobState)" in RUNNING|COMPLETING) sleep 0.1 ;; *) break ;; esac
done
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
job_state=$(job_field "$job" JobState) exit_code=$(job_field "$job" ExitCode)
if [ "$job_state" = RUNNING ] || [ "$job_state" = COMPLETING ]; then
  scancel "$job" || true
  cat "$WORK/job-$job.out"
  fail "kill -9 of rank pid $victim: job $job still $job_state 30 s later"
fi
[ "$job_state" = FAILED ] || { cat "$WORK/job-$job.out"; fail "job $job: JobState=$job_state, expected FAILED"; }
[ "$exit_code" != 0:0 ] || fail "job $job: ExitCode=0:0 after a rank was killed"
# The rank that survived is gone too: nothing of the job is left running.
[ -z "$(job_rank_pids "$job")" ] || fail "job $job: rank processes left after the job ended"
echo "kill -9 of rank pid $victim: job $job ended in $secs s, JobState=$job_state, ExitCode=$exit_code"

# The newest complete checkpoint, and an epoch count that trains two epochs past it.
latest=$(ls "$ckpt" | grep -E '^step-[0-9]+\.safetensors$' | tail -n 1)
[ -n "$latest" ] || fail "no complete checkpoint after the kill"
step=$((10#$(sed -E 's/step-([0-9]+)\.safetensors/\1/' <<< "$latest")))
epochs=$(( step / 4 + 2 ))
rc=0
job=$(submit auto "" "${common[@]}" --set epochs="$epochs" --resume latest) || rc=$?
resumed="$WORK/runs/slurm-$job/train.jsonl"
[ "$rc" -eq 0 ] || { cat "$WORK/job-$job.out"; fail "resume job $job: exit code $rc"; }
grep -q "\"resumed_from\":{\"path\":\"[^\"]*$latest\"" "$resumed" || fail "resume job $job did not resume from $latest"

# The uninterrupted run, by the tests' launcher: the resumed steps are the same, bit for bit.
run_np 2 train --quiet --set 'optimizer={"type":"adam","lr":0.01}' --set epochs="$epochs" \
  --log "$WORK/straight.jsonl"
records "$WORK/straight.jsonl" | grep -A100000 "\"step\":$((step + 1))," > "$WORK/straight.records"
records "$resumed" > "$WORK/resumed.records"
[ -s "$WORK/resumed.records" ] || fail "the resumed job logged no steps"
cmp -s "$WORK/straight.records" "$WORK/resumed.records" ||
  { diff "$WORK/straight.records" "$WORK/resumed.records" | head; fail "resumed steps differ from the uninterrupted run"; }
# compare pairs epochs and steps from the first: the baseline is the uninterrupted run's tail,
# from the epoch the resumed job started in (steps after the checkpoint's).
awk -v s="$step" -v e0=$(( step / 4 + 1 )) '
  /"kind":"step"/ { match($0, /"step":[0-9]+/); if (substr($0, RSTART + 7, RLENGTH - 7) + 0 <= s) next }
  /"kind":"epoch"/ { match($0, /"epoch":[0-9]+/); if (substr($0, RSTART + 8, RLENGTH - 8) + 0 < e0) next }
  { print }' "$WORK/straight.jsonl" > "$WORK/straight_tail.jsonl"
"$MPIDDP" compare "$WORK/straight_tail.jsonl" "$resumed" > "$WORK/compare.txt" ||
  { cat "$WORK/compare.txt"; fail "mpiddp compare: the resumed job does not match the uninterrupted run"; }
[ "$(checksum_of "$WORK/straight.jsonl")" = "$(checksum_of "$resumed")" ] ||
  fail "the resumed job's final parameters differ from the uninterrupted run's"
echo "resume from $latest (step $step) through slurm.sbatch: steps $((step + 1))..$(( epochs * 4 )) and" \
     "final parameters equal to the uninterrupted run's; compare: $(tail -n 1 "$WORK/compare.txt")"
