#!/usr/bin/env bash
# Optional: the plot renders in a real browser. Headless Chromium screenshots the SVG, and
# the PNG must show a drawing: ink on a few percent of the pixels, in several colours (the
# runs' curves), not a blank or error page. Skipped (exit 77) when chromium is not installed
# (scripts/install-deps.sh --with-chromium installs it).
source "$(dirname "$0")/lib.sh"
browser_or_skip

run_np 1 train --quiet --log "$WORK/np1.jsonl"
run_np 2 train --quiet --log "$WORK/np2.jsonl"
"$MPIDDP" plot "$WORK/np1.jsonl" "$WORK/np2.jsonl" -o "$WORK/curves.svg" > /dev/null

read -r width height ink colors < <(render_svg "$WORK/curves.svg" "$WORK/curves.png") || fail "rendering failed"
echo "rendered ${width}x${height}: ink on $ink of the pixels, $colors colours"
[ "$width" -gt 0 ] && [ "$height" -gt 0 ] || fail "empty image"
# Axes, grid, text and curves cover a few percent of a white page; a blank page has none,
# and one colour. Several colours: the two runs' curves and the grid.
awk -v f="$ink" 'BEGIN { exit !(f > 0.01 && f < 0.6) }' || fail "ink fraction $ink: blank or not a plot"
[ "$colors" -ge 4 ] || fail "only $colors colours: no curves drawn"
