#!/usr/bin/python3
"""The PyTorch peer of `mpiddp bench`: the same workload (bench/WORKLOAD.json) trained the
way a PyTorch user would, timed the same way, printed as one JSON line.

  /usr/bin/python3 bench/torch_peer.py WORKLOAD --procs 1 --threads 2
  /usr/bin/python3 bench/torch_peer.py WORKLOAD --procs 2            # DDP over gloo, 1 thread each

Debian's python3-torch belongs to /usr/bin/python3. Optional: never a build or CI dependency.
The data are random tensors of the workload's shape (throughput does not depend on the
values); the model, loss, optimizer, batch and epochs are the config's. As in mpiddp bench,
the first epoch is warm-up and samples/s is over the remaining epochs. The best settings
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


def _threads_from_argv(argv):
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return "1"


# torch.set_num_threads does not reach OpenBLAS's own pthread pool (Debian's torch uses
# libopenblas0-pthread): without this a "1 thread" run multiplies on both cores, which
# samples per CPU-second gives away. The pool reads the variable once, when it loads.
os.environ["OPENBLAS_NUM_THREADS"] = _threads_from_argv(sys.argv)

import torch  # noqa: E402  (after the thread count is in the environment)
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def load_workload(name):
    with open(os.path.join(HERE, name + ".json")) as f:
        return json.load(f)


class Residual(nn.Module):
    """y = x + body(x): mpiddp's residual layer, with its state_dict names (<i>.body.<j>.*)."""

    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return x + self.body(x)


def pair(value):
    return tuple(value) if isinstance(value, list) else (value, value)


def build_layers(specs, shape):
    """nn.Sequential of the config's layers for per-sample input `shape` (C, H, W) or (F,);
    returns it and the output shape."""
    layers = []
    for spec in specs:
        kind = spec["type"]
        if kind == "linear":
            layers.append(nn.Linear(shape[0], spec["out"]))
            shape = (spec["out"],)
        elif kind == "conv2d":
            k, s, p = pair(spec["kernel"]), pair(spec.get("stride", 1)), pair(spec.get("padding", 0))
            layers.append(nn.Conv2d(shape[0], spec["out"], k, s, p, bias=spec.get("bias", True)))
            shape = (spec["out"],) + tuple((shape[1 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(2))
        elif kind in ("maxpool2d", "avgpool2d"):
            k = pair(spec["kernel"])
            s, p = pair(spec.get("stride", spec["kernel"])), pair(spec.get("padding", 0))
            layers.append((nn.MaxPool2d if kind == "maxpool2d" else nn.AvgPool2d)(k, s, p))
            shape = (shape[0],) + tuple((shape[1 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(2))
        elif kind == "global_avgpool":
            layers.append(nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten()))
            shape = (shape[0],)
        elif kind == "flatten":
            layers.append(nn.Flatten())
            shape = (int(torch.tensor(shape).prod()),)
        elif kind in ("batchnorm1d", "batchnorm2d"):
            bn = nn.BatchNorm1d if kind == "batchnorm1d" else nn.BatchNorm2d
            layers.append(bn(shape[0], eps=spec.get("eps", 1e-5), momentum=spec.get("momentum", 0.1),
                             affine=spec.get("affine", True)))
        elif kind == "dropout":
            layers.append(nn.Dropout(spec.get("p", 0.5)))
        elif kind == "residual":
            body, _ = build_layers(spec["layers"], shape)
            layers.append(Residual(body))
        else:
            layers.append({"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "gelu": nn.GELU}[kind]())
    return nn.Sequential(*layers), shape


def input_shape(cfg, x):
    model = cfg["model"]
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


def make_data(cfg):
    train = cfg["data"]["train"]
    g = torch.Generator().manual_seed(0)
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


def make_optimizer(cfg, params):
    o = cfg["optimizer"]
    if o.get("type", "sgd") == "sgd":
        return torch.optim.SGD(params, lr=o.get("lr", 0.03), momentum=o.get("momentum", 0.0))
    return torch.optim.Adam(params, lr=o.get("lr", 0.001))


def train(rank, world, cfg, threads, result_queue):
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
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    loss_fn = nn.CrossEntropyLoss() if cfg["loss"] == "cross_entropy" else nn.MSELoss()
    opt = make_optimizer(cfg, model.parameters())
    n = x.shape[0]
    batch = cfg["batch"]["global"] // world
    per_rank = (n + world - 1) // world
    epochs = cfg.get("epochs", 4)
    times, cpu = [], []
    for epoch in range(epochs):
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(epoch))
        mine = perm[rank::world][:per_rank]
        start, cpu_start = time.perf_counter(), time.process_time()
        for first in range(0, per_rank, batch):
            idx = mine[first:first + batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
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
    args = parser.parse_args()
    cfg = load_workload(args.workload)
    if args.procs == 1:
        q = mp.get_context("fork").SimpleQueue()
        train(0, 1, cfg, args.threads, q)
        results = [q.get()]
    else:
        ctx = mp.get_context("spawn")
        q = ctx.SimpleQueue()
        procs = [ctx.Process(target=train, args=(r, args.procs, cfg, args.threads, q)) for r in range(args.procs)]
        for p in procs:
            p.start()
        results = [q.get() for _ in procs]
        for p in procs:
            p.join()
    rate = next(r[1] for r in results if r[0] == 0)
    cpu_per_sample = sum(r[2] for r in results)  # CPU seconds per sample, all processes
    print(json.dumps({"workload": args.workload, "impl": "torch", "torch": torch.__version__,
                      "procs": args.procs, "threads": args.threads, "samples_per_s": rate,
                      "samples_per_cpu_s": 1.0 / cpu_per_sample}))


if __name__ == "__main__":
    sys.exit(main())
