#!/usr/bin/env bash
# compute.precision's speed (docs/precision.md): mpiddp np=2 x 1 in float32 and in bf16, and the
# PyTorch peer in float32 and with torch.autocast("cpu", dtype=torch.bfloat16) around its
# forward, each in its three configurations (1 x 1, 1 x 2, DDP 2 x 1), alternated ROUNDS times
# on the same cores. Prints medians and the ratios of issue 46's targets (docs/benchmarks.md).
# Usage: bench/precision.sh [ROUNDS] [WORKLOAD...]     (default: 3 rounds of gpt)
# Raw lines in $OUT (default bench/results/precision-DATE.jsonl). bf16 needs AVX512_BF16.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rounds=${1:-3}; shift || true
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(gpt)
mkdir -p "$here/results"
out="${OUT:-$here/results/precision-$(date -u +%Y%m%dT%H%M%SZ).jsonl}"
source "$here/peer.sh"

for round in $(seq "$rounds"); do
  for w in "${workloads[@]}"; do
    echo "round $round/$rounds: $w" >&2
    record mpiddp_np2x1 "$("$here/run.sh" "$w" 2 1)"
    record torch_1x2_autocast "$(torch_peer "$w" --procs 1 --threads 2 --autocast bf16)"
    record mpiddp_np2x1_bf16 "$("$here/run.sh" "$w" 2 1 -- --set compute.precision='"bf16"')"
    record torch_ddp_2x1_autocast "$(torch_peer "$w" --procs 2 --threads 1 --autocast bf16)"
    record torch_1x1_autocast "$(torch_peer "$w" --procs 1 --threads 1 --autocast bf16)"
    record torch_1x2 "$(torch_peer "$w" --procs 1 --threads 2)"
    record torch_ddp_2x1 "$(torch_peer "$w" --procs 2 --threads 1)"
  done
done
echo "raw results: $out" >&2
"$python" - "$out" <<'PY'
import json, statistics, sys
from collections import defaultdict
runs = defaultdict(lambda: defaultdict(list))
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[r["workload"]][r["label"]].append(r["samples_per_s"])
labels = ["mpiddp_np2x1", "mpiddp_np2x1_bf16", "torch_1x2", "torch_ddp_2x1", "torch_1x1_autocast",
          "torch_1x2_autocast", "torch_ddp_2x1_autocast"]
print("samples per second, medians:\n")
print("| workload | " + " | ".join(labels) + " |")
print("|---" * (len(labels) + 1) + "|")
for w, by in runs.items():
    m = {l: statistics.median(by[l]) for l in labels}
    # gpt2s runs at a few samples per second: its medians keep two decimals.
    print(f"| {w} | " + " | ".join(f"{m[l]:,.0f}" if m[l] >= 100 else f"{m[l]:.2f}" for l in labels) + " |")
print("\n| workload | bf16 / best autocast (>= 1.3) | float32 / best torch float32 | bf16 / float32 |")
print("|---|---|---|---|")
for w, by in runs.items():
    m = {l: statistics.median(by[l]) for l in labels}
    autocast = max(m[l] for l in labels if l.endswith("_autocast"))
    torch32 = max(m["torch_1x2"], m["torch_ddp_2x1"])
    print(f"| {w} | {m['mpiddp_np2x1_bf16'] / autocast:.2f} | {m['mpiddp_np2x1'] / torch32:.2f} | "
          f"{m['mpiddp_np2x1_bf16'] / m['mpiddp_np2x1']:.2f} |")
PY
