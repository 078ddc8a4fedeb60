#!/usr/bin/env bash
# tests/golden/deterministic.json: the param_checksum and final loss (the last step
# record's loss) of the default experiment, of a small CNN and of a relu MLP that takes the
# chunked pass (the grid product), in deterministic mode, as the portable build (baseline
# x86-64-v3, MPIDDP_NATIVE=OFF, the default) computes them on any CPU with AVX2 and FMA, at
# any instruction-set level (docs/isa.md), checked at the file's world size and at another
# one. A -march=native build computes other bits (Eigen's own code at the CPU's vector width),
# so it skips (77). MPIDDP_GOLDEN_WRITE=1 prints the figures of this build as the file's JSON
# instead (how the file was made).
source "$(dirname "$0")/lib.sh"
golden="$SOURCE_DIR/tests/golden/deterministic.json"
if [ "${MPIDDP_NATIVE:-OFF}" != OFF ]; then
  echo "skipped: tests/golden/deterministic.json holds the portable build's bits; this build is" \
       "-march=native (MPIDDP_NATIVE=${MPIDDP_NATIVE}); build with the default -DMPIDDP_NATIVE=OFF"
  exit 77
fi
cd "$SOURCE_DIR"  # the args name files relative to the repository

# figures LOG: "CHECKSUM LOSS" of a run's end record and last step record.
figures() {
  python3 - "$1" <<'PY'
import json, sys
checksum = loss = None
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["kind"] == "step": loss = r["loss"]
    if r["kind"] == "end": checksum = r["param_checksum"]
print(checksum, repr(loss))
PY
}
field() { python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))[sys.argv[2]]; v=c[sys.argv[3]]; print("\n".join(v) if isinstance(v, list) else (repr(v) if isinstance(v, float) else v))' "$golden" "$1" "$2"; }

for name in default cnn chunked; do
  mapfile -t args < <(field "$name" args)
  np=$(field "$name" np)
  other=$((np == 1 ? 3 : 1))
  for n in "$np" "$other"; do
    run_np "$n" train --quiet "${args[@]}" --log "$WORK/$name.np$n.jsonl" || fail "$name at np=$n failed"
    read -r checksum loss <<< "$(figures "$WORK/$name.np$n.jsonl")"
    if [ "${MPIDDP_GOLDEN_WRITE:-0}" = 1 ]; then
      echo "$name np=$n: \"param_checksum\": \"$checksum\", \"final_loss\": $loss"
      continue
    fi
    [ "$checksum" = "$(field "$name" param_checksum)" ] ||
      fail "$name at np=$n: param_checksum $checksum, golden $(field "$name" param_checksum) (see docs/design.md: what changes the bits)"
    [ "$loss" = "$(field "$name" final_loss)" ] ||
      fail "$name at np=$n: final loss $loss, golden $(field "$name" final_loss)"
    echo "  $name at np=$n: param_checksum $checksum, final loss $loss: as golden"
  done
done
[ "${MPIDDP_GOLDEN_WRITE:-0}" = 1 ] && exit 0
echo "deterministic golden: default, cnn and chunked match tests/golden/deterministic.json at two world sizes"
