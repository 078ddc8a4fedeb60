#!/usr/bin/env bash
# Soak run: many steps of a small model at np=2 with replica checks, sampling every rank's
# resident memory (VmRSS) once a second. Prints the RSS after the first epoch and at the end
# per rank, and fails when the end is more than 5 % above the first sample.
# Usage: scripts/soak.sh [EPOCHS] [MPIDDP] ; 4 steps per epoch (20,000 steps by default).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
epochs=${1:-5000}
mpiddp=${2:-$root/build/mpiddp}
mpiexec=${MPIEXEC:-mpiexec}
flags=()
if "$mpiexec" --version 2>&1 | grep -Eq "Open MPI|OpenRTE"; then
  flags+=(--oversubscribe)
  [ "$(id -u)" -ne 0 ] || flags+=(--allow-run-as-root)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

start=$(date +%s)
"$mpiexec" -n 2 "${flags[@]}" "$mpiddp" train --quiet --set epochs="$epochs" \
  --set check_every_steps=100 --set log.every_steps=1000 --log "$work/soak.jsonl" &
launcher=$!
: > "$work/rss"
while kill -0 "$launcher" 2> /dev/null; do
  for pid in $(pgrep -P "$launcher" || true); do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2> /dev/null || true)
    [ -n "$rss" ] && echo "$pid $(( $(date +%s) - start )) $rss" >> "$work/rss"
  done
  sleep 1
done
wait "$launcher"
grep -q '"kind":"end".*"replicas_identical":true' "$work/soak.jsonl" || { echo "soak: no clean end record" >&2; exit 1; }
steps=$(sed -nE 's/.*"kind":"end","steps":([0-9]+).*/\1/p' "$work/soak.jsonl")
echo "soak: $steps steps at np=2 in $(( $(date +%s) - start )) s, replicas identical at every check"
awk '{ if (!($1 in first)) first[$1] = $3; last[$1] = $3; if ($3 > peak[$1]) peak[$1] = $3; n[$1]++ }
     END { bad = 0
           for (p in first) {
             growth = 100 * (last[p] - first[p]) / first[p]
             printf "  rank pid %s: RSS first %d KiB, end %d KiB, peak %d KiB (%+.1f %%, %d samples)\n",
                    p, first[p], last[p], peak[p], growth, n[p]
             if (growth > 5) bad = 1
           }
           exit bad }' "$work/rss"
