# What launch/local-slurm/ (one node) and launch/local-cluster/ (K nodes in network namespaces)
# share: the tool check, the state directory, munge, slurm.conf, the daemons' pid list, the
# wait for idle nodes, and the stopping of jobs and daemons. Sourced, after `set -euo pipefail`,
# by their start.sh and stop.sh; every function names its inputs, nothing runs on sourcing.
#
# The daemons run as plain background processes of the calling user, recorded in
# STATE_DIR/pids as "NAME PID" lines; stop ends exactly those pids (never by name).

PATH="$PATH:/usr/sbin:/sbin"

# slurm_require_tools PREFIX TOOLS...: dies (naming the install step) when one is missing.
slurm_require_tools() {
  local prefix=$1 tool; shift
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 ||
      { echo "$prefix: '$tool' not found; install Slurm and munge with scripts/install-deps.sh --with-slurm" >&2; exit 1; }
  done
}

# slurm_make_state PREFIX DEFAULT_TEMPLATE [DIR]: creates (or checks, when given: it must be
# empty) the state directory and its subdirectories; sets $state to its absolute path.
slurm_make_state() {
  local prefix=$1 template=$2 dir
  if [ -n "${3:-}" ]; then
    state=$3
    mkdir -p "$state"
    [ -z "$(ls -A "$state")" ] || { echo "$prefix: state directory '$state' is not empty; give a new one" >&2; exit 1; }
  else
    state="$(mktemp -d "${TMPDIR:-/tmp}/$template.XXXXXX")"
  fi
  state="$(cd "$state" && pwd)"
  # munged refuses a socket under a directory that others cannot search (a 0700 mktemp -d, a
  # private home): say so now rather than through its log.
  dir="$state"
  while [ "$dir" != / ]; do
    dir="$(dirname "$dir")"
    [ -n "$(find "$dir" -maxdepth 0 -perm -o+x)" ] ||
      { echo "$prefix: munge needs the directories above its socket searchable by all, '$dir' is not; give a state directory elsewhere" >&2; exit 1; }
  done
  # munge wants every directory on its socket's path searchable by all (0755), its key 0600.
  mkdir -p "$state/munge" "$state/log" "$state/ctld" "$state/spool"
  chmod 0755 "$state" "$state/munge"
  : >"$state/pids"
}

# slurm_abort_on_error PREFIX STOP_SCRIPT: from now on, a failing command (or a call of
# `abort MESSAGE`) shows why and the daemons' logs, stops what was started (STOP_SCRIPT --keep
# $state) and exits 1.
slurm_abort_on_error() {
  abort_prefix=$1 abort_stop=$2
  abort() {
    trap - ERR
    echo "$abort_prefix: start failed: $*; the daemons' logs:" >&2
    tail -n 20 "$state"/log/* >&2 || true
    "$abort_stop" --keep "$state" >&2 || true
    exit 1
  }
  trap 'abort "a command failed (line $LINENO)"' ERR
}

# slurm_start_daemon NAME COMMAND...: starts one daemon in the background, its output in
# log/NAME.out, and records its pid. COMMAND must exec the daemon (so the pid is the
# daemon's) and name $state on its command line (stop checks that before signalling).
slurm_start_daemon() {
  local name="$1"; shift
  "$@" </dev/null >"$state/log/$name.out" 2>&1 &
  echo "$name $!" >>"$state/pids"
}

# slurm_start_munge: a key and munged on $state/munge/munge.socket; returns 1 when the socket
# does not appear within 5 s. A path-named Unix socket: reachable from every network namespace.
slurm_start_munge() {
  mungekey --create --keyfile="$state/munge/munge.key" >/dev/null
  chmod 0600 "$state/munge/munge.key"
  local socket="$state/munge/munge.socket" pid
  slurm_start_daemon munged munged -F --key-file="$state/munge/munge.key" --socket="$socket" \
    --pid-file="$state/munge/munged.pid" --seed-file="$state/munge/munged.seed" \
    --log-file="$state/log/munged.log"
  pid="$(awk '$1 == "munged" { print $2 }' "$state/pids")"
  for _ in $(seq 50); do
    [ -S "$socket" ] && return 0
    kill -0 "$pid" 2>/dev/null || break  # it exited: its log says why
    sleep 0.1
  done
  [ -S "$socket" ]
}

# slurm_write_conf DESCRIPTION CTLD_HOST CTLD_ADDR CTLD_PORT SLURMD_PORT PARTITION_NODES
# NODE_LINES [EXTRA_LINES]: writes $state/slurm.conf. NODE_LINES: the NodeName lines;
# EXTRA_LINES: site lines (per-node paths with %n, TmpFS, SlurmdParameters).
slurm_write_conf() {
  local description=$1 ctld_host=$2 ctld_addr=$3 ctld_port=$4 slurmd_port=$5 partition=$6
  local node_lines=$7 extra=${8:-}
  cat >"$state/slurm.conf" <<EOF
# Written by $description, state in $state.
ClusterName=mpiddp-local
SlurmctldHost=$ctld_host($ctld_addr)
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge/munge.socket
StateSaveLocation=$state/ctld
SlurmctldPidFile=$state/slurmctld.pid
SlurmctldLogFile=$state/log/slurmctld.log
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
$extra
$node_lines
PartitionName=local Nodes=$partition Default=YES MaxTime=INFINITE State=UP
EOF
}

# slurm_wait_idle SECONDS NODE...: waits until every node reports idle (its slurmd registered
# and the controller accepts jobs); returns 1 with the states on stderr when not in time.
slurm_wait_idle() {
  local seconds=$1 node node_state states="" all; shift
  for _ in $(seq $((seconds * 5))); do
    states="" all=1
    for node in "$@"; do
      node_state="$(sinfo -h -n "$node" -o %T 2>/dev/null || true)"
      states+="$node=${node_state:-unreachable} "
      [ "$node_state" = idle ] || all=0
    done
    [ "$all" -eq 1 ] && return 0
    sleep 0.2
  done
  echo "nodes not idle after $seconds s: $states" >&2
  return 1
}

# slurm_cancel_jobs PREFIX: cancels the cluster's jobs and waits until the controller has seen
# them end (bounded: KillWait is 5 s). A job step runs under its own slurmstepd, which is not
# a child of slurmd, so killing the daemons under a running job would leave its steps behind.
slurm_cancel_jobs() {
  local prefix=$1 jobs
  export SLURM_CONF="$state/slurm.conf"
  [ -f "$SLURM_CONF" ] && jobs="$(squeue -h -o %i 2>/dev/null)" || return 0
  [ -n "$jobs" ] || return 0
  echo "$prefix: cancelling jobs $(tr '\n' ' ' <<<"$jobs")" >&2
  # shellcheck disable=SC2086  # one argument per job id
  scancel $jobs || true
  for _ in $(seq 100); do
    [ -z "$(squeue -h -o %i 2>/dev/null)" ] && return 0
    sleep 0.2
  done
  echo "$prefix: jobs still listed after 20 s" >&2
}

# slurm_stop_daemons PREFIX: ends the daemons recorded in $state/pids, newest first (slurmd,
# slurmctld, then munged, which they use). Each pid is checked to still be a process whose
# command line names $state, so a pid reused by an unrelated process is never signalled.
# Returns 1 when one survives SIGKILL.
slurm_stop_daemons() {
  local prefix=$1 name pid status=0
  [ -f "$state/pids" ] || return 0
  while read -r name pid; do
    [ -n "$pid" ] || continue
    slurm_ours "$pid" || continue
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 100); do slurm_ours "$pid" || break; sleep 0.1; done
    if slurm_ours "$pid"; then
      echo "$prefix: $name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.2
      if slurm_ours "$pid"; then echo "$prefix: $name (pid $pid) is still running" >&2; status=1; fi
    fi
  done < <(tac "$state/pids")
  return "$status"
}

# slurm_ours PID: the process exists, is not a zombie, and was started for $state.
slurm_ours() {
  local cmdline
  cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline")" || return 1
  [[ "$cmdline" == *"$state"* ]]
}
