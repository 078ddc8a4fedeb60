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
# rep PATTERN N: the escape text PATTERN N times (expanded by npy's printf).
rep() { local i; for ((i = 0; i < $2; i++)); do printf '%s' "$1"; done; }
# npy FILE VERSION DESCR SHAPE DATA: a .npy file, header padded to 64 bytes as NumPy does.
npy() {
  local header="{'descr': '$3', 'fortran_order': False, 'shape': $4, }" prefix=10 length pad
  [ "$2" = 1 ] || prefix=12
  pad=$(( (64 - (prefix + ${#header} + 1) % 64) % 64 ))
  header="$header$(printf '%*s' "$pad" '')"
  length=$(( ${#header} + 1 ))
  {
    printf '\x93NUMPY'
    if [ "$2" = 1 ]; then
      printf "\\x01\\x00\\x$(printf %02x $((length & 255)))\\x$(printf %02x $((length >> 8)))"
    else
      printf "\\x02\\x00\\x$(printf %02x $((length & 255)))\\x$(printf %02x $((length >> 8)))\\x00\\x00"
    fi
    printf '%s\n' "$header"
    printf "$5"  # DATA is printf escape text like '\x00\x00\x80\x3f'

  } > "$1"
}
d="$out/fuzz_npy"
mkdir -p "$d"
npy "$d/f4_3x2.npy" 1 '<f4' '(3, 2)' "$(rep '\x00\x00\x80\x3f' 6)"
npy "$d/f8_4.npy" 1 '<f8' '(4,)' "$(rep '\x00\x00\x00\x00\x00\x00\xf0\x3f' 4)"
npy "$d/u1_labels.npy" 1 '|u1' '(4,)' '\x00\x01\x02\x01'
npy "$d/i8_2x1.npy" 1 '<i8' '(2, 1)' '\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00'
npy "$d/i4_3_v2.npy" 2 '<i4' '(3,)' "$(rep '\x02\x00\x00\x00' 3)"
npy "$d/f4_2x2x2.npy" 1 '<f4' '(2, 2, 2)' "$(rep '\x00\x00\x00\x40' 8)"

d="$out/fuzz_csv"
mkdir -p "$d"
printf '1,2,3\n4,5,6\n' > "$d/plain.csv"
printf 'a,b,y\n1.5,-2e-3,0.25\n\n4,5,6\n' > "$d/header.csv"
printf '0.5;1\n0.25;3\n-1;0\n' > "$d/labels.csv"
printf 'x,y\r\n1,2\r\n3,4\r\n' > "$d/crlf.csv"
printf '1e308,2\n-0,+3\n' > "$d/edges.csv"

d="$out/fuzz_idx"
mkdir -p "$d"
printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02\x00\x40\x80\xff\x01\x02\x03\x04' > "$d/images.idx"
printf '\x00\x00\x08\x01\x00\x00\x00\x03\x00\x01\x02' > "$d/labels.idx"
printf '\x00\x00\x0d\x02\x00\x00\x00\x02\x00\x00\x00\x01\x3f\x80\x00\x00\x40\x00\x00\x00' > "$d/floats.idx"
printf '\x00\x00\x0c\x01\x00\x00\x00\x02\x00\x00\x00\x05\x00\x00\x00\x07' > "$d/int32.idx"
gzip -c -n "$d/images.idx" > "$d/images.idx.gz"
gzip -c -n "$d/labels.idx" > "$d/labels.idx.gz"

# safetensors FILE HEADER DATA: an 8-byte little-endian header length, the JSON header
# (padded with spaces to a multiple of 8, as the writer does), then DATA (printf escapes).
safetensors() {
  local header=$2 length
  header="$header$(printf '%*s' $(( (8 - ${#header} % 8) % 8 )) '')"
  length=${#header}
  {
    printf "\\x$(printf %02x $((length & 255)))\\x$(printf %02x $((length >> 8)))\\x00\\x00\\x00\\x00\\x00\\x00"
    printf '%s' "$header"
    printf "$3"
  } > "$1"
}
d="$out/fuzz_safetensors"
mkdir -p "$d"
safetensors "$d/f32.safetensors" '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' \
  "$(rep '\x00\x00\x80\x3f' 2)"
safetensors "$d/two.safetensors" '{"__metadata__":{"format":"pt","step":"3"},"0.weight":{"dtype":"F64","shape":[1,2],"data_offsets":[0,16]},"0.bias":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}}' \
  "$(rep '\x00\x00\x00\x00\x00\x00\xf0\x3f' 2)\x00\x00\x00\x40"
safetensors "$d/scalar.safetensors" '{"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}' '\x00\x00\x80\x3f'

# fuzz_checkpoint: a first byte, then (odd) the metadata alone or (even) a whole file. The
# metadata matches the run checkpoint_fuzz.cpp resumes into (a 2-linear2-tanh-linear1 model
# with Adam: 9 parameters and two state buffers of 9).
d="$out/fuzz_checkpoint"
mkdir -p "$d"
meta='{"format":1,"epoch":1,"batch":2,"step":2,"optimizer_steps":2,"optimizer_buffers":["exp_avg","exp_avg_sq"],"model":"2-linear2-tanh-linear1","dtype":"float32","global_batch":2,"train_samples":8,"steps_per_epoch":4,"world_size":1,"rng":{"kind":"derived from config seed and epoch"},"config_hash":"0000000000000000","config":{"seed":1},"data_checksum":"cbf29ce484222325"}'
{ printf '\x03'; printf '%s' "$meta"; } > "$d/metadata_checksum_fixed"
{ printf '\x01'; printf '%s' "$meta"; } > "$d/metadata_as_is"
{ printf '\x03'; printf '%s' "${meta/\"epoch\":1,/\"epoch\":0,}"; } > "$d/metadata_bad_position"
{ printf '\x03'; printf '%s' "${meta/\"config\":\{\"seed\":1\}/\"config\":\{\"seed\":2,\"epochs\":3\}}"; } \
  > "$d/metadata_other_config"
# Whole files: the model's tensors then Adam's, 9 float32 values each, in one data section.
tensors='' offset=0
for prefix in '' optimizer.exp_avg. optimizer.exp_avg_sq.; do
  for t in '0.weight:[2,2]:4' '0.bias:[2]:2' '2.weight:[1,2]:2' '2.bias:[1]:1'; do
    IFS=: read -r name shape count <<< "$t"
    tensors="$tensors,\"$prefix$name\":{\"dtype\":\"F32\",\"shape\":$shape,\"data_offsets\":[$offset,$((offset + 4 * count))]}"
    offset=$((offset + 4 * count))
  done
done
safetensors "$d/whole" "{\"__metadata__\":{\"mpiddp_checkpoint\":\"${meta//\"/\\\"}\"}$tensors}" \
  "$(rep '\x00\x00\x80\x3f' 27)"
safetensors "$d/weights_only" "{${tensors#,}}" "$(rep '\x00\x00\x80\x3f' 27)"
for f in whole weights_only; do { printf '\x00'; cat "$d/$f"; } > "$d/$f.seed"; rm "$d/$f"; done

# fuzz_checkpoint_parts: a first byte, then (odd) a merge patch of the genuine index of
# checkpoint_parts_fuzz.cpp's two parts or (even) a whole index.
d="$out/fuzz_checkpoint_parts"
mkdir -p "$d"
{ printf '\x01'; printf '%s' '{}'; } > "$d/genuine"
{ printf '\x01'; printf '%s' '{"tensors":{"0.bias":{"slices":[{"part":0,"begin":0,"end":1,"checksum":"0000000000000000"},{"part":1,"begin":1,"end":2,"checksum":"0000000000000000"}]}}}'; } > "$d/slices"
{ printf '\x01'; printf '%s' '{"tensors":{"0.weight":{"shape":[1099511627776],"slices":[{"part":0,"begin":0,"end":1099511627776,"checksum":"0000000000000000"}]}}}'; } > "$d/huge"
{ printf '\x01'; printf '%s' '{"parts":["../x.safetensors","part-00001-of-00002-0000000000000000.safetensors"]}'; } > "$d/parts"
{ printf '\x01'; printf '%s' '{"mpiddp_checkpoint":{"epoch":0,"optimizer_steps":"two"}}'; } > "$d/metadata"
{ printf '\x00'; printf '%s' '{"mpiddp_checkpoint_parts":1,"id":"x","mpiddp_checkpoint":{},"parts":["p"],"tensors":{}}'; } > "$d/whole"

# fuzz_order: sampler.order files, int64 [epochs, samples], for 4 samples over 2 epochs.
d="$out/fuzz_order"
mkdir -p "$d"
i8() { local v; for v in "$@"; do printf '\\x%02x\\x00\\x00\\x00\\x00\\x00\\x00\\x00' "$v"; done; }
npy "$d/two_epochs.npy" 1 '<i8' '(2, 4)' "$(i8 3 1 0 2 0 1 2 3)"
npy "$d/three_samples.npy" 1 '<i8' '(1, 3)' "$(i8 2 2 0)"
npy "$d/out_of_range.npy" 1 '<i8' '(2, 4)' "$(i8 3 1 0 2 0 1 2 4)"
npy "$d/float.npy" 1 '<f4' '(2, 4)' "$(rep '\x00\x00\x80\x3f' 8)"
npy "$d/one_dim.npy" 2 '<i8' '(4,)' "$(i8 0 1 2 3)"

echo "seeds: $(find "$out" -type f | wc -l) files in $out"
