#!/usr/bin/env bash
# Runs mpiddp train on N ranks of this machine with mpirun and sensible defaults, and
# prints the exact command first; optionally restarts a failed run from its latest
# checkpoint (torchrun's --max-restarts).
#
# Usage: launch/mpirun.sh [--max-restarts K [--min-np M]] N CONFIG.json [TRAIN ARGS...]
#   CONFIG may be "default" for the built-in default experiment. TRAIN ARGS go to
#   `mpiddp train` unchanged (--set KEY=VALUE, --log PATH, --quiet, ...).
#   --max-restarts K  when the run dies (a rank killed, a node gone, the watchdog), start it
#                     again with --resume auto (its newest checkpoint in checkpoint.dir, or from
#                     the beginning when there is none yet), up to K times. Not restarted: exit
#                     codes a restart cannot fix (2 config, 3 data, 5 non-finite, 6 checkpoint,
#                     8 output) and a stop that was asked for (9 interrupted with a checkpoint,
#                     130/138/143: SIGINT/SIGUSR1/SIGTERM without one, a signal to this script).
#                     Each restart passes --restart, so the run's log (--log) carries on and
#                     gets a `restart` record (docs/log-format.md).
#   --min-np M        let restarts run on fewer ranks, down to M, with the same global batch
#                     (batch.global; each rank's batch grows): after two failures in a row at
#                     one world size, the next attempt has one rank fewer; a world size the
#                     run refuses (exit 2 or 6 at start: batch.global not divisible by it, a
#                     mid-epoch checkpoint whose epoch has another number of batches there) is
#                     skipped without counting as a restart. Default: N (never fewer).
#
# Signals: SIGTERM, SIGINT (Ctrl-C), SIGHUP or SIGUSR1 to this script reach the ranks as
# SIGUSR1, through mpirun, which forwards SIGUSR1 but answers SIGTERM and SIGINT by killing
# the ranks within about 2 s; the ranks then stop together after their current step with a
# checkpoint (exit code 9, docs/reliability.md). mpirun runs in its own process group, so a
# Ctrl-C on the terminal reaches only this script, which passes it on.
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

usage() { echo "usage: launch/mpirun.sh [--max-restarts K [--min-np M]] N CONFIG.json|default [TRAIN ARGS...]" >&2; exit 2; }
die() { echo "launch/mpirun.sh: $*" >&2; exit 2; }
max_restarts=0
min_np=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --max-restarts)
      [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--max-restarts needs a count (0 or more), got '${2:-}'"
      max_restarts=$2; shift 2 ;;
    --min-np)
      [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--min-np needs a positive integer, got '${2:-}'"
      min_np=$2; shift 2 ;;
    *) break ;;
  esac
done
[ "$#" -ge 2 ] || usage
n=$1
config=$2
shift 2
[[ "$n" =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer, got '$n'"
min_np=${min_np:-$n}
[ "$min_np" -le "$n" ] || die "--min-np $min_np is more than N = $n"
if [ "$min_np" -lt "$n" ] && [ "$max_restarts" -eq 0 ]; then die "--min-np needs --max-restarts"; fi
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

version=$("$mpirun" --version 2>&1 || true)
# launch_command NP: the launcher's command line for NP ranks, in the array `args`.
launch_command() {
  local np=$1
  args=("$mpirun" -np "$np")
  if [[ "$version" == *"Open MPI"* ]]; then
    if [ "$(id -u)" -eq 0 ]; then args+=(--allow-run-as-root); fi
    if [ "$np" -gt "$cores" ]; then
      args+=(--oversubscribe --bind-to none)
    else
      args+=(--bind-to core --map-by core)
    fi
    # Open MPI passes only the variables it is told to on to remote nodes.
    args+=(-x OMP_NUM_THREADS)
    if [ -n "${MPIDDP_PROGRESS:-}" ]; then args+=(-x MPIDDP_PROGRESS); fi
  else  # MPICH's Hydra: passes the whole environment on; oversubscribes without asking
    if [ "$np" -gt "$cores" ]; then args+=(-bind-to none); else args+=(-bind-to core); fi
  fi
  if [ -n "${MPIRUN_ARGS:-}" ]; then
    read -r -a extra <<< "$MPIRUN_ARGS"
    args+=("${extra[@]}")
  fi
  args+=("$mpiddp" train)
  if [ "$config" != "default" ]; then args+=("$config"); fi
}

# Background jobs get their own process group: a Ctrl-C on the terminal reaches this script
# only, which passes it on as SIGUSR1 (see the top of this file).
set -m
child=""
stopping=0
forward() {
  stopping=1
  if [ -n "$child" ]; then kill -USR1 "$child" 2> /dev/null || true; fi
}
trap forward TERM INT HUP USR1

# run_attempt ARGS...: runs the launcher command in `args` with ARGS appended, printing it
# first, and sets `rc` to its exit code; signals to this script are forwarded meanwhile.
run_attempt() {
  local command=("${args[@]}" "$@")
  # The exact command, quoted so it can be pasted into a shell.
  {
    printf 'launch/mpirun.sh: running: OMP_NUM_THREADS=%q' "$OMP_NUM_THREADS"
    if [ -n "${MPIDDP_PROGRESS:-}" ]; then printf ' MPIDDP_PROGRESS=%q' "$MPIDDP_PROGRESS"; fi
    printf ' %q' "${command[@]}"
    printf '\n'
  } >&2
  # stdin from /dev/null: mpirun forwards its stdin to rank 0, and a background process
  # group that reads the terminal would be stopped.
  "${command[@]}" < /dev/null &
  child=$!
  rc=0
  # wait returns early (> 128) when a trapped signal arrives: wait again for the exit code.
  while :; do
    wait "$child" && rc=0 || rc=$?
    kill -0 "$child" 2> /dev/null || break
  done
  child=""
}

# Whether a restart can help after exit code $1 (see --max-restarts at the top).
restartable() {
  case "$1" in
    0|2|3|5|6|8|9|130|138|143) return 1 ;;
    *) [ "$stopping" -eq 0 ] ;;
  esac
}

describe() {  # describe CODE: "exit code 137 (SIGKILL)"
  local text="exit code $1"
  if [ "$1" -gt 128 ] && name=$(kill -l "$(($1 - 128))" 2> /dev/null); then text+=" (SIG$name)"; fi
  echo "$text"
}

np=$n
attempt=0       # restarts so far
fails_here=0    # failed attempts in a row at world size $np
restart_args=()
while :; do
  launch_command "$np"
  run_attempt "$@" "${restart_args[@]}"
  [ "$rc" -ne 0 ] || exit 0
  if [ "$attempt" -gt 0 ] && [ "$np" -lt "$previous_np" ] && { [ "$rc" -eq 2 ] || [ "$rc" -eq 6 ]; } &&
     [ "$np" -gt "$min_np" ]; then
    echo "launch/mpirun.sh: the run refuses $np ranks ($(describe "$rc")); trying $((np - 1))" >&2
    np=$((np - 1))
    continue
  fi
  if ! restartable "$rc"; then
    if [ "$attempt" -gt 0 ] || [ "$max_restarts" -gt 0 ]; then
      echo "launch/mpirun.sh: not restarting after $(describe "$rc"): a restart cannot fix it, or the stop was asked for" >&2
    fi
    exit "$rc"
  fi
  if [ "$attempt" -ge "$max_restarts" ]; then
    [ "$max_restarts" -eq 0 ] || echo "launch/mpirun.sh: $(describe "$rc") after $attempt restarts (--max-restarts $max_restarts): giving up" >&2
    exit "$rc"
  fi
  attempt=$((attempt + 1))
  previous_np=$np
  fails_here=$((fails_here + 1))
  if [ "$fails_here" -ge 2 ] && [ "$np" -gt "$min_np" ]; then
    np=$((np - 1))
    fails_here=0
  fi
  reason="attempt $((attempt - 1)) at $previous_np ranks ended with $(describe "$rc")"
  echo "launch/mpirun.sh: $reason; restart $attempt of $max_restarts at $np ranks from the latest checkpoint" >&2
  restart_args=(--resume auto --restart "{\"attempt\":$attempt,\"exit_code\":$rc,\"previous_world_size\":$previous_np,\"reason\":\"$reason\"}")
done
