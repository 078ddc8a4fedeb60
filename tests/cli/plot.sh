#!/usr/bin/env bash
# mpiddp plot writes a well-formed SVG with both panels, the legend and axis labels.
source "$(dirname "$0")/lib.sh"

run_np 1 train --quiet --log "$WORK/np1.jsonl"
run_np 2 train --quiet --log "$WORK/np2.jsonl"
"$MPIDDP" plot "$WORK/np1.jsonl" "$WORK/np2.jsonl" -o "$WORK/curves.svg" > "$WORK/out"
grep -q "wrote $WORK/curves.svg (2 runs)" "$WORK/out" || fail "no confirmation"
svg=$WORK/curves.svg
if command -v xmllint > /dev/null; then
  xmllint --noout "$svg" || fail "not well-formed XML"
else
  echo "xmllint not installed (libxml2-utils): skipping the XML parse" >&2
fi
for part in '<svg xmlns="http://www.w3.org/2000/svg"' '<g id="loss-panel">' '<g id="diff-panel">' \
            '<g id="legend">' '>optimizer step</text>' ">np=1  " ">np=2  " '(log scale)</text>'; do
  grep -qF -- "$part" "$svg" || fail "the SVG lacks $part"
done
# 2 step curves + 2 epoch curves + 1 difference curve; 4 epoch markers per run.
[ "$(grep -c '<polyline' "$svg")" -eq 5 ] || fail "expected 5 curves"
[ "$(grep -c '<circle' "$svg")" -eq 8 ] || fail "expected 8 epoch markers"

# One log: only the loss panel.
"$MPIDDP" plot "$WORK/np1.jsonl" -o "$WORK/one.svg" > /dev/null
grep -q 'diff-panel' "$WORK/one.svg" && fail "one log should have no difference panel"

# Errors: no output name (2), a log that is not one (3), an unwritable output (8).
code=0; "$MPIDDP" plot "$WORK/np1.jsonl" 2> "$WORK/err" || code=$?
[ "$code" -eq 2 ] || fail "no -o: exit $code, expected 2"
code=0; "$MPIDDP" plot "$SOURCE_DIR/configs/default.json" -o "$WORK/x.svg" 2> "$WORK/err" || code=$?
[ "$code" -eq 3 ] && grep -q "not an mpiddp run log" "$WORK/err" || fail "a config as log: exit $code"
code=0; "$MPIDDP" plot "$WORK/np1.jsonl" -o "$WORK/no/such/dir/x.svg" 2> "$WORK/err" || code=$?
[ "$code" -eq 8 ] && grep -q "cannot create" "$WORK/err" || fail "unwritable output: exit $code"
echo "cli plot: well-formed SVG with both panels"
