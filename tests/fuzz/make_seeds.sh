#!/usr/bin/env bash
# Writes the seed corpus of each fuzz target into DIR/<target>/: valid inputs of every
# shape the readers accept, plus a few near misses, so the fuzzer starts deep in the parser.
# Usage: tests/fuzz/make_seeds.sh DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: make_seeds.sh DIR}

config="$out/fuzz_config"
mkdir -p "$config"
cp "$root/configs/default.json" "$config/default.json"
cat > "$config/classification.json" <<'JSON'
// comments are allowed
{"seed": 3, "dtype": "float64",
 "model": {"layers": [{"type": "linear", "out": 16}, {"type": "gelu"}, {"type": "linear", "out": 3}]},
 "loss": "cross_entropy",
 "data": {"train": {"source": "synthetic_classification", "samples": 90, "features": 4,
                    "classes": 3, "generator": "blobs", "spread": 2.5},
          "eval": {"source": "synthetic_classification", "samples": 30, "features": 4, "classes": 3}},
 "sampler": {"shuffle": false, "drop_last": true},
 "batch": {"per_rank": 8},
 "optimizer": {"type": "adamw", "lr": 1e-3, "betas": [0.8, 0.99], "eps": 1e-7, "weight_decay": 0.1},
 "schedule": {"type": "cosine", "unit": "step", "t_max": 40, "eta_min": 1e-5, "warmup_steps": 4},
 "epochs": 2, "sync": true, "check_every_steps": 5,
 "on_nonfinite": "skip", "max_skipped": 3, "divergence": {"action": "resync"},
 "watchdog": {"timeout_s": 30, "action": "warn"},
 "debug": {"fail_rank": 1, "fail_step": 5, "fail_kind": "nan", "fail_count": 2, "stall_s": 1},
 "log": {"path": "run.jsonl", "every_steps": 10}}
JSON
cat > "$config/sgd_step.json" <<'JSON'
{"model": {"inputs": 6, "layers": [{"type": "linear", "out": 1}]},
 "data": {"train": {"source": "synthetic_regression", "outputs": 1, "noise": 0, "seed": 9}},
 "batch": {"global": 64},
 "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": true, "dampening": 0},
 "schedule": {"type": "step", "step_size": 2, "gamma": 0.5}}
JSON
printf '%s' 'optimizer.lr=0.1' > "$config/set_lr"
printf '%s' 'model.layers.0.out=64' > "$config/set_layer"
printf '%s' 'data.train={"source":"synthetic_classification","classes":4}' > "$config/set_object"
printf '%s' '{"epochs": 3, "optimizer": {"lr": 0.1,}}' > "$config/trailing_comma"
printf '%s' '{"batch": {"global": 1e400}}' > "$config/huge_number"
echo "seeds: $(find "$out" -type f | wc -l) files in $out"
