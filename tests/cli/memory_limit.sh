#!/usr/bin/env bash
# memory.limit_mb at np=2: a run whose ranks would hold more than the limit ends with exit 2
# before its first step, naming the key, the need by kind and the limit, and the shard that
# would help; the same run with reduce.shard "optimizer" (AdamW's moments halved, the node's
# one copy of the parameters shared) fits under the same limit and trains; the run record
# states what a rank holds by kind, and `mpiddp bench` reports it per mode.
source "$(dirname "$0")/lib.sh"

# 6-linear1024-tanh-linear1024-tanh-linear1: P = 7,168 + 1,049,600 + 1,025 = 1,057,793, 4.04 MiB
# in float32; AdamW's two moments 8.07 MiB. Unsharded a rank holds ~16.3 MiB, sharded across
# the node's 2 ranks on the shm path ~10.2 MiB: a limit of 13 lies between.
cat > "$WORK/wide.json" <<'JSON'
{"model": {"inputs": 6, "layers": [{"type": "linear", "out": 1024}, {"type": "tanh"},
                                   {"type": "linear", "out": 1024}, {"type": "tanh"},
                                   {"type": "linear", "out": 1}]},
 "loss": "mse",
 "data": {"train": {"source": "synthetic_regression", "samples": 256, "features": 6, "noise": 0.1}},
 "batch": {"global": 64},
 "optimizer": {"type": "adamw", "lr": 0.001},
 "epochs": 1,
 "reduce": {"algorithm": "shm"}}
JSON
MODEL=("$WORK/wide.json")

rc=0
run_np 2 train --quiet "${MODEL[@]}" --set memory.limit_mb=13 --log "$WORK/refused.jsonl" > /dev/null 2> "$WORK/err" || rc=$?
[ "$rc" -eq 2 ] || { cat "$WORK/err"; fail "over the limit: exit code $rc, expected 2"; }
grep -qE 'config: memory.limit_mb: is 13 MiB per rank, but this run needs 1[67] MiB per rank \(parameters 4, gradients 4, optimizer state 8' "$WORK/err" ||
  { cat "$WORK/err"; fail "the refusal does not name the key, the need by kind and the limit"; }
grep -qF 'reduce.shard "optimizer" divides the optimizer state' "$WORK/err" || { cat "$WORK/err"; fail "no hint to shard"; }
# Before the first step: not even the run record was written.
if [ -s "$WORK/refused.jsonl" ]; then fail "the refused run wrote its log"; fi

run_np 2 train --quiet "${MODEL[@]}" --set memory.limit_mb=13 --set reduce.shard='"optimizer"' --log "$WORK/sharded.jsonl"
grep -q '"kind":"end"' "$WORK/sharded.jsonl" || fail "the sharded run under the limit did not finish"
run=$(grep '"kind":"run"' "$WORK/sharded.jsonl")
echo "$run" | grep -qE '"memory":\{"needed_mb":1[01]\.[0-9]+,"by_kind":\{"parameters":2\.0[0-9]*,"gradients":4\.03[0-9]*,"optimizer_state":4\.03[0-9]*,' ||
  { echo "$run" | grep -o '"memory":{[^}]*}[^}]*}'; fail "run record: memory by kind"; }
echo "$run" | grep -q '"limit_mb":13' || fail "run record: memory.limit_mb"

# bench: the need per mode before choosing one, and by kind.
run_np 2 bench "${MODEL[@]}" > "$WORK/bench.json"
grep -qE '"needed_mb_by_kind":\{"parameters":4\.03[0-9]*,' "$WORK/bench.json" || { cat "$WORK/bench.json"; fail "bench: needed_mb_by_kind"; }
grep -qE '"needed_mb_by_shard":\{"none":1[67]\.[0-9]+,"optimizer":1[01]\.[0-9]+\}' "$WORK/bench.json" ||
  { cat "$WORK/bench.json"; fail "bench: needed_mb_by_shard"; }
echo "cli memory_limit: over the limit exit 2 before the first step, naming key, need by kind and limit;" \
     "reduce.shard optimizer fits under it and trains; run record and bench state the need"
