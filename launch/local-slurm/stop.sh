#!/usr/bin/env bash
# Stops a one-node cluster brought up by launch/local-slurm/start.sh.
#
# Usage: launch/local-slurm/stop.sh [--keep] STATE_DIR
#   --keep   leave STATE_DIR (logs, slurm.conf) in place; by default it is removed.
#
# Running jobs are cancelled first and their end awaited: a job step runs under its own
# slurmstepd, which is not a child of slurmd, so killing the daemons under a running job would
# leave its steps behind. Then exactly the daemons that start.sh recorded in STATE_DIR/pids are
# ended, newest first, by pid (never by name): each pid is checked to still be a process whose
# command line names STATE_DIR, so a pid reused by an unrelated process is never signalled.
set -uo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
die() { echo "local-slurm: $*" >&2; exit 1; }

keep=0
if [ "${1:-}" = "--keep" ]; then keep=1; shift; fi
[ $# -eq 1 ] || die "usage: stop.sh [--keep] STATE_DIR"
state="$(cd "$1" 2>/dev/null && pwd)" || die "no state directory '$1'"
[ -f "$state/pids" ] || die "'$state' holds no pids file; was it made by start.sh?"

slurm_cancel_jobs local-slurm
status=0
slurm_stop_daemons local-slurm || status=1

if [ "$keep" -eq 1 ]; then
  echo "local-slurm: stopped; state and logs kept in $state" >&2
elif [ "$status" -eq 0 ]; then
  rm -rf -- "$state"
fi
exit "$status"
