#!/usr/bin/python3
"""Golden values of the layers that act on sequences (T, C), from PyTorch: linear on the last
dimension, layernorm, position_embedding, gelu (both forms) and attention (nanoGPT's
CausalSelfAttention without dropout: causal or not, with or without biases).

The cases are built and laid out as tools/golden/conv_pool.py builds its own (a fixed float64
input from a seeded generator, L = sum(y * dy) back-propagated, every tensor flat in PyTorch's
row-major order, batch first, which is mpiddp's (features, B) column-major with features in the
last dimension); tests/nn/layer_golden_test.cpp replays them through mpiddp's layers to 1e-12.

Run with Debian's interpreter, which has python3-torch:
    /usr/bin/python3 tools/golden/sequence_layers.py   # writes tests/golden/sequence_layers.json
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conv_pool  # noqa: E402  (the same cases, flattening and layout)

OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden",
                      "sequence_layers.json")


class PositionEmbedding(torch.nn.Module):
    """GPT's wpe: row t of the table added to position t (mpiddp's position_embedding)."""

    def __init__(self, positions, width):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(positions, width))

    def forward(self, x):
        return x + self.weight[: x.shape[1]]


class Attention(torch.nn.Module):
    """nanoGPT's CausalSelfAttention (dropout 0), the math of mpiddp's attention layer."""

    def __init__(self, width, heads, causal, bias):
        super().__init__()
        self.c_attn = torch.nn.Linear(width, 3 * width, bias=bias)
        self.c_proj = torch.nn.Linear(width, width, bias=bias)
        self.heads, self.causal = heads, causal

    def forward(self, x):
        batch, positions, width = x.shape
        q, k, v = self.c_attn(x).split(width, dim=2)
        heads = [t.view(batch, positions, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v)]
        q, k, v = heads
        scores = q @ k.transpose(-2, -1) / (k.shape[-1] ** 0.5)
        if self.causal:
            mask = torch.tril(torch.ones(positions, positions, dtype=torch.bool))
            scores = scores.masked_fill(~mask, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(batch, positions, width))


def module_for(layer, input_shape):
    kind = layer["type"]
    if kind == "linear":
        return torch.nn.Linear(input_shape[-1], layer["out"])
    if kind == "layernorm":
        return torch.nn.LayerNorm(input_shape[-1], eps=layer.get("eps", 1e-5),
                                  elementwise_affine=layer.get("affine", True))
    if kind == "position_embedding":
        return PositionEmbedding(layer["positions"], input_shape[-1])
    if kind == "attention":
        return Attention(input_shape[-1], layer["heads"], layer.get("causal", True), layer.get("bias", True))
    if kind == "gelu":
        return torch.nn.GELU(approximate=layer.get("approximate", "none"))
    raise ValueError(kind)


def case(name, layer, input_shape, batch, generator, scale=1.0):
    return conv_pool.case(name, layer, input_shape, batch, generator, scale=scale, modules=module_for)


def main():
    generator = torch.Generator().manual_seed(20261204)
    cases = [
        case("linear_sequence", {"type": "linear", "out": 3}, (4, 5), 2, generator),
        case("linear_flat", {"type": "linear", "out": 2}, (6,), 3, generator),
        case("layernorm_sequence", {"type": "layernorm"}, (3, 8), 2, generator, scale=3.0),
        case("layernorm_flat_eps", {"type": "layernorm", "eps": 0.001}, (5,), 3, generator),
        case("layernorm_plain", {"type": "layernorm", "affine": False}, (2, 6), 2, generator),
        case("position_embedding_short", {"type": "position_embedding", "positions": 6}, (4, 3), 2,
             generator),
        case("position_embedding_full", {"type": "position_embedding", "positions": 3}, (3, 2), 3,
             generator),
        case("gelu_erf", {"type": "gelu"}, (3, 4), 2, generator, scale=3.0),
        case("attention_causal_2_heads", {"type": "attention", "heads": 2}, (5, 6), 2, generator, scale=2.0),
        case("attention_full_1_head", {"type": "attention", "heads": 1, "causal": False}, (4, 4), 2, generator),
        case("attention_causal_3_heads_nobias", {"type": "attention", "heads": 3, "bias": False}, (4, 6), 1,
             generator, scale=2.0),
        case("gelu_tanh", {"type": "gelu", "approximate": "tanh"}, (3, 4), 2, generator, scale=3.0),
    ]
    with open(OUTPUT, "w") as f:
        json.dump({"generator": "tools/golden/sequence_layers.py", "torch": torch.__version__,
                   "cases": cases}, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.normpath(OUTPUT)}")


if __name__ == "__main__":
    main()
