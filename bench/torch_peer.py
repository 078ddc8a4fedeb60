#!/usr/bin/python3
"""The PyTorch peer of `mpiddp bench`: the same workload (bench/WORKLOAD.json) trained the
way a PyTorch user would, timed the same way, printed as one JSON line.

  /usr/bin/python3 bench/torch_peer.py WORKLOAD --procs 1 --threads 2
  /usr/bin/python3 bench/torch_peer.py WORKLOAD --procs 2            # DDP over gloo, 1 thread each

Debian's python3-torch belongs to /usr/bin/python3. Optional: never a build or CI dependency.
The data are random tensors of the workload's shape (throughput does not depend on the
values); the model, loss, optimizer, batch and epochs are the config's. The model is built by
tools/mpiddp_torch.py, mpiddp's layers with their state_dict names. As in mpiddp bench,
the first epoch is warm-up and samples/s is over the remaining epochs.

A language model (bench/gpt.json: its first layer an embedding, its data a text, tokens or
npy token source) gets random token ids [samples, T] and a class per position, as many
windows as the source holds (the text file must exist: scripts/get-kjv.sh); attention is
nanoGPT's non-flash path; it reports tokens/s (samples/s x T) too.

  /usr/bin/python3 bench/torch_peer.py gpt --steps 3   # a smoke test: 3 steps per epoch The best settings
found for the peer are OMP_WAIT_POLICY=passive GLIBC_TUNABLES=glibc.malloc.hugetlb=1
(bench/compare.sh sets them).
"""
import argparse
import gzip
import struct
import json
import os
import sys
import time


def openblas_core():
    """The kernel OpenBLAS picked for this CPU ("Zen", "Haswell", "SkylakeX", "Cooperlake"), or
    "" when the process has no OpenBLAS: what the peer's matrix products ran on."""
    import ctypes
    paths = sorted({line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line and ".so" in line})
    for path in paths:
        try:
            corename = ctypes.CDLL(path).openblas_get_corename
        except (OSError, AttributeError):
            continue
        corename.restype = ctypes.c_char_p
        return corename().decode()
    return ""


# A float32 product's error, relative to sum |a||b| elementwise, is at most about k 2^-24 for
# k = 384 terms (2.3e-5); a kernel that computes wrong products is off by order 1.
PRODUCT_TOLERANCE = 1e-4
WRONG_PRODUCTS = 3  # the exit code: bench/compare.sh then falls back to the environment's kernel


def product_error():
    """The largest error of a (512, 384) x (384, 256) float32 product on this process's kernel
    against float64, relative to sum |a||b| in each element: the check that OpenBLAS's own
    pick for this CPU computes right before any figure is taken from it."""
    g = torch.Generator().manual_seed(0)
    a = torch.rand(512, 384, generator=g) - 0.5
    b = torch.rand(384, 256, generator=g) - 0.5
    exact = a.double() @ b.double()
    scale = a.double().abs() @ b.double().abs()
    return float((((a @ b).double() - exact).abs() / scale).max())


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import openblas_threads  # noqa: E402

openblas_threads.set_from_argv(sys.argv)  # before torch loads

import numpy as np  # noqa: E402
import torch  # noqa: E402  (after the thread count is in the environment)
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import mpiddp_torch as mt  # noqa: E402


def load_workload(name):
    with open(os.path.join(HERE, name + ".json")) as f:
        return json.load(f)


def build_layers(specs, shape):
    """nn.Sequential of the config's layers for per-sample input `shape` (C, H, W), (F,) or,
    for token ids, (T,); returns it and the output shape."""
    return mt.build_model(specs, shape), mt.output_shape(specs, shape)


def input_shape(cfg, x):
    model = cfg["model"]
    if mt.takes_tokens(model["layers"]):
        return (x.shape[1],)
    if "input_shape" in model:
        return tuple(model["input_shape"])
    return tuple(x.shape[1:])


def read_idx(path):
    """An IDX file (plain or .gz) as a uint8 tensor of its shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = struct.unpack(">" + "I" * dims, raw[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(raw[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def fashion_mnist(train, image_model):
    folder = train.get("dir", "/usr/share/datasets/fashion-mnist")
    prefix = "train" if train["split"] == "train" else "t10k"
    find = lambda name: next(p for p in (os.path.join(folder, name), os.path.join(folder, name + ".gz"))
                             if os.path.exists(p))
    x = read_idx(find(prefix + "-images-idx3-ubyte")).float() / 255.0
    x = x.reshape(-1, 1, 28, 28) if image_model else x.reshape(-1, 784)
    y = read_idx(find(prefix + "-labels-idx1-ubyte")).long()
    return x, y


def token_shape(train):
    """(windows, T) of a text, tokens or npy token source, without reading its tokens."""
    if train["source"] == "npy":
        return tuple(np.load(train["features"], mmap_mode="r").shape)
    path = train["path"]
    if not os.path.exists(path):
        hint = " (scripts/get-kjv.sh writes data/kjv.txt)" if path.endswith("kjv.txt") else ""
        raise SystemExit(f"torch_peer: {path}: no such file{hint}; run from the repository's root")
    if train["source"] == "text":
        n = os.path.getsize(path)  # chars and bytes: one token per byte
    elif path.endswith(".npy"):
        n = np.load(path, mmap_mode="r").shape[0]
    else:
        n = (os.path.getsize(path) - train.get("header_bytes", 0)) // 2  # uint16 tokens
    return len(mt.window_starts(n, train)), train["block"]


def make_data(cfg):
    train = cfg["data"]["train"]
    g = torch.Generator().manual_seed(0)
    if mt.takes_tokens(cfg["model"]["layers"]):
        n, block = token_shape(train)
        vocab = cfg["model"]["layers"][0]["vocab"]
        return (torch.randint(0, vocab, (n, block), generator=g),
                torch.randint(0, vocab, (n, block), generator=g))
    if train["source"] == "fashion_mnist":
        image_model = any(l["type"] in ("conv2d", "maxpool2d", "avgpool2d", "batchnorm2d")
                          for l in cfg["model"]["layers"])
        return fashion_mnist(train, image_model)
    n, f = train["samples"], train["features"]
    x = torch.randn(n, f, generator=g)
    if cfg["loss"] == "cross_entropy":
        y = torch.randint(0, train.get("classes", 10), (n,), generator=g)
    else:
        y = torch.randn(n, train.get("outputs", 1), generator=g)
    return x, y


def train(rank, world, cfg, threads, max_steps, autocast, result_queue):
    torch.set_num_threads(threads)
    if world > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    x, y = make_data(cfg)
    shape = input_shape(cfg, x)
    model, _ = build_layers(cfg["model"]["layers"], shape)
    x = x.reshape((x.shape[0],) + shape)
    opt = mt.make_optimizer(cfg.get("optimizer"), model)  # decay: the module's own names
    clip = mt.clip_grad_norm(cfg.get("optimizer"))
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    n = x.shape[0]
    batch = cfg["batch"]["global"] // world
    per_rank = (n + world - 1) // world
    if max_steps > 0:  # a smoke test
        per_rank = min(per_rank, max_steps * batch)
    epochs = cfg.get("epochs", 4)
    schedule = mt.lr_scheduler(opt, cfg.get("schedule"), (per_rank + batch - 1) // batch, epochs)
    times, cpu = [], []
    for epoch in range(epochs):
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(epoch))
        mine = perm[rank::world][:per_rank]
        start, cpu_start = time.perf_counter(), time.process_time()
        for first in range(0, per_rank, batch):
            idx = mine[first:first + batch]
            opt.zero_grad(set_to_none=True)
            # Autocast around the forward and the loss, as PyTorch's users write it; backward
            # runs outside, in the dtypes the forward chose.
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = mt.loss_of(cfg["loss"], model(x[idx]), y[idx])
            loss.backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            schedule.step()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
    skip = 1 if len(times) > 1 else 0
    samples_per_s = per_rank * world * len(times[skip:]) / sum(times[skip:])
    cpu_per_sample = sum(cpu[skip:]) / (per_rank * world * len(cpu[skip:]))  # this process's share
    if world > 1:
        dist.destroy_process_group()
    result_queue.put((rank, samples_per_s, cpu_per_sample))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workload")
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=0, help="at most this many steps per epoch (a smoke test)")
    parser.add_argument("--autocast", choices=["none", "bf16"], default="none",
                        help="bf16: torch.autocast('cpu', dtype=torch.bfloat16) around the forward and the loss")
    args = parser.parse_args()
    error = product_error()
    if not error <= PRODUCT_TOLERANCE:
        print(f"torch_peer: the OpenBLAS kernel {openblas_core()!r} computes a float32 product {error:.3g} away "
              f"from float64 (relative; at most {PRODUCT_TOLERANCE:g} is rounding)", file=sys.stderr)
        return WRONG_PRODUCTS
    cfg = load_workload(args.workload)
    if args.procs == 1:
        q = mp.get_context("fork").SimpleQueue()
        train(0, 1, cfg, args.threads, args.steps, args.autocast == "bf16", q)
        results = [q.get()]
    else:
        ctx = mp.get_context("spawn")
        q = ctx.SimpleQueue()
        procs = [ctx.Process(target=train, args=(r, args.procs, cfg, args.threads, args.steps, args.autocast == "bf16", q)) for r in range(args.procs)]
        for p in procs:
            p.start()
        results = [q.get() for _ in procs]
        for p in procs:
            p.join()
    rate = next(r[1] for r in results if r[0] == 0)
    cpu_per_sample = sum(r[2] for r in results)  # CPU seconds per sample, all processes
    line = {"workload": args.workload, "impl": "torch", "torch": torch.__version__,
            "procs": args.procs, "threads": args.threads, "samples_per_s": rate,
            "samples_per_cpu_s": 1.0 / cpu_per_sample}
    if mt.takes_tokens(cfg["model"]["layers"]):  # a sample is a window of T tokens
        block = token_shape(cfg["data"]["train"])[1]
        line["tokens_per_s"] = rate * block
        line["tokens_per_cpu_s"] = block / cpu_per_sample
    line["autocast"] = args.autocast
    line["blas_core"] = openblas_core()
    line["openblas_coretype"] = os.environ.get("OPENBLAS_CORETYPE", "")
    line["product_error"] = error
    if args.steps > 0:
        line["steps_per_epoch"] = args.steps  # a smoke test, not a measurement
    print(json.dumps(line))


if __name__ == "__main__":
    sys.exit(main())
