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

--model gpt does it for a tiny GPT on token ids (vocab 11, T 8, width 16): embedding,
position_embedding, two pre-LN blocks (residual[layernorm, attention 2 heads] and
residual[layernorm, linear 64, gelu, linear 16]), a final layernorm and a head without bias
tied to the embedding ("tied_to": "0.weight"), trained with AdamW (weight decay on matrices
only, "optimizer.decay": "matrices") and gradients clipped to norm 1 ("optimizer.clip_grad_norm",
torch.nn.utils.clip_grad_norm_): the gradient norm of every step is printed, and compared with
mpiddp's step records when they hold it. The tokens go to mpiddp as npy int64 [N, T] features
and int64 [N, T] targets (a class per position); each sample is a window of a token stream, y
its x shifted by one. After the run PyTorch's load_state_dict(strict=True) must take mpiddp's
saved weights (both tied names, equal) and give its last eval_loss.

--export DIR writes the data, order, initial weights and PyTorch's per-epoch results (both
dtypes) to DIR instead of running mpiddp (and for gpt the mpiddp configs that replay them):
tests/golden/cnn_replay is made so, and tests/cli/cnn_replay.sh replays it in CI without PyTorch.

The models come from tools/mpiddp_torch.py, which builds mpiddp's layer lists in PyTorch.

Run with Debian's interpreter, which has python3-torch and python3-numpy:
    /usr/bin/python3 tools/torch_crosscheck.py --mpiddp build/mpiddp [--model cnn|gpt] [--np 1,2]
    /usr/bin/python3 tools/torch_crosscheck.py --model cnn --export tests/golden/cnn_replay
    /usr/bin/python3 tools/torch_crosscheck.py --model gpt --np 2,4
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

import mpiddp_torch as mt
from mpiddp_torch import read_safetensors, write_safetensors  # noqa: F401  (bench/time_to_accuracy.py imports them from here)

DTYPES = {"float32": (torch.float32, np.float32), "float64": (torch.float64, np.float64)}


CNN_CLASSES = 3
GPT_VOCAB, GPT_BLOCK, GPT_WIDTH = 11, 8, 16

# Per model: samples, batch, epochs, lr (an option given on the command line wins).
DEFAULTS = {"mlp": (512, 32, 5, 0.1), "cnn": (512, 32, 5, 0.1), "gpt": (48, 12, 3, 0.01)}


def input_shape(args):
    return {"mlp": (args.features,), "cnn": (1, 8, 8), "gpt": (GPT_BLOCK,)}[args.model]


def make_model(args):
    """The PyTorch model of mpiddp_layers(args), with mpiddp's state_dict names."""
    return mt.build_model(mpiddp_layers(args), input_shape(args))


def mpiddp_layers(args):
    if args.model == "cnn":
        return [{"type": "conv2d", "out": 4, "kernel": 3, "padding": 1}, {"type": "batchnorm2d"},
                {"type": "relu"}, {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"},
                {"type": "linear", "out": CNN_CLASSES}]
    if args.model == "gpt":
        std = {"init_std": args.init_std} if args.init_std > 0 else {}
        C = GPT_WIDTH
        attention = {"type": "residual", "layers": [{"type": "layernorm"}, {"type": "attention", "heads": 2, **std}]}
        mlp = {"type": "residual", "layers": [{"type": "layernorm"}, {"type": "linear", "out": 4 * C, **std},
                                              {"type": "gelu"}, {"type": "linear", "out": C, **std}]}
        return [{"type": "embedding", "vocab": GPT_VOCAB, "dim": C, **std},
                {"type": "position_embedding", "positions": GPT_BLOCK, **std},
                attention, mlp, attention, mlp,
                {"type": "layernorm"},
                {"type": "linear", "out": GPT_VOCAB, "bias": False, "tied_to": "0.weight"}]
    return [{"type": "linear", "out": args.hidden}, {"type": "tanh"},
            {"type": "linear", "out": args.hidden}, {"type": "tanh"}, {"type": "linear", "out": 1}]


def loss_name(args):
    return "mse" if args.model == "mlp" else "cross_entropy"


def optimizer_spec(args):
    """mpiddp's optimizer object; mt.make_optimizer gives PyTorch's from the same."""
    if args.model == "gpt":
        return {"type": "adamw", "lr": args.lr, "betas": [0.9, 0.95], "weight_decay": args.weight_decay,
                "decay": "matrices", "clip_grad_norm": args.clip}
    return {"type": "sgd", "lr": args.lr, "momentum": args.momentum}


def make_data(args):
    """x, y and the order of every epoch, in float64 (labels int64 for the cnn, tokens and
    labels int64 for the gpt)."""
    if args.model == "gpt":
        # A token stream that steps forward by 1 or 2 (mod vocab): the next token is half
        # predictable from the current one. Sample k is the window at k * T, as the text source's.
        steps = torch.randint(1, 3, (args.samples * GPT_BLOCK,))
        stream = torch.cat([torch.randint(0, GPT_VOCAB, (1,)), steps]).cumsum(0) % GPT_VOCAB
        x, y = mt.windows(stream.numpy().astype(np.int64), np.arange(args.samples) * GPT_BLOCK, GPT_BLOCK)
    elif args.model == "cnn":
        x = torch.randn(args.samples, 1, 8, 8, dtype=torch.float64)
        # The class: which third of the image (top, middle, bottom rows) is brightest.
        bands = torch.stack([x[:, 0, 0:3].mean((1, 2)), x[:, 0, 3:5].mean((1, 2)),
                             x[:, 0, 5:8].mean((1, 2))], 1)
        x, y = x.numpy(), bands.argmax(1).to(torch.int64).numpy()
    else:
        x = torch.randn(args.samples, args.features, dtype=torch.float64)
        w = torch.randn(args.features, 1, dtype=torch.float64)
        y = torch.sin(x @ w / args.features ** 0.5) + 0.1 * torch.randn(args.samples, 1, dtype=torch.float64)
        x, y = x.numpy(), y.numpy()
    order = torch.stack([torch.randperm(args.samples) for _ in range(args.epochs)]).numpy().astype(np.int64)
    return x, y, order


def in_dtype(a, np_dtype):
    """Floats in the run's dtype; token ids and labels stay int64."""
    return a if a.dtype == np.int64 else a.astype(np_dtype)


def evaluate(args, model, X, Y):
    """(mean loss, accuracy or None) over the whole set in eval mode: mpiddp's eval_loss."""
    model.eval()
    with torch.no_grad():
        out = model(X)
        accuracy = float((out.argmax(-1) == Y).double().mean()) if args.model != "mlp" else None
        return mt.loss_of(loss_name(args), out, Y).item(), accuracy


def torch_reference(args, x, y, order, initial, torch_dtype):
    """Per-epoch (eval_loss, eval_accuracy) over the training set in eval mode, the final state
    and every step's gradient norm before clipping (None without clipping)."""
    model = make_model(args).to(torch_dtype)
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in initial.items()}, strict=True)
    spec = optimizer_spec(args)
    opt = mt.make_optimizer(spec, model)
    clip = mt.clip_grad_norm(spec)
    X, Y = torch.from_numpy(x), torch.from_numpy(y)
    results, norms = [], []
    for epoch in range(args.epochs):
        model.train()
        for k in range(0, args.samples, args.batch):
            idx = torch.from_numpy(order[epoch, k:k + args.batch])
            opt.zero_grad()
            mt.loss_of(loss_name(args), model(X[idx]), Y[idx]).backward()
            if clip > 0:
                norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip)))
            opt.step()
        results.append(evaluate(args, model, X, Y))
    return results, mt.state_dict_arrays(model), norms if clip > 0 else None


def mpiddp_config(args, folder, dtype):
    """The mpiddp config that replays the run from the files in `folder`."""
    data = {"source": "npy", "features": os.path.join(folder, "x.npy"),
            "targets": os.path.join(folder, "y.npy")}
    if args.model != "mlp":
        data["classes"] = GPT_VOCAB if args.model == "gpt" else CNN_CLASSES
    return {
        "seed": 0, "dtype": dtype,
        "model": {"layers": mpiddp_layers(args)},
        "loss": loss_name(args),
        "data": {"train": data},
        "sampler": {"order": os.path.join(folder, "order.npy")},
        "batch": {"global": args.batch},
        "optimizer": optimizer_spec(args),
        "epochs": args.epochs,
        "init": {"weights": os.path.join(folder, "init.safetensors")},
    }


def run_mpiddp(args, work, dtype, np_, log, final):
    """Per-epoch eval_loss and the steps' grad_norm (None where the log has none) of mpiddp's
    replay at np_ ranks; None when mpiddp stops (a refused config: exit code 2; a weight file
    it does not take: 3), after printing the command and its exit code."""
    config = mpiddp_config(args, work, dtype)
    config["save_weights"] = final
    config["log"] = {"path": log}
    path = os.path.join(work, f"config_{dtype}.json")
    with open(path, "w") as f:
        json.dump(config, f, indent=1)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    command = [args.mpiexec, "-n", str(np_), "--oversubscribe", args.mpiddp, "train", path, "--quiet"]
    run = subprocess.run(command, env=env, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        print(f"mpiddp stopped with exit code {run.returncode}: {' '.join(command)}")
        return None
    with open(log) as f:
        records = [json.loads(line) for line in f]
    return ([r["eval_loss"] for r in records if r["kind"] == "epoch"],
            [r.get("grad_norm") for r in records if r["kind"] == "step"])


def check_tied_load(args, final, torch_dtype, X, Y, mpiddp_last_loss):
    """PyTorch's load_state_dict(strict=True) takes mpiddp's saved weights: every name, the tied
    ones equal; PyTorch's eval_loss with them is mpiddp's last. The relative difference."""
    saved = read_safetensors(final)
    for name, target in tied_pairs(mpiddp_layers(args)):
        assert name in saved and target in saved, f"{final}: holds {sorted(saved)}, needs {name} and {target}"
        assert np.array_equal(saved[name], saved[target]), f"{final}: {name} differs from {target}"
    model = make_model(args).to(torch_dtype)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in saved.items()}, strict=True)
    loss, _ = evaluate(args, model, X, Y)
    return abs(loss - mpiddp_last_loss) / abs(mpiddp_last_loss)


def tied_pairs(layers, prefix=""):
    """(tied weight's name, its tied_to) of every linear layer with tied_to."""
    pairs = []
    for i, layer in enumerate(layers):
        if layer["type"] == "residual":
            pairs += tied_pairs(layer["layers"], f"{prefix}{i}.body.")
        elif layer.get("tied_to"):
            pairs.append((f"{prefix}{i}.weight", layer["tied_to"]))
    return pairs


def print_norms(norms, clip):
    clipped = sum(n > clip for n in norms)
    print(f"  gradient norms before clipping to {clip:g} ({clipped} of {len(norms)} steps clipped): "
          + " ".join(f"{n:.3g}" for n in norms))


def export_golden(args, x, y, order, initial64):
    """The files of tests/golden/cnn_replay (replayed by tests/cli/cnn_replay.sh), or of a gpt
    replay: for gpt also the two mpiddp configs that replay it, paths relative to where this ran."""
    os.makedirs(args.export, exist_ok=True)
    np.save(os.path.join(args.export, "x.npy"), x)
    np.save(os.path.join(args.export, "y.npy"), y)
    np.save(os.path.join(args.export, "order.npy"), order)
    write_safetensors(os.path.join(args.export, "init.safetensors"), initial64)
    expected = {"torch": torch.__version__, "command": " ".join(sys.argv[1:]),
                "batch": args.batch, "epochs": args.epochs, "lr": args.lr,
                "momentum": args.momentum, "layers": mpiddp_layers(args)}
    if args.model == "gpt":
        expected["optimizer"] = optimizer_spec(args)
    for dtype, (torch_dtype, np_dtype) in DTYPES.items():
        initial = {k: in_dtype(v, np_dtype) for k, v in initial64.items()}
        results, _, norms = torch_reference(args, in_dtype(x, np_dtype), in_dtype(y, np_dtype), order, initial,
                                            torch_dtype)
        expected[dtype] = {"eval_loss": [r[0] for r in results],
                           "eval_accuracy": [r[1] for r in results]}
        if norms is not None:
            expected[dtype]["grad_norm"] = norms
            print(f"{dtype}:")
            print_norms(norms, args.clip)
        if args.model == "gpt":
            with open(os.path.join(args.export, f"config_{dtype}.json"), "w") as f:
                json.dump(mpiddp_config(args, args.export, dtype), f, indent=1)
    with open(os.path.join(args.export, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(f"wrote {args.export}: {expected}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mpiddp", default="build/mpiddp")
    p.add_argument("--model", choices=["mlp", "cnn", "gpt"], default="mlp")
    p.add_argument("--export", default=None, help="write golden files here instead of running mpiddp")
    p.add_argument("--mpiexec", default="mpirun")
    p.add_argument("--np", default="1,2")
    p.add_argument("--samples", type=int, default=None, help="default 512 (gpt: 48)")
    p.add_argument("--features", type=int, default=8)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--batch", type=int, default=None, help="default 32 (gpt: 12)")
    p.add_argument("--epochs", type=int, default=None, help="default 5 (gpt: 3)")
    p.add_argument("--lr", type=float, default=None, help="default 0.1 (gpt: 0.01)")
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=0.1, help="gpt: AdamW's, on matrices only")
    p.add_argument("--clip", type=float, default=1.0, help="gpt: clip_grad_norm")
    p.add_argument("--init-std", type=float, default=0.02, help="gpt: the layers' init_std (0: none)")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--work", default=None, help="keep the files here (default: a temp dir)")
    args = p.parse_args()
    for key, value in zip(("samples", "batch", "epochs", "lr"), DEFAULTS[args.model]):
        if getattr(args, key) is None:
            setattr(args, key, value)
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

    spec = optimizer_spec(args)
    print(f"torch {torch.__version__}, {args.samples} samples, {args.model}, "
          f"{' '.join(f'{k} {v}' for k, v in spec.items())}, global batch {args.batch}, "
          f"{args.epochs} epochs; files in {work}")
    worst = 0.0
    for dtype, (torch_dtype, np_dtype) in DTYPES.items():
        xs, ys = in_dtype(x, np_dtype), in_dtype(y, np_dtype)
        np.save(os.path.join(work, "x.npy"), xs)
        np.save(os.path.join(work, "y.npy"), ys)
        initial = {k: in_dtype(v, np_dtype) for k, v in initial64.items()}
        write_safetensors(os.path.join(work, "init.safetensors"), initial)
        reference, final_ref, norms = torch_reference(args, xs, ys, order, initial, torch_dtype)
        reference = [r[0] for r in reference]
        print(f"\n{dtype}:")
        if norms is not None:
            print_norms(norms, args.clip)
        results = {}
        for n in args.np.split(","):
            final = os.path.join(work, f"final_{dtype}_np{n}.safetensors")
            run = run_mpiddp(args, work, dtype, int(n), os.path.join(work, f"log_{dtype}_np{n}.jsonl"), final)
            if run is None:
                print(f"\nSTOPPED: mpiddp does not run this replay (above); the PyTorch side ran. Rerun:\n"
                      f"  /usr/bin/python3 {' '.join(sys.argv)}")
                return 2
            results[n], mpiddp_norms = run
            saved = read_safetensors(final)
            assert sorted(saved) == sorted(final_ref), f"tensor names {sorted(saved)} vs {sorted(final_ref)}"
            wdiff = max(float(np.max(np.abs(saved[k].astype(np.float64) - final_ref[k]))) for k in saved)
            print(f"  np={n}: saved weights and buffers vs PyTorch's final state_dict: max |diff| {wdiff:.3g}")
            if norms is not None and all(m is not None for m in mpiddp_norms):
                rel = max(abs(m - t) / t for m, t in zip(mpiddp_norms, norms))
                worst = max(worst, rel)
                print(f"  np={n}: the steps' grad_norm vs PyTorch's: largest relative difference {rel:.3g}"
                      f" ({len(mpiddp_norms)} steps)")
            if tied_pairs(mpiddp_layers(args)):
                rel = check_tied_load(args, final, torch_dtype, torch.from_numpy(xs), torch.from_numpy(ys),
                                      results[n][-1])
                worst = max(worst, rel)
                print(f"  np={n}: load_state_dict(strict=True) takes mpiddp's weights, the tied names equal; "
                      f"PyTorch's eval_loss with them vs mpiddp's last: relative {rel:.3g}")
        print(f"  epoch  {'pytorch':>16}" +
              "".join(f"  {'mpiddp np=' + n:>16}  {'rel diff':>9}" for n in args.np.split(",")))
        for e in range(args.epochs):
            row = f"  {e + 1:5d}  {reference[e]:16.10g}"
            for n in args.np.split(","):
                rel = abs(results[n][e] - reference[e]) / abs(reference[e])
                worst = max(worst, rel)
                row += f"  {results[n][e]:16.10g}  {rel:9.2e}"
            print(row)
    verdict = "OK" if worst <= args.rtol else "MISMATCH"
    print(f"\n{verdict}: largest relative difference {worst:.3g} (tolerance {args.rtol:g})")
    return 0 if worst <= args.rtol else 1


if __name__ == "__main__":
    sys.exit(main())
