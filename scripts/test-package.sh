#!/usr/bin/env bash
# The install and the Debian packages, end to end, from the already built build directory
# (docs/library.md, docs/launching.md):
#   1. cmake --install into a temporary prefix: the installed headers include only installed
#      headers and compile against the CMake package alone; find_package's version rule and
#      COMPONENTS core; mpiddp --help and launch/mpirun.sh from the prefix find their files;
#   2. examples/custom_layer built against that prefix, and its tests run (swish's gradient
#      check, training at np=1 and np=2, loss falls, np=2 matches np=1 by mpiddp compare);
#   3. cpack -G DEB; both packages installed with apt-get; mpirun -np 2 mpiddp train and
#      mpiddp compare from /usr/bin; the example configured against /usr; apt-get purge; gone.
# Step 3 needs root (or sudo) and apt-get; without them it is skipped with a message.
# The machine is left as it was found, also on failure: the packages this script installed,
# and the dependencies apt-get pulled in for them, are purged by the exit trap.
# If an mpiddp package is installed already, the script stops and says so (it would replace
# it and could not put it back); MPIDDP_PACKAGE_REPLACE=1 purges it and goes on.
# Usage: scripts/test-package.sh ; MPIDDP_BUILD_DIR overrides the build directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${MPIDDP_BUILD_DIR:-$root/build}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpiddp-package.XXXXXX")
prefix=$tmp/prefix
say() { echo "test-package.sh: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
# step NAME: prints how long the previous step took, so a slow one shows.
step_name="" step_start=$SECONDS
step() {
  if [ -n "$step_name" ]; then say "$step_name took $((SECONDS - step_start)) s"; fi
  step_name=$1 step_start=$SECONDS
}

# Open MPI as root (CI), and more ranks than cores on a small runner.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1

sudo_cmd=()
if [ "$(id -u)" -ne 0 ] && command -v sudo > /dev/null && sudo -n true 2> /dev/null; then sudo_cmd=(sudo -n); fi
apt_get() {
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -y -q "$@"
}
installed_packages() { dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" {print $2}' | sort; }
is_installed() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2> /dev/null | grep -q '^ii'; }

# What this script installed, and must purge on the way out: our packages and the
# dependencies apt-get added for them.
to_purge=()
cleanup() {
  local code=$?
  trap - EXIT INT TERM
  local left=()
  for p in "${to_purge[@]}"; do if is_installed "$p"; then left+=("$p"); fi; done
  if [ ${#left[@]} -gt 0 ]; then
    say "cleaning up: purging ${left[*]}"
    apt_get purge "${left[@]}" > "$tmp/cleanup-purge.log" 2>&1 || { cat "$tmp/cleanup-purge.log" >&2; code=1; }
  fi
  rm -rf "$tmp"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

version=$("$build/mpiddp" --version | awk 'NR == 1 {print $2}')
[ -n "$version" ] || fail "no version from $build/mpiddp --version"

# Step 3 needs to install packages; an mpiddp package already installed is said at once.
deb_check=1
if [ "$(id -u)" -ne 0 ] && [ ${#sudo_cmd[@]} -eq 0 ]; then
  say "the .deb check will be skipped: it installs packages, which needs root or sudo"; deb_check=0
elif ! command -v apt-get > /dev/null || ! command -v dpkg-shlibdeps > /dev/null; then
  say "the .deb check will be skipped: it needs apt-get and dpkg-shlibdeps (dpkg-dev)"; deb_check=0
fi
for p in mpiddp mpiddp-dev; do
  if [ "$deb_check" = 1 ] && is_installed "$p"; then
    old=$(dpkg-query -W -f='${Version}' "$p")
    if [ "${MPIDDP_PACKAGE_REPLACE:-0}" != 1 ]; then
      fail "package $p $old is installed already (by hand, or by a run of this script that was killed); remove it (apt-get purge $p) or set MPIDDP_PACKAGE_REPLACE=1 to let this script purge it"
    fi
    say "package $p $old is installed already; MPIDDP_PACKAGE_REPLACE=1: purging it (it is not put back)"
    apt_get purge "$p" > "$tmp/purge-old.log" 2>&1 || { cat "$tmp/purge-old.log" >&2; fail "could not purge $p"; }
  fi
done

# --- 1. install into a prefix ---------------------------------------------------------------
step install
cmake --build "$build" --target mpiddp > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; fail "build"; }
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" || fail "cmake --install"
for f in bin/mpiddp share/mpiddp/launch/mpirun.sh share/mpiddp/launch/slurm.sbatch \
         share/mpiddp/launch/compare_baseline.sh share/mpiddp/launch/local-slurm/start.sh \
         share/mpiddp/configs/default.json include/mpiddp/nn/layer_registry.hpp \
         include/mpiddp/tools/train_command.hpp lib/libmpiddp_core.a lib/libmpiddp_mpi.a \
         lib/cmake/mpiddp/mpiddp-config.cmake lib/cmake/mpiddp/mpiddp-config-version.cmake; do
  [ -e "$prefix/$f" ] || fail "cmake --install did not install $f"
done
[ -x "$prefix/share/mpiddp/launch/mpirun.sh" ] || fail "launch/mpirun.sh installed without its x bit"

step headers
# Every quoted include of an installed header names an installed header; every <...> one is
# the standard library's, the C library's or a dependency's (Eigen, nlohmann_json).
while IFS= read -r header; do
  while IFS= read -r line; do
    if [[ "$line" =~ ^#include\ \"([^\"]+)\" ]]; then
      [ -f "$prefix/include/${BASH_REMATCH[1]}" ] || fail "$header includes \"${BASH_REMATCH[1]}\", which is not installed"
    elif [[ "$line" =~ ^#include\ \<([^\>]+)\> ]]; then
      [[ "${BASH_REMATCH[1]}" =~ ^([a-z_0-9]+|[a-z_0-9]+\.h|Eigen/.*|nlohmann/.*)$ ]] ||
        fail "$header includes <${BASH_REMATCH[1]}>, neither standard nor a dependency's"
    fi
  done < <(grep -E '^#include' "$header")
done < <(find "$prefix/include" -name '*.hpp' | sort)
# And they compile with nothing but the package: one file including them all. The same
# project checks the package's version rule (Note [0.x versions] in cmake/package.cmake) and
# that COMPONENTS core loads no MPI.
mkdir -p "$tmp/headers"
(cd "$prefix/include" && find mpiddp -name '*.hpp' | sort | sed 's/.*/#include <&>/') > "$tmp/headers/all.cpp"
cat > "$tmp/headers/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(mpiddp_headers LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(mpiddp 0.3 QUIET)
if(mpiddp_FOUND)
  message(FATAL_ERROR "find_package(mpiddp 0.3) accepted mpiddp ${version}")
endif()
find_package(mpiddp 0.1 QUIET)
if(mpiddp_FOUND)
  message(FATAL_ERROR "find_package(mpiddp 0.1) accepted mpiddp ${version}")
endif()
find_package(mpiddp 0.2 REQUIRED COMPONENTS core)
if(TARGET mpiddp::mpi OR TARGET MPI::MPI_CXX)
  message(FATAL_ERROR "find_package(mpiddp COMPONENTS core) loaded MPI")
endif()
find_package(mpiddp ${version} EXACT REQUIRED)
add_library(all_headers OBJECT all.cpp)
target_link_libraries(all_headers PRIVATE mpiddp::mpi)
CMAKE
cmake -S "$tmp/headers" -B "$tmp/headers/build" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/headers.log" 2>&1 \
  || { cat "$tmp/headers.log" >&2; fail "the header check project did not configure"; }
cmake --build "$tmp/headers/build" > "$tmp/headers-build.log" 2>&1 \
  || { cat "$tmp/headers-build.log" >&2; fail "the installed headers do not compile against the package"; }
say "$(wc -l < "$tmp/headers/all.cpp") installed headers include only installed headers and compile"

step launch
# The installed program names its installed data directories; the installed mpirun.sh runs
# the installed program (not build/mpiddp, not one on PATH).
"$prefix/bin/mpiddp" --help > "$tmp/help.txt"
grep -qxF "launch scripts: $prefix/share/mpiddp/launch" "$tmp/help.txt" || { cat "$tmp/help.txt" >&2; fail "--help does not name $prefix/share/mpiddp/launch"; }
grep -qxF "configs:        $prefix/share/mpiddp/configs" "$tmp/help.txt" || fail "--help does not name $prefix/share/mpiddp/configs"
(unset MPIDDP; cd "$tmp" && "$prefix/share/mpiddp/launch/mpirun.sh" 2 "$prefix/share/mpiddp/configs/default.json" \
  --quiet --set epochs=1 --log "$tmp/launch.jsonl") > /dev/null 2> "$tmp/launch.txt" \
  || { cat "$tmp/launch.txt" >&2; fail "the installed launch/mpirun.sh failed"; }
grep -qF " $prefix/bin/mpiddp train " "$tmp/launch.txt" || { cat "$tmp/launch.txt" >&2; fail "the installed mpirun.sh did not run $prefix/bin/mpiddp"; }

# --- 2. the example against the prefix ------------------------------------------------------
step example
example=$tmp/example
cmake -S "$root/examples/custom_layer" -B "$example" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/example.log" 2>&1 \
  || { cat "$tmp/example.log" >&2; fail "examples/custom_layer did not configure against $prefix"; }
cmake --build "$example" -j "$(nproc)" > "$tmp/example-build.log" 2>&1 \
  || { cat "$tmp/example-build.log" >&2; fail "examples/custom_layer did not build"; }
(cd "$example" && ctest --output-on-failure) > "$tmp/example-test.log" 2>&1 \
  || { cat "$tmp/example-test.log" >&2; fail "examples/custom_layer's tests failed"; }
grep "tests passed" "$tmp/example-test.log" >&2 || true
"$example/swish_gradient_check" >&2  # again, for its figures in the log (milliseconds)

# --- 3. the Debian packages -----------------------------------------------------------------
if [ "$deb_check" != 1 ]; then
  step ""; say "OK: installed to a prefix, example built and run against it; the .deb check was skipped (see above)"
  exit 0
fi
step cpack
# cpack first runs the build's "preinstall" target, which builds everything (tests too) that
# is not built yet: nothing, after scripts/build.sh.
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/deb" > "$tmp/cpack.log" 2>&1 || { cat "$tmp/cpack.log" >&2; fail "cpack -G DEB"; }
arch=$(dpkg --print-architecture)
deb=$tmp/deb/mpiddp_${version}_${arch}.deb
dev_deb=$tmp/deb/mpiddp-dev_${version}_${arch}.deb
[ -f "$deb" ] && [ -f "$dev_deb" ] || { ls "$tmp/deb" >&2; fail "cpack made no mpiddp_${version}_${arch}.deb and mpiddp-dev_${version}_${arch}.deb"; }
depends=$(dpkg-deb -f "$deb" Depends)
say "mpiddp Depends: $depends"
for need in libopenmpi3 libgomp1 zlib1g libstdc++6 libc6 openmpi-bin; do
  [[ ", $depends," == *", $need"[\ ,]* ]] || fail "mpiddp's Depends lacks $need: $depends"
done
dev_depends=$(dpkg-deb -f "$dev_deb" Depends)
[[ "$dev_depends" == *"mpiddp (= $version)"* ]] || fail "mpiddp-dev does not depend on mpiddp (= $version): $dev_depends"
# (Listings are matched whole: `dpkg-deb -c | grep -q` fails under pipefail when grep exits early.)
contents=$(dpkg-deb -c "$deb")
dev_contents=$(dpkg-deb -c "$dev_deb")
[[ "$contents" == *" ./usr/bin/mpiddp"* && "$contents" == *" ./usr/share/mpiddp/launch/mpirun.sh"* ]] ||
  fail "mpiddp lacks /usr/bin/mpiddp or /usr/share/mpiddp/launch/mpirun.sh"
[[ "$contents" == *"/usr/include/"* ]] && fail "the runtime package holds headers"
[[ "$dev_contents" == *" ./usr/lib/cmake/mpiddp/mpiddp-config.cmake"* ]] || fail "mpiddp-dev lacks the CMake package"

step apt-install
before=$tmp/packages-before
installed_packages > "$before"
to_purge=(mpiddp-dev mpiddp)
# apt-get wants a path with a slash to take a file; the packages' dependencies come from the
# archive (installed already in CI: scripts/install-deps.sh).
(cd "$tmp/deb" && apt_get install "./$(basename "$deb")" "./$(basename "$dev_deb")") > "$tmp/apt-install.log" 2>&1 \
  || { cat "$tmp/apt-install.log" >&2; fail "apt-get install ./mpiddp_*.deb"; }
# The dependencies apt-get added for them go again with them.
mapfile -t added < <(comm -13 "$before" <(installed_packages) | grep -vxE 'mpiddp|mpiddp-dev' || true)
if [ ${#added[@]} -gt 0 ]; then say "apt-get also installed ${added[*]}; they are purged at the end"; to_purge+=("${added[@]}"); fi

step apt-run
[ "$(command -v mpiddp)" = /usr/bin/mpiddp ] || fail "mpiddp on PATH is '$(command -v mpiddp || true)', not /usr/bin/mpiddp"
[ "$(mpiddp --version | head -n 1)" = "mpiddp $version" ] || fail "/usr/bin/mpiddp --version: $(mpiddp --version)"
# The package is the portable build: its baseline, and our kernels at every level (docs/isa.md).
mpiddp --version | grep -q '^built for: *x86-64-v3 ' || fail "/usr/bin/mpiddp is not the portable x86-64-v3 build: $(mpiddp --version)"
mpiddp --version | grep -q '^kernels compiled: baseline avx2 avx512 avx512_bf16$' || fail "/usr/bin/mpiddp: kernels not compiled at every level"
mpiddp --help | grep -qxF "launch scripts: /usr/share/mpiddp/launch" || fail "/usr/bin/mpiddp --help does not name /usr/share/mpiddp/launch"
mkdir -p "$tmp/run"
cd "$tmp/run"
config=/usr/share/mpiddp/configs/default.json
mpiddp train "$config" --quiet --log np1.jsonl > np1.txt 2>&1 || { cat np1.txt >&2; fail "/usr/bin/mpiddp train"; }
mpirun -np 2 --oversubscribe mpiddp train "$config" --quiet --log np2.jsonl > np2.txt 2>&1 \
  || { cat np2.txt >&2; fail "mpirun -np 2 mpiddp train"; }
grep -q '"kind":"run","world_size":2' np2.jsonl || fail "the np=2 run wrote no np=2 log"
mpiddp compare np1.jsonl np2.jsonl > compare.txt || { cat compare.txt >&2; fail "mpiddp compare np1 np2"; }
grep "^PASS" compare.txt >&2
(unset MPIDDP; /usr/share/mpiddp/launch/mpirun.sh 2 default --quiet --set epochs=1) > /dev/null 2> launch.txt \
  || { cat launch.txt >&2; fail "/usr/share/mpiddp/launch/mpirun.sh"; }
grep -qF " /usr/bin/mpiddp train" launch.txt || fail "the packaged mpirun.sh did not run /usr/bin/mpiddp"
cd "$root"
# The dev package alone is enough for find_package: the example configures against /usr.
cmake -S "$root/examples/custom_layer" -B "$tmp/example-usr" > "$tmp/example-usr.log" 2>&1 \
  || { cat "$tmp/example-usr.log" >&2; fail "examples/custom_layer did not configure against the installed mpiddp-dev"; }

step apt-purge
apt_get purge mpiddp-dev mpiddp > "$tmp/apt-purge.log" 2>&1 || { cat "$tmp/apt-purge.log" >&2; fail "apt-get purge mpiddp"; }
for p in mpiddp mpiddp-dev; do is_installed "$p" && fail "$p is still installed after the purge"; done
for path in /usr/bin/mpiddp /usr/share/mpiddp /usr/include/mpiddp /usr/lib/cmake/mpiddp \
            /usr/lib/libmpiddp_core.a /usr/lib/libmpiddp_mpi.a; do
  [ -e "$path" ] && fail "$path is still there after the purge"
done
hash -r
command -v mpiddp > /dev/null && [ "$(command -v mpiddp)" = /usr/bin/mpiddp ] && fail "mpiddp is still on PATH"
step ""
say "OK: installed to a prefix, example built and run against it, mpiddp_${version}_${arch}.deb installed, run from /usr/bin and purged"
