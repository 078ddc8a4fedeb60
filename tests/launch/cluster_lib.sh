# Shared by the cluster tests (with job_lib.sh, which it sources): brings up a 2-node cluster of launch/local-cluster for this test
# (torn down on every exit, its logs shown when the test failed) and submits jobs of
# launch/slurm.sbatch across it. Sourced after tests/cli/lib.sh; exits 77 (skip) without root,
# network namespaces, or Slurm and munge (scripts/install-deps.sh --with-slurm).
source "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
source "$SOURCE_DIR/launch/local-slurm/lib.sh"  # slurm_wait_idle
sbatch_script="$SOURCE_DIR/launch/slurm.sbatch"
local_cluster="$SOURCE_DIR/launch/local-cluster"

PATH="$PATH:/usr/sbin:/sbin"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
for tool in munged slurmctld slurmd sbatch ip nsenter unshare; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/install-deps.sh --with-slurm)"; exit 77; }
done
probe="mpiddp-probe-$$"
ip netns add "$probe" 2>/dev/null || { echo "SKIP: cannot create a network namespace here"; exit 77; }
ip netns del "$probe"

# Not under $WORK: munge wants every directory above its socket searchable by all.
state="$(mktemp -d "${TMPDIR:-/tmp}/mpiddp-cluster-test.XXXXXX")"
tear_down_cluster_on_exit "$local_cluster/stop.sh"
t0=$(date +%s.%N)
"$local_cluster/start.sh" --state "$state" ${CLUSTER_START_ARGS:-} 2 > /dev/null
cluster_up=1
source "$state/env.sh"
echo "cluster up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s ($(cat "$state/tc"))"

# elapsed SINCE: seconds since the `date +%s.%N` value SINCE, one decimal.
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# submit [--no-wait] TASKS_PER_NODE ARGS...: one job of launch/slurm.sbatch on both nodes,
# from $WORK, never requeued (a node failure must end it, not restart it); prints its id;
# waits for it and returns the job's exit code unless --no-wait. Output in $WORK/job-JOBID.out,
# the run directory is $WORK/runs/slurm-JOBID.
submit() {
  local wait=(--wait)
  if [ "$1" = --no-wait ]; then wait=(); shift; fi
  local per_node=$1; shift
  (cd "$WORK" && MPIDDP="$MPIDDP" timeout 240 \
     sbatch "${wait[@]}" --parsable --no-requeue --nodes=2 --ntasks-per-node="$per_node" \
            --cpus-per-task=1 --time=5 --output="$WORK/job-%j.out" "$sbatch_script" "$@")
}

# wait_job_end JOB SECONDS: waits until JOB is no longer running; returns 1 if it still is.
wait_job_end() {
  local deadline=$(( $(date +%s) + $2 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    case "$(job_field "$1" JobState)" in RUNNING|COMPLETING|PENDING|CONFIGURING) sleep 0.2 ;; *) return 0 ;; esac
  done
  return 1
}

# node_mpiddp_pids NODE: the mpiddp processes running on NODE (in its network namespace).
node_mpiddp_pids() {
  local pid
  for pid in $(cluster_pids "$1"); do if is_mpiddp "$pid"; then echo "$pid"; fi; done
}

# node_job_pids NODE: every process on NODE except its slurmd (job steps, ranks, leftovers).
node_job_pids() {
  local daemon pid
  daemon=$(awk -v n="slurmd-$1" '$1 == n { print $2 }' "$state/pids")
  for pid in $(cluster_pids "$1"); do [ "$pid" = "$daemon" ] || echo "$pid"; done
}

# run_record_check LOG HOSTS WITHIN BETWEEN: the run record lists HOSTS (a JSON list body,
# e.g. "n1","n2") and the reduction levels WITHIN / BETWEEN on 2 nodes.
run_record_check() {
  local run
  run=$(grep '"kind":"run"' "$1") || fail "$1: no run record"
  grep -qF "\"hosts\":[$2]" <<< "$run" || fail "$1: run record hosts are not [$2]: $(grep -o '"hosts":\[[^]]*\]' <<< "$run")"
  grep -qE "\"reduction\":\{\"nodes\":2,\"ranks_per_node\":[0-9]+,\"within_node\":\"$3\",\"between_nodes\":\"$4\"\}" <<< "$run" ||
    fail "$1: run record reduction is not within_node $3, between_nodes $4 on 2 nodes: $(grep -o '"reduction":{[^}]*}' <<< "$run")"
}
