#!/usr/bin/env bash
# Optional: the plot renders in a real browser. Headless Chromium screenshots the SVG, and
# the PNG must show a drawing: ink on a few percent of the pixels, in several colours (the
# runs' curves), not a blank or error page. Skipped (exit 77) when chromium is not installed
# (scripts/install-deps.sh --with-chromium installs it).
source "$(dirname "$0")/lib.sh"

browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "chromium not installed: skipping the render test"; exit 77; }

run_np 1 train --quiet --log "$WORK/np1.jsonl"
run_np 2 train --quiet --log "$WORK/np2.jsonl"
"$MPIDDP" plot "$WORK/np1.jsonl" "$WORK/np2.jsonl" -o "$WORK/curves.svg" > /dev/null

# The figure's own size, so the screenshot holds all of it and nothing else.
size=$(sed -nE 's/^<svg [^>]*width="([0-9]+)[.0-9]*" height="([0-9]+)[.0-9]*".*/\1,\2/p' "$WORK/curves.svg")
[ -n "$size" ] || fail "no width/height in the SVG"
profile=$(mktemp -d)
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
  --hide-scrollbars --window-size="$size" --screenshot="$WORK/curves.png" \
  "file://$WORK/curves.svg" > "$WORK/chromium.log" 2>&1 || { cat "$WORK/chromium.log" >&2; fail "chromium failed"; }
rm -rf "$profile"
[ -s "$WORK/curves.png" ] || fail "no screenshot written"
read -r width height ink colors < <("$PNG_STATS" "$WORK/curves.png") || fail "png_stats failed"
echo "rendered ${width}x${height}: ink on $ink of the pixels, $colors colours"
[ "$width" -gt 0 ] && [ "$height" -gt 0 ] || fail "empty image"
# Axes, grid, text and curves cover a few percent of a white page; a blank page has none,
# and one colour. Several colours: the two runs' curves and the grid.
awk -v f="$ink" 'BEGIN { exit !(f > 0.01 && f < 0.6) }' || fail "ink fraction $ink: blank or not a plot"
[ "$colors" -ge 4 ] || fail "only $colors colours: no curves drawn"
