#!/usr/bin/env bash
# Preemption and the time limit under launch/slurm.sbatch, on a one-node cluster of
# launch/local-slurm: `scancel --signal=USR1 --batch` (what --signal=B:USR1@120 sends before the
# time limit) mid-run makes the ranks stop after their current step with a checkpoint (exit
# code 9), the script requeues the job, and the requeued job (SLURM_RESTART_COUNT=1) continues
# from that checkpoint in the same log: its final parameters equal an uninterrupted run's bit
# for bit, `mpiddp compare` passes, and the log has the interrupted and restart records.
# Skips (exit 77) when Slurm and munge are not installed: scripts/install-deps.sh --with-slurm.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/slurm_cluster.sh"

job_field() { scontrol show job "$1" | grep -oE "(^| )$2=[^ ]*" | cut -d= -f2; }

# 300 epochs of 4 steps, rank 0 paced to at least 5 ms a step: a fast machine runs the 1,200
# steps unpaced in 0.3 s, before the signal arrives. The uninterrupted run below is paced too
# (common holds the flags).
ckpt="$WORK/checkpoints"
# shellcheck disable=SC2207  # pace_flags prints a list of flags
common=(--quiet --set 'optimizer={"type":"adam","lr":0.01}' --set epochs=300
        --set checkpoint.dir="$ckpt" --set checkpoint.every_steps=50 $(pace_flags 0 0.005))
job=$(submit --no-wait auto "" "${common[@]}" | cut -d';' -f1)
log="$WORK/runs/slurm-$job/train.jsonl"
for _ in $(seq 600); do
  grep -q '"kind":"checkpoint"' "$log" 2> /dev/null && break
  sleep 0.1
done
grep -q '"kind":"checkpoint"' "$log" || { cat "$WORK/job-$job.out"; fail "job $job: no checkpoint in 60 s"; }
scancel --signal=USR1 --batch "$job"

# The requeue: the job goes back to PENDING with Restarts=1. Slurm holds a requeued job for
# about 2 minutes (EligibleTime = requeue + 121 s, measured on 22.05); a test need not wait.
for _ in $(seq 300); do
  [ "$(job_field "$job" Restarts)" = 1 ] && [ "$(job_field "$job" JobState)" = PENDING ] && break
  sleep 0.1
done
[ "$(job_field "$job" Restarts)" = 1 ] || { cat "$WORK/job-$job.out"; fail "job $job was not requeued"; }
# Started at once, the requeued step can meet the first step, which has the same step id 0,
# still in the spool directory: under Open MPI its PMIx socket ("Address already in use"), under
# MPICH its slurmstepd socket (vm_<job>.0), which takes the new step's PMI2 key-value exchange
# ("mpi/pmi2: failed to send temp kvs", seen on a loaded machine). Wait until both are gone.
for _ in $(seq 300); do
  spool=$(ls "$state/spool")
  [[ "$spool" == *"pmix.$job.0"* || "$spool" == *"_$job.0"* ]] || break
  sleep 0.1
done
sleep 1
scontrol update JobId="$job" StartTime=now
deadline=$(( $(date +%s) + 200 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  case "$(job_field "$job" JobState)" in COMPLETED|FAILED|CANCELLED|TIMEOUT) break ;; esac
  sleep 0.2
done
job_state=$(job_field "$job" JobState)
[ "$job_state" = COMPLETED ] || { cat "$WORK/job-$job.out"; fail "requeued job $job: JobState=$job_state, expected COMPLETED"; }

out="$WORK/job-$job.out"
grep -q "requeueing job $job" "$out" || { cat "$out"; fail "the script did not say it requeued"; }
interrupted=$(grep '"kind":"interrupted"' "$log") || { cat "$out"; fail "no interrupted record"; }
step=$(sed -nE 's/.*"step":([0-9]+).*/\1/p' <<< "$interrupted")
# The launcher passes the signal on to the ranks one after the other: a step can end between
# the two deliveries, and then the stop is decided on the first rank's vote alone (seen once
# in CI: "ranks":[0]). Either way every rank stops after the same step, with one checkpoint.
grep -qE "\"signal\":\"SIGUSR1\",\"ranks\":\[(0|1|0,1)\],\"checkpoint\":\"[^\"]*step-0*$step.safetensors\"" <<< "$interrupted" ||
  fail "interrupted record: $interrupted"
grep -qE "\"kind\":\"restart\",\"attempt\":1,\"exit_code\":9,.*\"from\":\{\"path\":\"[^\"]*step-0*$step.safetensors\"" "$log" ||
  { grep restart "$log"; fail "no restart record from step $step"; }
[ "$(grep -c '"kind":"run"' "$log")" -eq 1 ] || fail "the log holds more than one run record"

# The uninterrupted run, by the tests' launcher: the same steps and parameters, bit for bit.
run_np 2 train "${common[@]}" --set checkpoint.dir="$WORK/straight" --log "$WORK/straight.jsonl"
expect_same_run "$WORK/straight.jsonl" "$log" "the requeued run"
echo "slurm requeue: job $job stopped by SIGUSR1 after step $step, requeued, finished with the" \
     "uninterrupted run's parameters ($(checksum_of "$log")); compare: $(tail -n 1 "$WORK/compare.txt")"
