#!/usr/bin/python3
"""Time to accuracy, as a user sees it: the wall time from launching a training run to the end
of its first epoch whose test accuracy reaches the target (89 %) on Fashion-MNIST with
configs/fashion_mnist.json, start-up and data loading included. Runs, alternately, ROUNDS times:

  mpiddp   mpirun -np 2 build/mpiddp train configs/fashion_mnist.json (1 thread per rank), as
           configured and with reduce.shard_optimizer
  torch    the same model, Adam, per-step cosine schedule, batch 128 and sample order in
           PyTorch: DDP over gloo with 2 processes x 1 thread, and one process with 2 and
           with 1 threads (PyTorch's best single process is the faster of those two)

Every run starts from the same initial weights (written here from PyTorch's initialisation,
read by mpiddp through init.weights) and sees the samples in the same order (sampler.order,
one row per epoch; DDP takes its rank's share of a row as DistributedSampler would), so all
of them reach the target at the same epoch, or within one. A run is stopped once it has.

  /usr/bin/python3 bench/time_to_accuracy.py [--rounds 3] [--target 0.89]

Prints one JSON line per run and a table of medians. Debian's python3-torch belongs to
/usr/bin/python3. Optional: never a build or CI dependency.
"""
import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIG = os.path.join(ROOT, "configs", "fashion_mnist.json")


def load_config():
    with open(CONFIG) as f:
        return json.load(f)


# ---- the PyTorch worker: one run, an {"epoch", "accuracy"} line after every epoch ----------

def torch_worker(args):
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)  # before torch loads OpenBLAS
    import torch.multiprocessing as mp
    if args.procs == 1:
        run_torch(0, 1, args)
    else:
        mp.spawn(run_torch, args=(args.procs, args), nprocs=args.procs, join=True)


def run_torch(rank, world, args):
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    sys.path.insert(0, HERE)
    from torch_peer import build_layers, fashion_mnist  # noqa: E402
    torch.set_num_threads(args.threads)
    if world > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29534")
        dist.init_process_group("gloo", rank=rank, world_size=world)
    cfg = load_config()
    x, y = fashion_mnist(cfg["data"]["train"], False)
    tx, ty = fashion_mnist(cfg["data"]["eval"], False)
    model, _ = build_layers(cfg["model"]["layers"], (784,))
    initial = np.load(os.path.join(args.work, "init.npz"))
    model.load_state_dict({k: torch.from_numpy(initial[k]) for k in initial.files})
    order = torch.from_numpy(np.load(os.path.join(args.work, "order.npy")))
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=cfg["optimizer"]["lr"])
    batch = cfg["batch"]["global"]
    epochs = cfg["epochs"]
    steps_per_epoch = math.ceil(x.shape[0] / batch)
    total = epochs * steps_per_epoch  # the cosine's t_max: the whole run, in steps
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda u: 0.5 * (1 + math.cos(math.pi * u / total)))
    for epoch in range(epochs):
        row = order[epoch]
        for first in range(0, row.shape[0], batch):
            idx = row[first:first + batch][rank::world]  # rank r: positions r, r + N, ... of the batch
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x[idx]), y[idx]).backward()
            opt.step()
            schedule.step()
        with torch.no_grad():
            correct = (model(tx).argmax(1) == ty).sum().item()
        if rank == 0:
            print(json.dumps({"epoch": epoch, "accuracy": correct / tx.shape[0]}), flush=True)
    if world > 1:
        dist.destroy_process_group()


# ---- the driver ------------------------------------------------------------------------------

def prepare(work):
    """init.safetensors and init.npz (the same weights), order.npy [epochs, samples]."""
    import numpy as np
    import torch
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from torch_peer import build_layers  # noqa: E402
    from torch_crosscheck import write_safetensors  # noqa: E402
    cfg = load_config()
    torch.manual_seed(0)
    model, _ = build_layers(cfg["model"]["layers"], (784,))
    weights = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    write_safetensors(os.path.join(work, "init.safetensors"), weights)
    np.savez(os.path.join(work, "init.npz"), **weights)
    g = torch.Generator().manual_seed(1)
    order = torch.stack([torch.randperm(60000, generator=g) for _ in range(cfg["epochs"])])
    np.save(os.path.join(work, "order.npy"), order.numpy().astype(np.int64))


def timed(command, reached, target, env=None):
    """Launches command (a new process group); returns (seconds from launch to the first
    epoch at or above target, that epoch, its accuracy), then stops the run."""
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True, env=env)
    try:
        for epoch, accuracy in reached(proc):
            if accuracy >= target:
                return time.monotonic() - start, epoch, accuracy
        raise SystemExit(f"{command[0]}...: ended without reaching {target} (exit {proc.wait()})")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def torch_epochs(proc):
    for line in proc.stdout:
        record = json.loads(line)
        yield record["epoch"], record["accuracy"]


def mpiddp_epochs(log):
    """The epoch records of the run's log, as rank 0 appends them (read incrementally)."""
    def follow(proc):
        while not os.path.exists(log):
            if proc.poll() is not None:
                return
            time.sleep(0.005)
        with open(log) as f:
            pending = ""
            while True:
                chunk = f.read()
                pending += chunk
                *lines, pending = pending.split("\n")
                for line in lines:
                    record = json.loads(line)
                    if record.get("kind") == "epoch":
                        yield record["epoch"], record["eval_accuracy"]
                if not chunk:
                    if proc.poll() is not None:
                        return
                    time.sleep(0.005)
    return follow


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", type=float, default=0.89)
    parser.add_argument("--mpiddp", default=os.environ.get("MPIDDP", os.path.join(ROOT, "build", "mpiddp")))
    parser.add_argument("--mpiexec", default=os.environ.get("MPIEXEC", "mpirun"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--work", default="")
    args = parser.parse_args()
    if args.worker:
        return torch_worker(args)

    work = tempfile.mkdtemp(prefix="mpiddp-tta-")
    prepare(work)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    peer_env = dict(os.environ, OMP_WAIT_POLICY="passive", GLIBC_TUNABLES="glibc.malloc.hugetlb=1")
    log = os.path.join(work, "mpiddp.jsonl")
    runs = {}
    # As configured, and with the optimizer sharded across the node (the same bits).
    for name, extra in (("mpiddp_np2x1", []), ("mpiddp_np2x1_shard", ["--set", "reduce.shard_optimizer=true"])):
        command = [args.mpiexec, "-np", "2", "--oversubscribe", args.mpiddp, "train", CONFIG, "--quiet",
                   "--set", "threads=1", "--set", f"init.weights={work}/init.safetensors",
                   "--set", f"sampler.order={work}/order.npy", "--log", log] + extra
        runs[name] = lambda command=command: timed(command, mpiddp_epochs(log), args.target, env)
    for procs, threads in ((2, 1), (1, 2), (1, 1)):  # DDP over gloo, then one process
        name = f"torch_{'ddp_' if procs > 1 else ''}{procs}x{threads}"
        command = [sys.executable, __file__, "--worker", "--procs", str(procs), "--threads", str(threads),
                   "--work", work]
        runs[name] = lambda command=command: timed(command, torch_epochs, args.target, peer_env)
    seconds = {name: [] for name in runs}
    for round_ in range(args.rounds):
        for name, run in runs.items():
            if os.path.exists(log):
                os.remove(log)
            elapsed, epoch, accuracy = run()
            seconds[name].append(elapsed)
            print(json.dumps({"label": name, "round": round_, "seconds": elapsed, "epoch": epoch,
                              "accuracy": accuracy, "load1": os.getloadavg()[0]}), flush=True)
    median = {name: statistics.median(s) for name, s in seconds.items()}
    best_torch = min(median["torch_ddp_2x1"], median["torch_1x2"], median["torch_1x1"])
    print(f"\n| run | median s to {args.target:.0%} |\n|---|---|")
    for name, m in median.items():
        print(f"| {name} | {m:.2f} |")
    for name in ("mpiddp_np2x1", "mpiddp_np2x1_shard"):
        print(f"\nbest PyTorch / {name}: {best_torch / median[name]:.3f} (target >= 1.5)")
    shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
