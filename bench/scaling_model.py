#!/usr/bin/python3
"""The step-time model of docs/scaling.md, fed with measured `mpiddp bench` lines.

Usage: scaling_model.py RESULTS.jsonl [--bandwidth-gbs 12.5] [--latency-us 5]
RESULTS.jsonl holds bench/run.sh lines of one workload at np=1 (1 thread), 2 and 4 (run
by hand or taken from bench/compare.sh). Prints (1) the one-node check: throughput at
np=2 and 4 predicted from the np=1 run and the measured reduction times, against the
measured throughput; (2) predicted weak-scaling efficiency at 8, 64 and 512 nodes.
"""
import argparse
import json
import statistics
from collections import defaultdict

parser = argparse.ArgumentParser()
parser.add_argument("results")
parser.add_argument("--bandwidth-gbs", type=float, default=12.5, help="network GB/s per node (100 Gb/s)")
parser.add_argument("--latency-us", type=float, default=5.0, help="per-message latency alpha")
args = parser.parse_args()

runs = defaultdict(lambda: defaultdict(list))
for line in open(args.results):
    r = json.loads(line)
    if "samples_per_s" not in r:
        continue
    key = (r["np"], r["threads"])
    for k, v in r.items():
        if isinstance(v, (int, float)):
            runs[(r["workload"], key)][k].append(v)

med = lambda xs: statistics.median(xs)
batch = {"seed": 64, "mlp": 256, "wide": 64, "fmnist": 256}
alpha, beta = args.latency_us * 1e-6, args.bandwidth_gbs * 1e9

for workload in sorted({w for w, _ in runs}):
    get = lambda np_, th, k: med(runs[(workload, (np_, th))][k])
    if (workload, (1, 1)) not in runs or (workload, (2, 1)) not in runs:
        continue
    B = batch[workload]
    # np=1: the whole batch on one core.
    t1 = B / get(1, 1, "samples_per_s")
    compute1 = (get(1, 1, "forward_ms") + get(1, 1, "backward_ms") + get(1, 1, "data_ms")) / 1e3
    opt1 = get(1, 1, "optimizer_ms") / 1e3
    print(f"## {workload}: global batch {B}, gradients {get(2, 1, 'gradient_mb'):.2f} MB\n")
    print("| np | predicted samples/s | measured samples/s | predicted / measured |")
    print("|---|---|---|---|")
    print(f"| 1 | (measured) | {B / t1:,.0f} | 1 |")
    for n, cores_used, opt_factor in ((2, 2, 1), (4, 2, 2)):
        if (workload, (n, 1)) not in runs:
            continue
        # Compute splits over the 2 cores; every rank updates all parameters (so 4 ranks
        # on 2 cores pay the optimizer twice); the reduction time is the measured reduce_ms.
        t = compute1 / cores_used + opt_factor * opt1 + get(n, 1, "reduce_ms") / 1e3
        measured = get(n, 1, "samples_per_s")
        print(f"| {n} | {B / t:,.0f} | {measured:,.0f} | {B / t / measured:.2f} |")
    # Weak scaling: every node keeps the per-node batch B of the np=2 run; the nodes add a
    # ring allreduce of the S-byte gradients on top of the node-local reduction.
    T1 = B / get(2, 1, "samples_per_s")
    S = get(2, 1, "gradient_mb") * 1e6
    backward = get(2, 1, "backward_ms") / 1e3
    print(f"\nOne node (2 ranks): step {T1 * 1e3:.2f} ms. Network: {args.bandwidth_gbs} GB/s, alpha {args.latency_us} us.\n")
    print("| nodes | ring allreduce ms | efficiency, no overlap | efficiency, overlapped with backward |")
    print("|---|---|---|---|")
    for N in (8, 64, 512):
        net = 2 * (N - 1) * alpha + 2 * (N - 1) / N * S / beta
        plain = T1 / (T1 + net)
        hidden = T1 / (T1 + max(0.0, net - backward))
        print(f"| {N} | {net * 1e3:.2f} | {plain:.3f} | {hidden:.3f} |")
    print()
