#!/usr/bin/env bash
# Optional: the timeline renders in a real browser. Headless Chromium screenshots the SVG of
# an np=2 trace, and the PNG must show a drawing: ink on a fair part of the pixels, in
# several colours (the span kinds), not a blank or error page. Skipped (exit 77) when
# chromium is not installed (scripts/install-deps.sh --with-chromium installs it).
source "$(dirname "$0")/lib.sh"

browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "chromium not installed: skipping the render test"; exit 77; }

run_np 2 train --quiet --trace "$WORK/trace.json" --set reduce.algorithm=mpi \
  --set reduce.first_bucket_mb=0.004 --set reduce.bucket_cap_mb=0.004
"$MPIDDP" timeline "$WORK/trace.json" -o "$WORK/timeline.svg" > /dev/null

size=$(sed -nE 's/^<svg [^>]*width="([0-9]+)[.0-9]*" height="([0-9]+)[.0-9]*".*/\1,\2/p' "$WORK/timeline.svg")
[ -n "$size" ] || fail "no width/height in the SVG"
profile=$(mktemp -d)
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
  --hide-scrollbars --window-size="$size" --screenshot="$WORK/timeline.png" \
  "file://$WORK/timeline.svg" > "$WORK/chromium.log" 2>&1 || { cat "$WORK/chromium.log" >&2; fail "chromium failed"; }
rm -rf "$profile"
[ -s "$WORK/timeline.png" ] || fail "no screenshot written"
read -r width height ink colors < <("$PNG_STATS" "$WORK/timeline.png") || fail "png_stats failed"
echo "rendered ${width}x${height}: ink on $ink of the pixels, $colors colours"
[ "$width" -gt 0 ] && [ "$height" -gt 0 ] || fail "empty image"
# Rows of bars, labels and the legend cover a fair part of a white page; a blank page has
# none, and one colour. Several colours: the span kinds (at least step, forward, backward,
# the wait, the reduction).
awk -v f="$ink" 'BEGIN { exit !(f > 0.02 && f < 0.8) }' || fail "ink fraction $ink: blank or not a timeline"
[ "$colors" -ge 6 ] || fail "only $colors colours: no spans drawn"
