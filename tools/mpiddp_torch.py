"""mpiddp's model description as a PyTorch module, and weights in and out (optional; never part
of CI or the build).

    import mpiddp_torch as mt
    model = mt.build_model(config["model"]["layers"], input_shape=(64,))   # token ids (T)
    model.load_state_dict(mt.load_state_dict("final.safetensors"), strict=True)
    mt.write_safetensors("init.safetensors", mt.state_dict_arrays(model))

build_model() gives an nn.Sequential whose state_dict() names and shapes are mpiddp's, so a
safetensors file passes both ways (mpiddp's init.weights and save_weights; docs/interchange.md):
"0.weight", "1.weight", ...; a residual's body is "<i>.body.<j>.*"; an attention layer holds
"c_attn" Linear(C, 3C) and "c_proj" Linear(C, C). A linear layer with "tied_to" shares that
tensor's Parameter, so state_dict() holds both names (equal) and parameters() the tensor once.

Initialisation: a layer with "init_std" gets N(0, init_std^2) weights and zero biases (LayerNorm
and BatchNorm: ones and zeros); the others keep PyTorch's defaults, which are mpiddp's
distributions (position_embedding: N(0, 1), as nn.Embedding). mpiddp's random numbers are not
PyTorch's, so the values never match: a run is reproduced through an exported init file.

Also here, shared by tools/torch_crosscheck.py, tools/kjv_torch.py and bench/torch_peer.py: the
losses (per-position cross-entropy as nanoGPT's F.cross_entropy(logits.view(-1, V), y.view(-1))),
the optimizers (nanoGPT's "decay only matrices" rule, "optimizer.decay"), mpiddp's learning-rate
schedules, and the windows of the text and tokens sources.

Run with Debian's interpreter, which has python3-torch and python3-numpy (/usr/bin/python3).
"""
import json
import math
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------------------------------------
# Configs

def load_config(path):
    """An mpiddp config: JSON with // and /* */ comments allowed, as mpiddp reads it."""
    with open(path) as f:
        text = f.read()
    out, i, in_string = [], 0, False
    while i < len(text):
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
            continue
        else:
            out.append(c)
        i += 1
    return json.loads("".join(out))


# ---------------------------------------------------------------------------------------------
# Layers that PyTorch does not have under mpiddp's names

class Residual(nn.Module):
    """y = x + body(x): mpiddp's residual layer, its body's names <i>.body.<j>.*."""

    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return x + self.body(x)


class PositionEmbedding(nn.Module):
    """GPT's wpe: row t of `weight` [positions, C] added to position t of x (B, T, C), T <= positions."""

    def __init__(self, positions, width):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(positions, width))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.normal_(self.weight)  # N(0, 1), as nn.Embedding

    def forward(self, x):
        return x + self.weight[: x.shape[1]]


class CausalSelfAttention(nn.Module):
    """nanoGPT's CausalSelfAttention on its non-flash path: x (B, T, C) -> (B, T, C).

    The mask is made per call, not kept as nanoGPT's "bias" buffer, which would add a name that
    mpiddp's state_dict does not have. `dropout` acts on the probabilities (nanoGPT's
    attn_dropout); nanoGPT's resid_dropout is a dropout layer after this one in mpiddp."""

    def __init__(self, width, heads, causal=True, bias=True, dropout=0.0):
        super().__init__()
        if width % heads != 0:
            raise ValueError(f"attention: {heads} heads do not divide the width {width}")
        self.c_attn = nn.Linear(width, 3 * width, bias=bias)
        self.c_proj = nn.Linear(width, width, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)
        self.heads, self.causal = heads, causal

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        # (B, T, C) -> (B, heads, T, D)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, heads, T, T)
        if self.causal:
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)  # the heads side by side
        return self.c_proj(y)


class GlobalAvgPool(nn.Module):
    """(B, C, H, W) -> (B, C): mpiddp's global_avgpool."""

    def forward(self, x):
        return x.mean(dim=(2, 3))


# ---------------------------------------------------------------------------------------------
# The model

def _pair(value):
    return tuple(value) if isinstance(value, list) else (value, value)


def _layer(spec, shape):
    """(module, output shape) of one layer on per-sample input `shape` (no batch dimension)."""
    kind = spec["type"]
    if kind == "embedding":
        return nn.Embedding(spec["vocab"], spec["dim"]), tuple(shape) + (spec["dim"],)
    if kind == "position_embedding":
        if len(shape) != 2 or shape[0] > spec["positions"]:
            raise ValueError(f"position_embedding: input {shape}, needs (T, C) with T <= {spec['positions']}")
        return PositionEmbedding(spec["positions"], shape[-1]), shape
    if kind == "layernorm":
        return nn.LayerNorm(shape[-1], eps=spec.get("eps", 1e-5),
                            elementwise_affine=spec.get("affine", True)), shape
    if kind == "attention":
        return CausalSelfAttention(shape[-1], spec["heads"], spec.get("causal", True),
                                   spec.get("bias", True), spec.get("dropout", 0.0)), shape
    if kind == "linear":  # on the last dimension: (F) -> (out), (T, F) -> (T, out)
        return nn.Linear(shape[-1], spec["out"], bias=spec.get("bias", True)), tuple(shape[:-1]) + (spec["out"],)
    if kind == "conv2d":
        k, s, p = _pair(spec["kernel"]), _pair(spec.get("stride", 1)), _pair(spec.get("padding", 0))
        out = (spec["out"],) + tuple((shape[1 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(2))
        return nn.Conv2d(shape[0], spec["out"], k, s, p, bias=spec.get("bias", True)), out
    if kind in ("maxpool2d", "avgpool2d"):
        k = _pair(spec["kernel"])
        s, p = _pair(spec.get("stride", spec["kernel"])), _pair(spec.get("padding", 0))
        out = (shape[0],) + tuple((shape[1 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(2))
        return (nn.MaxPool2d if kind == "maxpool2d" else nn.AvgPool2d)(k, s, p), out
    if kind == "global_avgpool":
        return GlobalAvgPool(), (shape[0],)
    if kind == "flatten":
        return nn.Flatten(), (int(np.prod(shape)),)
    if kind in ("batchnorm1d", "batchnorm2d"):
        bn = nn.BatchNorm1d if kind == "batchnorm1d" else nn.BatchNorm2d
        return bn(shape[0], eps=spec.get("eps", 1e-5), momentum=spec.get("momentum", 0.1),
                  affine=spec.get("affine", True)), shape
    if kind == "dropout":
        return nn.Dropout(spec.get("p", 0.5)), shape
    if kind == "residual":
        body, out = _layers(spec["layers"], shape)
        if tuple(out) != tuple(shape):
            raise ValueError(f"residual: the body changes the shape {shape} to {out}")
        return Residual(body), shape
    if kind == "gelu":
        return nn.GELU(approximate=spec.get("approximate", "none")), shape
    if kind in ("relu", "tanh", "sigmoid"):
        return {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}[kind](), shape
    raise ValueError(f"unknown layer type {kind!r}")


def _layers(specs, shape):
    modules = []
    for spec in specs:
        module, shape = _layer(spec, shape)
        modules.append(module)
    return nn.Sequential(*modules), shape


def _tie(model, specs, prefix=""):
    """Points every linear layer with "tied_to" at that tensor's Parameter."""
    for i, spec in enumerate(specs):
        name = f"{prefix}{i}"
        if spec["type"] == "residual":
            _tie(model, spec["layers"], f"{name}.body.")
        elif spec["type"] == "linear" and spec.get("tied_to"):
            linear = model.get_submodule(name)
            target = model.get_parameter(spec["tied_to"])
            if target.shape != linear.weight.shape:
                raise ValueError(f"{name}.weight {list(linear.weight.shape)} cannot be tied to "
                                 f"{spec['tied_to']} {list(target.shape)}")
            linear.weight = target


def build_model(layers, input_shape):
    """nn.Sequential of mpiddp's `model.layers` for per-sample input `input_shape`: (T,) for token
    ids, (F,), (C, H, W), or (T, C). The layers with "init_std" are initialised as init_weights()
    says; the others keep what their constructors drew, so a model without init_std gets the
    values the same nn modules built by hand would get from the same seed."""
    model, _ = _layers(layers, tuple(input_shape))
    _tie(model, layers)
    init_weights(model, layers, defaults=False)
    return model


def output_shape(layers, input_shape):
    return _layers(layers, tuple(input_shape))[1]


def _tied_names(specs, prefix=""):
    names = set()
    for i, spec in enumerate(specs):
        if spec["type"] == "residual":
            names |= _tied_names(spec["layers"], f"{prefix}{i}.body.")
        elif spec["type"] == "linear" and spec.get("tied_to"):
            names.add(f"{prefix}{i}.weight")
    return names


@torch.no_grad()
def init_weights(model, layers, defaults=True, _prefix="", _tied=None):
    """Every layer with "init_std": weights N(0, init_std^2), biases zero, LayerNorm/BatchNorm
    ones and zeros; the others PyTorch's defaults (reset_parameters), or untouched when not
    `defaults`. A tied weight is its owner's: only the layer that holds the tensor initialises it."""
    tied = _tied_names(layers) if _tied is None else _tied
    for i, spec in enumerate(layers):
        module = model[i]
        if spec["type"] == "residual":
            init_weights(module.body, spec["layers"], defaults, f"{_prefix}{i}.body.", tied)
            continue
        std = spec.get("init_std")
        if std is None and not defaults:
            continue
        for sub_name, sub in ([("c_attn", module.c_attn), ("c_proj", module.c_proj)]
                              if isinstance(module, CausalSelfAttention) else [("", module)]):
            weight_name = f"{_prefix}{i}.{sub_name + '.' if sub_name else ''}weight"
            weight = getattr(sub, "weight", None)
            bias = getattr(sub, "bias", None)
            if weight is None:
                continue
            if isinstance(sub, (nn.LayerNorm, nn.BatchNorm1d, nn.BatchNorm2d)):
                sub.reset_parameters()  # ones and zeros (and BatchNorm's running statistics)
            elif std is None:
                if weight_name in tied:  # reset_parameters() would redraw the owner's tensor
                    if bias is not None:
                        bound = 1.0 / math.sqrt(weight.shape[1])
                        nn.init.uniform_(bias, -bound, bound)
                else:
                    sub.reset_parameters()
            else:
                if weight_name not in tied:
                    nn.init.normal_(weight, mean=0.0, std=std)
                if bias is not None:
                    nn.init.zeros_(bias)


def takes_tokens(layers):
    return bool(layers) and layers[0]["type"] == "embedding"


# ---------------------------------------------------------------------------------------------
# Loss, optimizer, schedule

def loss_of(loss, out, target):
    """mpiddp's `loss` ("mse", "cross_entropy" or {"type": ...}) of the model's output.
    cross_entropy with a class per position: out (B, T, V), target (B, T), the mean over B*T."""
    kind = loss if isinstance(loss, str) else loss.get("type", "mse")
    if kind == "cross_entropy":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    if kind == "mse":
        return F.mse_loss(out, target)
    raise ValueError(f"unknown loss {kind!r}")


def parameter_groups(model, weight_decay, decay="all"):
    """decay "all": every tensor decays (PyTorch's default); "matrices": only tensors with >= 2
    dimensions (weights and embeddings, not biases nor LayerNorm), nanoGPT's rule. A tied
    tensor appears once (named_parameters() removes duplicates)."""
    params = [p for _, p in model.named_parameters() if p.requires_grad]
    if decay == "all":
        return [{"params": params, "weight_decay": weight_decay}]
    if decay != "matrices":
        raise ValueError(f"optimizer.decay: {decay!r}, expected \"all\" or \"matrices\"")
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


OPTIMIZER_DEFAULTS = {"sgd": {"lr": 0.03, "weight_decay": 0.0}, "adam": {"lr": 0.001, "weight_decay": 0.0},
                      "adamw": {"lr": 0.001, "weight_decay": 0.01}}


def make_optimizer(spec, model):
    """mpiddp's `optimizer` object as a torch.optim optimizer (PyTorch's defaults are mpiddp's).
    Its "clip_grad_norm" is the caller's: clip_grad_norm(spec) gives it."""
    spec = spec or {}
    kind = spec.get("type", "sgd")
    if kind not in OPTIMIZER_DEFAULTS:
        raise ValueError(f"optimizer.type {kind!r}")
    lr = spec.get("lr", OPTIMIZER_DEFAULTS[kind]["lr"])
    groups = parameter_groups(model, spec.get("weight_decay", OPTIMIZER_DEFAULTS[kind]["weight_decay"]),
                              spec.get("decay", "all"))
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=spec.get("momentum", 0.0),
                               dampening=spec.get("dampening", 0.0), nesterov=spec.get("nesterov", False))
    cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
    return cls(groups, lr=lr, betas=tuple(spec.get("betas", (0.9, 0.999))), eps=spec.get("eps", 1e-8))


def clip_grad_norm(spec):
    """The optimizer's "clip_grad_norm" (0 or absent: none)."""
    return float((spec or {}).get("clip_grad_norm", 0.0))


def scheduled_lr(schedule, base_lr, step, epoch, total_steps, total_epochs):
    """mpiddp's learning rate of optimizer step `step` (1-based) in epoch `epoch` (1-based), as
    src/optim/schedule.cpp computes it: u counts completed units (steps: step - 1; epochs:
    epoch - 1); step: base * gamma^floor(u / step_size); cosine: eta_min + (base - eta_min)
    (1 + cos(pi u / t_max)) / 2, t_max 0 being the whole run; then warm-up multiplies by
    min(1, step / warmup_steps)."""
    schedule = schedule or {}
    kind = schedule.get("type", "constant")
    per_step = schedule.get("unit", "epoch") == "step"
    completed = step - 1 if per_step else epoch - 1
    lr = base_lr
    if kind == "step":
        lr = base_lr * schedule.get("gamma", 0.1) ** (completed // schedule.get("step_size", 1))
    elif kind == "cosine":
        period = schedule.get("t_max", 0) or (total_steps if per_step else total_epochs)
        eta_min = schedule.get("eta_min", 0.0)
        lr = eta_min + (base_lr - eta_min) * (1.0 + math.cos(math.pi * completed / period)) / 2.0
    warmup = schedule.get("warmup_steps", 0)
    if warmup > 0:
        lr *= min(1.0, step / warmup)
    return lr


def lr_scheduler(optimizer, schedule, steps_per_epoch, epochs):
    """A LambdaLR stepped once per optimizer step that gives mpiddp's schedule. LambdaLR
    multiplies each group's lr by a factor; eta_min is a rate, not a factor, so the factor is
    scheduled_lr() of the group's own lr divided by it."""
    total = steps_per_epoch * epochs

    def factor_of(base_lr):
        def factor(i):  # i: steps taken so far; the next step is i + 1
            lr = scheduled_lr(schedule, base_lr, i + 1, i // steps_per_epoch + 1, total, epochs)
            return lr / base_lr if base_lr != 0 else 0.0
        return factor

    return torch.optim.lr_scheduler.LambdaLR(optimizer, [factor_of(g["lr"]) for g in optimizer.param_groups])


# ---------------------------------------------------------------------------------------------
# The text and tokens sources (docs/config.md, "text", "tokens")

def text_tokens(spec):
    """(token ids int64 [n], vocabulary size) of a `text` source's whole file."""
    raw = np.fromfile(spec["path"], dtype=np.uint8)
    if spec.get("encoding", "chars") == "bytes":
        return raw.astype(np.int64), 256
    chars = np.unique(raw)  # sorted distinct bytes
    lookup = np.zeros(256, dtype=np.int64)
    lookup[chars] = np.arange(len(chars))
    return lookup[raw], len(chars)


def source_tokens(spec):
    """(token ids int64 [n], vocabulary size) of a `text` or `tokens` source."""
    if spec["source"] == "text":
        return text_tokens(spec)
    if spec["source"] == "tokens":
        if spec["path"].endswith(".npy"):
            return np.load(spec["path"]).astype(np.int64), spec["vocab"]
        return np.fromfile(spec["path"], dtype="<u2", offset=spec.get("header_bytes", 0)).astype(np.int64), spec["vocab"]
    raise ValueError(f"source {spec['source']!r} holds no token windows")


def window_starts(n, spec):
    """The first token of every sample of a text/tokens source over n tokens: in the range
    [floor(a n), floor(b n)), sample k at floor(a n) + k * stride, each of block + 1 tokens."""
    a, b = spec.get("range", [0, 1])
    first, end = math.floor(a * n), math.floor(b * n)
    block = spec["block"]
    return np.arange(first, end - block, spec.get("stride", block), dtype=np.int64)


def windows(tokens, starts, block):
    """x, y int64 [len(starts), block]: each window's first block tokens and its last block."""
    idx = starts[:, None] + np.arange(block + 1, dtype=np.int64)[None, :]
    w = tokens[idx]
    return w[:, :-1], w[:, 1:]


# ---------------------------------------------------------------------------------------------
# safetensors: u64 LE header length, JSON header, raw little-endian data

ST_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.int64): "I64"}
ST_NUMPY = {name: dtype for dtype, name in ST_DTYPES.items()}


def write_safetensors(path, tensors):
    """tensors: name -> numpy array (float32, float64 or int64), written in this order."""
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
    """name -> numpy array (a writable copy), in the file's order; __metadata__ left out."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=ST_NUMPY[entry["dtype"]])
        out[name] = array.reshape(entry["shape"]).copy()
    return out


def state_dict_arrays(model, dtype=None):
    """The model's state_dict as numpy arrays (float tensors converted to `dtype` when given)."""
    out = {}
    for name, t in model.state_dict().items():
        a = t.detach().cpu().numpy()
        out[name] = a.astype(dtype) if dtype is not None and a.dtype.kind == "f" else a.copy()
    return out


def load_state_dict(path):
    """A safetensors file as a state_dict of torch tensors, for model.load_state_dict(strict=True)."""
    return {name: torch.from_numpy(a) for name, a in read_safetensors(path).items()}
