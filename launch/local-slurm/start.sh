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
die() { echo "local-slurm: $*" >&2; exit 1; }

for tool in munged mungekey slurmctld slurmd sinfo scontrol; do
  command -v "$tool" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin"
  command -v "$tool" >/dev/null 2>&1 ||
    die "'$tool' not found; install Slurm and munge with scripts/install-deps.sh --with-slurm"
done

cpus=""
if [ "${1:-}" = "--cpus" ]; then
  [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--cpus needs a positive number, got '${2:-}'"
  cpus="$2"; shift 2
fi
if [ $# -gt 1 ]; then die "usage: start.sh [--cpus N] [STATE_DIR]"; fi
if [ $# -eq 1 ]; then
  state="$1"
  mkdir -p "$state"
  [ -z "$(ls -A "$state")" ] || die "state directory '$state' is not empty; give a new one"
else
  state="$(mktemp -d "${TMPDIR:-/tmp}/mpiddp-slurm.XXXXXX")"
fi
state="$(cd "$state" && pwd)"
# munged refuses a socket under a directory that others cannot search (a 0700 mktemp -d, a
# private home): say so now rather than through its log.
dir="$state"
while [ "$dir" != / ]; do
  dir="$(dirname "$dir")"
  [ -n "$(find "$dir" -maxdepth 0 -perm -o+x)" ] ||
    die "munge needs the directories above its socket searchable by all, '$dir' is not; give a state directory elsewhere"
done
# munge wants every directory on its socket's path searchable by all (0755), its key 0600.
mkdir -p "$state/munge" "$state/log" "$state/ctld" "$state/spool"
chmod 0755 "$state" "$state/munge"
: >"$state/pids"

user="$(id -un)"
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

# Starts one daemon in the background, its output in log/NAME.out, and records its pid for stop.sh.
start_daemon() {
  local name="$1"; shift
  "$@" </dev/null >"$state/log/$name.out" 2>&1 &
  echo "$name $!" >>"$state/pids"
}

# On any failure from here on, show why, and stop what was started.
abort() {
  trap - ERR
  echo "local-slurm: start failed: $*; the daemons' logs:" >&2
  tail -n 20 "$state"/log/* >&2 || true
  "$here/stop.sh" --keep "$state" >&2 || true
  exit 1
}
trap 'abort "a command failed (line $LINENO)"' ERR

mungekey --create --keyfile="$state/munge/munge.key" >/dev/null
chmod 0600 "$state/munge/munge.key"
socket="$state/munge/munge.socket"
start_daemon munged munged -F --key-file="$state/munge/munge.key" --socket="$socket" \
  --pid-file="$state/munge/munged.pid" --seed-file="$state/munge/munged.seed" \
  --log-file="$state/log/munged.log"
munged_pid="$(awk '$1 == "munged" { print $2 }' "$state/pids")"
for _ in $(seq 50); do
  [ -S "$socket" ] && break
  kill -0 "$munged_pid" 2>/dev/null || break  # it exited: its log says why
  sleep 0.1
done
[ -S "$socket" ] || abort "munged did not create its socket"

cat >"$state/slurm.conf" <<EOF
# Written by launch/local-slurm/start.sh: a one-node cluster of user $user, state in $state.
ClusterName=mpiddp-local
SlurmctldHost=$node(127.0.0.1)
SlurmUser=$user
SlurmdUser=$user
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MailProg=/bin/true
$slurmd_parameters
$node_line NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$state/slurm.conf"

start_daemon slurmctld slurmctld -D -c -f "$SLURM_CONF"
start_daemon slurmd slurmd -D -f "$SLURM_CONF"

# Ready when the node reports idle: slurmd registered and the controller accepts jobs.
for _ in $(seq 150); do
  node_state="$(sinfo -h -n "$node" -o %T 2>/dev/null || true)"
  [ "$node_state" = "idle" ] && break
  sleep 0.2
done
[ "$node_state" = "idle" ] || abort "node $node is '${node_state:-unreachable}' after 30 s, not idle"

trap - ERR
echo "local-slurm: one-node cluster up (node $node, ports $ctld_port/$slurmd_port, user $user)" >&2
echo "local-slurm: export SLURM_CONF=\"$SLURM_CONF\"; stop with $here/stop.sh \"$state\"" >&2
echo "$state"
