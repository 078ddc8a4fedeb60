#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "${MPIDDP_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" --timeout 900
