#!/usr/bin/env bash
# The speed of each instruction-set level (docs/isa.md): mpiddp bench of a workload at NP
# ranks with compute.isa auto, avx2 and baseline (and any level given in LEVELS), in the
# default mode and with --deterministic (where the grid product and the exact sums run),
# alternately, ROUNDS times; prints every JSON line, then median samples/s per level and mode
# and their ratio to auto.
# Usage: bench/isa_levels.sh [WORKLOAD=mlp] [NP=2] [ROUNDS=2] [CHUNKS=16]
# Needs an idle machine; the CPU's levels are in each line's run record (mpiddp --version).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
workload=${1:-mlp} np=${2:-2} rounds=${3:-2} chunks=${4:-16}
levels=(${LEVELS:-auto avx2 baseline})
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  for mode in default deterministic; do
    for level in "${levels[@]}"; do
      extra=(--set "compute.isa=$level")
      [ "$mode" = deterministic ] && extra+=(--deterministic --set "deterministic.chunks=$chunks")
      line=$("$here/run.sh" "$workload" "$np" 1 -- "${extra[@]}" | tail -n 1)
      echo "$mode $level $line" | tee -a "$out"
    done
  done
done
/usr/bin/python3 - "$out" "$workload" "$np" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    mode, level, text = line.split(" ", 2)
    rows.setdefault((mode, level), []).append(json.loads(text)["samples_per_s"])
print(f"\n{sys.argv[2]} at np={sys.argv[3]} x 1 thread, samples/s (median):")
for mode in ("default", "deterministic"):
    auto = statistics.median(rows[(mode, "auto")])
    cells = ", ".join(f"{level} {statistics.median(v):,.0f} ({statistics.median(v) / auto:.2f} x)"
                      for (m, level), v in rows.items() if m == mode)
    print(f"  {mode}: {cells}")
PY
