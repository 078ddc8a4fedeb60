#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan), writes their seed
# corpora, and runs each for FUZZ_SECONDS (default 45), one target per core at a time. Any
# finding fails: libFuzzer exits non-zero and leaves the input as
# build-fuzz/findings/<target>/crash-*.
# A unity build with scripts/test-sanitize.sh's flags, so every library object comes out of ccache.
# Usage: scripts/fuzz.sh [TARGET...] ; FUZZ_SECONDS, MPIDDP_FUZZ_BUILD_DIR override.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MPIDDP_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-45}
clang=${CLANGXX:-clang++-14}
command -v "$clang" > /dev/null || { echo "fuzz.sh: $clang not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 1; }

mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$clang" \
  -DMPIDDP_FUZZ=ON -DMPIDDP_BUILD_TESTS=OFF -DCMAKE_UNITY_BUILD=ON > "$build/cmake.log" 2>&1 \
  || { cat "$build/cmake.log" >&2; exit 1; }
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -nE 's/^mpiddp_add_fuzz_target\((fuzz_[a-z0-9_]+).*/\1/p' \
                         "$root/tests/fuzz/CMakeLists.txt")
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
"$root/tests/fuzz/make_seeds.sh" "$build/seeds"

# fuzz_one TARGET: replays the target's past findings, then fuzzes it for $seconds; prints
# its verdict and returns non-zero on a finding. libFuzzer runs on one thread, so the
# targets run side by side, one per core: the same fuzzing time per target in less wall time.
fuzz_one() {
  local target=$1 corpus="$build/corpus/$1" findings="$build/findings/$1" name=${1#fuzz_}
  local dict=() rc=0 runs regressions="$root/tests/fuzz/regressions/$1"
  mkdir -p "$corpus" "$findings"
  [ -f "$root/tests/fuzz/$name.dict" ] && dict=(-dict="$root/tests/fuzz/$name.dict")
  # Every input that once was a finding must stay fixed.
  if [ -d "$regressions" ] && ! "$build/tests/fuzz/$target" "$regressions"/* > "$build/$target.regressions.log" 2>&1; then
    echo "$target: a past finding is back; see $build/$target.regressions.log" >&2
    return 1
  fi
  "$build/tests/fuzz/$target" "$corpus" "$build/seeds/$target" "${dict[@]}" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$findings/" -print_final_stats=1 > "$build/$target.log" 2>&1 || rc=$?
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$build/$target.log")
  if [ "$rc" -ne 0 ]; then
    echo "$target: FINDING after ${runs:-?} executions (exit $rc); see $build/$target.log" >&2
    grep -E "ERROR|runtime error|terminate|==[0-9]+==" "$build/$target.log" | head -n 20 >&2 || true
    return 1
  fi
  echo "$target: ${runs:-?} executions in $seconds s, no finding"
}

status=0
jobs=$(nproc)
pids=()
for target in "${targets[@]}"; do
  fuzz_one "$target" > "$build/$target.verdict" 2>&1 &
  pids+=($!)
  # At most one target per core at a time: wait for the oldest before starting another.
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for target in "${targets[@]}"; do cat "$build/$target.verdict"; done
exit $status
