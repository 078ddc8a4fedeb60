#!/usr/bin/env bash
# The Slurm scripts from an installed prefix (cmake --install, docs/launching.md "Installed"):
# the cluster comes up from P/share/mpiddp/launch/local-slurm/, and a job of
# P/share/mpiddp/launch/slurm.sbatch, submitted from a directory without build/ and with
# MPIDDP unset, runs P/bin/mpiddp (found on PATH: Slurm copies the script, so it cannot look
# next to itself) and matches the np=1 baseline. Skips (77) when Slurm is not installed.
source "$(dirname "$0")/../cli/lib.sh"

prefix=$WORK/prefix
cmake --install "$(dirname "$MPIDDP")" --prefix "$prefix" > "$WORK/install.log" ||
  fail "cmake --install of $(dirname "$MPIDDP") failed"
# shellcheck disable=SC2034  # read by slurm_cluster.sh
sbatch_script=$prefix/share/mpiddp/launch/slurm.sbatch
# shellcheck disable=SC2034  # read by slurm_cluster.sh
local_slurm=$prefix/share/mpiddp/launch/local-slurm
source "$(dirname "$0")/slurm_cluster.sh"

run_np 1 train --quiet --set epochs=2 --log "$WORK/baseline.jsonl"
mkdir -p "$WORK/submit"
rc=0
job=$(cd "$WORK/submit" && env -u MPIDDP PATH="$prefix/bin:$PATH" timeout 240 \
  sbatch --wait --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=5 \
         --output="$WORK/job-%j.out" "$sbatch_script" --quiet --set epochs=2) || rc=$?
[ "$rc" -eq 0 ] || { cat "$WORK/job-$job.out" >&2 || true; fail "installed slurm.sbatch: job '$job' exit code $rc"; }
run_dir=$WORK/submit/runs/slurm-$job
grep -qF " $prefix/bin/mpiddp train " "$run_dir/job.txt" ||
  { cat "$run_dir/job.txt" >&2; fail "the installed slurm.sbatch did not run $prefix/bin/mpiddp"; }
grep -q '"kind":"run","world_size":2' "$run_dir/train.jsonl" || fail "the job wrote no np=2 log"
"$MPIDDP" compare "$WORK/baseline.jsonl" "$run_dir/train.jsonl" > "$WORK/compare.txt" ||
  { cat "$WORK/compare.txt" >&2; fail "the installed job does not match the np=1 baseline"; }
echo "slurm installed: $prefix/share/mpiddp/launch/slurm.sbatch ran $prefix/bin/mpiddp on 2 tasks, matching np=1"
