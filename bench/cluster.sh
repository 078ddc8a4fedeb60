#!/usr/bin/env bash
# The gradient sync across a network link: mpiddp bench on 2 nodes of launch/local-cluster
# (network namespaces on one machine, a veth link between them, TCP), at 1 and 2 ranks per
# node, for each workload given. Prints one JSON line per run, prefixed by what ran:
#   reduce auto    --reduce-only through the reducer as configured (buckets; 2 x 2: shared
#                  memory inside a node, then MPI per slice between nodes)
#   reduce plain   --reduce-only with reduce.algorithm=mpi and one bucket: the whole buffer
#                  in one sum, world-wide (MPI_Iallreduce + wait; at 2 x 1 the scattered sum
#                  and a gather, Note [the allreduce as a scattered sum and a gather])
#   train          the training bench: backward_ms, sync_exposed_ms (the part of the sync
#                  that backward did not hide) against reduce_ms (the sync alone)
#   train shard    the same with reduce.shard_optimizer: at 2 x 1 the optimizer sharded
#                  across the leaders (the gradients reduce-scattered, the updated parameters
#                  allgathered; sync_exposed_ms + optimizer_ms against the unsharded run's)
#   train MODE     with SHARD_MODES="gradients parameters": the training bench under
#                  reduce.shard MODE (ZeRO-2, ZeRO-3), against the train line
#   trace          with TRACE_DIR set and "parameters" among SHARD_MODES: one epoch of `mpiddp
#                  train` under ZeRO-3 with --trace (steps 3-22) into TRACE_DIR, checked and
#                  summed by trace_check (the share of the gathers' time hidden behind compute)
# Usage (root): bench/cluster.sh [--rate RATE] [WORKLOAD...]   (default: mlp wide)
#   --rate RATE   limit each node's link (launch/local-cluster/start.sh --rate)
# Environment: MPIDDP (default build/mpiddp), SHARD_MODES, TRACE_DIR, TRACE_CHECK (default
# build/tests/trace_check), TRAIN_ONLY=1 (no reduce lines: --reduce-only needs a model of
# fixed inputs, not a GPT's tokens).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
start_args=()
if [ "${1:-}" = --rate ]; then start_args=(--rate "$2"); shift 2; fi
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(mlp wide)
mpiddp="$(readlink -f "${MPIDDP:-$here/../build/mpiddp}")"
[ -x "$mpiddp" ] || { echo "cluster.sh: no mpiddp binary at $mpiddp (set MPIDDP)" >&2; exit 2; }
srun_mpi=pmix
[[ "$(ldd "$mpiddp")" != *libmpich* ]] || srun_mpi=pmi2

state=$("$here/../launch/local-cluster/start.sh" "${start_args[@]}" 2)
trap '"$here/../launch/local-cluster/stop.sh" "$state"' EXIT
source "$state/env.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# A rank waiting for the network yields its core to the other rank of its node.
export OMPI_MCA_mpi_yield_when_idle=1
echo "# $(grep -m 1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(getconf _NPROCESSORS_ONLN) cores; link: $(cat "$state/tc")"

run() {  # run LABEL PER_NODE WORKLOAD ARGS...
  local label=$1 per_node=$2 workload=$3; shift 3
  printf '%-13s 2x%s %-5s ' "$label" "$per_node" "$workload"
  srun --mpi="$srun_mpi" -N 2 --ntasks-per-node="$per_node" --cpus-per-task=1 \
    "$mpiddp" bench "$here/$workload.json" --set threads=1 "$@" | tail -n 1
}
for workload in "${workloads[@]}"; do
  for per_node in 1 2; do
    if [ "${TRAIN_ONLY:-0}" != 1 ]; then
      run "reduce auto" "$per_node" "$workload" --reduce-only
      run "reduce plain" "$per_node" "$workload" --reduce-only --set reduce.algorithm=mpi \
        --set reduce.bucket_cap_mb=1024 --set reduce.first_bucket_mb=1024
    fi
    run train "$per_node" "$workload"
    run "train shard" "$per_node" "$workload" --set reduce.shard_optimizer=true
    for mode in ${SHARD_MODES:-}; do
      run "train $mode" "$per_node" "$workload" --set reduce.shard="\"$mode\""
    done
    if [ -n "${TRACE_DIR:-}" ] && [[ " ${SHARD_MODES:-} " == *" parameters "* ]]; then
      trace="$TRACE_DIR/$workload-2x$per_node"
      srun --mpi="$srun_mpi" -N 2 --ntasks-per-node="$per_node" --cpus-per-task=1 \
        "$mpiddp" train "$here/$workload.json" --quiet --set threads=1 --set reduce.shard='"parameters"' \
        --set epochs=1 --log "$trace.jsonl" --trace "$trace.json" --set 'trace.steps=[3,22]'
      printf '%-13s 2x%s %-5s ' trace "$per_node" "$workload"
      "${TRACE_CHECK:-$here/../build/tests/trace_check}" "$trace.json" "$trace.jsonl" 3 22 $((2 * per_node)) \
        --expect-gathers
    fi
  done
done
