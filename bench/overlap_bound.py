#!/usr/bin/env python3
"""What bounds the overlap of the gradient sync with backward, from an mpiddp trace.

For each rank and traced step of a `--trace` file (docs/log-format.md): when backward ended,
when each reduction bucket started and ended against that, and the exposed wait. The last
bucket to start holds the first layers' gradients, which are final only when backward ends:
its reduction cannot overlap anything, so its duration bounds the exposed sync from below.
Prints one line per bucket (medians over the traced steps of rank 0) and the bound.

Usage: bench/overlap_bound.py TRACE.json [--rank R]
"""
import json
import statistics
import sys


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    rank = int(args[args.index("--rank") + 1]) if "--rank" in args else 0
    events = json.load(open(args[0]))["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X" and e.get("pid") == rank]
    backward_end, waits, buckets = {}, {}, {}
    for e in spans:
        step = e["args"].get("step")
        if e["name"] == "backward":
            backward_end[step] = e["ts"] + e["dur"]
        elif e["name"] == "reduction_wait":
            waits[step] = e["dur"]
        elif e["name"] == "reduction":
            buckets.setdefault(e["args"]["bucket"], []).append((step, e))
    steps = sorted(s for s in backward_end if s in waits)
    print(f"rank {rank}, {len(steps)} traced steps; times in ms, medians; 'start' and 'end' "
          "relative to the end of backward (negative: during backward)")
    print(f"{'bucket':>6} {'MB':>7} {'start':>8} {'end':>8} {'duration':>9}")
    last_start_bucket, last_start = None, None
    for b in sorted(buckets):
        rows = [(e["ts"] - backward_end[s], e["ts"] + e["dur"] - backward_end[s], e["dur"])
                for s, e in buckets[b] if s in backward_end]
        start = statistics.median(r[0] for r in rows) / 1e3
        end = statistics.median(r[1] for r in rows) / 1e3
        duration = statistics.median(r[2] for r in rows) / 1e3
        mb = buckets[b][0][1]["args"]["bytes"] / 1e6
        print(f"{b:>6} {mb:>7.3f} {start:>8.2f} {end:>8.2f} {duration:>9.2f}")
        if last_start is None or start > last_start:
            last_start_bucket, last_start, last_duration = b, start, duration
    exposed = statistics.median(waits[s] for s in steps) / 1e3
    print(f"exposed wait (reduction_wait): {exposed:.2f} ms; the last bucket to start ({last_start_bucket}) "
          f"starts {last_start:.2f} ms after backward's end and takes {last_duration:.2f} ms")


if __name__ == "__main__":
    main()
