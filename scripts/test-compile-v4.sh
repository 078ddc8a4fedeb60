#!/usr/bin/env bash
# Compile-only: the MPIDDP_NATIVE=ON configuration at -march=x86-64-v4, what an AVX-512 host's
# native build compiles (AVX-512 F, BW, CD, DQ, VL on everything, Eigen's AVX-512 code
# included), built on whatever host runs it, in build-v4/. Nothing is run: an AVX2 host could
# not. The library, the program and the benchmarks are compiled, at -O0: a compile error (an
# undeclared name, a target-attribute mismatch in an inlined intrinsic) is the front end's and
# shows at any level, and -O0 compiles fastest (cold on 2 cores of a Zen 5: 365 s at -O0, 471 s
# at -O3; ccache keeps what did not change). The tests hold no code that depends on the instruction set,
# so they stay out, to keep the stage cheap.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MPIDDP_V4_BUILD_DIR:-$root/build-v4}
mkdir -p "$build"
# A build type of its own: CMakeLists.txt fixes Release's flags at -O3.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=CompileOnly -DCMAKE_CXX_FLAGS_COMPILEONLY="-O0 -DNDEBUG" \
  -DMPIDDP_NATIVE=ON -DMPIDDP_NATIVE_ARCH=x86-64-v4 -DMPIDDP_BUILD_TESTS=OFF > "$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
start=$SECONDS
cmake --build "$build" -j "$(nproc)" > "$build/build.log" 2>&1 ||
  { grep -E "error|Error" "$build/build.log" | head -40 >&2; echo "compile-v4: the x86-64-v4 build failed; see $build/build.log" >&2; exit 1; }
echo "compile-v4: the MPIDDP_NATIVE=ON build at -march=x86-64-v4 compiled in $((SECONDS - start)) s (not run)"
