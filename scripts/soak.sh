#!/usr/bin/env bash
# Soak run: many steps of a small model at np=2 with replica checks, a checkpoint every
# CHECKPOINT_EVERY steps and the flight recorder on (it always is), sampling every rank's
# resident memory (VmRSS) and open file descriptors. Fails when, after the warm-up (until a
# fifth of the checkpoints, at least 2, are written), a rank's RSS rises more than SOAK_RSS_LIMIT_KIB (1024) above its
# value at the end of the warm-up, when a rank has more than 2 file descriptors more than it
# had then (at most a checkpoint file and its directory are open for a moment), when a
# temporary file is left, or when the stale temporary file planted in the checkpoint
# directory before the start is not removed and named.
# Usage: scripts/soak.sh [EPOCHS] [MPIDDP] ; 4 steps per epoch (20,000 steps by default).
# Environment: CHECKPOINT_EVERY (500), SOAK_SAMPLE_S (1), SOAK_RSS_LIMIT_KIB (1024), MPIEXEC.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
epochs=${1:-5000}
MPIDDP=${2:-${MPIDDP:-$root/build/mpiddp}}
MPIEXEC=${MPIEXEC:-mpiexec}
if [ -z "${MPIEXEC_FLAGS+set}" ]; then
  MPIEXEC_FLAGS=""
  if "$MPIEXEC" --version 2>&1 | grep -Eq "Open MPI|OpenRTE"; then
    MPIEXEC_FLAGS="--oversubscribe"
    [ "$(id -u)" -ne 0 ] || MPIEXEC_FLAGS+=" --allow-run-as-root"
  fi
fi
every=${CHECKPOINT_EVERY:-500}
sample_s=${SOAK_SAMPLE_S:-1}
limit_kib=${SOAK_RSS_LIMIT_KIB:-1024}
# WORK (removed at exit), fail, run_np and rank_pids.
source "$root/tests/cli/lib.sh"

ckpt="$WORK/ckpt"
mkdir -p "$ckpt"
# What a run killed while writing a checkpoint leaves, and a file of the user's that looks
# alike but is not one of ours (it must stay).
echo partial > "$ckpt/.step-000000000007.safetensors.tmp"
echo mine > "$ckpt/.notes.tmp"

# The warm-up ends once a fifth of the checkpoints (at least 2) are written: the first ones
# allocate the buffers that later ones reuse.
warm_checkpoints=$(( epochs * 4 / every / 5 ))
[ "$warm_checkpoints" -ge 2 ] || warm_checkpoints=2
start=$(date +%s)
run_np 2 train --quiet --set epochs="$epochs" --set check_every_steps=100 \
  --set log.every_steps=1000 --log "$WORK/soak.jsonl" --set checkpoint.dir="\"$ckpt\"" \
  --set checkpoint.every_steps="$every" > "$WORK/out" 2> "$WORK/err" &
launcher=$!
: > "$WORK/samples"
pids=""
while kill -0 "$launcher" 2> /dev/null; do
  # Found once (the search is slow), so that sampling is quick.
  [ "$(echo "$pids" | wc -w)" -ge 2 ] || pids=$(rank_pids "$launcher")
  written=$(grep -c '"kind":"checkpoint"' "$WORK/soak.jsonl" 2> /dev/null || true)
  warm=0
  [ "${written:-0}" -lt "$warm_checkpoints" ] || warm=1
  for pid in $pids; do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2> /dev/null || true)
    fds=$(ls "/proc/$pid/fd" 2> /dev/null | wc -l || true)
    [ -n "$rss" ] && echo "$pid $rss $fds $warm" >> "$WORK/samples"
  done
  sleep "$sample_s"
done
wait "$launcher" || { cat "$WORK/err"; fail "soak: the run failed"; }
secs=$(( $(date +%s) - start ))
grep -q '"kind":"end".*"replicas_identical":true' "$WORK/soak.jsonl" || fail "soak: no clean end record"
steps=$(sed -nE 's/.*"kind":"end","steps":([0-9]+).*/\1/p' "$WORK/soak.jsonl")
checkpoints=$(grep -c '"kind":"checkpoint"' "$WORK/soak.jsonl")
echo "soak: $steps steps at np=2 in $secs s, $checkpoints checkpoints (every $every steps), replicas identical at every check"

grep -qF "mpiddp: removed 1 stale temporary file of an interrupted checkpoint write from '$ckpt': .step-000000000007.safetensors.tmp" \
  "$WORK/err" || { cat "$WORK/err"; fail "soak: the stale temporary file was not removed and named"; }
[ -e "$ckpt/.notes.tmp" ] || fail "soak: the user's .notes.tmp was removed"
rm "$ckpt/.notes.tmp"
left=$(find "$WORK" -name '*.tmp')
[ -z "$left" ] || fail "soak: temporary files left: $left"
ls "$WORK"/soak.jsonl.flight.* > /dev/null 2>&1 && fail "soak: a healthy run wrote flight files"
echo "  no temporary file left; the stale one was removed at start; $(ls "$ckpt" | wc -l) checkpoints kept"

awk -v limit="$limit_kib" '
  { n[$1]++; rss[$1, n[$1]] = $2; fds[$1, n[$1]] = $3; if ($4 && !($1 in warm_at)) warm_at[$1] = n[$1] }
  END {
    bad = 0
    for (p in n) {
      if (!(p in warm_at) || n[p] - warm_at[p] < 2) {
        printf "  rank pid %s: %d samples, too few after the warm-up (a longer run, or a smaller SOAK_SAMPLE_S)\n", p, n[p]
        bad = 1; continue
      }
      w = warm_at[p]  # the first sample after the warm-up
      # Peaks, not the last sample, which may catch the process while it exits.
      peak = 0; fd_peak = 0
      for (i = w; i <= n[p]; i++) {
        if (rss[p, i] > peak) peak = rss[p, i]
        if (fds[p, i] > fd_peak) fd_peak = fds[p, i]
      }
      growth = peak - rss[p, w]
      printf "  rank pid %s: RSS first %d KiB, after warm-up %d KiB, end %d KiB, peak after warm-up %d KiB (%+d KiB); fds after warm-up %d, peak after %d (%d samples)\n",
             p, rss[p, 1], rss[p, w], rss[p, n[p]], peak, growth, fds[p, w], fd_peak, n[p]
      if (growth > limit) { printf "  FAIL: RSS grew %d KiB after the warm-up, more than %d\n", growth, limit; bad = 1 }
      # +2: a checkpoint being written (its file, then its directory for the fsync) may be
      # open at the moment of a sample; a leak of one per checkpoint or log record is far more.
      if (fd_peak > fds[p, w] + 2) { printf "  FAIL: file descriptors %d -> %d\n", fds[p, w], fd_peak; bad = 1 }
    }
    exit bad }' "$WORK/samples" || fail "soak: memory or file descriptors grew"
