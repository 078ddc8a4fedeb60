#!/usr/bin/env bash
# The soak run of scripts/soak.sh, short: 10,000 steps at np=2 with a checkpoint every 100
# steps, RSS and file descriptors sampled every 0.02 s; a run too quick to judge (a fast machine
# runs the 10,000 steps in 1 s) goes again with 4 times the steps. The same bounds as the long run
# (docs/reliability.md): RSS within 1 MiB after the warm-up, no descriptor leaked, no .tmp left,
# a stale temporary checkpoint file removed and named at start.
set -euo pipefail
CHECKPOINT_EVERY=100 SOAK_SAMPLE_S=0.02 bash "$(dirname "$0")/../../scripts/soak.sh" 2500 "$MPIDDP"
