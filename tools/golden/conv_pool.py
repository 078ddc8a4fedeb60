#!/usr/bin/python3
"""Golden values of conv2d, maxpool2d, avgpool2d, global_avgpool and flatten from PyTorch.

Each case builds the PyTorch module that a layer config means, feeds it a fixed input
(float64, from a seeded generator), and back-propagates L = sum(y * dy) for a fixed dy, so
that dL/dy = dy. It records the config, the input and parameters, dy, and PyTorch's y, dx
and parameter gradients; tests/nn/layer_golden_test.cpp replays every case through
mpiddp's layer and expects the same numbers to 1e-12.

Every tensor is written flat in PyTorch's row-major order, batch first: sample b of a batch
is the b-th block of input_shape's size, which is mpiddp's (features, B) column-major.

Run with Debian's interpreter, which has python3-torch:
    /usr/bin/python3 tools/golden/conv_pool.py      # writes tests/golden/conv_pool.json
"""
import json
import os

import torch

OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden",
                      "conv_pool.json")


def pair(value):
    return tuple(value) if isinstance(value, list) else (value, value)


def module_for(layer, input_shape):
    """The PyTorch module of a layer config, on a per-sample input shape."""
    kind = layer["type"]
    if kind == "conv2d":
        return torch.nn.Conv2d(input_shape[0], layer["out"], pair(layer["kernel"]),
                               stride=pair(layer.get("stride", 1)),
                               padding=pair(layer.get("padding", 0)),
                               bias=layer.get("bias", True))
    if kind == "maxpool2d":
        kernel = pair(layer["kernel"])
        return torch.nn.MaxPool2d(kernel, stride=pair(layer.get("stride", layer["kernel"])),
                                  padding=pair(layer.get("padding", 0)))
    if kind == "avgpool2d":
        kernel = pair(layer["kernel"])
        return torch.nn.AvgPool2d(kernel, stride=pair(layer.get("stride", layer["kernel"])),
                                  padding=pair(layer.get("padding", 0)))
    if kind == "global_avgpool":
        return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    if kind == "flatten":
        return torch.nn.Flatten()
    raise ValueError(kind)


def flat(tensor):
    return [float(v) for v in tensor.detach().reshape(-1).tolist()]


def case(name, layer, input_shape, batch, generator, integer_inputs=False, scale=1.0, modules=module_for):
    """One case: `modules` gives the PyTorch module of a layer config (tools/golden/
    sequence_layers.py passes its own); inputs uniform in [-scale, scale), or small integers."""
    module = modules(layer, input_shape).double()
    if integer_inputs:
        # Small integers: many ties inside the windows, to pin down which maximum wins.
        x = torch.randint(-2, 3, (batch, *input_shape), generator=generator).double()
    else:
        x = (torch.rand((batch, *input_shape), generator=generator, dtype=torch.float64) * 2 - 1) * scale
    x.requires_grad_(True)
    parameters = dict(module.named_parameters())
    with torch.no_grad():
        for tensor in parameters.values():
            tensor.copy_(torch.rand(tensor.shape, generator=generator, dtype=torch.float64) * 2 - 1)
    y = module(x)
    dy = torch.rand(y.shape, generator=generator, dtype=torch.float64) * 2 - 1
    (y * dy).sum().backward()
    return {
        "name": name,
        "layer": layer,
        "input_shape": list(input_shape),
        "batch": batch,
        "output_shape": list(y.shape[1:]),
        "x": flat(x),
        # In mpiddp's memory order: weight [out, in, kh, kw], then bias [out].
        "parameters": [v for tensor in parameters.values() for v in flat(tensor)],
        "dy": flat(dy),
        "y": flat(y),
        "dx": flat(x.grad),
        "gradients": [v for tensor in parameters.values() for v in flat(tensor.grad)],
    }


def main():
    generator = torch.Generator().manual_seed(20240611)
    cases = [
        case("conv_k3_p1", {"type": "conv2d", "out": 3, "kernel": 3, "padding": 1}, (2, 5, 5), 2,
             generator),
        case("conv_k2x3_s2_p1", {"type": "conv2d", "out": 2, "kernel": [2, 3], "stride": 2,
                                 "padding": 1}, (2, 5, 6), 2, generator),
        case("conv_k3x2_s2x1_p1x0_nobias", {"type": "conv2d", "out": 4, "kernel": [3, 2],
                                            "stride": [2, 1], "padding": [1, 0], "bias": False},
             (2, 6, 5), 2, generator),
        case("conv_k1", {"type": "conv2d", "out": 3, "kernel": 1}, (4, 3, 3), 2, generator),
        case("conv_k1_s2", {"type": "conv2d", "out": 2, "kernel": 1, "stride": 2}, (3, 5, 5), 2,
             generator),
        case("conv_k5_s3_p2", {"type": "conv2d", "out": 2, "kernel": 5, "stride": 3, "padding": 2},
             (1, 7, 8), 2, generator),
        case("conv_k3x5_p0x2", {"type": "conv2d", "out": 2, "kernel": [3, 5], "padding": [0, 2]},
             (2, 6, 5), 2, generator),
        case("maxpool_k2", {"type": "maxpool2d", "kernel": 2}, (2, 4, 4), 2, generator),
        case("maxpool_k3_s2_p1", {"type": "maxpool2d", "kernel": 3, "stride": 2, "padding": 1},
             (2, 5, 5), 2, generator),
        case("maxpool_k2x3_s1x2_p1", {"type": "maxpool2d", "kernel": [2, 3], "stride": [1, 2],
                                      "padding": 1}, (1, 5, 6), 2, generator),
        case("maxpool_k3_s1_ties", {"type": "maxpool2d", "kernel": 3, "stride": 1, "padding": 1},
             (2, 4, 5), 2, generator, integer_inputs=True),
        case("avgpool_k2", {"type": "avgpool2d", "kernel": 2}, (2, 4, 4), 2, generator),
        case("avgpool_k3_s2_p1", {"type": "avgpool2d", "kernel": 3, "stride": 2, "padding": 1},
             (2, 5, 5), 2, generator),
        case("avgpool_k3x2_s2x1_p1x0", {"type": "avgpool2d", "kernel": [3, 2], "stride": [2, 1],
                                        "padding": [1, 0]}, (1, 5, 4), 2, generator),
        case("global_avgpool", {"type": "global_avgpool"}, (3, 4, 5), 2, generator),
        case("flatten", {"type": "flatten"}, (2, 3, 4), 2, generator),
    ]
    with open(OUTPUT, "w") as f:
        json.dump({"generator": "tools/golden/conv_pool.py", "torch": torch.__version__,
                   "cases": cases}, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.normpath(OUTPUT)}")


if __name__ == "__main__":
    main()
