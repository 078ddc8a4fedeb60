#!/usr/bin/env bash
# reduce.shard_optimizer (ZeRO-1) from the command line: at np=2, np=3 and 2 emulated nodes
# of 2 (sharded across the world) the sharded run writes the unsharded run's step and epoch
# records, final parameters and checkpoints (byte for byte), and so do 4 emulated nodes of
# one, sharded or not, against one node of 4; a checkpoint written sharded at np=2 resumes unsharded at np=3, and one written
# unsharded at np=3 resumes sharded at np=2, each as the run resumed from the other form's
# checkpoint, bit for bit (the forms' checkpoints being one file); the configs it cannot serve
# exit 2 naming the key. Deterministic mode sharded: shard_deterministic.sh.
source "$(dirname "$0")/lib.sh"

# 4 steps per epoch at np 2 and 3 (48 divides by both); Adam, so the state is two buffers.
BASE=(--quiet --set 'optimizer={"type":"adam","lr":0.01}' --set data.train.samples=192
      --set batch.global=48 --set epochs=3 --set checkpoint.every_steps=3 --set checkpoint.keep=0)
SHARD=(--set reduce.shard_optimizer=true)
# same_run A B WHAT: the runs logged in A.jsonl and B.jsonl wrote the same 12 step records,
# the same epoch records and the same final parameters.
same_run() { expect_same_records "$1.jsonl" "$2.jsonl" 12 "$3"; }
# same_checkpoints A B WHAT: every checkpoint in directory A is the one of the same name in B.
same_checkpoints() {
  for f in "$1"/step-*.safetensors; do
    cmp -s "$f" "$2/$(basename "$f")" || fail "$3: checkpoint $(basename "$f") differs"
  done
}

for np in 2 3; do
  d="$WORK/np$np"
  run_np "$np" train "${BASE[@]}" --log "$d.whole.jsonl" --set checkpoint.dir="$d/whole"
  run_np "$np" train "${BASE[@]}" "${SHARD[@]}" --log "$d.sharded.jsonl" --set checkpoint.dir="$d/sharded"
  grep -q '"reduce_shard_optimizer":true' "$d.sharded.jsonl" || fail "np=$np: run record lacks reduce_shard_optimizer"
  same_run "$d.whole" "$d.sharded" "np=$np sharded"
  same_checkpoints "$d/whole" "$d/sharded" "np=$np sharded"
done

# Two emulated nodes of 2 ranks: the optimizer sharded across the world (each node rank's
# run of the buffer reduce-scattered and allgathered between the nodes, into each node's one
# copy of the parameters) gives the unsharded run's bits, and its checkpoints (the state
# gathered from the 4 parts) are the unsharded run's. With bf16 between the nodes, which
# has no scattered form, the state is cut among the node.
d="$WORK/np4"
MPIDDP_TEST_RANKS_PER_NODE=2 run_np 4 train "${BASE[@]}" --log "$d.whole.jsonl" --set checkpoint.dir="$d/whole"
MPIDDP_TEST_RANKS_PER_NODE=2 run_np 4 train "${BASE[@]}" "${SHARD[@]}" --log "$d.sharded.jsonl" \
  --set checkpoint.dir="$d/sharded"
grep -q '"reduce_shard_across":"world"' "$d.sharded.jsonl" || fail "2 nodes of 2: run record lacks reduce_shard_across world"
same_run "$d.whole" "$d.sharded" "np=4 as 2 nodes, sharded"
same_checkpoints "$d/whole" "$d/sharded" "np=4 as 2 nodes, sharded"
MPIDDP_TEST_RANKS_PER_NODE=2 run_np 4 train "${BASE[@]}" "${SHARD[@]}" --set reduce.compress=bf16 \
  --log "$d.bf16.jsonl" --set checkpoint.dir="$d/bf16"
grep -q '"reduce_shard_across":"node"' "$d.bf16.jsonl" || fail "2 nodes of 2 in bf16: reduce_shard_across is not node"

# Across world sizes and forms, from the checkpoint of step 6 (epoch 2, batch 2: 4 steps an
# epoch at np 2 and 3).
ck=step-000000000006.safetensors
run_np 3 train "${BASE[@]}" --resume "$WORK/np2/sharded/$ck" --log "$WORK/2s_to_3w.jsonl" \
  --set checkpoint.dir="$WORK/2s_to_3w"
run_np 3 train "${BASE[@]}" "${SHARD[@]}" --resume "$WORK/np2/whole/$ck" --log "$WORK/2w_to_3s.jsonl" \
  --set checkpoint.dir="$WORK/2w_to_3s"
run_np 2 train "${BASE[@]}" "${SHARD[@]}" --resume "$WORK/np3/whole/$ck" --log "$WORK/3w_to_2s.jsonl" \
  --set checkpoint.dir="$WORK/3w_to_2s"
run_np 2 train "${BASE[@]}" --resume "$WORK/np3/sharded/$ck" --log "$WORK/3s_to_2w.jsonl" \
  --set checkpoint.dir="$WORK/3s_to_2w"
for pair in "2s_to_3w 2w_to_3s" "3w_to_2s 3s_to_2w"; do
  set -- $pair
  expect_same_records "$WORK/$1.jsonl" "$WORK/$2.jsonl" 6 "$1 and $2"
done
# The resumed run carries on the run it resumed (within float rounding of another world size).
epoch_field eval_loss "$WORK/2s_to_3w.jsonl" > "$WORK/resumed.loss"
epoch_field eval_loss "$WORK/np3.whole.jsonl" | tail -2 > "$WORK/straight.loss"
expect_close "$WORK/resumed.loss" "$WORK/straight.loss" 1e-5 || fail "np=2 sharded -> np=3 resume drifted"

# One rank per node (emulated nodes of one): the optimizer sharded across the leaders, the
# gradients reduce-scattered and the updated parts allgathered between the nodes. At 2 nodes
# the unsharded run's records, parameters and checkpoints (a + b = b + a); at 4 nodes of one
# the unsharded run on one node of 4, whose shared-memory sum adds in rank order as the
# scattered sum does; bit for bit. The run record says among whom the parts are cut.
d="$WORK/leaders2"
MPIDDP_TEST_RANKS_PER_NODE=1 run_np 2 train "${BASE[@]}" --log "$d.whole.jsonl" --set checkpoint.dir="$d/whole"
MPIDDP_TEST_RANKS_PER_NODE=1 run_np 2 train "${BASE[@]}" "${SHARD[@]}" --log "$d.sharded.jsonl" \
  --set checkpoint.dir="$d/sharded"
grep -q '"reduce_shard_across":"world"' "$d.sharded.jsonl" || fail "2 nodes of 1: run record lacks reduce_shard_across world"
grep -q '"reduce_shard_across":"none"' "$d.whole.jsonl" || fail "2 nodes of 1 unsharded: reduce_shard_across is not none"
same_run "$d.whole" "$d.sharded" "2 nodes of 1, sharded"
same_checkpoints "$d/whole" "$d/sharded" "2 nodes of 1, sharded"
d="$WORK/leaders4"
run_np 4 train "${BASE[@]}" --log "$d.one_node.jsonl" --set checkpoint.dir="$d/one_node"
MPIDDP_TEST_RANKS_PER_NODE=1 run_np 4 train "${BASE[@]}" "${SHARD[@]}" --log "$d.sharded.jsonl" \
  --set checkpoint.dir="$d/sharded"
grep -q '"reduce_shard_across":"node"' "$d.one_node.jsonl" && fail "one node unsharded: reduce_shard_across is node"
same_run "$d.one_node" "$d.sharded" "4 nodes of 1 sharded against one node of 4"
# Its checkpoints (the state gathered from the 4 leaders) are the one-node run's, byte for byte.
same_checkpoints "$d/one_node" "$d/sharded" "4 nodes of 1 sharded against one node of 4"
# Unsharded among the 4 nodes of 1 the allreduce is the scattered sum and a gather (Note [the
# allreduce as a scattered sum and a gather]): rank order too, so the one-node run's bits.
MPIDDP_TEST_RANKS_PER_NODE=1 run_np 4 train "${BASE[@]}" --log "$d.nodes.jsonl" --set checkpoint.dir="$d/nodes"
same_run "$d.one_node" "$d.nodes" "4 nodes of 1 unsharded against one node of 4"
same_checkpoints "$d/one_node" "$d/nodes" "4 nodes of 1 unsharded against one node of 4"

# What it cannot serve: exit 2, naming the key.
expect_config_error() {
  local key=$1; shift
  local rc=0
  timeout 60 "$MPIEXEC" -n 2 $MPIEXEC_FLAGS "$MPIDDP" train --quiet "$@" > /dev/null 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] || { cat "$WORK/err"; fail "'$*': exit code $rc, expected 2"; }
  grep -qF -- "$key" "$WORK/err" || { cat "$WORK/err"; fail "'$*': message does not name '$key'"; }
}
expect_config_error "reduce.shard_optimizer" "${SHARD[@]}" --set sync=false
expect_config_error "reduce.shard_optimizer" --set reduce.shard_optimizer=2

# Deterministic mode under reduce.shard "optimizer": tests/cli/shard_deterministic.sh.
# reduce.shard names the mode: "optimizer" is ZeRO-1 as above, and the messages name the key
# as written; both spellings at once, and the modes this version has not built, are refused.
d="$WORK/np2"
run_np 2 train "${BASE[@]}" --set reduce.shard='"optimizer"' --log "$d.shard_key.jsonl" \
  --set checkpoint.dir="$d/shard_key"
grep -q '"reduce_shard":"optimizer"' "$d.shard_key.jsonl" || fail "reduce.shard: run record lacks reduce_shard"
grep -q '"reduce_shard":"none"' "$d.whole.jsonl" || fail "unsharded run record lacks reduce_shard none"
same_run "$d.whole" "$d.shard_key" "reduce.shard \"optimizer\" at np=2"
expect_config_error "config: reduce.shard: needs sync true" --set reduce.shard='"optimizer"' --set sync=false
expect_config_error "config: reduce.shard_optimizer: is the older spelling" --set reduce.shard='"optimizer"' "${SHARD[@]}"
expect_config_error "config: reduce.shard_unit: \"layer\"" --set reduce.shard='"parameters"' --set reduce.shard_unit='"layer"'
expect_config_error "config: reduce.shard_unit: applies to reduce.shard \"parameters\" only" --set reduce.shard='"optimizer"' --set reduce.shard_unit='"block"'
# The float32 reduce-scatter has no bf16 form.
MPIDDP_TEST_RANKS_PER_NODE=1 expect_config_error "reduce.compress" "${SHARD[@]}" --set reduce.compress=bf16
# The node's ranks share one copy of the parameters: one replica cannot be perturbed alone.
expect_config_error "debug.fail_kind" "${SHARD[@]}" --set debug.fail_kind=perturb --set debug.fail_rank=1
echo "cli shard_optimizer: np=2,3 and 2 nodes x 2 (across the world) records, parameters and checkpoints equal to unsharded;" \
     "across the leaders (2 and 4 nodes of 1) too, and 4 nodes of 1 unsharded as one node of 4; 2<->3 resumes across forms bitwise; refusals exit 2"
