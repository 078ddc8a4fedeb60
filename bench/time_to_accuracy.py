#!/usr/bin/python3
"""Time to accuracy, as a user sees it: the wall time from launching a training run to its
first evaluation that reaches the target, start-up and data loading included. Two workloads:

  fashion-mnist  (the default) the end of the first epoch whose test accuracy reaches the
                 target (89 %) on Fashion-MNIST with configs/fashion_mnist.json
  gpt            the first evaluation, every --eval-every (50) steps on the first
                 --eval-windows (512) windows of data.eval, whose validation loss is at or
                 below the target (1.83) with configs/kjv_gpt.json (issue 34)

Runs, alternately, ROUNDS times:

  mpiddp   mpirun -np 2 build/mpiddp train CONFIG (1 thread per rank), as configured; for
           fashion-mnist also with reduce.shard_optimizer
  torch    the same model, optimizer, per-step schedule, batch and sample order in PyTorch:
           DDP over gloo with 2 processes x 1 thread, and one process with 2 and with 1
           threads (PyTorch's best single process is the faster of those two)

A gpt round takes about 8 minutes on 2 cores of a Zen 3: mpiddp reaches the target in about
75 s (400 steps of 0.17 s and 8 evaluations of 0.5 s), PyTorch in about 90 to 170 s.

Every run starts from the same initial weights (written here from PyTorch's initialisation,
read by mpiddp through init.weights) and sees the samples in the same order (sampler.order,
one row per epoch; DDP takes its rank's share of a row as DistributedSampler would), so all
of them reach the target at the same evaluation, or within one. A run is stopped once it has.

The gpt workload: the model (809,600 parameters, the head tied to the token embedding: the
init file holds both names, equal, which init.weights takes), AdamW with weight decay on the
matrices, clipping at 1.0 and the cosine with 100 warm-up steps to 1e-4 over the epoch's 910
steps as src/optim/schedule.cpp computes it (tools/mpiddp_torch.py's lr_scheduler), one epoch
of the 58,188 training windows of 64 characters. mpiddp evaluates through eval.every_steps and
eval.max_samples (the first windows of data.eval, split over the ranks); PyTorch evaluates the
same windows in eval mode, DDP each rank a share, the sums all-reduced. The recipe states no
target of its own; 1.83 is chosen so that it is met halfway into the epoch, between two
evaluations: from these weights and this order mpiddp's validation loss on those windows was
2.664, 2.353, 2.269, 2.167, 2.058, 1.946, 1.859, 1.804, 1.766, 1.727 at steps 50, 100, ..., 500
(np=2, one run), so the target is met at step 400 of 910, 0.026 under it and 0.029 above the
evaluation before. mpiddp and PyTorch, from the same weights and order, agreed to 1e-6 at
steps 10 to 40 and differ by float rounding only, which should stay far below those margins:
every run stops at the same evaluation (each JSON line lists the evaluations it saw, as
(step, eval_loss, seconds since launch), from which the time per step follows).

The gpt workload's PyTorch runs multiply on OpenBLAS's own kernel for this CPU (the
environment's OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE left out, as bench/compare.sh does) after
torch_peer.py's check of its float32 product; when that check fails they run on the
environment's settings. Their JSON lines record the kernel (blas_core) and the check
(product_error).

  /usr/bin/python3 bench/time_to_accuracy.py [--rounds 3] [--target 0.89]
  /usr/bin/python3 bench/time_to_accuracy.py --workload gpt [--rounds 3] [--target 1.83]
  /usr/bin/python3 bench/time_to_accuracy.py --workload gpt --rounds 1 --target 3.0 --eval-every 10
                                                    # a smoke test: a few evaluations per run

Prints one JSON line per run and a table of medians. Debian's python3-torch belongs to
/usr/bin/python3. Optional: never a build or CI dependency. Run it anywhere: the configs' data
paths are relative to the repository's root, where every run starts.
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
sys.path.insert(0, HERE)                         # torch_peer
sys.path.insert(0, os.path.join(ROOT, "tools"))  # mpiddp_torch, kjv_torch, torch_crosscheck
CONFIG = os.path.join(ROOT, "configs", "fashion_mnist.json")
GPT_CONFIG = os.path.join(ROOT, "configs", "kjv_gpt.json")


def load_config():
    with open(CONFIG) as f:
        return json.load(f)


# ---- the PyTorch workers: one run, a line of JSON after every evaluation ---------------------

def torch_worker(args):
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)  # before torch loads OpenBLAS
    import torch.multiprocessing as mp
    run = WORKLOADS[args.workload].run_torch
    if args.procs == 1:
        run(0, 1, args)
    else:
        mp.spawn(run, args=(args.procs, args), nprocs=args.procs, join=True)


def init_ddp(rank, world):
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29534")
    dist.init_process_group("gloo", rank=rank, world_size=world)


def run_torch_fashion_mnist(rank, world, args):
    """An {"epoch", "accuracy"} line after every epoch."""
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch_peer import build_layers, fashion_mnist  # noqa: E402
    torch.set_num_threads(args.threads)
    if world > 1:
        init_ddp(rank, world)
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


def run_torch_gpt(rank, world, args):
    """A {"step", "eval_loss"} line after every args.eval_every steps and at the end."""
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import mpiddp_torch as mt
    from kjv_torch import evaluate, load_windows
    torch.set_num_threads(args.threads)
    if world > 1:
        init_ddp(rank, world)
    cfg = mt.load_config(GPT_CONFIG)
    x, y, _ = load_windows(cfg["data"]["train"])  # (windows, T) each
    ex, ey, _ = load_windows(cfg["data"]["eval"])
    first = slice(0, args.eval_windows or None)  # eval.max_samples: the first windows (0: all)
    ex, ey = ex[first][rank::world], ey[first][rank::world]  # this rank's share
    model = mt.build_model(cfg["model"]["layers"], (x.shape[1],))
    model.load_state_dict(mt.load_state_dict(os.path.join(args.work, "init.safetensors")), strict=True)
    opt = mt.make_optimizer(cfg["optimizer"], model)  # decay on the module's own names
    clip = mt.clip_grad_norm(cfg["optimizer"])
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    order = torch.from_numpy(np.load(os.path.join(args.work, "order.npy")))
    samples = order.shape[1] - order.shape[1] % world  # DistributedSampler's drop_last (none here)
    batch = cfg["batch"]["global"]
    steps_per_epoch = math.ceil(samples / batch)
    epochs = cfg["epochs"]
    schedule = mt.lr_scheduler(opt, cfg["schedule"], steps_per_epoch, epochs)

    def eval_loss():
        """The mean cross-entropy over every position of the evaluation windows, all ranks'."""
        mean, _ = evaluate(model, ex, ey)  # eval mode
        loss_sum = torch.tensor([mean * ey.numel(), float(ey.numel())], dtype=torch.float64)
        model.train()
        if world > 1:
            dist.all_reduce(loss_sum)
        return float(loss_sum[0] / loss_sum[1])

    step = 0
    for epoch in range(epochs):
        row = order[epoch, :samples]
        for first in range(0, samples, batch):
            idx = row[first:first + batch][rank::world]  # rank r: positions r, r + N, ... of the batch
            opt.zero_grad(set_to_none=True)
            mt.loss_of(cfg["loss"], net(x[idx]), y[idx]).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            schedule.step()
            step += 1
            last = epoch == epochs - 1 and first + batch >= samples
            if step % args.eval_every == 0 or last:  # mpiddp: eval records, then the epoch record
                loss = eval_loss()
                if rank == 0:
                    print(json.dumps({"step": step, "eval_loss": loss}), flush=True)
    if world > 1:
        dist.destroy_process_group()


def kernel_check():
    """torch_peer.py's check of this process's OpenBLAS kernel: prints the kernel, the
    OPENBLAS_CORETYPE it ran under and the product's error as JSON; WRONG_PRODUCTS when the
    product is wrong."""
    import torch_peer
    error = torch_peer.product_error()
    print(json.dumps({"blas_core": torch_peer.openblas_core(),
                      "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""), "product_error": error}))
    return 0 if error <= torch_peer.PRODUCT_TOLERANCE else torch_peer.WRONG_PRODUCTS


# ---- what is prepared before the rounds ------------------------------------------------------

def prepare_fashion_mnist(work):
    """init.safetensors and init.npz (the same weights), order.npy [epochs, samples]."""
    import numpy as np
    import torch
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


def prepare_gpt(work):
    """init.safetensors (PyTorch's initialisation by the config's init_std; the tied head under
    both names), order.npy [epochs, training windows]."""
    import numpy as np
    import torch
    import mpiddp_torch as mt
    from torch_peer import token_shape
    cfg = mt.load_config(GPT_CONFIG)
    windows, block = token_shape(cfg["data"]["train"])
    torch.manual_seed(0)
    model = mt.build_model(cfg["model"]["layers"], (block,))
    mt.write_safetensors(os.path.join(work, "init.safetensors"), mt.state_dict_arrays(model))
    g = torch.Generator().manual_seed(1)
    order = torch.stack([torch.randperm(windows, generator=g) for _ in range(cfg["epochs"])])
    np.save(os.path.join(work, "order.npy"), order.numpy().astype(np.int64))


def peer_environment(base, own_kernel=True):
    """The PyTorch runs' environment and the kernel they multiply on, as bench/compare.sh
    chooses them: the peer's best settings (OMP_WAIT_POLICY=passive, glibc's heap on huge
    pages) and, when own_kernel, OpenBLAS's own pick for this CPU (this workplace's
    OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE left out, which would hand it AVX2 kernels on an
    AVX-512 machine) unless its float32 product fails torch_peer.py's check; then the
    environment's settings. The kernel: torch_peer.py's fields (blas_core, openblas_coretype,
    product_error), {} without own_kernel."""
    from torch_peer import WRONG_PRODUCTS
    best = {"OMP_WAIT_POLICY": "passive", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
    if not own_kernel:
        return dict(base, **best), {}
    own = {k: v for k, v in base.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    for env in (own, base):
        env = dict(env, **best)
        check = subprocess.run([sys.executable, __file__, "--check-kernel"], env=env, capture_output=True, text=True)
        if check.returncode == 0:
            return env, json.loads(check.stdout)
        if check.returncode != WRONG_PRODUCTS:
            raise SystemExit(f"time_to_accuracy.py --check-kernel: exit {check.returncode}\n{check.stderr}")
        print(f"time_to_accuracy.py: OpenBLAS's kernel {json.loads(check.stdout)['blas_core']!r} computes wrong "
              f"float32 products; the peer falls back to OPENBLAS_CORETYPE={base.get('OPENBLAS_CORETYPE', '')} "
              f"OPENBLAS_L2_SIZE={base.get('OPENBLAS_L2_SIZE', '')}", file=sys.stderr)
    raise SystemExit("time_to_accuracy.py: the environment's OpenBLAS kernel computes wrong float32 products too")


# ---- the workloads: what differs between them ------------------------------------------------

class FashionMnist:
    """Test accuracy at or above the target at an epoch's end."""
    config, target = CONFIG, 0.89
    point, metric = "epoch", "accuracy"  # the JSON line's keys
    mpiddp_runs = {"mpiddp_np2x1": [], "mpiddp_np2x1_shard": ["--set", "reduce.shard_optimizer=true"]}
    run_torch = staticmethod(run_torch_fashion_mnist)
    prepare = staticmethod(prepare_fashion_mnist)
    own_kernel = False  # its published figures ran the peer on the environment's OpenBLAS settings

    def __init__(self, args):
        self.args = args

    def met(self, accuracy):
        return accuracy >= self.args.target

    def settings(self):
        return []

    @staticmethod
    def mpiddp_point(record):
        if record.get("kind") == "epoch":
            return record["epoch"], record["eval_accuracy"]
        return None

    @staticmethod
    def details(seen):
        return {}

    def heading(self):
        return f"median s to {self.args.target:.0%}"


class Gpt:
    """Validation loss at or below the target at an evaluation every args.eval_every steps."""
    config, target = GPT_CONFIG, 1.83
    point, metric = "step", "eval_loss"
    mpiddp_runs = {"mpiddp_np2x1": []}
    run_torch = staticmethod(run_torch_gpt)
    prepare = staticmethod(prepare_gpt)
    own_kernel = True

    def __init__(self, args):
        self.args = args

    def met(self, eval_loss):
        return eval_loss <= self.args.target

    def settings(self):
        return ["--set", f"eval.every_steps={self.args.eval_every}",
                "--set", f"eval.max_samples={self.args.eval_windows}"]

    @staticmethod
    def mpiddp_point(record):
        if record.get("kind") in ("eval", "epoch"):  # every eval.every_steps, then the epoch's end
            return record["step"], record["eval_loss"]
        return None

    @staticmethod
    def details(seen):
        """Every evaluation seen: [step, eval_loss, seconds since launch]."""
        return {"evals": [[step, round(loss, 5), round(s, 3)] for step, loss, s in seen]}

    def heading(self):
        return f"median s to eval_loss <= {self.args.target:g}"


WORKLOADS = {"fashion-mnist": FashionMnist, "gpt": Gpt}


# ---- the driver ------------------------------------------------------------------------------

def timed(command, points, met, env=None):
    """Launches command (a new process group, in the repository's root); returns the seconds
    from launch to the first point (epoch or step) whose value meets the target, and the
    points seen until then as (point, value, seconds since launch); then stops the run."""
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True, env=env, cwd=ROOT)
    seen = []
    try:
        for point, value in points(proc):
            seen.append((point, value, time.monotonic() - start))
            if met(value):
                return seen[-1][2], seen
        raise SystemExit(f"{command[0]}...: ended without reaching the target (exit {proc.wait()}); "
                         f"the last evaluations: {seen[-3:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def torch_points(point, metric):
    """The evaluations of the worker's output, a {point: ..., metric: ...} line each."""
    def follow(proc):
        for line in proc.stdout:
            record = json.loads(line)
            yield record[point], record[metric]
    return follow


def mpiddp_points(log, point_of):
    """The evaluations (point_of(record), or None for other records) of the run's log, as
    rank 0 appends them (read incrementally)."""
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
                    point = point_of(json.loads(line))
                    if point is not None:
                        yield point
                if not chunk:
                    if proc.poll() is not None:
                        return
                    time.sleep(0.005)
    return follow


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="fashion-mnist")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", type=float, default=None,
                        help="fashion-mnist: test accuracy (0.89); gpt: validation loss (1.83)")
    parser.add_argument("--eval-every", type=int, default=50, help="gpt: evaluate every this many steps")
    parser.add_argument("--eval-windows", type=int, default=512, help="gpt: on the first this many windows of data.eval")
    parser.add_argument("--mpiddp", default=os.environ.get("MPIDDP", os.path.join(ROOT, "build", "mpiddp")))
    parser.add_argument("--mpiexec", default=os.environ.get("MPIEXEC", "mpirun"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--check-kernel", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--work", default="")
    args = parser.parse_args()
    if args.worker:
        return torch_worker(args)
    if args.check_kernel:
        return kernel_check()
    workload = WORKLOADS[args.workload](args)
    if args.target is None:
        args.target = workload.target
    args.mpiddp = os.path.abspath(args.mpiddp)  # the runs start in the repository's root

    work = tempfile.mkdtemp(prefix="mpiddp-tta-")
    workload.prepare(work)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    peer_env, kernel = peer_environment(os.environ, workload.own_kernel)
    log = os.path.join(work, "mpiddp.jsonl")
    runs = {}  # name: (the run, the fields its JSON line adds)
    for name, extra in workload.mpiddp_runs.items():
        command = [args.mpiexec, "-np", "2", "--oversubscribe", args.mpiddp, "train", workload.config, "--quiet",
                   "--set", "threads=1", "--set", f"init.weights={work}/init.safetensors",
                   "--set", f"sampler.order={work}/order.npy", "--log", log] + workload.settings() + extra
        runs[name] = (lambda command=command: timed(command, mpiddp_points(log, workload.mpiddp_point),
                                                    workload.met, env)), {}
    points = torch_points(workload.point, workload.metric)
    for procs, threads in ((2, 1), (1, 2), (1, 1)):  # DDP over gloo, then one process
        name = f"torch_{'ddp_' if procs > 1 else ''}{procs}x{threads}"
        command = [sys.executable, __file__, "--worker", "--workload", args.workload, "--procs", str(procs),
                   "--threads", str(threads), "--work", work, "--eval-every", str(args.eval_every),
                   "--eval-windows", str(args.eval_windows)]
        runs[name] = (lambda command=command: timed(command, points, workload.met, peer_env)), kernel
    seconds = {name: [] for name in runs}
    for round_ in range(args.rounds):
        for name, (run, fields) in runs.items():
            if os.path.exists(log):
                os.remove(log)
            elapsed, seen = run()
            point, value, _ = seen[-1]
            seconds[name].append(elapsed)
            line = {"label": name, "round": round_, "seconds": elapsed, workload.point: point,
                    workload.metric: value, "load1": os.getloadavg()[0]}
            line.update(workload.details(seen))
            line.update(fields)
            print(json.dumps(line), flush=True)
    median = {name: statistics.median(s) for name, s in seconds.items()}
    best_torch = min(median["torch_ddp_2x1"], median["torch_1x2"], median["torch_1x1"])
    print(f"\n| run | {workload.heading()} |\n|---|---|")
    for name, m in median.items():
        print(f"| {name} | {m:.2f} |")
    for name in workload.mpiddp_runs:
        print(f"\nbest PyTorch / {name}: {best_torch / median[name]:.3f} (target >= 1.5)")
    shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
