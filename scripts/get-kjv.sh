#!/usr/bin/env bash
# Writes the King James Bible (Debian's bible-kjv, public domain) as one plain text file for the
# "text" data source: every verse a line, its reference ("Ge1:1 ") stripped. About 4.1 MB of
# ASCII with 63 distinct characters. Installs bible-kjv (install-deps.sh --with-data) when the
# `bible` program is missing. The file is written whole or not at all.
# Usage: scripts/get-kjv.sh [OUT]     (default: data/kjv.txt in the repository)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/data/kjv.txt}
command -v bible >/dev/null || "$root/scripts/install-deps.sh" --with-data
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
bible -f Gen1:1-Rev22:21 </dev/null | sed -E 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //' > "$tmp"
[ -s "$tmp" ] || { echo "get-kjv.sh: bible printed no text" >&2; exit 1; }
mv "$tmp" "$out"
echo "$out: $(wc -c < "$out") bytes"
