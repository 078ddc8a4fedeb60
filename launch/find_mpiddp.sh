# shellcheck shell=bash
# Sourced by launch/mpirun.sh and launch/compare_baseline.sh: default_mpiddp DIR prints the
# mpiddp program that the scripts in DIR run when MPIDDP is not set, the first of
#   DIR/../build/mpiddp        scripts in a source tree: its build (scripts/build.sh)
#   DIR/../../../bin/mpiddp    scripts installed in PREFIX/share/mpiddp/launch: PREFIX/bin/mpiddp
#   mpiddp on PATH
# and, when none is there, the build-tree path, so that the caller's error names it.
default_mpiddp() {
  local candidate
  for candidate in "$1/../build/mpiddp" "$1/../../../bin/mpiddp"; do
    if [ -x "$candidate" ]; then
      echo "$(cd "$(dirname "$candidate")" && pwd)/mpiddp"
      return
    fi
  done
  command -v mpiddp || echo "$1/../build/mpiddp"
}
