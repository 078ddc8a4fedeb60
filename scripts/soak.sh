#!/usr/bin/env bash
# Soak run: many steps of a small model at np=2 with replica checks, a checkpoint every
# CHECKPOINT_EVERY steps and the flight recorder on (it always is), sampling every rank's
# resident memory (VmRSS) and open file descriptors. Fails when, after the warm-up (until a
# fifth of the checkpoints, at least 2, are written), a rank's RSS rises more than
# SOAK_RSS_LIMIT_KIB (1024) above its value at the end of the warm-up, when a rank has more
# than 2 file descriptors more than it had then (at most a checkpoint file and its directory
# are open for a moment), when a temporary file is left, or when the stale temporary file
# planted in the checkpoint directory before the start is not removed and named.
# A run too quick for SOAK_MIN_SAMPLES (10) samples per rank after the warm-up says nothing
# about growth: it is run again with 4 times the epochs, at most twice.
# Usage: scripts/soak.sh [EPOCHS] [MPIDDP] ; 4 steps per epoch (20,000 steps by default).
# Environment: CHECKPOINT_EVERY (500), SOAK_SAMPLE_S (1), SOAK_RSS_LIMIT_KIB (1024),
# SOAK_MIN_SAMPLES (10), MPIEXEC.
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
min_samples=${SOAK_MIN_SAMPLES:-10}
# WORK (removed at exit), fail, run_np and rank_pids.
source "$root/tests/cli/lib.sh"

# The sampling loop forks nothing (bash builtins only): a fork and exec costs milliseconds,
# and a loop of a few of them sampled a one-second run only 5 or 6 times.
exec {sleep_fd}<> <(:)  # a pipe nobody writes to: `read -t` on it is a sleep without a fork
log_fd=""
log_partial=""
checkpoints_logged=0

# count_new_checkpoints LOG: adds the checkpoint records written to LOG since the last call to
# checkpoints_logged; a record still being written is kept until its newline arrives.
count_new_checkpoints() {
  local chunk
  if [ -z "$log_fd" ]; then
    [ -e "$1" ] || return 0
    exec {log_fd}< "$1"
  fi
  while true; do
    chunk=""
    if IFS= read -r -u "$log_fd" chunk; then
      [[ $log_partial$chunk != *'"kind":"checkpoint"'* ]] || checkpoints_logged=$((checkpoints_logged + 1))
      log_partial=""
    else
      log_partial+=$chunk
      return 0
    fi
  done
}

# sample_rank PID WARM: appends "PID RSS_KIB FDS WARM" to $WORK/samples, nothing once PID exited.
sample_rank() {
  local key value rest rss="" fds
  while read -r key value rest; do
    [ "$key" != VmRSS: ] || { rss=$value; break; }
  done 2> /dev/null < "/proc/$1/status" || return 0
  fds=(/proc/"$1"/fd/*)
  [ -n "$rss" ] && [ -e "${fds[0]}" ] || return 0
  echo "$1 $rss ${#fds[@]} $2" >> "$WORK/samples"
}

# soak_once EPOCHS: plants the temporary files, trains, samples; leaves the log, the samples and
# the run's seconds in secs.
soak_once() {
  rm -rf "$ckpt" "$WORK/soak.jsonl" "$WORK"/soak.jsonl.flight.*
  mkdir -p "$ckpt"
  # What a run killed while writing a checkpoint leaves, and a file of the user's that looks
  # alike but is not one of ours (it must stay).
  echo partial > "$ckpt/.step-000000000007.safetensors.tmp"
  echo mine > "$ckpt/.notes.tmp"
  # The warm-up ends once a fifth of the checkpoints (at least 2) are written: the first ones
  # allocate the buffers that later ones reuse.
  local warm_checkpoints=$(( $1 * 4 / every / 5 )) launcher pids=() pid warm start
  [ "$warm_checkpoints" -ge 2 ] || warm_checkpoints=2
  [ -z "$log_fd" ] || exec {log_fd}<&-
  log_fd="" log_partial="" checkpoints_logged=0
  start=$(date +%s)
  run_np 2 train --quiet --set epochs="$1" --set check_every_steps=100 \
    --set log.every_steps=1000 --log "$WORK/soak.jsonl" --set checkpoint.dir="\"$ckpt\"" \
    --set checkpoint.every_steps="$every" > "$WORK/out" 2> "$WORK/err" &
  launcher=$!
  : > "$WORK/samples"
  while kill -0 "$launcher" 2> /dev/null; do
    # Searched until both are found (the search forks), then only sampled.
    [ "${#pids[@]}" -ge 2 ] || mapfile -t pids < <(rank_pids "$launcher")
    count_new_checkpoints "$WORK/soak.jsonl"
    warm=0
    [ "$checkpoints_logged" -lt "$warm_checkpoints" ] || warm=1
    for pid in "${pids[@]}"; do sample_rank "$pid" "$warm"; done
    read -r -t "$sample_s" -u "$sleep_fd" _ || true
  done
  wait "$launcher" || { cat "$WORK/err"; fail "soak: the run failed"; }
  secs=$(( $(date +%s) - start ))
}

# judge_samples: 0 when no rank grew after the warm-up, 1 when one did, 2 when a rank has too
# few samples after the warm-up to tell.
judge_samples() {
  awk -v limit="$limit_kib" -v min_after="$min_samples" '
    { n[$1]++; rss[$1, n[$1]] = $2; fds[$1, n[$1]] = $3; if ($4 && !($1 in warm_at)) warm_at[$1] = n[$1] }
    END {
      bad = 0; few = 0
      if (length(n) < 2) { printf "  samples of %d ranks, not 2\n", length(n); exit 2 }
      for (p in n) {
        if (!(p in warm_at) || n[p] - warm_at[p] + 1 < min_after) {
          printf "  rank pid %s: %d samples, %d after the warm-up, fewer than %d\n", p, n[p], (p in warm_at) ? n[p] - warm_at[p] + 1 : 0, min_after
          few = 1; continue
        }
        w = warm_at[p]  # the first sample after the warm-up
        # Peaks, not the last sample, which may catch the process while it exits.
        peak = 0; fd_peak = 0
        for (i = w; i <= n[p]; i++) {
          if (rss[p, i] > peak) peak = rss[p, i]
          if (fds[p, i] > fd_peak) fd_peak = fds[p, i]
        }
        growth = peak - rss[p, w]
        printf "  rank pid %s: RSS first %d KiB, after warm-up %d KiB, end %d KiB, peak after warm-up %d KiB (%+d KiB); fds after warm-up %d, peak after %d (%d samples, %d after the warm-up)\n",
               p, rss[p, 1], rss[p, w], rss[p, n[p]], peak, growth, fds[p, w], fd_peak, n[p], n[p] - w + 1
        if (growth > limit) { printf "  FAIL: RSS grew %d KiB after the warm-up, more than %d\n", growth, limit; bad = 1 }
        # +2: a checkpoint being written (its file, then its directory for the fsync) may be
        # open at the moment of a sample; a leak of one per checkpoint or log record is far more.
        if (fd_peak > fds[p, w] + 2) { printf "  FAIL: file descriptors %d -> %d\n", fds[p, w], fd_peak; bad = 1 }
      }
      exit bad ? 1 : few ? 2 : 0 }' "$WORK/samples"
}

ckpt="$WORK/ckpt"
for attempt in 1 2 3; do
  soak_once "$epochs"
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

  verdict=0
  judge_samples || verdict=$?
  [ "$verdict" -ne 1 ] || fail "soak: memory or file descriptors grew"
  [ "$verdict" -ne 0 ] || exit 0
  epochs=$(( epochs * 4 ))
  [ "$attempt" -eq 3 ] || echo "  too quick to judge on this machine: again with $epochs epochs"
done
fail "soak: too few samples after the warm-up even at $(( epochs / 4 )) epochs (a smaller SOAK_SAMPLE_S)"
