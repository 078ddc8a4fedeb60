#!/usr/bin/env bash
# Deterministic mode's cost (docs/benchmarks.md, "Deterministic mode"): mpiddp bench of a
# workload at NP ranks in the default mode and with --deterministic, alternately, ROUNDS
# times; prints both JSON lines of every round, then the median step times, their ratio
# (target <= 1.3 at np=2 on mlp and cnn) and the bytes each rank sends per step.
# Usage: bench/deterministic.sh [WORKLOAD=mlp] [NP=2] [ROUNDS=3] [CHUNKS=16]
# CHUNKS must divide the workload's global batch and samples (mlp, cnn: 16 or 32).
# GEMM=LIBRARY sets compute.gemm in both modes (deterministic mode's auto is Eigen, the
# default mode's the fastest library measured; name the library to compare like with like).
# Needs an idle machine for figures that mean anything.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
workload=${1:-mlp} np=${2:-2} rounds=${3:-3} chunks=${4:-16}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  for mode in default deterministic; do
    extra=()
    [ -n "${GEMM:-}" ] && extra+=(--set "compute.gemm=$GEMM")
    [ "$mode" = deterministic ] && extra+=(--deterministic --set "deterministic.chunks=$chunks")
    line=$("$here/run.sh" "$workload" "$np" -- "${extra[@]}" | tail -n 1)
    echo "$mode $line" | tee -a "$out"
  done
done
/usr/bin/python3 - "$out" "$workload" "$np" "$chunks" <<'PY'
import json, statistics, sys
rows = {"default": [], "deterministic": []}
params = None
for line in open(sys.argv[1]):
    mode, text = line.split(" ", 1)
    r = json.loads(text)
    params = r["parameters"]
    step = r["forward_ms"] + r["backward_ms"] + r["sync_exposed_ms"] + r["optimizer_ms"] + r["data_ms"]
    rows[mode].append(step)
d, x = statistics.median(rows["default"]), statistics.median(rows["deterministic"])
# Default: the P gradients and the loss slot in float32. Deterministic, chunk by chunk: the
# same P + 1 values (plus BatchNorm's buffers) as int64, and one double per tensor for the
# max-reduction; in the chunked pass the P gradients as int64, two doubles per linear layer
# for its maxima, and 32 bytes for the loss and the stop vote (docs/design.md).
print(f"{sys.argv[2]} np={sys.argv[3]} chunks={sys.argv[4]}: step {d:.2f} ms default, {x:.2f} ms "
      f"deterministic, ratio {x / d:.2f} (target <= 1.3); bytes per rank per step: "
      f"default {4 * (params + 1)}, deterministic {8 * params} + 16 per linear layer + 32 (chunked pass) "
      f"or {8 * (params + 1)} + 8 per buffer value and per tensor (chunk by chunk)")
PY
