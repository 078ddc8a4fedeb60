#!/usr/bin/env bash
# launch/mpirun.sh prints the exact command and passes arguments through unchanged;
# launch/compare_baseline.sh on configs/default.json at N=2 passes, writes both logs, the
# comparison and the plot, and exits with compare's code.
source "$(dirname "$0")/lib.sh"
export MPIDDP  # the scripts' mpiddp: the one under test
export MPIRUN="${MPIRUN:-$MPIEXEC}"  # and the launcher of its MPI (mpiexec.mpich in an MPICH build)
launch=$SOURCE_DIR/launch

# An argument with a space reaches mpiddp intact, and the printed command says so.
mkdir -p "$WORK/with space"
"$launch/mpirun.sh" 2 "$SOURCE_DIR/configs/default.json" --quiet --log "$WORK/with space/np2.jsonl" \
  --set epochs=1 2> "$WORK/err" > "$WORK/out" || { cat "$WORK/err" >&2; fail "mpirun.sh failed"; }
grep -q '"kind":"run","world_size":2,"launcher":"mpirun"' "$WORK/with space/np2.jsonl" || fail "no np=2 log"
grep -qF "running: OMP_NUM_THREADS=1 " "$WORK/err" || fail "no command printed"
grep -qF -- "-np 2 " "$WORK/err" || fail "printed command lacks -np 2"
grep -qF -- "--log $WORK/with\\ space/np2.jsonl --set epochs=1" "$WORK/err" || fail "arguments not passed through quoted"
# Root flags only as root; --oversubscribe only beyond the cores.
version=$("${MPIRUN:-mpirun}" --version 2>&1 || true)
if [[ "$version" == *"Open MPI"* ]]; then
  if [ "$(id -u)" -eq 0 ]; then grep -qF -- "--allow-run-as-root" "$WORK/err" || fail "root without --allow-run-as-root"
  else grep -qF -- "--allow-run-as-root" "$WORK/err" && fail "--allow-run-as-root while not root"; fi
  cores=$(env -u OMP_NUM_THREADS nproc)
  if [ "$cores" -ge 2 ]; then grep -qF -- "--oversubscribe" "$WORK/err" && fail "--oversubscribe for 2 ranks on $cores cores"; fi
  "$launch/mpirun.sh" $((cores + 1)) default --quiet --set batch.global=$((8 * (cores + 1))) --set epochs=1 2> "$WORK/err" > /dev/null \
    || { cat "$WORK/err" >&2; fail "mpirun.sh with more ranks than cores failed"; }
  grep -qF -- "--oversubscribe" "$WORK/err" || fail "no --oversubscribe for $((cores + 1)) ranks on $cores cores"
fi
code=0; "$launch/mpirun.sh" 2 "$WORK/none.json" 2> "$WORK/err" || code=$?
[ "$code" -eq 2 ] && grep -q "cannot read the config" "$WORK/err" || fail "missing config: exit $code"
code=0; "$launch/mpirun.sh" two default 2> "$WORK/err" || code=$?
[ "$code" -eq 2 ] || fail "N=two: exit $code"

# mpiddp --help names the scripts and configs; a build tree's are the source tree's.
"$MPIDDP" --help > "$WORK/help.txt"
grep -qxF "launch scripts: $SOURCE_DIR/launch" "$WORK/help.txt" || fail "--help does not name $SOURCE_DIR/launch"
grep -qxF "configs:        $SOURCE_DIR/configs" "$WORK/help.txt" || fail "--help does not name $SOURCE_DIR/configs"

# The one-command check: default config at np=1 and np=2.
RUN_DIR="$WORK/run" "$launch/compare_baseline.sh" "$SOURCE_DIR/configs/default.json" 2 > "$WORK/cb.txt" 2>&1 \
  || { cat "$WORK/cb.txt" >&2; fail "compare_baseline.sh did not pass"; }
for f in np1.jsonl np2.jsonl np1.txt np2.txt compare.txt curves.svg; do
  [ -s "$WORK/run/$f" ] || fail "compare_baseline.sh did not write $f"
done
grep -q "^PASS: " "$WORK/run/compare.txt" || fail "no passing verdict"
grep -q '<g id="diff-panel">' "$WORK/run/curves.svg" || fail "plot lacks the difference panel"

# Its exit code is compare's: a tolerance of 0 fails (float32 np=1 and np=2 differ in the
# last bits), and a config that cannot run at np=3 is exit 2.
code=0; RUN_DIR="$WORK/strict" COMPARE_ARGS="--rtol 0 --atol 0" "$launch/compare_baseline.sh" default 2 \
  > "$WORK/strict.txt" 2>&1 || code=$?
[ "$code" -eq 1 ] || { cat "$WORK/strict.txt" >&2; fail "tolerance 0: exit $code, expected 1"; }
code=0; RUN_DIR="$WORK/np3" "$launch/compare_baseline.sh" default 3 > "$WORK/np3.txt" 2>&1 || code=$?
[ "$code" -eq 2 ] && grep -q "the np=3 run failed" "$WORK/np3.txt" || fail "np=3 (64 not divisible): exit $code"
echo "cli launch: mpirun.sh and compare_baseline.sh behave"
