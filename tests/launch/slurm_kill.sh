#!/usr/bin/env bash
# kill -9 of one rank of a 2-task job of launch/slurm.sbatch, on a one-node cluster of
# launch/local-slurm: the job ends within 30 s in a failed state with a non-zero exit code; the
# newest complete checkpoint loads, and a job with --resume latest continues exactly as an
# uninterrupted run does (the same step records, mpiddp compare passes, the same parameters).
# Skips (exit 77) when Slurm and munge are not installed: scripts/install-deps.sh --with-slurm.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/slurm_cluster.sh"

# Adam has state a resume must restore; 4 steps per epoch, a checkpoint every 10 steps (so the
# newest is usually mid-epoch), the newest two kept.
ckpt="$WORK/checkpoints"
common=(--quiet --set 'optimizer={"type":"adam","lr":0.01}' --set checkpoint.dir="$ckpt"
        --set checkpoint.every_steps=10 --set checkpoint.keep=2)

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
latest=$(latest_checkpoint "$ckpt")
step=$(checkpoint_step "$latest")
epochs=$(( step / 4 + 2 ))
rc=0
job=$(submit auto "" "${common[@]}" --set epochs="$epochs" --resume latest) || rc=$?
resumed="$WORK/runs/slurm-$job/train.jsonl"
[ "$rc" -eq 0 ] || { cat "$WORK/job-$job.out"; fail "resume job $job: exit code $rc"; }
grep -q "\"resumed_from\":{\"path\":\"[^\"]*$latest\"" "$resumed" || fail "resume job $job did not resume from $latest"

# The uninterrupted run, by the tests' launcher: the resumed steps are the same, bit for bit.
expect_resume_exact "$step" 4 "$epochs" "$resumed" --set 'optimizer={"type":"adam","lr":0.01}'
