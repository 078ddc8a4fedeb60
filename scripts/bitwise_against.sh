#!/usr/bin/env bash
# Does the current tree compute the same bits as an earlier commit? Builds BASE beside the
# current tree (a git worktree in build-bitwise/), runs a set of experiments with both
# programs on this machine, and compares their step losses, epoch records and end records
# (param_checksum, replicas_identical) as text: a refactor must change none of them.
#
# Usage: scripts/bitwise_against.sh BASE [RUN...]
#   BASE   a commit (main's head before a refactor, say)
#   RUN    the names of the runs to make (default: all; `--list` prints them)
# Exit 0: every run the same; 1: some run differs (its differing records are printed);
# 2: usage, or a build or run failed.
#
# Every run names compute.gemm: `auto` remembers a timed choice (~/.cache/mpiddp/gemm.json),
# and a re-measured cache may pick another library for small products, which changes bits
# without any change to the code. The runs cover default and deterministic mode, the mpi and
# shm paths and two emulated nodes, the optimizer sharded or not, accumulate_steps, sync off,
# float64, the MLP of bench/mlp.json, the Fashion-MNIST CNN (skipped without the data set:
# scripts/install-deps.sh --with-data) and bench/gpt.json's GPT on the King James Bible
# (scripts/get-kjv.sh), with attention's dropout in deterministic mode, its tiled kernel at
# T = 100 (two tiles, the second partial) with dropout, and its optimizer sharded with the
# gradients clipped; clipping with SGD's and Adam's L2 decay (the decay added to the scaled
# gradient); and compute.precision's bf16 products: the reference on any CPU, the fast
# path (GPT and MLP, and the GPT with two blocks recomputed) where the CPU has avx512_bf16.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# name | ranks | environment (or -) | arguments of `mpiddp train`
RUNS=$(cat <<'EOF'
default_np1        | 1 | - | --set compute.gemm=eigen
default_np2_mpi    | 2 | - | --set compute.gemm=eigen --set reduce.algorithm=mpi
default_np2_shm    | 2 | - | --set compute.gemm=eigen --set reduce.algorithm=shm
default_overlap_off| 2 | - | --set compute.gemm=eigen --set reduce.overlap=false
default_accumulate | 2 | - | --set compute.gemm=eigen --set accumulate_steps=2
default_sync_off   | 2 | - | --set compute.gemm=eigen --no-sync
default_float64    | 3 | - | --set compute.gemm=eigen --set dtype=float64 --set batch.global=48 --set data.train.samples=240
default_batchnorm  | 2 | - | --set compute.gemm=eigen --set model.layers.1.type=batchnorm1d --set model.layers.3.type=dropout --set model.layers.3.p=0.25
default_det        | 2 | - | --set compute.gemm=eigen --deterministic --set batch.global=48 --set data.train.samples=240
default_det_np3    | 3 | - | --set compute.gemm=eigen --set deterministic.chunks=12 --set batch.global=48 --set data.train.samples=240
mlp_mpi            | 2 | - | bench/mlp.json --set compute.gemm=eigen --set reduce.algorithm=mpi
mlp_shm            | 2 | - | bench/mlp.json --set compute.gemm=eigen --set reduce.algorithm=shm
mlp_onednn         | 2 | - | bench/mlp.json --set compute.gemm=onednn
mlp_sharded        | 2 | - | bench/mlp.json --set compute.gemm=eigen --set reduce.shard_optimizer=true
mlp_sharded_accum  | 2 | - | bench/mlp.json --set compute.gemm=eigen --set reduce.shard_optimizer=true --set accumulate_steps=4 --set optimizer={"type":"adam","lr":0.001}
mlp_two_nodes      | 4 | MPIDDP_TEST_RANKS_PER_NODE=2 | bench/mlp.json --set compute.gemm=eigen --set epochs=1
mlp_two_nodes_shard| 4 | MPIDDP_TEST_RANKS_PER_NODE=2 | bench/mlp.json --set compute.gemm=eigen --set epochs=1 --set reduce.shard_optimizer=true
mlp_nodes_of_one   | 2 | MPIDDP_TEST_RANKS_PER_NODE=1 | bench/mlp.json --set compute.gemm=eigen --set epochs=1 --set reduce.shard_optimizer=true
mlp_sync_off       | 2 | - | bench/mlp.json --set compute.gemm=eigen --set epochs=1 --no-sync
mlp_det            | 2 | - | bench/mlp.json --set compute.gemm=eigen --set deterministic.chunks=16 --set epochs=1
mlp_det_accum      | 2 | - | bench/mlp.json --set compute.gemm=eigen --set deterministic.chunks=16 --set epochs=1 --set accumulate_steps=2
cnn_fmnist         | 2 | - | configs/fashion_mnist_cnn.json --set compute.gemm=eigen --set epochs=1
cnn_det            | 2 | - | tests/golden/deterministic_cnn.json --set compute.gemm=eigen
gpt_np2            | 2 | - | bench/gpt.json --set compute.gemm=eigen --set epochs=1 --set data.train.range=[0,0.008]
gpt_dropout_det    | 2 | - | bench/gpt.json --set compute.gemm=eigen --set deterministic.chunks=2 --set epochs=1 --set data.train.range=[0,0.004] --set model.layers.2.layers.1.dropout=0.1
gpt_tiled_t100     | 2 | - | bench/gpt.json --set compute.gemm=eigen --set epochs=1 --set data.train.range=[0,0.004] --set data.train.block=100 --set model.layers.1.positions=100 --set model.layers.2.layers.1.algorithm=tiled --set model.layers.4.layers.1.algorithm=tiled --set model.layers.6.layers.1.algorithm=tiled --set model.layers.8.layers.1.algorithm=tiled --set model.layers.2.layers.1.dropout=0.1
gpt_sharded_clip   | 2 | - | bench/gpt.json --set compute.gemm=eigen --set epochs=1 --set data.train.range=[0,0.004] --set reduce.shard_optimizer=true
gpt_zero2          | 2 | - | bench/gpt.json --set compute.gemm=eigen --set epochs=1 --set data.train.range=[0,0.004] --set reduce.shard="gradients"
gpt_zero3          | 2 | - | bench/gpt.json --set compute.gemm=eigen --set epochs=1 --set data.train.range=[0,0.004] --set reduce.shard="parameters" --set ema.decay=0.9
default_sgd_decay_clip | 2 | - | --set compute.gemm=eigen --set optimizer={"type":"sgd","lr":0.05,"momentum":0.9,"weight_decay":0.01,"clip_grad_norm":0.5}
mlp_adam_l2_clip   | 2 | - | bench/mlp.json --set compute.gemm=eigen --set epochs=1 --set optimizer={"type":"adam","lr":0.001,"weight_decay":0.01,"clip_grad_norm":0.5}
gpt_bf16           | 2 | - | bench/gpt.json --set compute.gemm=onednn --set compute.precision="bf16" --set epochs=1 --set data.train.range=[0,0.008]
gpt_bf16_recompute | 2 | - | bench/gpt.json --set compute.gemm=onednn --set compute.precision="bf16" --set epochs=1 --set data.train.range=[0,0.004] --set model.layers.2.recompute=true --set model.layers.3.recompute=true
gpt_bf16_reference | 2 | - | bench/gpt.json --set compute.gemm=eigen --set compute.precision="bf16_reference" --set epochs=1 --set data.train.range=[0,0.004]
mlp_bf16_accum     | 2 | - | bench/mlp.json --set compute.gemm=onednn --set compute.precision="bf16" --set epochs=1 --set accumulate_steps=2
EOF
)
names() { sed -E 's/ *\|.*//' <<< "$RUNS"; }

[ $# -ge 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
if [ "$1" = --list ]; then names; exit 0; fi
base=$(git -C "$root" rev-parse --verify "$1^{commit}") || { echo "bitwise_against: no commit '$1'" >&2; exit 2; }
shift
wanted=("$@")

# The earlier commit's program, built once per commit (ccache shares the unchanged objects).
dir=${MPIDDP_BITWISE_DIR:-$root/build-bitwise}
src="$dir/${base:0:12}"
if [ ! -x "$src/build/mpiddp" ]; then
  mkdir -p "$dir"
  [ -d "$src/.git" ] || [ -f "$src/.git" ] || git -C "$root" worktree add --force --detach "$src" "$base" > /dev/null
  echo "bitwise_against: building ${base:0:12} in $src/build" >&2
  MPIDDP_BUILD_DIR="$src/build" "$src/scripts/build.sh" mpiddp > "$dir/${base:0:12}.build.log" 2>&1 ||
    { tail -30 "$dir/${base:0:12}.build.log" >&2; exit 2; }
fi
echo "bitwise_against: building the current tree in ${MPIDDP_BUILD_DIR:-$root/build}" >&2
"$root/scripts/build.sh" mpiddp > "$dir/current.build.log" 2>&1 || { tail -30 "$dir/current.build.log" >&2; exit 2; }
before="$src/build/mpiddp"
after="${MPIDDP_BUILD_DIR:-$root/build}/mpiddp"
MPIEXEC=${MPIEXEC:-mpirun}
flags=(--oversubscribe)
"$MPIEXEC" --version 2>&1 | grep -q "Open MPI" || flags=()

# The records a refactor must keep: every step's loss, every epoch's evaluation, the end
# record, without their times. The epoch record's last field, "step", is dropped too:
# commits before it was appended do not write it.
numbers() {
  grep -E '"kind":"(step|epoch|end)"' "$1" |
    sed -E 's/,"(time_s|samples_per_s)":[^,}]*//g; s/^(\{"kind":"epoch".*),"step":[0-9]+\}$/\1}/'
}

out="$dir/runs"
rm -rf "$out"
mkdir -p "$out"
printf '%-20s %3s %6s  %-18s %-18s %s\n' run np steps checksum_before checksum_after verdict
differing=0
while IFS='|' read -r name np envs args; do
  name=$(echo $name); np=$(echo $np); envs=$(echo $envs)
  if [ ${#wanted[@]} -gt 0 ] && ! printf '%s\n' "${wanted[@]}" | grep -qx "$name"; then continue; fi
  if [[ $name == cnn_* ]] && [ ! -d /usr/share/datasets/fashion-mnist ]; then
    printf '%-20s %3s %6s  %s\n' "$name" "$np" - "skipped: Fashion-MNIST is not installed"; continue
  fi
  if [[ $name == gpt_* ]] && [ ! -f "$root/data/kjv.txt" ]; then
    printf '%-20s %3s %6s  %s\n' "$name" "$np" - "skipped: data/kjv.txt is missing (scripts/get-kjv.sh)"; continue
  fi
  if [[ $name == *_bf16* && $name != *_bf16_reference ]] && ! grep -qw avx512_bf16 /proc/cpuinfo; then
    printf '%-20s %3s %6s  %s\n' "$name" "$np" - "skipped: this CPU has no avx512_bf16"; continue
  fi
  envv=()
  [ "$envs" = - ] || envv=($envs)
  for side in before after; do
    program=$before
    [ $side = after ] && program=$after
    # shellcheck disable=SC2086  # the arguments are a list of words
    (cd "$root" && env "${envv[@]}" "$MPIEXEC" -n "$np" "${flags[@]}" "$program" train $args --quiet \
       --log "$out/$name.$side.jsonl") < /dev/null > "$out/$name.$side.txt" 2>&1 ||
      { cat "$out/$name.$side.txt" >&2; echo "bitwise_against: run $name failed ($side)" >&2; exit 2; }
    numbers "$out/$name.$side.jsonl" > "$out/$name.$side.numbers"
  done
  sum() { sed -nE 's/.*"kind":"end".*"param_checksum":"([0-9a-f]+)".*/\1/p' "$1"; }
  steps=$(grep -c '"kind":"step"' "$out/$name.after.numbers" || true)
  verdict=same
  if ! cmp -s "$out/$name.before.numbers" "$out/$name.after.numbers"; then
    verdict=DIFFERENT
    differing=1
  fi
  printf '%-20s %3s %6s  %-18s %-18s %s\n' "$name" "$np" "$steps" "$(sum "$out/$name.before.numbers")" \
    "$(sum "$out/$name.after.numbers")" "$verdict"
  if [ $verdict = DIFFERENT ]; then
    diff "$out/$name.before.numbers" "$out/$name.after.numbers" | head -6 | sed 's/^/    /'
  fi
done <<< "$RUNS"
if [ $differing = 1 ]; then
  echo "bitwise_against: some runs differ from ${base:0:12} (logs in $out)"
  exit 1
fi
echo "bitwise_against: every run gives the same bits as ${base:0:12}"
