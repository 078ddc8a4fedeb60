#!/usr/bin/env bash
# The issue's model too big for DDP on this machine (issue 47): bench/gpt1b.json (1.008 B
# parameters) trained at np = 2 under reduce.shard "parameters" and memory.limit_mb 10,000 per
# rank, 8 steps (16 windows of 256 of the King James text, 1 a rank a step), each rank's peak
# RSS from /usr/bin/time. The products' library is given (compute.gemm "openblas"): "auto"
# times every library on the model's own products first, minutes at these shapes.
# tests/cli/memory_limit.sh shows the same run refused unsharded and under "optimizer".
# Usage: bench/gpt1b_parameters.sh [LOG]   (default /tmp/gpt1b.jsonl)
# Environment: MPIDDP (the binary; default build/mpiddp).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$here/.."
mpiexec -n 2 --bind-to none /usr/bin/time -f "rank max RSS %M KiB, wall %e s" "${MPIDDP:-build/mpiddp}" train \
  bench/gpt1b.json --set memory.limit_mb=10000 --set reduce.shard='"parameters"' \
  --set 'data.train.range=[0,0.001]' --set optimizer.lr=0.00003 --set threads=1 --set compute.gemm='"openblas"' \
  --log "${1:-/tmp/gpt1b.jsonl}"
