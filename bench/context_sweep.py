#!/usr/bin/python3
"""Context length (issue 34): tokens/s and peak memory per rank of bench/gpt.json's model at
T = 64, 256 and 1024, mpiddp and PyTorch side by side, the tokens of a step fixed: batch x T =
4,096 (B = 64, 16, 4 windows, global). Per T, the config is bench/gpt.json with the position
embedding's positions and the text source's block set to T, batch.global to B, and the range
of data/kjv.txt cut to exactly STEPS x B windows of T + 1 tokens (STEPS steps an epoch, 16 by
default: 65,536 tokens an epoch at every T; 2 epochs, the second timed). Runs, alternately
within a round, ROUNDS times:

  mpiddp_np2x1   bench/run.sh gpt 2 1 -- --set ... : `mpiddp bench`, 2 ranks x 1 thread (the
                 launcher of bench/compare.sh); tokens/s is its samples_per_s x T, the peak
                 RSS its peak_rss_mb (the largest rank's, of training). attention's `auto`
                 picks the tiled algorithm from T = 128 on
  torch_1x2      bench/torch_peer.py's training of the same config (the model built by
  torch_ddp_2x1  tools/mpiddp_torch.py, nanoGPT's attention with the (T, T) matrix, random
                 token ids of the shape), one process x 2 threads and DDP over gloo with
                 2 processes x 1 thread; the peak RSS of each process from getrusage

The peer runs with compare.sh's settings (OMP_WAIT_POLICY=passive, glibc's heap on huge pages,
OpenBLAS's own kernel for this CPU after torch_peer.py's check of its float32 product; its
lines record blas_core and product_error). At the default STEPS on 2 cores of a Zen 3 a run
takes about 8 s (mpiddp at T = 64) to 40 s (PyTorch at T = 1024, whose attention costs T^2), a
round about 3 minutes.

  /usr/bin/python3 bench/context_sweep.py [--rounds 3] [--steps 16] [--contexts 64,256,1024] [--mpiddp BIN]
  /usr/bin/python3 bench/context_sweep.py --rounds 1 --steps 2 --contexts 64,256   # a smoke test

Prints one JSON line per run and a markdown table of medians: tokens/s and peak RSS per rank
or process, and how mpiddp's peak RSS grows against T. Run it anywhere (the runs start in the
repository's root, where bench/gpt.json's data path is); --mpiddp (or MPIDDP) is the binary,
MPIEXEC the launcher, as for bench/run.sh. Debian's python3-torch belongs to /usr/bin/python3. Optional: never a build or
CI dependency.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)                         # torch_peer, time_to_accuracy
sys.path.insert(0, os.path.join(ROOT, "tools"))  # mpiddp_torch
from time_to_accuracy import peer_environment  # noqa: E402  (stdlib only until called)

WORKLOAD = "gpt"  # bench/gpt.json
TOKENS_PER_STEP = 4096
RUNS = ("mpiddp_np2x1", "torch_1x2", "torch_ddp_2x1")


def load_workload():
    import mpiddp_torch as mt
    return mt.load_config(os.path.join(HERE, WORKLOAD + ".json"))


def context_settings(cfg, block, steps):
    """The dotted config paths and values that make bench/gpt.json a run at context `block`:
    B = TOKENS_PER_STEP / block windows a step, steps x B windows of block + 1 tokens at
    stride block in data/kjv.txt ([0, floor(b n)) holds them when floor(b n) = steps B block + 1)."""
    batch = TOKENS_PER_STEP // block
    positions = next(i for i, layer in enumerate(cfg["model"]["layers"]) if layer["type"] == "position_embedding")
    chars = os.path.getsize(os.path.join(ROOT, cfg["data"]["train"]["path"]))  # one token per byte
    end = (steps * batch * block + 1.5) / chars
    return {f"model.layers.{positions}.positions": block, "data.train.block": block,
            "batch.global": batch, "data.train.range": [0, end]}


def with_settings(cfg, settings):
    """cfg with each dotted path set, as mpiddp's --set does (list items by index)."""
    cfg = json.loads(json.dumps(cfg))
    for path, value in settings.items():
        *parents, key = path.split(".")
        node = cfg
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[int(key) if isinstance(node, list) else key] = value
    return cfg


# ---- the PyTorch peer: torch_peer.py's training, and each process's peak RSS ----------------

class Collected(list):
    """A result queue within one process."""
    put = list.append


def measured_train(rank, world, cfg, threads, result_queue):
    """torch_peer.train, then this process's peak resident set (getrusage, KiB on Linux)."""
    import torch_peer
    results = Collected()
    torch_peer.train(rank, world, cfg, threads, 0, results)
    _, samples_per_s, _ = results[0]
    result_queue.put((rank, samples_per_s, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def peer(args):
    """One line of JSON: the rate of rank 0 and every process's peak RSS in MB."""
    import torch_peer  # sets OPENBLAS_NUM_THREADS from --threads before torch loads
    import torch.multiprocessing as mp
    cfg = with_settings(load_workload(), json.loads(args.peer))
    if args.procs == 1:
        results = Collected()
        measured_train(0, 1, cfg, args.threads, results)
    else:
        ctx = mp.get_context("spawn")
        q = ctx.SimpleQueue()
        procs = [ctx.Process(target=measured_train, args=(r, args.procs, cfg, args.threads, q))
                 for r in range(args.procs)]
        for p in procs:
            p.start()
        results = sorted(q.get() for _ in procs)
        for p in procs:
            p.join()
    block = cfg["data"]["train"]["block"]
    print(json.dumps({"impl": "torch", "torch": torch_peer.torch.__version__, "procs": args.procs,
                      "threads": args.threads, "samples_per_s": results[0][1],
                      "tokens_per_s": results[0][1] * block, "peak_rss_mb": max(r[2] for r in results),
                      "peak_rss_mb_per_process": [r[2] for r in results]}))


# ---- the driver ------------------------------------------------------------------------------

def last_json_line(command, env):
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_mpiddp(settings, block, env):
    sets = [arg for path, value in settings.items() for arg in ("--set", f"{path}={json.dumps(value)}")]
    line = last_json_line([os.path.join(HERE, "run.sh"), WORKLOAD, "2", "1", "--"] + sets, env)
    line["tokens_per_s"] = line["samples_per_s"] * block
    return line


def run_torch(settings, procs, threads, env, kernel):
    line = last_json_line([sys.executable, __file__, "--peer", json.dumps(settings), "--procs", str(procs),
                           "--threads", str(threads)], env)
    return dict(line, **kernel)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=16, help="steps an epoch (2 epochs, the second timed)")
    parser.add_argument("--contexts", default="64,256,1024", help="the values of T")
    parser.add_argument("--mpiddp", default=os.environ.get("MPIDDP", os.path.join(ROOT, "build", "mpiddp")))
    parser.add_argument("--peer", default="", help=argparse.SUPPRESS)  # a worker: the settings as JSON
    parser.add_argument("--procs", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        return peer(args)

    cfg = load_workload()
    contexts = [int(t) for t in args.contexts.split(",")]
    settings = {t: context_settings(cfg, t, args.steps) for t in contexts}
    env = dict(os.environ, MPIDDP=os.path.abspath(args.mpiddp))  # bench/run.sh's binary
    peer_env, kernel = peer_environment(os.environ)
    results = {(t, name): [] for t in contexts for name in RUNS}
    for round_ in range(args.rounds):
        for t in contexts:
            for name in RUNS:
                if name == "mpiddp_np2x1":
                    line = run_mpiddp(settings[t], t, env)
                else:
                    procs, threads = (2, 1) if name == "torch_ddp_2x1" else (1, 2)
                    line = run_torch(settings[t], procs, threads, peer_env, kernel)
                results[(t, name)].append(line)
                print(json.dumps(dict({"label": name, "round": round_, "T": t,
                                       "batch": settings[t]["batch.global"], "load1": os.getloadavg()[0]},
                                      **line)), flush=True)

    def median(t, name, key):
        return statistics.median(line[key] for line in results[(t, name)])

    print("\n| T | B | mpiddp np=2 × 1 tokens/s | PyTorch best tokens/s | mpiddp / PyTorch | "
          "mpiddp peak RSS per rank (MB) | PyTorch peak RSS per process (MB): 1 × 2, DDP 2 × 1 |")
    print("|---|---|---|---|---|---|---|")
    for t in contexts:
        best = max(("torch_1x2", "torch_ddp_2x1"), key=lambda name: median(t, name, "tokens_per_s"))
        mine, theirs = median(t, "mpiddp_np2x1", "tokens_per_s"), median(t, best, "tokens_per_s")
        print(f"| {t} | {settings[t]['batch.global']} | {mine:,.0f} | {theirs:,.0f} ({best[6:]}) | "
              f"{mine / theirs:.2f} | {median(t, 'mpiddp_np2x1', 'peak_rss_mb'):.1f} | "
              f"{median(t, 'torch_1x2', 'peak_rss_mb'):.1f}, {median(t, 'torch_ddp_2x1', 'peak_rss_mb'):.1f} |")
    # The target: mpiddp's memory grows at most linearly in T, m(T) <= m(T0) T / T0.
    first = contexts[0]
    base = median(first, "mpiddp_np2x1", "peak_rss_mb")
    for t in contexts[1:]:
        growth = median(t, "mpiddp_np2x1", "peak_rss_mb") / base
        print(f"\nmpiddp peak RSS per rank at T = {t}: {growth:.2f} x T = {first}'s, T {t / first:g} x: "
              f"{'at most linear' if growth <= t / first else 'MORE than linear'}")


if __name__ == "__main__":
    sys.exit(main())
