#!/usr/bin/env bash
# compute.isa (docs/isa.md): `mpiddp --version` names the levels; the run record's isa names
# what the CPU runs and the level used (the CPU's best under auto); deterministic mode gives the
# same bits at every level this CPU runs, at np 1, 2 and 3, for a model that goes chunk by chunk
# (the exact sums: the grid's conversion, the reduction's sums) and one that takes the chunked
# pass (the grid product); a cap above the CPU, or a name that is no level, is exit 2 naming
# the key. A level this CPU lacks is listed as skipped.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/deterministic_lib.sh"
cd "$SOURCE_DIR"

"$MPIDDP" --version > "$WORK/version.txt"
cat "$WORK/version.txt"
grep -q '^kernels compiled: baseline avx2 avx512 avx512_bf16$' "$WORK/version.txt" || fail "--version: the compiled levels"
cpu_levels=$(sed -n 's/^this CPU runs: *//p' "$WORK/version.txt")
[ -n "$cpu_levels" ] && [ "${cpu_levels%% *}" = baseline ] || fail "--version: the CPU's levels ($cpu_levels)"
best=${cpu_levels##* }

MLP=(--deterministic --set batch.global=48 --set data.train.samples=240)
CHUNKED=(tests/golden/deterministic_chunked.json --set epochs=1)
det_run auto_np1 1 "${MLP[@]}"
# The record: every level the CPU runs, and the best of them used under auto.
python3 - "$WORK/auto_np1.jsonl" "$cpu_levels" "$best" <<'PY' || fail "auto: the run record's isa"
import json, sys
run = next(json.loads(l) for l in open(sys.argv[1]) if '"kind":"run"' in l)
assert run["isa"] == {"cpu": sys.argv[2].split(), "used": sys.argv[3]}, run["isa"]
PY
det_run chunked_auto_np1 1 "${CHUNKED[@]}"
grep -q '"pass":"chunked"' "$WORK/chunked_auto_np1.jsonl" || fail "the chunked model does not take the chunked pass"

for level in baseline avx2 avx512 avx512_bf16 amx; do
  if [[ " $cpu_levels " != *" $level "* ]]; then
    echo "  $level: SKIPPED (compiled; this CPU lacks it)"
    continue
  fi
  for np in 1 2 3; do
    det_run "${level}_np$np" "$np" "${MLP[@]}" --set compute.isa="$level"
    grep -q "\"isa\":{[^}]*\"used\":\"$level\"" "$WORK/${level}_np$np.jsonl" || fail "$level: the record's isa.used"
    same_bits auto_np1 "${level}_np$np"
    det_run "chunked_${level}_np$np" "$np" "${CHUNKED[@]}" --set compute.isa="$level"
    same_bits chunked_auto_np1 "chunked_${level}_np$np"
  done
  echo "  $level: run; the same bits as auto at np 1, 2 and 3 (chunk by chunk and chunked)"
done

# A cap above this CPU: exit 2 before anything runs, naming the key and what the CPU lacks.
above=""
for level in baseline avx2 avx512 avx512_bf16 amx; do
  [[ " $cpu_levels " == *" $level "* ]] || { above=$level; break; }
done
if [ -n "$above" ]; then
  status=0
  run_np 1 train --quiet --set compute.isa="$above" 2> "$WORK/above.err" || status=$?
  [ "$status" -eq 2 ] || { cat "$WORK/above.err"; fail "compute.isa=$above above this CPU: exit $status, not 2"; }
  grep -q "compute.isa: \"$above\" needs .*, which this CPU lacks" "$WORK/above.err" ||
    { cat "$WORK/above.err"; fail "compute.isa=$above: the message"; }
  echo "  compute.isa=$above (above this CPU): exit 2: $(grep -o 'compute.isa.*' "$WORK/above.err" | head -1)"
else
  echo "  a cap above this CPU: SKIPPED (this CPU runs every level)"
fi
status=0
run_np 1 train --quiet --set compute.isa=avx9 2> "$WORK/name.err" || status=$?
[ "$status" -eq 2 ] && grep -q "compute.isa" "$WORK/name.err" ||
  { cat "$WORK/name.err"; fail "compute.isa=avx9: exit $status, not 2 naming the key"; }
echo "isa: levels and caps as expected"
