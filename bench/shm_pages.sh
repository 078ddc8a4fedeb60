#!/usr/bin/env bash
# The shm path with the node's shared windows on 4 KiB pages (/dev/shm as mounted) and on
# 2 MiB pages (a tmpfs this script mounts with huge=advise, under Open MPI's windows through
# osc_sm_backing_directory), unsharded and with reduce.shard_optimizer, alternately, at np=2
# (Note [shared memory on 4 KiB pages] in src/distributed/mpi_shared_memory_sum.cpp).
# Prints one JSON line of `mpiddp bench` per run, prefixed by what ran; shm_huge_mb shows how
# much of the windows each got on huge pages.
# Usage (root, Open MPI): bench/shm_pages.sh [ROUNDS] [WORKLOAD...]   (default: 3 wide mlp)
# Environment: MPIDDP (the binary; default build/mpiddp).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rounds=${1:-3}
[ $# -gt 0 ] && shift
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(wide mlp)
[ "$(id -u)" = 0 ] || { echo "shm_pages.sh: needs root (it mounts a tmpfs)" >&2; exit 2; }

huge_dir=$(mktemp -d)
mount -t tmpfs -o size=4g,huge=advise tmpfs "$huge_dir"
trap 'umount "$huge_dir"; rmdir "$huge_dir"' EXIT
echo "# $(grep -m 1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(getconf _NPROCESSORS_ONLN) cores;" \
     "/dev/shm: $(findmnt -fno OPTIONS /dev/shm); huge tmpfs: $(findmnt -no OPTIONS "$huge_dir")"

for round in $(seq "$rounds"); do
  for workload in "${workloads[@]}"; do
    for pages in 4k 2m; do
      for shard in false true; do
        dir=/dev/shm
        [ "$pages" = 2m ] && dir=$huge_dir
        printf 'round %s %-5s pages %s shard %-5s ' "$round" "$workload" "$pages" "$shard"
        OMPI_MCA_osc_sm_backing_directory=$dir "$here/run.sh" "$workload" 2 1 -- \
          --set reduce.algorithm=shm --set reduce.shard_optimizer="$shard" 2> /dev/null | tail -n 1
      done
    done
  done
done
