#!/usr/bin/env bash
# Brings up a Slurm cluster of K nodes on this machine, each node a Linux network namespace
# with its own host name, address, boot id, /tmp-like TmpFS and /dev/shm, the nodes joined by veth
# links on a bridge: launch/slurm.sbatch then runs across a real network link (TCP between
# hosts, shared memory inside one), and a link can be cut or slowed from outside. Needs root
# (namespaces), iproute2, util-linux (nsenter, unshare), Slurm and munge
# (scripts/install-deps.sh --with-slurm). Shares slurm.conf, munge and the daemon bookkeeping
# with launch/local-slurm/ (lib.sh there).
#
# Usage: launch/local-cluster/start.sh [--cpus N] [--rate RATE] [--delay DELAY] [--state DIR] [NODES]
#   NODES          number of nodes, n1..nNODES (default 2)
#   --cpus N       CPUs each node declares (default 2), so that jobs with more tasks than cores
#                  can run (every node shares this machine's cores)
#   --rate RATE    limit each node's link to RATE (e.g. 1gbit, 100mbit): tc tbf, or netem's
#                  rate with --delay
#   --delay DELAY  add DELAY one way on each node's link (tc netem, e.g. 100us, 1ms; needs the
#                  kernel's sch_netem). What was applied is printed and kept in STATE_DIR/tc
#   --state DIR    the state directory (must be empty; default: a new one under ${TMPDIR:-/tmp})
#   Prints the state directory on stdout (progress goes to stderr); then:
#     source "$STATE_DIR/env.sh"    # SLURM_CONF, and sbatch/srun/squeue/... on PATH that talk
#                                   # to the controller inside the cluster's network
#     sbatch -N 2 --ntasks-per-node=2 --wait launch/slurm.sbatch ...
#     cluster_link n2 down; cluster_link n2 up   # cut a node's link at the switch, and back
#     launch/local-cluster/stop.sh "$STATE_DIR"
#
# Layout (Note [namespaces]): a head namespace holds the bridge (10.77.0.1/24) and slurmctld;
# node k's namespace holds eth0 (10.77.0.(10+k)), the other end of a veth whose head end
# (named nK) is on the bridge, and slurmd -N nK with its job steps. Every address lives in
# these namespaces: nothing is sent to or from any other address, and the machine's own
# network is not touched. Namespace names carry a hash of the state directory
# (mpiddp-HASH-head, mpiddp-HASH-nK), so two clusters, or a leftover, never collide;
# stop.sh removes them and every process in them.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../local-slurm/lib.sh"
source "$here/names.sh"
die() { echo "local-cluster: $*" >&2; exit 1; }

nodes=2 cpus=2 rate="" delay="" state_arg=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cpus) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--cpus needs a positive number, got '${2:-}'"; cpus=$2; shift 2 ;;
    --rate) [[ "${2:-}" =~ ^[0-9.]+[kmgt]?(bit|bps)$ ]] || die "--rate needs a tc rate such as 1gbit, got '${2:-}'"; rate=$2; shift 2 ;;
    --delay) [[ "${2:-}" =~ ^[0-9.]+(us|ms|s)$ ]] || die "--delay needs a tc time such as 100us or 1ms, got '${2:-}'"; delay=$2; shift 2 ;;
    --state) state_arg=${2:?--state needs a directory}; shift 2 ;;
    -*) die "unknown option '$1'; usage: start.sh [--cpus N] [--rate RATE] [--delay DELAY] [--state DIR] [NODES]" ;;
    *) [[ "$1" =~ ^[1-9][0-9]?$ ]] || die "NODES must be 1..99, got '$1'"; nodes=$1; shift ;;
  esac
done

[ "$(id -u)" -eq 0 ] || die "needs root: it creates network, UTS and mount namespaces"
for tool in ip nsenter unshare; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found (iproute2, util-linux)"
done
slurm_require_tools local-cluster munged mungekey slurmctld slurmd sinfo scontrol sbatch srun

slurm_make_state local-cluster mpiddp-cluster "$state_arg"
cluster_names "$state" "$nodes"
for ns in "$head_ns" "${node_ns[@]}"; do
  [ ! -e "/run/netns/$ns" ] || die "network namespace $ns exists already (a leftover of a cluster in $state? run stop.sh on it)"
done
mkdir -p "$state/bin" "$state/nodes"
node_list=()
for k in $(seq "$nodes"); do node_list+=("n$k"); done
{ echo "nodes $nodes"; echo "head $head_ns"; printf 'node %s\n' "${node_ns[@]}"; } >"$state/cluster"

# On any failure from here on, show why, and remove what was made.
slurm_abort_on_error local-cluster "$here/stop.sh"

# limit_link NS: limits eth0's egress in namespace NS (so both directions of a node pair are
# limited, each by its sender's qdisc) and prints what it did. netem carries a delay (and a
# rate with it); a rate alone is a token bucket (tbf), which kernels without sch_netem (as in
# some containers) still have. Without either the cluster still comes up, unlimited: said so.
limit_link() {
  local ns=$1 in_ns=(nsenter --net="/run/netns/$1" -- tc qdisc add dev eth0 root)
  if [ -n "$delay" ] &&
     "${in_ns[@]}" netem delay "$delay" ${rate:+rate "$rate"} 2>"$state/log/tc.err"; then
    echo "each node's egress: tc netem delay $delay${rate:+ rate $rate}"
    return
  fi
  local missing=""
  [ -z "$delay" ] || missing="no delay: tc netem failed ($(head -n 1 "$state/log/tc.err"); the kernel may lack sch_netem); "
  if [ -n "$rate" ] && "${in_ns[@]}" tbf rate "$rate" burst 256kb latency 50ms 2>"$state/log/tc.err"; then
    echo "${missing}each node's egress: tc tbf rate $rate"
  elif [ -n "$rate" ]; then
    echo "${missing}no rate limit: tc tbf failed ($(head -n 1 "$state/log/tc.err"))"
  else
    echo "${missing%; }"
  fi
}

# --- The network. -------------------------------------------------------------------------
# The veths are created inside the namespaces (ip -n), so no interface ever appears in the
# machine's own namespace; their names only need to be unique within the head namespace.
hosts="127.0.0.1 localhost
$head_addr head"
ip netns add "$head_ns"
ip -n "$head_ns" link set lo up
ip -n "$head_ns" link add br0 type bridge
ip -n "$head_ns" addr add "$head_addr/24" dev br0
ip -n "$head_ns" link set br0 up
tc_note="no rate or delay limit"
for k in $(seq "$nodes"); do
  ns=${node_ns[k - 1]} addr=$(node_addr "$k")
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$head_ns" link add "n$k" type veth peer name eth0 netns "$ns"
  ip -n "$head_ns" link set "n$k" master br0 up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  hosts+=$'\n'"$addr n$k"
  [ -z "$rate$delay" ] || tc_note=$(limit_link "$ns")
done
echo "$hosts" >"$state/hosts"
echo "$tc_note" >"$state/tc"

# --- Entering a node. ----------------------------------------------------------------------
# Note [namespaces]: `ip netns exec` also remounts /sys for the network namespace, without the
# cgroup file system, and slurmd then refuses to start; nsenter --net enters only the network
# namespace. unshare adds the node's own UTS namespace (its host name, which MPI reports) and
# mount namespace, where the node's directory is bound over the TmpFS path (PMIx keeps its
# per-step /tmp/spmix_appdir_* there: shared, two nodes' steps would collide), a fresh tmpfs
# is mounted on /dev/shm (MPI's shared-memory segments stay inside the node, as on real
# hardware), the cluster's host table over /etc/hosts (MPICH resolves peers by name) and the
# node's own boot id over /proc/sys/kernel/random/boot_id (Note [a boot id per node]).
#
# Note [a boot id per node]
# UCX (MPICH's ch4:ucx transport) takes two processes for one machine when their system ids
# match: ucs_get_system_id() is /proc/sys/kernel/random/boot_id, which every namespace of one
# kernel shares. Its shared-memory transports (posix, sysv, cma: uct_sm_iface_is_reachable)
# are then "reachable" between the nodes, and UCX carries their messages around the link,
# which a cut then does not stop. Each node gets a random boot id of its own, made once at
# start like a real machine's at boot: UCX then uses shared memory inside a node and tcp on
# eth0 between nodes, as on a real cluster, with no UCX_TLS. Open MPI does not read it.
cat >"$state/bin/enter-node" <<EOF
#!/bin/sh
# enter-node NAME COMMAND...: runs COMMAND as node NAME (head or nK) of the cluster in $state.
set -e
name=\$1; shift
ns=mpiddp-$cluster_hash-\$name
[ -e "/run/netns/\$ns" ] || { echo "enter-node: no node '\$name' in $state" >&2; exit 1; }
exec nsenter --net="/run/netns/\$ns" -- unshare --uts --mount --propagation private -- \\
  "$state/bin/node-init" "\$name" "\$@"
EOF
cat >"$state/bin/node-init" <<EOF
#!/bin/sh
# Inside a node's new UTS and mount namespaces (see enter-node): its name, TmpFS, /dev/shm
# and host table, then COMMAND in place of this shell (the pid stays the same).
set -e
name=\$1; shift
hostname "\$name"
mkdir -p "$state/nodes/\$name/tmp"
mount --bind "$state/nodes/\$name/tmp" "$state/tmpfs"
mount -t tmpfs -o mode=1777,size=50% tmpfs /dev/shm
mount --bind "$state/hosts" /etc/hosts
mount --bind "$state/nodes/\$name/boot_id" /proc/sys/kernel/random/boot_id
exec "\$@"
EOF
chmod +x "$state/bin/enter-node" "$state/bin/node-init"
for name in head "${node_list[@]}"; do
  mkdir -p "$state/nodes/$name"
  cat /proc/sys/kernel/random/uuid >"$state/nodes/$name/boot_id"
done
mkdir -p "$state/tmpfs"
# The client commands talk to slurmctld at the head's address: they run in the head's network
# namespace (nothing else: the submitting shell's files and environment stay as they are).
for tool in sbatch srun salloc squeue scontrol scancel sinfo sacct sstat; do
  real=$(command -v "$tool" || true)
  [ -n "$real" ] || continue
  printf '#!/bin/sh\nexec nsenter --net=/run/netns/%s -- %s "$@"\n' "$head_ns" "$real" >"$state/bin/$tool"
  chmod +x "$state/bin/$tool"
done
cat >"$state/env.sh" <<EOF
# Source this to use the cluster in $state (written by launch/local-cluster/start.sh).
export SLURM_CONF="$state/slurm.conf"
export MPIDDP_CLUSTER_STATE="$state"
# Between nodes both MPIs use TCP on eth0: Open MPI by host, MPICH's UCX because each node
# has its own boot id (Note [a boot id per node] in start.sh); inside a node, shared memory.
case ":\$PATH:" in *":$state/bin:"*) ;; *) export PATH="$state/bin:\$PATH" ;; esac
# cluster_link NODE up|down: brings node NODE's link up or down at the bridge (from outside
# the node, like pulling its cable at the switch).
cluster_link() { ip -n "$head_ns" link set "\$1" "\$2"; }
# cluster_link_bytes NODE: the bytes that node NODE's link has carried so far, both ways
# (the counters of its end on the bridge): what crossed the network to and from the node.
cluster_link_bytes() {
  ip -n "$head_ns" -s link show dev "\$1" | awk '/RX:|TX:/ { getline; sum += \$1 } END { print sum + 0 }'
}
# cluster_pids NODE: the processes running on node NODE (in its network namespace).
cluster_pids() { ip netns pids "mpiddp-$cluster_hash-\$1"; }
EOF
source "$state/env.sh"

# --- Slurm. --------------------------------------------------------------------------------
# Inside the cluster's private network the standard ports are free by construction.
memory=$(slurmd -C | grep -o 'RealMemory=[0-9]*' | head -n 1)
node_lines="NodeName=DEFAULT CPUs=$cpus $memory State=UNKNOWN"
for k in $(seq "$nodes"); do node_lines+=$'\n'"NodeName=n$k NodeAddr=$(node_addr "$k")"; done
slurm_start_munge || abort "munged did not create its socket"
# Per-node spool, pid and log files (%n: the node's name). Declared CPUs (config_overrides):
# every node runs on this machine's cores.
slurm_write_conf "launch/local-cluster/start.sh: $nodes nodes in network namespaces mpiddp-$cluster_hash-*" \
  head "$head_addr" 6817 6818 "n[1-$nodes]" "$node_lines" \
  "SlurmdSpoolDir=$state/spool/%n
SlurmdPidFile=$state/spool/slurmd-%n.pid
SlurmdLogFile=$state/log/slurmd-%n.log
TmpFS=$state/tmpfs
SlurmdParameters=config_overrides"
slurm_start_daemon slurmctld "$state/bin/enter-node" head slurmctld -D -c -f "$SLURM_CONF"
for k in $(seq "$nodes"); do
  mkdir -p "$state/spool/n$k"
  slurm_start_daemon "slurmd-n$k" "$state/bin/enter-node" "n$k" slurmd -D -N "n$k" -f "$SLURM_CONF"
done
slurm_wait_idle 60 "${node_list[@]}" || abort "the nodes are not idle after 60 s"

trap - ERR
echo "local-cluster: $nodes nodes up (n1..n$nodes at $(node_addr 1)..$(node_addr "$nodes"), $cpus CPUs each; $tc_note)" >&2
echo "local-cluster: source \"$state/env.sh\"; stop with $here/stop.sh \"$state\"" >&2
echo "$state"
