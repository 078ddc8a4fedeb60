#!/usr/bin/env bash
# Every process that one node runs for a 2-node x 2-task job killed (kill -9 of both ranks on
# n2 at once, as when a node's processes crash together): Slurm ends the job in a failed state
# within 30 s and nothing of it is left on either node. (Killing Slurm's own slurmstepd too is
# a node failure: the controller ends the job after SlurmdTimeout, as cluster_link_down shows.)
# Skips (exit 77) without root, network namespaces or Slurm.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/cluster_lib.sh"

job=$(submit --no-wait 2 --quiet --set epochs=1000000)
for _ in $(seq 600); do
  [ "$(node_mpiddp_pids n1 | wc -w)" -eq 2 ] && [ "$(node_mpiddp_pids n2 | wc -w)" -eq 2 ] && break
  sleep 0.1
done
[ "$(node_mpiddp_pids n2 | wc -w)" -eq 2 ] && [ "$(node_mpiddp_pids n1 | wc -w)" -eq 2 ] ||
  { cat "$WORK/job-$job.out"; fail "job $job: not 2 ranks on each node after 60 s"; }
sleep 2  # past MPI_Init: the ranks are training
victims=$(node_mpiddp_pids n2 | tr '\n' ' ')
start=$(date +%s.%N)
# shellcheck disable=SC2086  # one argument per pid
kill -9 $victims
echo "killed n2's ranks, pids $victims"
wait_job_end "$job" 30 || { cat "$WORK/job-$job.out"; fail "n2's processes killed: job $job still $(job_field "$job" JobState) 30 s later"; }
secs=$(elapsed "$start")
job_state=$(job_field "$job" JobState) exit_code=$(job_field "$job" ExitCode)
echo "n2's processes killed: job $job ended after $secs s, JobState=$job_state, ExitCode=$exit_code"
[ "$job_state" = FAILED ] || { cat "$WORK/job-$job.out"; fail "job $job: JobState=$job_state, expected FAILED"; }
[ "$exit_code" != 0:0 ] || fail "job $job: ExitCode=0:0 after n2's processes were killed"
for _ in $(seq 50); do
  [ -z "$(node_job_pids n1)$(node_job_pids n2)" ] && break
  sleep 0.2
done
for node in n1 n2; do
  [ -z "$(node_job_pids "$node")" ] || fail "processes left on $node after job $job: $(node_job_pids "$node")"
done
echo "nothing of job $job is left on n1 or n2"
