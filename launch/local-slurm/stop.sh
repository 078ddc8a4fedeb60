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

die() { echo "local-slurm: $*" >&2; exit 1; }
PATH="$PATH:/usr/sbin:/sbin"

keep=0
if [ "${1:-}" = "--keep" ]; then keep=1; shift; fi
[ $# -eq 1 ] || die "usage: stop.sh [--keep] STATE_DIR"
state="$(cd "$1" 2>/dev/null && pwd)" || die "no state directory '$1'"
[ -f "$state/pids" ] || die "'$state' holds no pids file; was it made by start.sh?"

# 1. Cancel the jobs and wait until the controller has seen them end (bounded: KillWait is 5 s).
export SLURM_CONF="$state/slurm.conf"
if [ -f "$SLURM_CONF" ] && jobs="$(squeue -h -o %i 2>/dev/null)"; then
  if [ -n "$jobs" ]; then
    echo "local-slurm: cancelling jobs $(tr '\n' ' ' <<<"$jobs")" >&2
    # shellcheck disable=SC2086  # one argument per job id
    scancel $jobs || true
    for _ in $(seq 100); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
    [ -z "$(squeue -h -o %i 2>/dev/null)" ] || echo "local-slurm: jobs still listed after 20 s" >&2
  fi
fi

# 2. End the recorded daemons, newest first (slurmd, slurmctld, then munged, which they use).
ours() {  # ours PID: the process exists, is not a zombie, and was started for this STATE_DIR
  local cmdline
  cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline")" || return 1
  [[ "$cmdline" == *"$state"* ]]
}
status=0
while read -r name pid; do
  [ -n "$pid" ] || continue
  ours "$pid" || continue
  kill -TERM "$pid" 2>/dev/null || continue
  for _ in $(seq 100); do ours "$pid" || break; sleep 0.1; done
  if ours "$pid"; then
    echo "local-slurm: $name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
    if ours "$pid"; then echo "local-slurm: $name (pid $pid) is still running" >&2; status=1; fi
  fi
done < <(tac "$state/pids")

if [ "$keep" -eq 1 ]; then
  echo "local-slurm: stopped; state and logs kept in $state" >&2
elif [ "$status" -eq 0 ]; then
  rm -rf -- "$state"
fi
exit "$status"
