#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# --with-data: Fashion-MNIST, so its smoke test runs instead of skipping (~30 MB package).
"$root/scripts/install-deps.sh" --with-data
"$root/scripts/build.sh"
cd "${MPIDDP_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" --timeout 900
