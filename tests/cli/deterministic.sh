#!/usr/bin/env bash
# Deterministic mode on the MLP (the default experiment at a global batch of 48, 240 samples):
# byte-identical step, epoch and end records (times aside) at np 1, 2, 3, 4, 6 and 8, on
# the mpi, shm and two-level paths, with reduce.overlap on and off, accumulate_steps and 2
# threads per rank, with each matrix-product library, and with an epoch whose last step is
# shorter; mpiddp compare demands exact equality; the config errors.
# The matrix is not a full cross product: every np on the default path, every path at np 4
# and 6, so that the oversubscribed runs stay few (about a second each on 2 cores).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/deterministic_lib.sh"
MLP=(--deterministic --set batch.global=48 --set data.train.samples=240 --set epochs=2)

det_run np1 1 "${MLP[@]}"
[ "$(grep -c '"kind":"step"' "$WORK/np1.jsonl")" -eq 10 ] || fail "np1: expected 10 step records"
# tanh rounds otherwise in vector and scalar code: this model goes chunk by chunk.
grep -q '"deterministic":{"chunks":24,"pass":"chunk_by_chunk"}' "$WORK/np1.jsonl" ||
  fail "np1: the run record does not say chunk by chunk"
same_bits_everywhere "${MLP[@]}"
# A library named in compute.gemm (auto is Eigen for a model that goes chunk by chunk): its own bits, the
# same at np 1, 3 and 8 (one thread and the same shapes at every N). One not built in skips.
for lib in openblas blis onednn; do
  library_np1 "$lib" "${MLP[@]}" || continue
  grep -q "\"gemm\":{[^}]*\"backend\":\"$lib\"" "$WORK/${lib}_np1.jsonl" || fail "$lib: the run record names another library"
  for np in 3 8; do
    det_run "${lib}_np$np" "$np" "${MLP[@]}" --set compute.gemm=$lib
    same_bits "${lib}_np1" "${lib}_np$np"
  done
done
# An epoch that ends with a shorter step (264 samples: five steps of 48, then one of 24, whose
# chunks hold one sample each): the same bits at np 1, 3 and 8. (Setting this up once
# dereferenced a moved-from pointer, a crash whenever the epoch did not divide the batch.)
SHORT=("${MLP[@]}" --set data.train.samples=264)
det_run short_np1 1 "${SHORT[@]}"
[ "$(grep -c '"kind":"step"' "$WORK/short_np1.jsonl")" -eq 12 ] || fail "short_np1: expected 12 step records"
for np in 3 8; do
  det_run "short_np$np" "$np" "${SHORT[@]}"
  same_bits short_np1 "short_np$np"
done
# The object form, with other chunks: the same bits at np 1 and 4, other bits than 24 chunks.
det_run chunks48_np1 1 "${MLP[@]}" --set 'deterministic={"chunks":48}'
det_run chunks48_np4 4 "${MLP[@]}" --set deterministic.chunks=48
same_bits chunks48_np1 chunks48_np4
! cmp -s <(results "$WORK/np1.jsonl") <(results "$WORK/chunks48_np1.jsonl") ||
  fail "48 chunks gave the same bits as 24: is the setting used?"
grep -q '"deterministic":{"chunks":48,' "$WORK/chunks48_np4.jsonl" || fail "chunks 48 not logged"

# compare: one changed bit of one step's loss is named, record and field.
python3 - "$WORK/np2.jsonl" "$WORK/flipped.jsonl" <<'PY'
import json, struct, sys
out = []
done = False
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["kind"] == "step" and r["step"] == 3 and not done:
        bits = struct.unpack("<q", struct.pack("<d", r["loss"]))[0] ^ 1
        r["loss"] = struct.unpack("<d", struct.pack("<q", bits))[0]
        done = True
    out.append(json.dumps(r, separators=(",", ":")))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
rc=0
"$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/flipped.jsonl" > "$WORK/flip.txt" || rc=$?
[ "$rc" -eq 1 ] || { cat "$WORK/flip.txt"; fail "compare of a flipped bit: exit $rc, expected 1"; }
grep -q "FAIL: not bitwise identical: first difference at step record 3 (epoch 1, step 3), field loss" \
  "$WORK/flip.txt" || { cat "$WORK/flip.txt"; fail "compare does not name the flipped record and field"; }
# An explicit tolerance is still honoured, and then the bit is within it.
"$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/flipped.jsonl" --rtol 1e-12 > /dev/null ||
  fail "compare --rtol 1e-12 of a flipped last bit"
# The JSON form says so too.
"$MPIDDP" compare "$WORK/np1.jsonl" "$WORK/np4.jsonl" --json | grep -q '"bitwise_identical":true' ||
  fail "compare --json lacks bitwise_identical"
echo "deterministic: np 1 2 3 4 6 8, mpi/shm/two-level, overlap on/off, accumulate, threads: bitwise identical"

# Config errors: exit 2, naming the key and the numbers.
expect_config_error() {
  local np=$1; shift
  local want=("${@:1:3}"); shift 3
  local rc=0
  timeout 60 "$MPIEXEC" -n "$np" $MPIEXEC_FLAGS "$MPIDDP" train --quiet "$@" > /dev/null 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] || { cat "$WORK/err"; fail "'$*' at np=$np: exit code $rc, expected 2"; }
  for w in "${want[@]}"; do
    grep -qF -- "$w" "$WORK/err" || { cat "$WORK/err"; fail "'$*': message lacks '$w'"; }
  done
}
expect_config_error 1 "deterministic.chunks" "global batch 64" "deterministic.chunks 24" --deterministic
expect_config_error 3 "deterministic.chunks" "chunks 16" "world size 3" "${MLP[@]}" --set deterministic.chunks=16
expect_config_error 2 "accumulate_steps" "accumulate_steps 5" "12 chunks per rank" "${MLP[@]}" --set accumulate_steps=5
expect_config_error 1 "deterministic.chunks" "250 training samples" "chunks 24" "${MLP[@]}" --set data.train.samples=250
expect_config_error 1 "deterministic" "expected true, false or an object" "got \"yes\"" --set deterministic=yes
expect_config_error 1 "deterministic.chunks" "expected" "chunks" "${MLP[@]}" --set deterministic.chunks=0
expect_config_error 1 "deterministic" "needs batch.global" "batch.per_rank" --deterministic --set 'batch={"per_rank":8}'
echo "deterministic: config errors name the key and the numbers"
