#!/usr/bin/env bash
# launch/slurm.sbatch on a real one-node Slurm cluster (launch/local-slurm): a 2-task job through
# srun (--mpi=pmix for Open MPI, pmi2 for MPICH) and through mpirun inside the allocation must
# both reproduce the np=1 baseline; outside an allocation the script refuses; stopping the
# cluster cancels a running job and leaves none of its processes or the daemons behind.
# Skips (exit 77) when Slurm and munge are not installed: scripts/install-deps.sh --with-slurm.
source "$(dirname "$0")/../cli/lib.sh"

# Outside an allocation: exit 2 and say how to submit, before touching anything.
rc=0
env -u SLURM_JOB_ID bash "$SOURCE_DIR/launch/slurm.sbatch" --quiet > "$WORK/outside.txt" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "outside an allocation: exit code $rc, expected 2"
grep -q "not inside a Slurm allocation" "$WORK/outside.txt" || fail "outside: no clear message"
grep -q "sbatch launch/slurm.sbatch" "$WORK/outside.txt" || fail "outside: does not say how to submit"

source "$(dirname "$0")/slurm_cluster.sh"

# The np=1 baseline, run by the launcher the tests are configured with.
run_np 1 train --quiet --log "$WORK/baseline.jsonl"
# This machine as MPI names it, from the baseline's run record: both tasks must run here.
host=$(grep '"kind":"run"' "$WORK/baseline.jsonl" | sed -nE 's/.*"hosts":\["([^"]+)"\].*/\1/p')
[ -n "$host" ] || fail "baseline: run record lists no host"

# A config path with a space, passed after the script, reaches mpiddp unchanged.
cp "$SOURCE_DIR/configs/default.json" "$WORK/default config.json"

# Whole outputs are matched: `cmd | grep -q` fails under pipefail when grep exits early.
flavour=openmpi expected_srun_mpi=pmix
[[ "$(ldd "$MPIDDP")" != *libmpich* ]] || { flavour=mpich; expected_srun_mpi=pmi2; }
plugins="$(srun --mpi=list 2>&1)"
grep -qw "$expected_srun_mpi" <<< "$plugins" ||
  fail "Slurm has no '$expected_srun_mpi' MPI plugin (for pmix: install libpmix-dev)"

for launcher in auto mpirun; do
  rc=0
  job=$(submit "$launcher" "" "$WORK/default config.json" --quiet) || rc=$?
  out="$WORK/job-$job.out"
  [ "$rc" -eq 0 ] || { cat "$out" >&2 || true; fail "$launcher: job '$job' exit code $rc"; }
  run_dir="$WORK/runs/slurm-$job"
  # auto must find the plugin checked above and use srun.
  want=$([ "$launcher" = auto ] && echo srun || echo mpirun)
  grep -q "mpi: *$flavour, launched by $want" "$run_dir/job.txt" ||
    { cat "$out"; fail "$launcher: not $flavour launched by $want"; }
  grep -qF -- "$(printf '%q' "$WORK/default config.json") --quiet" "$run_dir/job.txt" ||
    fail "$launcher: the arguments after the script did not reach mpiddp unchanged"
  log="$run_dir/train.jsonl"
  grep -q '"kind":"run","world_size":2' "$log" || fail "$launcher: run record is not world_size 2"
  grep -qF "\"launcher\":\"$want\",\"hosts\":[\"$host\",\"$host\"]" "$log" ||
    fail "$launcher: run record does not say launcher $want on hosts $host, $host"
  # The verdict: eval_loss and step losses within the float32 defaults, replicas identical.
  "$MPIDDP" compare "$WORK/baseline.jsonl" "$log" > "$WORK/compare-$launcher.txt" ||
    { cat "$WORK/compare-$launcher.txt"; fail "$launcher: the 2-task job does not match the np=1 baseline"; }
  grep -q "replicas_identical: baseline true, run true" "$WORK/compare-$launcher.txt" ||
    fail "$launcher: compare does not report identical replicas"
  echo "$launcher: job $job, $want, 2 ranks: $(tail -n 1 "$WORK/compare-$launcher.txt")"
done

# srun with a plugin the MPI library does not speak must not pass for a 2-rank run. MPICH
# under --mpi=pmix starts two one-process MPI jobs: the trainer notices that MPI's world is
# smaller than the launch and stops with exit code 2. Open MPI refuses --mpi=none by itself.
if [ "$expected_srun_mpi" = pmi2 ]; then wrong_mpi=pmix want_rc=2; else wrong_mpi=none want_rc=1; fi
rc=0
job=$(submit srun "$wrong_mpi" "$WORK/default config.json" --quiet) || rc=$?
[ "$rc" -eq "$want_rc" ] ||
  { cat "$WORK/job-$job.out"; fail "srun --mpi=$wrong_mpi: job exit code $rc, expected $want_rc"; }
if [ "$want_rc" -eq 2 ]; then
  grep -q "the launcher started 2 processes, but MPI sees a world of 1" "$WORK/job-$job.out" ||
    { cat "$WORK/job-$job.out"; fail "srun --mpi=$wrong_mpi: no message about the mismatched launcher"; }
fi
echo "srun --mpi=$wrong_mpi: job $job failed as it should (exit code $rc)"

# Stopping with a job running cancels it first: neither the job's process nor a daemon survives.
# The job's process is recognised by its unique command line (pgrep only looks, never kills).
sleeper="sleep 300.$$"
job=$(sbatch --parsable --output=/dev/null --wrap "$sleeper")
for _ in $(seq 300); do
  pgrep -fx "$sleeper" > /dev/null && break
  sleep 0.1
done
pgrep -fx "$sleeper" > /dev/null || fail "the sleeping job $job did not start in 30 s"
daemons=$(awk '{ print $2 }' "$state/pids")
"$local_slurm/stop.sh" --keep "$state"
cluster_up=0
! pgrep -fx "$sleeper" > /dev/null || fail "stop left job $job's process running"
for pid in $daemons; do
  [ ! -d "/proc/$pid" ] || grep -q '^State:.*Z' "/proc/$pid/status" ||
    fail "stop left daemon pid $pid running"
done
echo "slurm: stop cancelled job $job and ended daemons $(tr '\n' ' ' <<< "$daemons")"
