#!/usr/bin/env bash
# Brings up a one-node Slurm cluster on this machine, for trying launch/slurm.sbatch on a laptop
# and for the `slurm` test. Needs Debian's slurm-wlm and munge (scripts/install-deps.sh
# --with-slurm, which also brings libpmix-dev for `srun --mpi=pmix`).
#
# Usage: launch/local-slurm/start.sh [--cpus N] [STATE_DIR]
#   --cpus N  declare N CPUs on the node instead of what `slurmd -C` finds, so that jobs with
#             more tasks than cores can run (like mpirun --oversubscribe; a single node with
#             --ntasks-per-node above its CPU count is refused even with --overcommit)
#   Prints the state directory on stdout (progress goes to stderr); then:
#     export SLURM_CONF="$STATE_DIR/slurm.conf"     # every client command needs it
#     sbatch --wait launch/slurm.sbatch ...
#     launch/local-slurm/stop.sh "$STATE_DIR"
#
# Everything lives in STATE_DIR (default: a new directory under ${TMPDIR:-/tmp}): munge key and
# socket, slurm.conf, spool, state, logs (log/), and the pids of the three daemons (pids). The
# daemons run as plain background processes of the calling user (munged -F, slurmctld -D,
# slurmd -D): nothing is installed, no systemd unit is touched, /etc is not read, and a system
# Slurm or munge on the same machine is left alone (the ports are chosen free).
#
# Choices that make it work in a container or a CI runner (seen on Debian 12, Slurm 22.05):
# cgroup plugins fail there, so processes are tracked by /proc (proctrack/linuxproc) and tasks
# are not confined (task/none); munge wants its key 0600 and its socket directory 0755.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib.sh"
die() { echo "local-slurm: $*" >&2; exit 1; }

slurm_require_tools local-slurm munged mungekey slurmctld slurmd sinfo scontrol

cpus=""
if [ "${1:-}" = "--cpus" ]; then
  [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--cpus needs a positive number, got '${2:-}'"
  cpus="$2"; shift 2
fi
if [ $# -gt 1 ]; then die "usage: start.sh [--cpus N] [STATE_DIR]"; fi
slurm_make_state local-slurm mpiddp-slurm "${1:-}"

# The node must be named as slurmd sees itself; its CPU and memory line comes from slurmd -C.
node_line="$(slurmd -C | head -n 1)"
node="$(sed -n 's/^NodeName=\([^ ]*\).*/\1/p' <<<"$node_line")"
[ -n "$node" ] || die "could not read the node line from 'slurmd -C': $node_line"
slurmd_parameters=""
if [ -n "$cpus" ]; then
  # Declared instead of detected: slurmd registers the configured CPUs (config_overrides).
  node_line="NodeName=$node CPUs=$cpus $(grep -o 'RealMemory=[0-9]*' <<<"$node_line")"
  slurmd_parameters="SlurmdParameters=config_overrides"
fi

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local port="$1"
  while port_in_use "$port" || [ "$port" = "${2:-}" ]; do port=$((port + 1)); done
  echo "$port"
}
ctld_port="$(free_port 16817)"
slurmd_port="$(free_port 16818 "$ctld_port")"

# On any failure from here on, show why, and stop what was started.
slurm_abort_on_error local-slurm "$here/stop.sh"

slurm_start_munge || abort "munged did not create its socket"
slurm_write_conf "launch/local-slurm/start.sh: a one-node cluster of user $(id -un)" \
  "$node" 127.0.0.1 "$ctld_port" "$slurmd_port" "$node" "$node_line NodeAddr=127.0.0.1 State=UNKNOWN" \
  "SlurmdSpoolDir=$state/spool
SlurmdPidFile=$state/slurmd.pid
SlurmdLogFile=$state/log/slurmd.log
$slurmd_parameters"
export SLURM_CONF="$state/slurm.conf"

slurm_start_daemon slurmctld slurmctld -D -c -f "$SLURM_CONF"
slurm_start_daemon slurmd slurmd -D -f "$SLURM_CONF"
slurm_wait_idle 30 "$node" || abort "node $node is not idle after 30 s"

trap - ERR
echo "local-slurm: one-node cluster up (node $node, ports $ctld_port/$slurmd_port, user $(id -un))" >&2
echo "local-slurm: export SLURM_CONF=\"$SLURM_CONF\"; stop with $here/stop.sh \"$state\"" >&2
echo "$state"
