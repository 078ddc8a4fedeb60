#!/usr/bin/env python3
"""Where a running process's memory goes: its PSS (/proc/PID/smaps) by kind of mapping.

    bench/smaps_summary.py PID [PID...]     # one JSON line per process, MiB

Kinds: heap ([heap]: glibc's arena, where mpiddp's allocator keeps everything below 2 MiB and
the training set); buffers (anonymous mappings that begin on a 2 MiB boundary and asked for
huge pages: mpiddp's flat buffers, core/memory.hpp's allocate_buffer, each listed); anonymous (the other
anonymous mappings: thread stacks, the libraries' own); windows (the files of mpiddp's
shared windows under Open MPI, osc_sm in /dev/shm; each listed); mpi_shm (the other files in
/dev/shm: Open MPI's transport buffers, and under MPICH its windows too); libraries (shared
objects and the executable); other. PSS shares a page among the processes that map it, so the node's
windows count once per node in the sum over its ranks. Standard library only.
"""
import json
import re
import sys

HUGE = 2 * 1024 * 1024
MAPPING = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$")


def kind_of(name, start, flags):
    if name == "[heap]":
        return "heap"
    if name.startswith("/dev/shm/"):
        return "windows" if "osc_sm" in name else "mpi_shm"
    if name == "":
        # mpiddp's flat buffers begin on a 2 MiB boundary and asked for huge pages ("hg"); a
        # thread's glibc arena is also aligned, but never asks.
        return "buffers" if start % HUGE == 0 and "hg" in flags else "anonymous"
    if name.startswith("/"):
        return "libraries"
    return "other"


def summary(pid):
    totals, listed = {}, {"buffers": [], "windows": []}
    start = end = 0
    pss, name = 0.0, None
    with open("/proc/%d/smaps" % pid) as smaps:
        for line in smaps:
            m = MAPPING.match(line)
            if m:
                start, end, name = int(m.group(1), 16), int(m.group(2), 16), m.group(3).strip()
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) / 1024.0
            elif line.startswith("VmFlags:"):  # the last field of each mapping
                kind = kind_of(name, start, line.split()[1:])
                totals[kind] = totals.get(kind, 0.0) + pss
                if kind in listed and pss >= 0.5:
                    listed[kind].append({"mapped_mib": round((end - start) / 2**20, 2), "pss_mib": round(pss, 2),
                                         **({"file": name} if name else {})})
    out = {"pid": pid, "pss_mib": round(sum(totals.values()), 2)}
    out.update({k: round(v, 2) for k, v in sorted(totals.items())})
    out.update({k + "_each": v for k, v in listed.items()})
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    for pid in sys.argv[1:]:
        print(json.dumps(summary(int(pid))))


if __name__ == "__main__":
    main()
