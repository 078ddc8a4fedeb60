#!/usr/bin/env bash
# The main job: installs what is missing, builds, runs the built-in default experiment at
# np=1 and np=2, and prints the per-epoch loss of both side by side and whether the
# replicas are identical. Logs and the loss-curve plot go to runs/demo/.
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
# Side by side: the per-epoch eval_loss of both runs, their differences, whether the
# replicas are identical (both end records) and the verdict (docs/compare.md).
echo "== np=1 vs np=2: mpiddp compare --metric eval_loss"
"$mpiddp" compare "$runs/np1.jsonl" "$runs/np2.jsonl" --metric eval_loss
"$mpiddp" plot "$runs/np1.jsonl" "$runs/np2.jsonl" -o "$runs/curves.svg"
