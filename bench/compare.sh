#!/usr/bin/env bash
# Runs mpiddp and the PyTorch peer alternately, ROUNDS times, on the same cores, and prints
# medians and the ratios the performance targets are stated in (docs/benchmarks.md).
# Usage: bench/compare.sh [ROUNDS] [WORKLOAD...]     (default: 3 rounds; seed mlp wide,
#        plus fmnist when bench/fmnist.json exists and its data are installed)
# Output: a markdown table on stdout; every raw JSON line in $OUT (default
# bench/results/compare-DATE.jsonl), each with the load average when it ran.
# ISA="avx2 ...": also runs np=2 x 1 capped at each of those levels (--set compute.isa=LEVEL,
# label mpiddp_np2x1_isa_LEVEL) beside auto, for the speed per level (docs/isa.md).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rounds=${1:-3}; shift || true
workloads=("$@")
if [ ${#workloads[@]} -eq 0 ]; then
  workloads=(seed mlp wide)
  [ -f "$here/fmnist.json" ] && workloads+=(fmnist)
fi
mkdir -p "$here/results"
out="${OUT:-$here/results/compare-$(date -u +%Y%m%dT%H%M%SZ).jsonl}"
source "$here/peer.sh"

for round in $(seq "$rounds"); do
  for w in "${workloads[@]}"; do
    echo "round $round/$rounds: $w" >&2
    record mpiddp_np2x1 "$("$here/run.sh" "$w" 2 1)"
    for level in ${ISA:-}; do
      record "mpiddp_np2x1_isa_$level" "$("$here/run.sh" "$w" 2 1 -- --set compute.isa="$level")"
    done
    # ZeRO-1 with one copy of the parameters per node: the same bits, less memory and time.
    record mpiddp_np2x1_shard "$("$here/run.sh" "$w" 2 1 -- --set reduce.shard_optimizer=true)"
    record torch_1x2 "$(torch_peer "$w" --procs 1 --threads 2)"
    record mpiddp_np1x1 "$("$here/run.sh" "$w" 1 1)"
    record torch_1x1 "$(torch_peer "$w" --procs 1 --threads 1)"
    record mpiddp_np1_auto "$("$here/run.sh" "$w" 1)"
    record torch_ddp_2x1 "$(torch_peer "$w" --procs 2 --threads 1)"
  done
done
echo "raw results: $out" >&2
"$python" "$here/summarize.py" "$out"
