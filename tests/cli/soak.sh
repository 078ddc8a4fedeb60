#!/usr/bin/env bash
# The soak run of scripts/soak.sh, short: 1,000 steps at np=2 with a checkpoint every 50
# steps, RSS and file descriptors sampled every 0.2 s. The same bounds as the long run
# (docs/reliability.md): RSS within 1 MiB after the warm-up, no descriptor leaked, no .tmp left,
# a stale temporary checkpoint file removed and named at start.
set -euo pipefail
CHECKPOINT_EVERY=50 SOAK_SAMPLE_S=0.2 bash "$(dirname "$0")/../../scripts/soak.sh" 250 "$MPIDDP"
