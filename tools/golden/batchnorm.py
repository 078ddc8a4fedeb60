#!/usr/bin/env python3
"""Writes tests/golden/batchnorm.json: PyTorch's BatchNorm1d / BatchNorm2d on small inputs.

Run with the Python that has torch (python3-torch): /usr/bin/python3 tools/golden/batchnorm.py
Everything is float64 and every input is a closed-form function of its index (no RNG), so
the file is the same on every machine and torch version. tests/nn/batchnorm_test.cpp reads it.

Each case: one step of module(x) with loss = sum(y * dy), from the given weight, bias and
running statistics. Tensors are flat lists in PyTorch's row-major (B, C, ...) order, which
is mpiddp's column-major (features, B) layout: sample after sample.
"""
import json
import math
import os

import torch

torch.set_default_dtype(torch.float64)


def values(count, a, b, offset=0.0):
    """Deterministic values in about [-2, 2] + offset: sin and cos of the index."""
    return [offset + 1.5 * math.sin(a * i + 0.3) + 0.5 * math.cos(b * i * i + 1.1) for i in range(count)]


def case(name, module_type, shape, batch, training, momentum=0.1, eps=1e-5, affine=True,
         channel_offset=0.0):
    channels = shape[0]
    module = {"batchnorm1d": torch.nn.BatchNorm1d, "batchnorm2d": torch.nn.BatchNorm2d}[module_type](
        channels, eps=eps, momentum=momentum, affine=affine)
    count = batch
    for d in shape:
        count *= d
    x = torch.tensor(values(count, 0.71, 0.37), dtype=torch.float64).reshape([batch] + list(shape))
    # A different offset per channel, so each channel's mean and variance differ.
    x = x + channel_offset * torch.arange(channels, dtype=torch.float64).reshape(
        [1, channels] + [1] * (len(shape) - 1))
    x.requires_grad_(True)
    dy = torch.tensor(values(count, 1.13, 0.59), dtype=torch.float64).reshape(x.shape)
    with torch.no_grad():
        if affine:
            module.weight.copy_(torch.tensor([0.5 + 0.25 * c for c in range(channels)]))
            module.bias.copy_(torch.tensor([0.1 - 0.2 * c for c in range(channels)]))
        module.running_mean.copy_(torch.tensor([0.3 * c - 0.2 for c in range(channels)]))
        module.running_var.copy_(torch.tensor([1.0 + 0.5 * c for c in range(channels)]))
    result = {
        "name": name,
        "layer": {"type": module_type, "momentum": momentum, "eps": eps, "affine": affine},
        "input_shape": list(shape),
        "batch": batch,
        "training": training,
        "x": x.detach().flatten().tolist(),
        "dy": dy.flatten().tolist(),
        "weight": module.weight.detach().tolist() if affine else [],
        "bias": module.bias.detach().tolist() if affine else [],
        "running_mean_before": module.running_mean.tolist(),
        "running_var_before": module.running_var.tolist(),
    }
    module.train(training)
    y = module(x)
    (y * dy).sum().backward()
    result.update({
        "y": y.detach().flatten().tolist(),
        "dx": x.grad.flatten().tolist(),
        "dweight": module.weight.grad.tolist() if affine else [],
        "dbias": module.bias.grad.tolist() if affine else [],
        "running_mean": module.running_mean.tolist(),
        "running_var": module.running_var.tolist(),
        "num_batches_tracked": int(module.num_batches_tracked.item()),
    })
    return result


def main():
    cases = [
        case("1d_flat_train", "batchnorm1d", [3], 5, True, channel_offset=1.0),
        case("1d_flat_eval", "batchnorm1d", [3], 5, False, channel_offset=1.0),
        case("1d_sequence_train", "batchnorm1d", [2, 4], 3, True, momentum=0.3, channel_offset=-0.5),
        case("1d_sequence_eval", "batchnorm1d", [2, 4], 3, False, eps=1e-3),
        case("1d_sequence_train_noaffine", "batchnorm1d", [2, 4], 3, True, affine=False),
        case("2d_train", "batchnorm2d", [3, 2, 3], 4, True, channel_offset=2.0),
        case("2d_train_momentum", "batchnorm2d", [2, 3, 2], 2, True, momentum=0.75, eps=1e-2),
        case("2d_eval", "batchnorm2d", [3, 2, 3], 4, False, channel_offset=2.0),
        case("2d_train_noaffine", "batchnorm2d", [2, 2, 2], 3, True, affine=False),
        case("2d_eval_noaffine", "batchnorm2d", [2, 2, 2], 3, False, affine=False),
    ]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "tests", "golden", "batchnorm.json")
    with open(path, "w") as f:
        json.dump({"generator": "tools/golden/batchnorm.py", "torch": torch.__version__,
                   "cases": cases}, f, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(cases)} cases, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
