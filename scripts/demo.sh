#!/usr/bin/env bash
# The main job: installs what is missing, builds, runs the built-in default experiment at
# np=1 and np=2, and prints the per-epoch loss of both side by side and whether the
# replicas are identical. Logs go to runs/demo/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" mpiddp > /dev/null
mpiddp=${MPIDDP_BUILD_DIR:-$root/build}/mpiddp
runs=$root/runs/demo
mkdir -p "$runs"

launcher=(mpirun)
if [ "$(id -u)" -eq 0 ]; then launcher+=(--allow-run-as-root); fi
if [ "$(nproc)" -lt 2 ]; then launcher+=(--oversubscribe); fi

for np in 1 2; do
  echo "== mpirun -np $np mpiddp train --log $runs/np$np.jsonl"
  "${launcher[@]}" -np "$np" "$mpiddp" train --log "$runs/np$np.jsonl"
  echo
done
# Side by side: the per-epoch eval_loss of both runs and the end records' replica check.
field() { sed -nE "s/.*\"kind\":\"$1\".*\"$2\":([^,}]+).*/\1/p" "$3"; }
echo "== np=1 vs np=2"
printf '%6s  %22s  %22s  %10s\n' epoch "eval_loss np=1" "eval_loss np=2" "rel diff"
paste <(field epoch eval_loss "$runs/np1.jsonl") <(field epoch eval_loss "$runs/np2.jsonl") |
  awk '{ d = $1 - $2; if (d < 0) d = -d; printf "%6d  %22.17g  %22.17g  %10.2e\n", NR, $1, $2, d / $1 }'
echo "replicas identical: np=1 $(field end replicas_identical "$runs/np1.jsonl"), np=2 $(field end replicas_identical "$runs/np2.jsonl")"
