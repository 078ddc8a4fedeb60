#!/usr/bin/env bash
# Stops a cluster brought up by launch/local-cluster/start.sh and removes all it made.
#
# Usage: launch/local-cluster/stop.sh [--keep] STATE_DIR
#   --keep   leave STATE_DIR (logs, slurm.conf) in place; by default it is removed.
#
# In order: the jobs are cancelled and their end awaited; the daemons recorded in
# STATE_DIR/pids are ended by pid (launch/local-slurm/lib.sh); whatever still runs in the
# cluster's network namespaces (a job step whose node was cut off, a rank) is killed: every
# process there was started by this cluster; the namespaces are deleted, which removes their
# veths and the bridge with them; the node mount namespaces go with their last process.
# Idempotent: a second call, or a call on a half-started cluster, removes what is left and
# succeeds. The namespace names come from the directory's path (names.sh), so even a removed
# STATE_DIR's leftovers are found.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../local-slurm/lib.sh"
source "$here/names.sh"
die() { echo "local-cluster: $*" >&2; exit 1; }

keep=0
if [ "${1:-}" = "--keep" ]; then keep=1; shift; fi
[ $# -eq 1 ] || die "usage: stop.sh [--keep] STATE_DIR"
case "$1" in /*) state=$1 ;; *) state="$PWD/$1" ;; esac
state="$(cd "$state" 2>/dev/null && pwd || echo "${state%/}")"

nodes=0
[ -f "$state/cluster" ] && nodes=$(awk '$1 == "nodes" { print $2 }' "$state/cluster")
# Without the record (a removed state directory), look for every node name of this hash.
cluster_names "$state" "${nodes:-0}"
if [ "${nodes:-0}" -eq 0 ]; then
  mapfile -t node_ns < <(ls /run/netns 2>/dev/null | grep -E "^mpiddp-$cluster_hash-n[0-9]+$" || true)
fi

status=0
if [ -f "$state/pids" ]; then
  [ -x "$state/bin/squeue" ] && PATH="$state/bin:$PATH"
  slurm_cancel_jobs local-cluster
  slurm_stop_daemons local-cluster || status=1
fi

# Every process left in the cluster's namespaces, then the namespaces themselves.
for ns in "${node_ns[@]}" "$head_ns"; do
  [ -e "/run/netns/$ns" ] || continue
  pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
  if [ -n "${pids// }" ]; then
    echo "local-cluster: killing processes left in $ns: $pids" >&2
    # shellcheck disable=SC2086  # one argument per pid
    kill -KILL $pids 2>/dev/null || true
    for _ in $(seq 50); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.1; done
    [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] || { echo "local-cluster: processes survive in $ns" >&2; status=1; }
  fi
  ip netns del "$ns" 2>/dev/null || { echo "local-cluster: cannot delete namespace $ns" >&2; status=1; }
done

if [ "$keep" -eq 1 ]; then
  [ -d "$state" ] && echo "local-cluster: stopped; state and logs kept in $state" >&2
elif [ "$status" -eq 0 ]; then
  rm -rf -- "$state"
fi
exit "$status"
