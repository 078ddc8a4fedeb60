#!/usr/bin/env bash
# checkpoint.format "parts" (Note [checkpoints in parts]) from the command line, on a GPT whose
# head is tied to its token table, with AdamW, decay groups, clipping and ema: each rank writes
# its part and rank 0 the index; a checkpoint written at N ranks under one reduce.shard resumes
# at M ranks under another (M = 1 too) as the same run's file checkpoint does, bit for bit; in
# deterministic mode a resume at another world size ends with the uninterrupted run's bits;
# `mpiddp export` assembles the same weights as from a file checkpoint; a node's parts,
# repeated on every node, are written once; a write killed before its index lands is no
# checkpoint and is cleared at the next start; the best checkpoint is rewritten in parts; and
# hostile parts (missing, damaged, of another checkpoint, an index whose slices overlap or
# leave elements out) exit 6 naming the file.
source "$(dirname "$0")/lib.sh"

tied_gpt "$WORK"
BASE=(--quiet "$WORK/gpt.json" --set ema.decay=0.9)
CK=(--set checkpoint.every_steps=6 --set checkpoint.keep=0)
PARTS=("${CK[@]}" --set checkpoint.format='"parts"')
ck6=step-000000000006

# expect_checkpoint_refusal WHAT NAME COMMAND...: exit 6 (a checkpoint missing, corrupt or
# incompatible, as for a file checkpoint), and the message names NAME.
expect_checkpoint_refusal() {
  local what=$1 name=$2; shift 2
  local rc=0
  "$@" > /dev/null 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 6 ] || { cat "$WORK/err"; fail "$what: exit code $rc, expected 6"; }
  grep -qF "$name" "$WORK/err" || { cat "$WORK/err"; fail "$what: the refusal does not name $name"; }
}

# The same run, from 2 ranks under ZeRO-2, in each format: the layout, and the exports agree.
run_np 2 train "${BASE[@]}" --set reduce.shard='"gradients"' "${PARTS[@]}" --set checkpoint.dir="\"$WORK/g2\"" \
  --log "$WORK/g2.jsonl"
run_np 2 train "${BASE[@]}" "${CK[@]}" --set checkpoint.dir="\"$WORK/file2\"" --log "$WORK/file2.jsonl"
expect_same_records "$WORK/g2.jsonl" "$WORK/file2.jsonl" 18 "ZeRO-2 writing parts against unsharded writing files"
for step in 000000000006 000000000012 000000000018; do
  dir="$WORK/g2/step-$step.parts"
  [ -f "$dir/index.json" ] || fail "no index in $dir"
  [ "$(ls "$dir" | grep -c '^part-0000[01]-of-00002-[0-9a-f]\{16\}\.safetensors$')" -eq 2 ] || { ls "$dir"; fail "$dir: expected 2 parts"; }
  [ "$(ls -A "$dir" | wc -l)" -eq 3 ] || { ls -A "$dir"; fail "$dir: files beside the index and its parts"; }
  grep -q "\"kind\":\"checkpoint\",\"path\":\"$dir\"" "$WORK/g2.jsonl" || fail "no checkpoint record names $dir"
done
# What a rank holds of the optimizer state: its part alone, 8,656 values of AdamW's two moments
# and ema's two, 138,496 bytes; in files it would count the whole gathered on rank 0 too.
grep -q '"optimizer_state":0.132080078125,' "$WORK/g2.jsonl" || { grep -o '"memory":{[^}]*}[^}]*}' "$WORK/g2.jsonl"; fail "memory: the state in parts"; }
# P = 17,312 cut in two at 8,656, which falls in the positions' table "1.weight" (8,192 values
# of the token table first): its slices are [0, 464) in part 0 and [464, 512) in part 1.
index="$WORK/g2/$ck6.parts/index.json"
tr -d ' \n' < "$index" | grep -q '"1.weight":{"dtype":"F32","shape":\[16,32\],"slices":\[{"part":0,"begin":0,"end":464,[^]]*},{"part":1,"begin":464,"end":512,' ||
  fail "the index does not cut 1.weight at 464"
"$MPIDDP" export "$WORK/g2/$ck6.parts" "$WORK/g2.safetensors" > /dev/null || fail "export of the parts failed"
"$MPIDDP" export "$WORK/file2/$ck6.safetensors" "$WORK/file2.safetensors" > /dev/null
cmp -s <(tensor_bytes "$WORK/g2.safetensors") <(tensor_bytes "$WORK/file2.safetensors") ||
  fail "export: the parts' weights differ from the file checkpoint's"
cmp -s <(tensor_bytes "$WORK/g2.ema.safetensors") <(tensor_bytes "$WORK/file2.ema.safetensors") ||
  fail "export: the parts' average differs from the file checkpoint's"

# mpiddp generate takes weights: a checkpoint in parts is named, with the export to make.
expect_checkpoint_refusal "generate from parts" "is a checkpoint in parts: export its weights first" \
  "$MPIDDP" generate "$WORK/g2/$ck6.parts" --prompt "line" --tokens 4
"$MPIDDP" generate "$WORK/g2.safetensors" --config "$WORK/gpt.json" --prompt "line" --tokens 4 > /dev/null ||
  fail "generate from the parts' exported weights failed"

# Written at N under one mode, resumed at M under another: the run that the file checkpoint of
# the same step of the unsharded run at N (the same bits: the sharded modes change none) gives
# at M.
file_checkpoint() {  # N: $WORK/fileN/step-…6.safetensors, once
  [ -d "$WORK/file$1" ] || run_np "$1" train "${BASE[@]}" "${CK[@]}" --set checkpoint.dir="\"$WORK/file$1\"" \
    --set epochs=1 --log "$WORK/file$1.jsonl"
}
resume_pair() {  # N SHARD_N M SHARD_M
  local name="n$1$2-m$3$4"
  file_checkpoint "$1"
  run_np "$1" train "${BASE[@]}" --set reduce.shard="\"$2\"" "${PARTS[@]}" --set checkpoint.dir="\"$WORK/$name\"" \
    --set epochs=1 --log "$WORK/$name.first.jsonl"
  run_np "$3" train "${BASE[@]}" --set reduce.shard="\"$4\"" --resume "$WORK/$name/$ck6.parts" \
    --log "$WORK/$name.parts.jsonl"
  run_np "$3" train "${BASE[@]}" --set reduce.shard="\"$4\"" --resume "$WORK/file$1/$ck6.safetensors" \
    --log "$WORK/$name.file.jsonl"
  expect_same_records "$WORK/$name.parts.jsonl" "$WORK/$name.file.jsonl" 12 "written at np $1 ($2), resumed at np $3 ($4)"
}
resume_pair 2 gradients 3 none
resume_pair 3 optimizer 1 none
resume_pair 4 none 2 gradients
resume_pair 1 none 4 optimizer
resume_pair 3 gradients 2 optimizer
# At the same world size and mode, the resumed run is the uninterrupted one.
run_np 2 train "${BASE[@]}" --set reduce.shard='"gradients"' --resume "$WORK/g2/$ck6.parts" --log "$WORK/g2.resumed.jsonl"
[ "$(checksum_of "$WORK/g2.resumed.jsonl")" = "$(checksum_of "$WORK/g2.jsonl")" ] || fail "resumed at np 2: not the uninterrupted run"

# Four ranks as two nodes, the optimizer cut among each node's two (on the mpi path: the
# world's cut needs the node's shared memory): the node's parts are the same on both nodes, and
# are written once. Resumed at np 2, as the same run's file checkpoint.
NODES=(--set reduce.shard='"optimizer"' --set reduce.algorithm='"mpi"' --set epochs=1)
MPIDDP_TEST_RANKS_PER_NODE=2 run_np 4 train "${BASE[@]}" "${NODES[@]}" "${PARTS[@]}" \
  --set checkpoint.dir="\"$WORK/nodes\"" --log "$WORK/nodes.jsonl"
MPIDDP_TEST_RANKS_PER_NODE=2 run_np 4 train "${BASE[@]}" "${NODES[@]}" "${CK[@]}" \
  --set checkpoint.dir="\"$WORK/nodes.file\"" --log "$WORK/nodes.file.jsonl"
grep -q '"reduce_shard_across":"node"' "$WORK/nodes.jsonl" || fail "nodes: the optimizer is not cut among a node's ranks"
[ "$(ls "$WORK/nodes/$ck6.parts" | grep -c '^part-.*-of-00002-')" -eq 2 ] || { ls "$WORK/nodes/$ck6.parts"; fail "nodes: expected 2 parts"; }
run_np 2 train "${BASE[@]}" --resume "$WORK/nodes/$ck6.parts" --log "$WORK/nodes.parts.resumed.jsonl"
run_np 2 train "${BASE[@]}" --resume "$WORK/nodes.file/$ck6.safetensors" --log "$WORK/nodes.file.resumed.jsonl"
expect_same_records "$WORK/nodes.parts.resumed.jsonl" "$WORK/nodes.file.resumed.jsonl" 12 "written by 2 nodes of 2"

# Deterministic mode: the same bits at every world size, through a resume at another.
DET=(--deterministic --set deterministic.chunks=6)  # 6 divides the 402 samples, the batch of 48 and np 1-3
run_np 1 train "${BASE[@]}" "${DET[@]}" --log "$WORK/det1.jsonl"
run_np 2 train "${BASE[@]}" "${DET[@]}" "${PARTS[@]}" --set checkpoint.dir="\"$WORK/det\"" --set epochs=1 \
  --log "$WORK/det2.jsonl"
run_np 3 train "${BASE[@]}" "${DET[@]}" --resume "$WORK/det/$ck6.parts" --log "$WORK/det3.jsonl"
[ "$(checksum_of "$WORK/det3.jsonl")" = "$(checksum_of "$WORK/det1.jsonl")" ] ||
  fail "deterministic: written at np 2, resumed at np 3, not np 1's bits"

# A write killed before its index lands (rank 0 killed before the rename): no checkpoint; the
# next start removes it, and --resume latest goes on from the one before.
rc=0
run_np 2 train "${BASE[@]}" "${PARTS[@]}" --set checkpoint.dir="\"$WORK/killed\"" --log "$WORK/killed.jsonl" \
  --set debug.fail_rank=0 --set debug.fail_kind='"kill_writing_checkpoint"' --set debug.fail_step=10 2> "$WORK/err" || rc=$?
[ "$rc" -ne 0 ] || fail "kill_writing_checkpoint: the run was not killed"
[ -d "$WORK/killed/step-000000000012.parts" ] && [ ! -f "$WORK/killed/step-000000000012.parts/index.json" ] ||
  { ls -R "$WORK/killed"; fail "kill_writing_checkpoint: expected step 12's parts without an index"; }
run_np 2 train "${BASE[@]}" "${PARTS[@]}" --set checkpoint.dir="\"$WORK/killed\"" --resume latest \
  --log "$WORK/killed.resumed.jsonl" 2> "$WORK/err" || { cat "$WORK/err"; fail "kill_writing_checkpoint: the resume failed"; }
grep -q "removed .*step-000000000012.parts/" "$WORK/err" || { cat "$WORK/err"; fail "the killed write was not reported removed"; }
grep -q "\"resumed_from\":{\"path\":\"$WORK/killed/$ck6.parts\"" "$WORK/killed.resumed.jsonl" || fail "did not resume from step 6"
[ "$(checksum_of "$WORK/killed.resumed.jsonl")" = "$(checksum_of "$WORK/file2.jsonl")" ] ||
  fail "kill_writing_checkpoint: the resumed run's parameters differ from the uninterrupted run's"
[ -f "$WORK/killed/step-000000000012.parts/index.json" ] || fail "step 12 was not written again"

# SIGTERM on rank 1 after step 4 under ZeRO-1 (ZeRO-2 takes no injected faults): every rank writes its part of the interrupt's
# checkpoint, exit 9, and --resume latest ends with the uninterrupted run's parameters.
rc=0
run_np 2 train "${BASE[@]}" --set reduce.shard='"optimizer"' "${PARTS[@]}" --set checkpoint.dir="\"$WORK/sig\"" \
  --set debug.fail_rank=1 --set debug.fail_step=4 --set debug.fail_kind='"signal"' --log "$WORK/sig.jsonl" 2> "$WORK/err" || rc=$?
[ "$rc" -eq 9 ] || { cat "$WORK/err"; fail "interrupted: exit code $rc, expected 9"; }
grep -qF "checkpoint '$WORK/sig/step-000000000004.parts' written; continue with --resume latest" "$WORK/err" ||
  { cat "$WORK/err"; fail "interrupted: the message does not name the checkpoint in parts"; }
run_np 2 train "${BASE[@]}" --set reduce.shard='"optimizer"' "${PARTS[@]}" --set checkpoint.dir="\"$WORK/sig\"" \
  --resume latest --log "$WORK/sig.resumed.jsonl"
[ "$(checksum_of "$WORK/sig.resumed.jsonl")" = "$(checksum_of "$WORK/file2.jsonl")" ] ||
  fail "interrupted: the resumed run's parameters differ from the uninterrupted run's"

# The best checkpoint in parts, rewritten in place: only the newest write's parts remain.
run_np 2 train "${BASE[@]}" "${PARTS[@]}" --set checkpoint.dir="\"$WORK/best\"" --set eval.every_steps=3 \
  --set checkpoint.keep_best='"eval_loss"' --set eval.max_samples=96 --log "$WORK/best.jsonl" \
  --set data.eval="{\"source\": \"text\", \"path\": \"$WORK/text.txt\", \"encoding\": \"bytes\", \"block\": 16}"
[ "$(grep -c '"best":{' "$WORK/best.jsonl")" -ge 2 ] || fail "best: expected the best rewritten"
[ "$(ls "$WORK/best/best.parts" | grep -c '^part-')" -eq 2 ] || { ls "$WORK/best/best.parts"; fail "best: the earlier writes' parts remain"; }
best_step=$(grep '"best":{' "$WORK/best.jsonl" | tail -1 | sed -E 's/.*"step":([0-9]+).*/\1/')
run_np 1 train "${BASE[@]}" --set checkpoint.dir="\"$WORK/best\"" --set epochs=3 --resume best --log "$WORK/from_best.jsonl" \
  --set data.eval="{\"source\": \"text\", \"path\": \"$WORK/text.txt\", \"encoding\": \"bytes\", \"block\": 16}"
grep -q "\"resumed_from\":{\"path\":\"$WORK/best/best.parts\",[^}]*\"step\":$best_step}" "$WORK/from_best.jsonl" ||
  fail "--resume best did not resume from the best checkpoint in parts (step $best_step)"

# Hostile parts and indexes: exit 6 naming the file. Copies of step 6 and 12 of the ZeRO-2 run.
h="$WORK/hostile"
fresh() { rm -rf "$h"; cp -r "$WORK/g2/$ck6.parts" "$h"; }
resume_hostile() { run_np 2 train "${BASE[@]}" --resume "$h" --log "$WORK/hostile.jsonl"; }
part1() { ls "$h"/part-00001-*; }
fresh; missing=$(part1); rm "$missing"
expect_checkpoint_refusal "a missing part" "checkpoint '$missing' refused: a missing part" resume_hostile
fresh; size=$(stat -c %s "$(part1)"); printf '\x5a' | dd of="$(part1)" bs=1 seek=$((size - 3)) conv=notrunc 2> /dev/null
expect_checkpoint_refusal "a damaged part" "$(part1)" resume_hostile
grep -q "does not match its checksum" "$WORK/err" || { cat "$WORK/err"; fail "a damaged part: not reported as damaged"; }
fresh; cp "$(ls "$WORK/g2/step-000000000012.parts"/part-00001-*)" "$(part1)"
expect_checkpoint_refusal "a part of another checkpoint" "a part of another checkpoint" resume_hostile
fresh; sed -i '0,/"begin": 464,/s//"begin": 460,/' "$h/index.json"
expect_checkpoint_refusal "overlapping slices" "$h/index.json" resume_hostile
grep -q "tensor '1.weight': its slices \[0, 464) in 'part-00000-.*' and \[460, 512) in 'part-00001-.*' overlap" "$WORK/err" ||
  { cat "$WORK/err"; fail "overlapping slices: not named"; }
fresh; sed -i '0,/"begin": 464,/s//"begin": 470,/' "$h/index.json"
expect_checkpoint_refusal "missing slices" "$h/index.json" resume_hostile
grep -q "tensor '1.weight': its elements \[464, 470) are in no part" "$WORK/err" || { cat "$WORK/err"; fail "missing slices: not named"; }
fresh; sed -i 's/"part-00001-of-00002-/"..\/part-00001-of-00002-/' "$h/index.json"
expect_checkpoint_refusal "a part outside the directory" "$h/index.json" resume_hostile
fresh; echo '{"mpiddp_checkpoint_parts": 1' > "$h/index.json"
expect_checkpoint_refusal "a truncated index" "$h/index.json" resume_hostile
# export checks as resume does.
fresh; missing=$(part1); rm "$missing"
expect_checkpoint_refusal "export: a missing part" "checkpoint '$missing' refused: a missing part" \
  "$MPIDDP" export "$h" "$WORK/x.safetensors"
[ ! -e "$WORK/x.safetensors" ] && [ -z "$(ls -A "$WORK" | grep '^\.x\.safetensors')" ] || fail "export left a file behind"
echo "PASS"
