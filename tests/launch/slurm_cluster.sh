# Shared by the slurm tests: brings up a one-node cluster of launch/local-slurm for this test
# (torn down on every exit, its logs shown when the test failed) and submits jobs through
# launch/slurm.sbatch. Sourced after tests/cli/lib.sh; exits 77 (skip) when Slurm and munge
# are not installed: scripts/install-deps.sh --with-slurm.
# A test may set both first, to the installed copies (slurm_installed.sh).
sbatch_script="${sbatch_script:-$SOURCE_DIR/launch/slurm.sbatch}"
local_slurm="${local_slurm:-$SOURCE_DIR/launch/local-slurm}"

PATH="$PATH:/usr/sbin:/sbin"
for tool in munged slurmctld slurmd sbatch; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/install-deps.sh --with-slurm)"; exit 77; }
done

# Not under $WORK: munge wants every directory above its socket searchable by all.
state="$(mktemp -d "${TMPDIR:-/tmp}/mpiddp-slurm-test.XXXXXX")"
cluster_up=0
teardown() {
  local rc=$?
  if [ "$cluster_up" -eq 1 ]; then
    [ "$rc" -eq 0 ] || tail -n 30 "$state"/log/slurm*.log >&2 || true
    "$local_slurm/stop.sh" "$state" || true
  fi
  rm -rf "$WORK" "$state"
  exit "$rc"
}
trap teardown EXIT
trap 'exit 143' TERM INT  # so that a ctest timeout or Ctrl-C still tears the cluster down
start_args=()
# 2 tasks need 2 CPUs on the node; on a smaller machine, declare them.
[ "$(slurmd -C | sed -nE 's/.* CPUs=([0-9]+).*/\1/p')" -ge 2 ] || start_args=(--cpus 2)
t0=$(date +%s.%N)
"$local_slurm/start.sh" "${start_args[@]}" "$state" > /dev/null
cluster_up=1
export SLURM_CONF="$state/slurm.conf"
echo "cluster up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"

# submit [--no-wait] LAUNCHER SRUN_MPI ARGS...: submits one 2-task job of launch/slurm.sbatch
# from $WORK with MPIDDP_LAUNCHER=LAUNCHER and srun's plugin SRUN_MPI (empty: the script's
# choice), ARGS after the script, and prints its job id; waits for it and returns the job's exit
# code unless --no-wait. Output in $WORK/job-JOBID.out, the run directory is $WORK/runs/slurm-JOBID.
submit() {
  local wait=(--wait)
  if [ "$1" = --no-wait ]; then wait=(); shift; fi
  local launcher=$1 srun_mpi=$2; shift 2
  (cd "$WORK" && MPIDDP="$MPIDDP" MPIDDP_LAUNCHER="$launcher" MPIDDP_SRUN_MPI="$srun_mpi" timeout 240 \
     sbatch "${wait[@]}" --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=5 \
            --output="$WORK/job-%j.out" "$sbatch_script" "$@")
}

# job_rank_pids JOB: the mpiddp processes of Slurm job JOB, however they were started (srun
# tasks run below one slurmstepd, mpirun's ranks below the batch step's): those whose
# environment says SLURM_JOB_ID=JOB.
job_rank_pids() {
  local pid environment
  for pid in $(pgrep -x "$(basename "$MPIDDP")" || true); do
    is_mpiddp "$pid" || continue
    environment=$(tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null || true)
    if grep -qx "SLURM_JOB_ID=$1" <<< "$environment"; then echo "$pid"; fi
  done
}
