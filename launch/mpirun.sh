#!/usr/bin/env bash
# Runs mpiddp train on N ranks of this machine with mpirun and sensible defaults, and
# prints the exact command first.
#
# Usage: launch/mpirun.sh N CONFIG.json [TRAIN ARGS...]
#   CONFIG may be "default" for the built-in default experiment. TRAIN ARGS go to
#   `mpiddp train` unchanged (--set KEY=VALUE, --log PATH, --quiet, ...).
#
# Defaults, each with its reason:
#   - one thread per rank (OMP_NUM_THREADS=1 unless already set): N ranks already use N
#     cores, and threads inside each rank would only compete for them;
#   - ranks bound to cores (--bind-to core): no migration between cores mid-run; when N is
#     more than the cores, binding is off and Open MPI gets --oversubscribe, which it needs
#     to start more ranks than cores (only then: otherwise it hides a mistyped N);
#   - --allow-run-as-root only when running as root (Open MPI refuses root otherwise);
#   - MPIDDP_PROGRESS=terminal when this script's stderr is a terminal: Open MPI hands its
#     ranks a pipe for stderr, so they cannot see the terminal themselves.
# Environment: MPIRUN (default mpirun), MPIDDP (default build/mpiddp, or bin/mpiddp of the
# prefix when installed, or mpiddp on PATH: launch/find_mpiddp.sh), MPIRUN_ARGS (extra
# launcher flags, split on spaces, e.g. "--hostfile hosts"; the core count compared with N
# is this machine's).
set -euo pipefail

usage() { echo "usage: launch/mpirun.sh N CONFIG.json|default [TRAIN ARGS...]" >&2; exit 2; }
[ "$#" -ge 2 ] || usage
n=$1
config=$2
shift 2
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "launch/mpirun.sh: N must be a positive integer, got '$n'" >&2; exit 2; }
if [ "$config" != "default" ] && [ ! -r "$config" ]; then
  echo "launch/mpirun.sh: cannot read the config '$config' (use 'default' for the built-in one)" >&2
  exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/find_mpiddp.sh"
mpirun=${MPIRUN:-mpirun}
mpiddp=${MPIDDP:-$(default_mpiddp "$here")}
[ -x "$mpiddp" ] || { echo "launch/mpirun.sh: no mpiddp binary at '$mpiddp'; build with scripts/build.sh or set MPIDDP" >&2; exit 2; }
command -v "$mpirun" > /dev/null || { echo "launch/mpirun.sh: '$mpirun' not found; install openmpi-bin (scripts/install-deps.sh)" >&2; exit 2; }

# The cores this process may use (nproc would report OMP_NUM_THREADS instead, if set).
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
if [ -z "${MPIDDP_PROGRESS:-}" ] && [ -t 2 ]; then export MPIDDP_PROGRESS=terminal; fi

args=("$mpirun" -np "$n")
version=$("$mpirun" --version 2>&1 || true)
if [[ "$version" == *"Open MPI"* ]]; then
  if [ "$(id -u)" -eq 0 ]; then args+=(--allow-run-as-root); fi
  if [ "$n" -gt "$cores" ]; then
    args+=(--oversubscribe --bind-to none)
  else
    args+=(--bind-to core --map-by core)
  fi
  # Open MPI passes only the variables it is told to on to remote nodes.
  args+=(-x OMP_NUM_THREADS)
  if [ -n "${MPIDDP_PROGRESS:-}" ]; then args+=(-x MPIDDP_PROGRESS); fi
else  # MPICH's Hydra: passes the whole environment on; oversubscribes without asking
  if [ "$n" -gt "$cores" ]; then args+=(-bind-to none); else args+=(-bind-to core); fi
fi
if [ -n "${MPIRUN_ARGS:-}" ]; then
  read -r -a extra <<< "$MPIRUN_ARGS"
  args+=("${extra[@]}")
fi
args+=("$mpiddp" train)
if [ "$config" != "default" ]; then args+=("$config"); fi
args+=("$@")

# The exact command, quoted so it can be pasted into a shell.
{
  printf 'launch/mpirun.sh: running: OMP_NUM_THREADS=%q' "$OMP_NUM_THREADS"
  if [ -n "${MPIDDP_PROGRESS:-}" ]; then printf ' MPIDDP_PROGRESS=%q' "$MPIDDP_PROGRESS"; fi
  printf ' %q' "${args[@]}"
  printf '\n'
} >&2
exec "${args[@]}"
