#!/usr/bin/env bash
# Optional: the timeline renders in a real browser. Headless Chromium screenshots the SVG of
# an np=2 trace, and the PNG must show a drawing: ink on a fair part of the pixels, in
# several colours (the span kinds), not a blank or error page. Skipped (exit 77) when
# chromium is not installed (scripts/install-deps.sh --with-chromium installs it).
source "$(dirname "$0")/lib.sh"
browser_or_skip

run_np 2 train --quiet --trace "$WORK/trace.json" --set reduce.algorithm=mpi \
  --set reduce.first_bucket_mb=0.004 --set reduce.bucket_cap_mb=0.004
"$MPIDDP" timeline "$WORK/trace.json" -o "$WORK/timeline.svg" > /dev/null

read -r width height ink colors < <(render_svg "$WORK/timeline.svg" "$WORK/timeline.png") || fail "rendering failed"
echo "rendered ${width}x${height}: ink on $ink of the pixels, $colors colours"
[ "$width" -gt 0 ] && [ "$height" -gt 0 ] || fail "empty image"
# Rows of bars, labels and the legend cover a fair part of a white page; a blank page has
# none, and one colour. Several colours: the span kinds (at least step, forward, backward,
# the wait, the reduction) and their anti-aliased edges.
awk -v f="$ink" 'BEGIN { exit !(f > 0.05 && f < 0.8) }' || fail "ink fraction $ink: blank or not a timeline"
[ "$colors" -ge 6 ] || fail "only $colors colours: no spans drawn"
