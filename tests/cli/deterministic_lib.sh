# Helpers of the deterministic-mode tests (tests/cli/deterministic*.sh). Sourced after lib.sh.

# results LOG: the step, epoch and end records with the wall-clock fields removed: what
# deterministic mode promises to be byte-identical at every world size.
results() {
  grep -E '"kind":"(step|epoch|end)"' "$1" |
    sed -E 's/,"(time_s|samples_per_s)":[-0-9.eE+]+//g'
}

# det_run NAME NP ARGS...: mpiddp train at NP ranks, its log in $WORK/NAME.jsonl; checks
# that the run record says deterministic and the replicas ended identical.
det_run() {
  local name=$1 np=$2; shift 2
  run_np "$np" train --quiet --log "$WORK/$name.jsonl" "$@" ||
    fail "$name: mpiddp train at np=$np failed"
  grep -q '"kind":"run".*"deterministic":{"chunks":' "$WORK/$name.jsonl" ||
    fail "$name: the run record does not say deterministic"
  grep -q '"replicas_identical":true' "$WORK/$name.jsonl" || fail "$name: replicas differ"
}

# same_bits BASE NAME: NAME's results are byte-identical to BASE's, and mpiddp compare says so.
same_bits() {
  if ! cmp -s <(results "$WORK/$1.jsonl") <(results "$WORK/$2.jsonl"); then
    diff <(results "$WORK/$1.jsonl") <(results "$WORK/$2.jsonl") | head -6 >&2
    fail "$2 is not bitwise identical to $1"
  fi
  "$MPIDDP" compare "$WORK/$1.jsonl" "$WORK/$2.jsonl" > "$WORK/compare.txt" ||
    { cat "$WORK/compare.txt" >&2; fail "mpiddp compare $1 $2 did not pass"; }
  grep -q "PASS: bitwise identical" "$WORK/compare.txt" || fail "compare $1 $2: no 'bitwise identical'"
  echo "  $2: bitwise identical to $1"
}
