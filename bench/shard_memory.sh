#!/usr/bin/env bash
# What each rank holds in each reduce.shard mode of this version, against what the trainer
# worked out before the model was built: `mpiddp bench` of a workload at each NP, unsharded,
# with the optimizer sharded, with the gradients too (ZeRO-2, shm only) and with the parameters
# too (ZeRO-3, shm only), on the shm path (where the node's ranks share one copy of
# the parameters) and on the mpi path. Prints one line per run: what ran, peak_rss_mb, pss_mb,
# needed_mb and needed_mb_by_kind. A memory table, not a speed one: NP may exceed the cores.
# Usage: bench/shard_memory.sh [WORKLOAD] [NP...]   (default: gpt2s 2 4)
# SHARD_MODES: the reduce.shard modes to run (default: "none optimizer gradients parameters").
# Environment: MPIDDP (the binary; default build/mpiddp); SHARD_MEMORY_JSONL: a file that
# receives each run's whole JSON line.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
workload=${1:-gpt2s}
[ $# -gt 0 ] && shift
nps=("$@")
[ ${#nps[@]} -gt 0 ] || nps=(2 4)
echo "# $(grep -m 1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(getconf _NPROCESSORS_ONLN) cores;" \
     "workload $workload"
for np in "${nps[@]}"; do
  for algorithm in shm mpi; do
    for shard in ${SHARD_MODES:-none optimizer gradients parameters}; do
      # ZeRO-2 and ZeRO-3 sum a node's ranks' units in the node's shared memory: the shm path only.
      if [ "$algorithm" = mpi ] && { [ "$shard" = gradients ] || [ "$shard" = parameters ]; }; then continue; fi
      # Two samples per rank; one epoch of the few steps gpt2s's text gives.
      line=$("$here/run.sh" "$workload" "$np" 1 -- --set batch.global=$((2 * np)) --set epochs=1 \
               --set reduce.algorithm="\"$algorithm\"" --set reduce.shard="\"$shard\"" 2> /dev/null | tail -n 1)
      echo "$line" >> "${SHARD_MEMORY_JSONL:-/dev/null}"
      printf 'np %s %-3s shard %-9s %s\n' "$np" "$algorithm" "$shard" "$(echo "$line" | /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
kinds = " ".join("%s %.1f" % (k, v) for k, v in r["needed_mb_by_kind"].items())
print("peak_rss_mb %.1f pss_mb %.1f needed_mb %.1f (%s)" % (r["peak_rss_mb"], r["pss_mb"], r["needed_mb"], kinds))')"
    done
  done
done
