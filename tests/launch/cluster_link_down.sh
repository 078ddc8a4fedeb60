#!/usr/bin/env bash
# One node's link goes down in the middle of a 2-node job (ip link set ... down at the bridge,
# from outside the node): with watchdog.timeout_s = 20 the job ends within 60 s, non-zero,
# with the watchdog's report naming the rank and the host that stopped answering, and the
# newest checkpoint intact; with the link back, --resume latest on two nodes continues bit for
# bit as an uninterrupted run does. Skips (exit 77) without root, network namespaces or Slurm.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/cluster_lib.sh"
# Under Open MPI and MPICH alike: each node has its own boot id, so MPICH's UCX sends between
# the nodes over tcp on the link too (Note [a boot id per node] in launch/local-cluster/start.sh).

# Adam has state a resume must restore; 4 steps per epoch, a checkpoint every 10 steps.
ckpt="$WORK/checkpoints"
adam='optimizer={"type":"adam","lr":0.01}'
common=(--quiet --set "$adam" --set checkpoint.dir="$ckpt" --set checkpoint.every_steps=10
        --set checkpoint.keep=2)

job=$(submit --no-wait 1 "${common[@]}" --set epochs=1000000 --set watchdog.timeout_s=20)
for _ in $(seq 600); do
  [ "$(ls "$ckpt" 2> /dev/null | grep -c '^step-')" -ge 2 ] && break
  sleep 0.1
done
[ "$(ls "$ckpt" | grep -c '^step-')" -ge 2 ] || { cat "$WORK/job-$job.out"; fail "job $job: no two checkpoints in 60 s"; }
start=$(date +%s.%N)
cluster_link n2 down
wait_job_end "$job" 60 || { cluster_link n2 up; cat "$WORK/job-$job.out"; fail "n2's link down: job $job still $(job_field "$job" JobState) 60 s later"; }
secs=$(elapsed "$start")
job_state=$(job_field "$job" JobState) exit_code=$(job_field "$job" ExitCode)
out="$WORK/job-$job.out"
# The checkpoints as the cut-off job left them, before the link is back.
latest=$(latest_checkpoint "$ckpt")
cluster_link n2 up
echo "n2's link down: job $job ended after $secs s, JobState=$job_state, ExitCode=$exit_code"
[ "$job_state" != COMPLETED ] && [ "$exit_code" != 0:0 ] ||
  { cat "$out"; fail "job $job: JobState=$job_state ExitCode=$exit_code after its node was cut off"; }
grep -qE "rank 0: watchdog: waited [0-9.]+ s in .* on host n1, longer than watchdog.timeout_s = 20" "$out" ||
  { cat "$out"; fail "no watchdog report from rank 0 on n1"; }
grep -qE "rank 1: no answer within [0-9]+ s .*host n2 unreachable" "$out" ||
  { cat "$out"; fail "the report does not name rank 1 on host n2 as not answering"; }
grep -E "rank 0: watchdog|rank 1: no answer" "$out"
# Nothing of the job is left on n1; n2's leftovers end when the controller reaches it again.
[ -z "$(node_job_pids n1)" ] || fail "processes left on n1 after job $job: $(node_job_pids n1)"

# Back to two idle nodes (the controller declared n2 down; ReturnToService=2 takes it back
# when its slurmd answers again), then the resume across both.
slurm_wait_idle 90 n1 n2 || fail "n2 did not come back after its link was restored"
for _ in $(seq 100); do [ -z "$(node_job_pids n2)" ] && break; sleep 0.2; done
[ -z "$(node_job_pids n2)" ] || fail "processes left on n2 after job $job: $(node_job_pids n2)"
step=$(checkpoint_step "$latest")
epochs=$(( step / 4 + 2 ))
rc=0
job=$(submit 1 "${common[@]}" --set epochs="$epochs" --resume latest) || rc=$?
resumed="$WORK/runs/slurm-$job/train.jsonl"
[ "$rc" -eq 0 ] || { cat "$WORK/job-$job.out"; fail "resume job $job: exit code $rc"; }
grep -q "\"resumed_from\":{\"path\":\"[^\"]*$latest\"" "$resumed" || fail "resume job $job did not resume from $latest"
run_record_check "$resumed" '"n1","n2"' none mpi
expect_resume_exact "$step" 4 "$epochs" "$resumed" --set "$adam"
