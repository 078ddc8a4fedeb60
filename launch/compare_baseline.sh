#!/usr/bin/env bash
# Does my N-rank run match the single-process baseline? Runs CONFIG at np=1 and at np=N
# (through launch/mpirun.sh), keeps both logs side by side in one run directory, then
# `mpiddp compare` and `mpiddp plot`. Exits with compare's exit code: 0 the runs agree
# within tolerance, 1 they do not, 2 they cannot be compared (or a run failed).
#
# Usage: launch/compare_baseline.sh CONFIG.json|default N
# Environment: RUN_DIR (default runs/compare-CONFIGNAME-npN-TIMESTAMP), COMPARE_ARGS (extra
# `mpiddp compare` flags, e.g. "--rtol 1e-5 --metric eval_loss"), and those of
# launch/mpirun.sh (MPIRUN, MPIDDP, MPIRUN_ARGS).
set -euo pipefail

[ "$#" -eq 2 ] || { echo "usage: launch/compare_baseline.sh CONFIG.json|default N" >&2; exit 2; }
config=$1
n=$2
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "launch/compare_baseline.sh: N must be a positive integer, got '$n'" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/find_mpiddp.sh"
mpiddp=${MPIDDP:-$(default_mpiddp "$here")}
export MPIDDP=$mpiddp

name=$(basename "$config" .json)
run_dir=${RUN_DIR:-runs/compare-$name-np$n-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$run_dir"
echo "compare_baseline: $config at np=1 and np=$n, in $run_dir/"

# The runs' names: np1 and npN; with N=1 the second run is np1-again, which checks that two
# runs of the config agree with each other.
run_name=np$n
if [ "$n" -eq 1 ]; then run_name=np1-again; fi

# Each run's table goes to the terminal and to NAME.txt; its log to NAME.jsonl.
for pair in "1 np1" "$n $run_name"; do
  read -r np name <<< "$pair"
  echo
  echo "== np=$np"
  # pipefail: the pipeline fails when the run does, though tee succeeds.
  "$here/mpirun.sh" "$np" "$config" --log "$run_dir/$name.jsonl" 2>&1 | tee "$run_dir/$name.txt" || {
    echo "compare_baseline: the np=$np run failed (see $run_dir/$name.txt); nothing to compare" >&2
    exit 2
  }
done

baseline=$run_dir/np1.jsonl
run=$run_dir/$run_name.jsonl
echo
echo "== mpiddp compare $baseline $run ${COMPARE_ARGS:-}"
read -r -a compare_args <<< "${COMPARE_ARGS:-}"
code=0
"$mpiddp" compare "$baseline" "$run" "${compare_args[@]}" | tee "$run_dir/compare.txt" || code=${PIPESTATUS[0]}
"$mpiddp" plot "$baseline" "$run" -o "$run_dir/curves.svg"
echo "compare_baseline: exit $code; table in $run_dir/compare.txt, plot in $run_dir/curves.svg"
exit "$code"
