#!/usr/bin/env bash
# Runs one benchmark workload and prints mpiddp bench's JSON line.
# Usage: bench/run.sh WORKLOAD NP [THREADS] [-- EXTRA mpiddp bench ARGS...]
#   WORKLOAD: seed | mlp | wide | cnn | fmnist | gpt (bench/WORKLOAD.json)
#   NP:       ranks (mpirun -np)
#   THREADS:  compute threads per rank; default: the cores of the node shared among ranks
# Environment: MPIDDP (the binary; default build/mpiddp), MPIEXEC (default mpirun).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 2 ] || { sed -n '2,8p' "${BASH_SOURCE[0]}" >&2; exit 2; }
workload=$1 np=$2; shift 2
threads=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then threads=$1; shift; fi
[ "${1:-}" = "--" ] && shift
config="$here/$workload.json"
[ -f "$config" ] || { echo "run.sh: no workload '$workload' ($config)" >&2; exit 2; }
mpiddp="${MPIDDP:-$here/../build/mpiddp}"
mpiexec="${MPIEXEC:-mpirun}"

args=("$config")
[ -n "$threads" ] && args+=(--set "threads=$threads")
cores=$(nproc)
launcher=("$mpiexec" -np "$np")
if "$mpiexec" --version 2>&1 | grep -q "Open MPI"; then
  [ "$(id -u)" = 0 ] && launcher+=(--allow-run-as-root)
  [ "$np" -gt "$cores" ] && launcher+=(--oversubscribe)
  # Open MPI binds each rank to one core when np <= 2; a rank that runs several threads
  # must be free to use the cores it was given.
  if [ "$np" -eq 1 ] || [ "${threads:-1}" -gt 1 ]; then launcher+=(--bind-to none); fi
  # A rank waiting at a barrier yields its core instead of spinning: on a machine shared
  # with other work, the rank it waits for may be the one that needs that core.
  launcher+=(--mca mpi_yield_when_idle 1)
fi
exec "${launcher[@]}" "$mpiddp" bench "${args[@]}" "$@"
