#!/usr/bin/python3
"""PyTorch's run of configs/kjv_gpt.json (optional; never part of CI): the same model, data,
optimizer and schedule, trained in one process, the validation loss printed as one JSON line.

Everything comes from the config: the layers (through tools/mpiddp_torch.py, so the weights are
mpiddp's names), the text source's windows, the optimizer (with "clip_grad_norm" and "decay"
when present), the schedule as mpiddp computes it (src/optim/schedule.cpp) and the epochs. What
differs from mpiddp: the random numbers (initial weights and the shuffle are PyTorch's own, so
the figures agree in distribution, not in value) and the world size (one process).

The epoch is mpiddp's: the sampler's drop_last is DistributedSampler's (the samples truncated
to a multiple of the world size, here 1), not a DataLoader's, so the last step takes the
remaining windows (58,188 windows at 64: 909 steps of 64 and one of 12, 910 steps) and the
cosine runs over 910 steps. Evaluation, at the end, in eval mode: the mean cross-entropy over
every position of every window of data.eval (stride 256: 1,617 windows).

    scripts/get-kjv.sh                                    # data/kjv.txt
    nice -n 10 /usr/bin/python3 tools/kjv_torch.py configs/kjv_gpt.json --threads 1
    /usr/bin/python3 tools/kjv_torch.py --steps 5         # a smoke test: 5 steps, then evaluate

Seconds per step: each step timed alone (batch gathering, forward, backward, clipping,
optimizer and schedule), median and mean over all but the first step. Run with Debian's
interpreter (/usr/bin/python3), which has python3-torch.
"""
import argparse
import json
import os
import statistics
import sys
import time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openblas_threads  # noqa: E402

openblas_threads.set_from_argv(sys.argv)  # before torch loads

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import mpiddp_torch as mt  # noqa: E402

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def load_windows(spec):
    """x, y int64 tensors [samples, block] of a text or tokens source, and the vocabulary."""
    tokens, vocab = mt.source_tokens(spec)
    starts = mt.window_starts(len(tokens), spec)
    if len(starts) == 0:
        raise SystemExit(f"{spec['path']}: the range holds no window of {spec['block'] + 1} tokens")
    x, y = mt.windows(tokens, starts, spec["block"])
    return torch.from_numpy(x), torch.from_numpy(y), vocab


@torch.no_grad()
def evaluate(model, x, y, batch=64):
    """(mean cross-entropy over every position of every window, token accuracy), eval mode."""
    model.eval()
    total, correct = 0.0, 0
    for first in range(0, len(x), batch):
        logits = model(x[first:first + batch])  # (b, T, V)
        target = y[first:first + batch]
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                       reduction="sum"))
        correct += int((logits.argmax(-1) == target).sum())
    return total / y.numel(), correct / y.numel()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", nargs="?", default="configs/kjv_gpt.json")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: the whole run)")
    p.add_argument("--log-every", type=int, default=100, help="a progress line on stderr every this many steps")
    p.add_argument("--train-loss", action="store_true",
                   help="also the mean loss over the whole training set at the end (mpiddp's train_loss)")
    p.add_argument("--save-weights", default="", help="the final weights as safetensors, mpiddp's names")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    cfg = mt.load_config(args.config)
    torch.manual_seed(cfg.get("seed", 0))
    dtype = DTYPES[cfg.get("dtype", "float32")]
    layers = cfg["model"]["layers"]
    loss = cfg.get("loss", "mse")
    if not mt.takes_tokens(layers) or (loss if isinstance(loss, str) else loss.get("type")) != "cross_entropy":
        raise SystemExit(f"{args.config}: expected a model starting with an embedding and a cross_entropy loss")
    x, y, vocab = load_windows(cfg["data"]["train"])
    eval_spec = cfg["data"].get("eval")
    ex, ey, _ = load_windows(eval_spec) if eval_spec else (x, y, vocab)
    block = x.shape[1]
    head = mt.output_shape(layers, (block,))
    if head != (block, vocab):
        raise SystemExit(f"{args.config}: the model gives {head} per sample, the data needs ({block}, {vocab})")

    model = mt.build_model(layers, (block,)).to(dtype)
    opt = mt.make_optimizer(cfg.get("optimizer"), model)
    clip = mt.clip_grad_norm(cfg.get("optimizer"))
    sampler = cfg.get("sampler", {})
    batch = cfg["batch"]["global"]
    epochs = cfg.get("epochs", 4)
    samples = len(x)  # drop_last at world size 1 drops nothing
    steps_per_epoch = (samples + batch - 1) // batch
    scheduler = mt.lr_scheduler(opt, cfg.get("schedule"), steps_per_epoch, epochs)
    total_steps = steps_per_epoch * epochs
    run_steps = min(args.steps, total_steps) if args.steps > 0 else total_steps
    parameters = sum(t.numel() for t in model.parameters())
    print(f"kjv_torch: {args.config}: {parameters} parameters, {samples} training windows of {block}, "
          f"vocab {vocab}, {steps_per_epoch} steps per epoch x {epochs}, {run_steps} to run, "
          f"{args.threads} thread(s), torch {torch.__version__}", file=sys.stderr)

    step_seconds, losses, norms = [], {}, []
    generator = torch.Generator().manual_seed(cfg.get("seed", 0))
    step = 0
    train_start = time.perf_counter()
    for epoch in range(epochs):
        order = (torch.randperm(samples, generator=generator) if sampler.get("shuffle", True)
                 else torch.arange(samples))
        model.train()
        for first in range(0, samples, batch):
            if step == run_steps:
                break
            start = time.perf_counter()
            idx = order[first:first + batch]
            loss = mt.loss_of("cross_entropy", model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if clip > 0:
                norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip)))
            lr = opt.param_groups[0]["lr"]
            opt.step()
            scheduler.step()
            step_seconds.append(time.perf_counter() - start)
            step += 1
            losses[step] = loss.item()
            if step % args.log_every == 0 or step == 1:
                print(f"  step {step:5d}  loss {losses[step]:.4f}  lr {lr:.3e}  "
                      f"{step_seconds[-1]:.3f} s", file=sys.stderr, flush=True)
    train_s = time.perf_counter() - train_start

    eval_start = time.perf_counter()
    eval_loss, eval_accuracy = evaluate(model, ex, ey)
    eval_s = time.perf_counter() - eval_start
    timed = step_seconds[1:] or step_seconds
    tokens_per_step = batch * block
    result = {
        "config": args.config, "impl": "torch", "torch": torch.__version__, "threads": args.threads,
        "dtype": cfg.get("dtype", "float32"), "parameters": parameters, "steps": step,
        "eval_loss": eval_loss, "eval_accuracy": eval_accuracy, "eval_windows": len(ex),
        "step_loss": {str(k): losses[k] for k in (1, 100, 500, step) if k in losses},
        "median_step_s": statistics.median(timed), "mean_step_s": statistics.mean(timed),
        "p10_step_s": float(np.percentile(timed, 10)), "p90_step_s": float(np.percentile(timed, 90)),
        "tokens_per_s": tokens_per_step / statistics.median(timed),
        "train_s": train_s, "eval_s": eval_s,
    }
    if norms:
        result["clipped_steps"] = sum(n > clip for n in norms)
    if args.train_loss:
        result["train_loss"], result["train_accuracy"] = evaluate(model, x, y)
    if args.save_weights:
        mt.write_safetensors(args.save_weights, mt.state_dict_arrays(model))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
