#!/usr/bin/python3
"""Cross-check mpiddp against PyTorch, step for step (optional; never part of CI).

PyTorch builds everything: the data (x.npy, y.npy), the initial weights of an
nn.Sequential (init.safetensors, written here by hand in the safetensors format) and the
data order of every epoch (order.npy, int64 [epochs, samples]). PyTorch then trains with
SGD and mse, evaluating after each epoch the mean loss over the whole training set, which
is mpiddp's eval_loss when data.eval is not set. mpiddp replays the same run through
init.weights and sampler.order at each world size, and the per-epoch eval_loss must match
PyTorch's to a relative 1e-5. The final weights mpiddp saves (save_weights) are compared
with PyTorch's final state_dict, by name.

--model cnn does the same for Conv2d(1,4,3,padding=1)-BatchNorm2d-ReLU-MaxPool2d(2)-Flatten-
Linear(64,3) on 8x8 one-channel images with cross-entropy. Evaluation runs in eval mode
(BatchNorm's running statistics), as mpiddp's does, and mpiddp synchronises BatchNorm across
ranks, so every world size must reproduce the one-process PyTorch run.

--export DIR writes the data, order, initial weights and PyTorch's per-epoch results (both
dtypes) to DIR instead of running mpiddp: tests/golden/cnn_replay is made so, and
tests/cli/cnn_replay.sh replays it in CI without PyTorch.

Run with Debian's interpreter, which has python3-torch and python3-numpy:
    /usr/bin/python3 tools/torch_crosscheck.py --mpiddp build/mpiddp [--model cnn]
    /usr/bin/python3 tools/torch_crosscheck.py --model cnn --export tests/golden/cnn_replay
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

DTYPES = {"float32": (torch.float32, np.float32), "float64": (torch.float64, np.float64)}


ST_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.int64): "I64"}


def write_safetensors(path, tensors):
    """tensors: name -> numpy array. The format: u64 LE header length, JSON header, raw data."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": ST_DTYPES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        kind = {"F32": np.float32, "F64": np.float64, "I64": np.int64}[entry["dtype"]]
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=kind).reshape(entry["shape"])
    return out


CNN_CLASSES = 3


def make_model(args):
    if args.model == "cnn":
        return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                                   torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                   torch.nn.Linear(4 * 4 * 4, CNN_CLASSES))
    return torch.nn.Sequential(torch.nn.Linear(args.features, args.hidden), torch.nn.Tanh(),
                               torch.nn.Linear(args.hidden, args.hidden), torch.nn.Tanh(),
                               torch.nn.Linear(args.hidden, 1))


def mpiddp_layers(args):
    if args.model == "cnn":
        return [{"type": "conv2d", "out": 4, "kernel": 3, "padding": 1}, {"type": "batchnorm2d"},
                {"type": "relu"}, {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"},
                {"type": "linear", "out": CNN_CLASSES}]
    return [{"type": "linear", "out": args.hidden}, {"type": "tanh"},
            {"type": "linear", "out": args.hidden}, {"type": "tanh"}, {"type": "linear", "out": 1}]


def make_data(args):
    """x, y and the order of every epoch, in float64 (labels int64 for the cnn)."""
    if args.model == "cnn":
        x = torch.randn(args.samples, 1, 8, 8, dtype=torch.float64)
        # The class: which third of the image (top, middle, bottom rows) is brightest.
        bands = torch.stack([x[:, 0, 0:3].mean((1, 2)), x[:, 0, 3:5].mean((1, 2)),
                             x[:, 0, 5:8].mean((1, 2))], 1)
        y = bands.argmax(1).to(torch.int64)
    else:
        x = torch.randn(args.samples, args.features, dtype=torch.float64)
        w = torch.randn(args.features, 1, dtype=torch.float64)
        y = torch.sin(x @ w / args.features ** 0.5) + 0.1 * torch.randn(args.samples, 1, dtype=torch.float64)
    order = torch.stack([torch.randperm(args.samples) for _ in range(args.epochs)]).numpy().astype(np.int64)
    return x.numpy(), y.numpy(), order


def loss_of(args, out, target):
    if args.model == "cnn":
        return torch.nn.functional.cross_entropy(out, target)
    return torch.nn.functional.mse_loss(out, target)


def torch_reference(args, x, y, order, initial, torch_dtype):
    """Per-epoch (eval_loss, eval_accuracy) over the training set in eval mode, final state."""
    model = make_model(args).to(torch_dtype)
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in initial.items()})
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    X, Y = torch.from_numpy(x), torch.from_numpy(y)
    results = []
    for epoch in range(args.epochs):
        model.train()
        for k in range(0, args.samples, args.batch):
            idx = torch.from_numpy(order[epoch, k:k + args.batch])
            opt.zero_grad()
            loss_of(args, model(X[idx]), Y[idx]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            out = model(X)
            accuracy = float((out.argmax(1) == Y).double().mean()) if args.model == "cnn" else None
            results.append((loss_of(args, out, Y).item(), accuracy))
    return results, {k: v.detach().numpy() for k, v in model.state_dict().items()}


def mpiddp_config(args, work, dtype):
    data = {"source": "npy", "features": os.path.join(work, "x.npy"),
            "targets": os.path.join(work, "y.npy")}
    if args.model == "cnn":
        data["classes"] = CNN_CLASSES
    return {
        "seed": 0, "dtype": dtype,
        "model": {"layers": mpiddp_layers(args)},
        "loss": "cross_entropy" if args.model == "cnn" else "mse",
        "data": {"train": data},
        "sampler": {"order": os.path.join(work, "order.npy")},
        "batch": {"global": args.batch},
        "optimizer": {"type": "sgd", "lr": args.lr, "momentum": args.momentum},
        "epochs": args.epochs,
        "init": {"weights": os.path.join(work, "init.safetensors")},
    }


def run_mpiddp(args, work, dtype, np_, log, final):
    config = mpiddp_config(args, work, dtype)
    config["save_weights"] = final
    config["log"] = {"path": log}
    path = os.path.join(work, f"config_{dtype}.json")
    with open(path, "w") as f:
        json.dump(config, f)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    subprocess.run([args.mpiexec, "-n", str(np_), "--oversubscribe", args.mpiddp, "train", path,
                    "--quiet"], check=True, env=env)
    with open(log) as f:
        return [r["eval_loss"] for r in map(json.loads, f) if r["kind"] == "epoch"]


def export_golden(args, x, y, order, initial64):
    """The files of tests/golden/cnn_replay: replayed by tests/cli/cnn_replay.sh."""
    os.makedirs(args.export, exist_ok=True)
    np.save(os.path.join(args.export, "x.npy"), x)
    np.save(os.path.join(args.export, "y.npy"), y)
    np.save(os.path.join(args.export, "order.npy"), order)
    write_safetensors(os.path.join(args.export, "init.safetensors"), initial64)
    expected = {"torch": torch.__version__, "command": " ".join(sys.argv[1:]),
                "batch": args.batch, "epochs": args.epochs, "lr": args.lr,
                "momentum": args.momentum, "layers": mpiddp_layers(args)}
    for dtype, (torch_dtype, np_dtype) in DTYPES.items():
        initial = {k: v.astype(np_dtype) if v.dtype != np.int64 else v for k, v in initial64.items()}
        xs = x.astype(np_dtype)
        ys = y if y.dtype == np.int64 else y.astype(np_dtype)
        results, _ = torch_reference(args, xs, ys, order, initial, torch_dtype)
        expected[dtype] = {"eval_loss": [r[0] for r in results],
                           "eval_accuracy": [r[1] for r in results]}
    with open(os.path.join(args.export, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(f"wrote {args.export}: {expected}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mpiddp", default="build/mpiddp")
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--export", default=None, help="write golden files here instead of running mpiddp")
    p.add_argument("--mpiexec", default="mpirun")
    p.add_argument("--np", default="1,2")
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--features", type=int, default=8)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--work", default=None, help="keep the files here (default: a temp dir)")
    args = p.parse_args()
    args.mpiddp = os.path.abspath(args.mpiddp)
    work = args.work or tempfile.mkdtemp(prefix="torch_crosscheck_")
    os.makedirs(work, exist_ok=True)

    torch.manual_seed(1234)
    torch.set_num_threads(1)
    x, y, order = make_data(args)
    initial64 = {k: (v.detach().numpy() if v.dtype == torch.int64 else v.detach().double().numpy())
                 for k, v in make_model(args).state_dict().items()}
    if args.export:
        return export_golden(args, x, y, order, initial64)
    np.save(os.path.join(work, "order.npy"), order)

    print(f"torch {torch.__version__}, {args.samples} samples, {args.model}, SGD lr {args.lr} "
          f"momentum {args.momentum}, global batch {args.batch}, {args.epochs} epochs; files in {work}")
    worst = 0.0
    for dtype, (torch_dtype, np_dtype) in DTYPES.items():
        xs = x.astype(np_dtype)
        ys = y if y.dtype == np.int64 else y.astype(np_dtype)
        np.save(os.path.join(work, "x.npy"), xs)
        np.save(os.path.join(work, "y.npy"), ys)
        initial = {k: v.astype(np_dtype) if v.dtype != np.int64 else v for k, v in initial64.items()}
        write_safetensors(os.path.join(work, "init.safetensors"), initial)
        reference, final_ref = torch_reference(args, xs, ys, order, initial, torch_dtype)
        reference = [r[0] for r in reference]
        print(f"\n{dtype}:\n  epoch  {'pytorch':>16}" +
              "".join(f"  {'mpiddp np=' + n:>16}  {'rel diff':>9}" for n in args.np.split(",")))
        results = {}
        for n in args.np.split(","):
            final = os.path.join(work, f"final_{dtype}_np{n}.safetensors")
            results[n] = run_mpiddp(args, work, dtype, int(n), os.path.join(work, f"log_{dtype}_np{n}.jsonl"), final)
            saved = read_safetensors(final)
            assert sorted(saved) == sorted(final_ref), f"tensor names {sorted(saved)} vs {sorted(final_ref)}"
            wdiff = max(float(np.max(np.abs(saved[k].astype(np.float64) - final_ref[k]))) for k in saved)
            print(f"  np={n}: saved weights and buffers vs PyTorch's final state_dict: max |diff| {wdiff:.3g}")
        for e in range(args.epochs):
            row = f"  {e + 1:5d}  {reference[e]:16.10g}"
            for n in args.np.split(","):
                rel = abs(results[n][e] - reference[e]) / abs(reference[e])
                worst = max(worst, rel)
                row += f"  {results[n][e]:16.10g}  {rel:9.2e}"
            print(row)
    verdict = "OK" if worst <= args.rtol else "MISMATCH"
    print(f"\n{verdict}: largest relative eval_loss difference {worst:.3g} (tolerance {args.rtol:g})")
    return 0 if worst <= args.rtol else 1


if __name__ == "__main__":
    sys.exit(main())
