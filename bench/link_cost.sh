#!/usr/bin/env bash
# What moving bytes across the link of launch/local-cluster costs in CPU, and how much of the
# gradient sum between 2 nodes of 1 rank that is. On this test bed the "network" is the
# kernel copying through a veth pair on the same cores the ranks train on, so a transfer
# cannot overlap computation there: its CPU is taken from the ranks' cores wherever it runs
# (docs/benchmarks.md, "The link is the CPU"). Prints JSON lines:
#   {"stream": "one_way" | "both_ways", ...}   BYTES per direction through blocking TCP
#       sockets (bench/tcp_stream.py), the senders starting together once every process is
#       up: GB/s from the first write to the last answer, and the machine's CPU seconds by
#       kind over that span (/proc/stat, read by the senders: user, system, softirq, idle);
#       cpu_ns_per_byte, the busy CPU per byte moved,
#       and kernel_ns_per_byte, its system and softirq part (the copies and TCP/IP; the user
#       part is the Python loop's)
#   {"workload": W, ...}   mpiddp bench --reduce-only at 2 x 1: reduce_ms; link_mb, the bytes
#       the sum moves across the link (the scattered sum and the gather each send (N - 1)/N
#       of the buffer from every rank: 2 (N - 1) S in all); predicted_kernel_ms_per_core, the
#       kernel CPU per core that the both-way stream's kernel_ns_per_byte gives for them; and
#       cpu_ms_per_reduction, measured: the difference of two runs of R and 11 R repeats, so
#       that start-up cancels (MPI's progress loop spins while it waits, so this is every
#       cycle of both cores, not only the copying)
# Run it on an otherwise idle machine: /proc/stat counts every process.
# Usage (root): bench/link_cost.sh [--rate RATE] [--mib MIB] [WORKLOAD...]   (default: mlp wide)
#   --rate RATE   limit each node's link (launch/local-cluster/start.sh --rate)
#   --mib MIB     MiB per direction of the streams (default 2048)
# Environment: MPIDDP (default build/mpiddp).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
start_args=() mib=2048
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) start_args=(--rate "$2"); shift 2 ;;
    --mib) mib=$2; shift 2 ;;
    *) break ;;
  esac
done
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(mlp wide)
mpiddp="$(readlink -f "${MPIDDP:-$here/../build/mpiddp}")"
[ -x "$mpiddp" ] || { echo "link_cost.sh: no mpiddp binary at $mpiddp (set MPIDDP)" >&2; exit 2; }
python=/usr/bin/python3
srun_mpi=pmix
[[ "$(ldd "$mpiddp")" != *libmpich* ]] || srun_mpi=pmi2

source "$here/../launch/local-cluster/names.sh"
state=$("$here/../launch/local-cluster/start.sh" "${start_args[@]}" 2)
trap '"$here/../launch/local-cluster/stop.sh" "$state"' EXIT
source "$state/env.sh"
cluster_names "$state" 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1  # as bench/cluster.sh
echo "# $(grep -m 1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(getconf _NPROCESSORS_ONLN) cores; link: $(cat "$state/tc")"

ticks=$(getconf CLK_TCK)
# The machine's CPU ticks: /proc/stat's "cpu" line, user nice system idle iowait irq softirq ...
cpu_now() { awk '/^cpu /{$1 = ""; print substr($0, 2)}' /proc/stat; }
# cpu_json BEFORE AFTER DIVISOR: the CPU seconds between two such readings (missing fields
# count 0), divided by DIVISOR, by kind: user (+ nice), system (+ irq), softirq, idle (+ iowait).
cpu_json() {
  awk -v a="$1" -v b="$2" -v t="$ticks" -v d="$3" 'BEGIN { split(a, x); split(b, y);
    for (i = 1; i <= 7; ++i) z[i] = (y[i] - x[i]) / t / d;
    printf "{\"user\":%.6f,\"system\":%.6f,\"softirq\":%.6f,\"idle\":%.6f}",
      z[1] + z[2], z[3] + z[6], z[7], z[4] + z[5] }'
}
in_node() { local k=$1; shift; nsenter --net="/run/netns/${node_ns[k - 1]}" -- "$@"; }

bytes=$((mib * 1024 * 1024)) chunk=$((4 * 1024 * 1024)) port=5990
# wait_all PID...: waits for each, failing if any failed (a bare `wait` would not tell).
wait_all() { local pid failed=0; for pid in "$@"; do wait "$pid" || failed=1; done; return $failed; }
stream() {  # stream one_way|both_ways
  local kind=$1 pids=() start_at
  port=$((port + 2))
  in_node 2 "$python" "$here/tcp_stream.py" recv "$(node_addr 2)" "$port" "$bytes" "$chunk" & pids+=($!)
  if [ "$kind" = both_ways ]; then
    in_node 1 "$python" "$here/tcp_stream.py" recv "$(node_addr 1)" $((port + 1)) "$bytes" "$chunk" & pids+=($!)
  fi
  # The senders write from the same moment on, two seconds from now: every interpreter has
  # started and connected by then, so the CPU the senders read spans the transfer alone.
  start_at=$("$python" -c 'import time; print(time.monotonic() + 2.0)')
  in_node 1 "$python" "$here/tcp_stream.py" send "$(node_addr 2)" "$port" "$bytes" "$chunk" "$start_at" \
    > "$state/sender1" & pids+=($!)
  if [ "$kind" = both_ways ]; then
    in_node 2 "$python" "$here/tcp_stream.py" send "$(node_addr 1)" $((port + 1)) "$bytes" "$chunk" "$start_at" \
      > "$state/sender2" & pids+=($!)
  else
    : > "$state/sender2"
  fi
  wait_all "${pids[@]}" || { echo "link_cost.sh: a stream of $kind failed" >&2; exit 1; }
  # From the first sender's first write to the last sender's answer, and the ticks at both.
  local seconds t0 t1 moved cpu
  IFS='|' read -r seconds t0 t1 moved < <("$python" - "$bytes" "$state/sender1" "$state/sender2" <<'PY'
import json, sys
senders = [json.loads(text) for text in (open(f).read() for f in sys.argv[2:]) if text.strip()]
first = min(senders, key=lambda s: s["start"]); last = max(senders, key=lambda s: s["end"])
print("%.6f|%s|%s|%d" % (last["end"] - first["start"], " ".join(map(str, first["ticks_start"])),
                         " ".join(map(str, last["ticks_end"])), int(sys.argv[1]) * len(senders)))
PY
)
  cpu=$(cpu_json "$t0" "$t1" 1)
  "$python" -c "import json, sys
cpu = json.loads(sys.argv[1]); moved = int(sys.argv[2]); s = float(sys.argv[3])
print(json.dumps({'stream': sys.argv[4], 'bytes': moved, 'seconds': s, 'gb_per_s': moved / s / 1e9,
                  'cpu_s': cpu, 'cpu_ns_per_byte': (cpu['user'] + cpu['system'] + cpu['softirq']) / moved * 1e9,
                  'kernel_ns_per_byte': (cpu['system'] + cpu['softirq']) / moved * 1e9}))" "$cpu" "$moved" "$seconds" "$kind"
}
stream one_way
both=$(stream both_ways)
echo "$both"
ns_per_byte=$("$python" -c "import json, sys; print(json.loads(sys.argv[1])['kernel_ns_per_byte'])" "$both")

reduce() {  # reduce WORKLOAD REPEATS: prints "CPU BEFORE|CPU AFTER|BENCH LINE"
  local before after line
  before=$(cpu_now)
  line=$(srun --mpi="$srun_mpi" -N 2 --ntasks-per-node=1 --cpus-per-task=1 \
    "$mpiddp" bench "$here/$1.json" --set threads=1 --reduce-only --reduce-repeats "$2" | tail -n 1)
  after=$(cpu_now)
  echo "$before|$after|$line"
}
for workload in "${workloads[@]}"; do
  repeats=20; [ "$workload" != wide ] || repeats=5
  short=$(reduce "$workload" "$repeats") long=$(reduce "$workload" $((11 * repeats)))
  IFS='|' read -r s0 s1 _ <<< "$short"
  IFS='|' read -r l0 l1 line <<< "$long"
  # (long run's CPU) - (short run's CPU), over the 10 R reductions between them.
  per=$(awk -v a="$s0" -v b="$s1" -v c="$l0" -v d="$l1" 'BEGIN { split(a, p); split(b, q);
    split(c, r); n = split(d, s); for (i = 1; i <= n; ++i) printf "%d ", (s[i] - r[i]) - (q[i] - p[i]) }')
  cpu=$(cpu_json "" "$per" $((10 * repeats)))
  "$python" -c "import json, sys
line = json.loads(sys.argv[1]); cpu = json.loads(sys.argv[2]); ns = float(sys.argv[3])
link_bytes = 2 * (line['np'] - 1) * line['gradient_mb'] * 1e6
print(json.dumps({'workload': line['workload'], 'np': line['np'], 'reduce_ms': line['reduce_ms'],
                  'link_mb': link_bytes / 1e6,
                  'predicted_kernel_ms_per_core': link_bytes * ns / 1e6 / 2,
                  'cpu_ms_per_reduction': {k: v * 1e3 for k, v in cpu.items()}}))" "$line" "$cpu" "$ns_per_byte"
done
