#!/usr/bin/env bash
# mpiddp train at np=1, 2 and 4 prints the same per-epoch losses; --no-sync reports drift.
# REDUCE_ALGORITHM (mpi | shm | auto, default: the config's default) picks the gradient
# reduction path; tests/CMakeLists.txt runs this script once per path.
source "$(dirname "$0")/lib.sh"
reduce=()
[ -n "${REDUCE_ALGORITHM:-}" ] && reduce=(--set "reduce.algorithm=$REDUCE_ALGORITHM")

for np in 1 2 4; do
  run_np "$np" train "${reduce[@]}" --quiet --log "$WORK/np$np.jsonl"
  epoch_field eval_loss "$WORK/np$np.jsonl" > "$WORK/np$np.loss"
  [ "$(wc -l < "$WORK/np$np.loss")" -eq 4 ] || fail "np=$np: expected 4 epoch records"
  grep -q '"kind":"end".*"replicas_identical":true' "$WORK/np$np.jsonl" || fail "np=$np: replicas not identical"
  grep -q "\"kind\":\"run\",\"world_size\":$np" "$WORK/np$np.jsonl" || fail "np=$np: run record"
done
expect_close "$WORK/np2.loss" "$WORK/np1.loss" 1e-5 || fail "np=2 differs from np=1"
expect_close "$WORK/np4.loss" "$WORK/np1.loss" 1e-5 || fail "np=4 differs from np=1"

# float64: equal to 1e-12
for np in 1 2; do
  run_np "$np" train "${reduce[@]}" --quiet --set dtype=float64 --log "$WORK/f64_np$np.jsonl"
  epoch_field eval_loss "$WORK/f64_np$np.jsonl" > "$WORK/f64_np$np.loss"
done
expect_close "$WORK/f64_np2.loss" "$WORK/f64_np1.loss" 1e-12 || fail "float64 np=2 differs from np=1"

# The human-readable table shows the same numbers.
run_np 2 train "${reduce[@]}" > "$WORK/table.txt"
grep -q "2 ranks" "$WORK/table.txt" || fail "no table header"
[ "$(grep -cE '^ +[1-4] ' "$WORK/table.txt")" -eq 4 ] || fail "table has not 4 epoch rows"

# Without the allreduce the replicas drift apart, and the run says so.
run_np 2 train --no-sync --log "$WORK/nosync.jsonl" > "$WORK/nosync.txt"
grep -q "drifted apart" "$WORK/nosync.txt" || fail "no-sync run did not report drift"
grep -q '"replicas_identical":false' "$WORK/nosync.jsonl" || fail "no-sync end record"
diff=$(grep '"kind":"end"' "$WORK/nosync.jsonl" | sed -E 's/.*"max_replica_diff":([-0-9.eE+]+).*/\1/')
awk -v d="$diff" 'BEGIN { exit !(d > 1e-3) }' || fail "no-sync drift $diff is not > 1e-3"


# configs/default.json is the built-in default experiment.
run_np 1 train "$SOURCE_DIR/configs/default.json" --quiet --log "$WORK/file.jsonl"
epoch_field eval_loss "$WORK/file.jsonl" > "$WORK/file.loss"
cmp -s "$WORK/file.loss" "$WORK/np1.loss" || fail "configs/default.json differs from the built-in default"
echo "cli equivalence (reduce.algorithm ${REDUCE_ALGORITHM:-default}): np=1,2,4 agree; no-sync drift $diff; configs/default.json matches"

# A log path with a quote and a backslash in it is taken as it is.
odd_dir="$WORK/dir with \"quote\" and \\ backslash"
mkdir -p "$odd_dir"
run_np 1 train --quiet --log "$odd_dir/run.jsonl"
[ -s "$odd_dir/run.jsonl" ] || fail "log path with a quote was not used as given"
