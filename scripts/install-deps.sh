#!/usr/bin/env bash
# Installs the Debian packages mpiddp needs, and nothing when they are present.
# Usage: scripts/install-deps.sh [--with-mpich] [--with-data] [--with-slurm] [--with-chromium]
#                               [--with-torch] [--with-fuzz] [--with-valgrind] [--with-qemu]
# --with-torch: for the optional tools/torch_crosscheck.py and tools/read_tensorboard.py (run
# with /usr/bin/python3); never needed to build or test. --with-fuzz: clang and libFuzzer for scripts/fuzz.sh (CI runs it).
# --with-valgrind: valgrind for scripts/test-valgrind.sh.
set -euo pipefail

packages=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin
          libopenblas-dev libblis-dev libdnnl-dev  # compute.gemm: measured against Eigen
          libeigen3-dev nlohmann-json3-dev libgtest-dev zlib1g-dev
          libsentencepiece-dev  # mpiddp tokenize, the text source's "sentencepiece" encoding
          libxml2-utils   # xmllint: the plot test parses the SVG
          ccache)         # CI builds five configurations; shared objects compile once
for arg in "$@"; do
  case "$arg" in
    --with-mpich) packages+=(mpich libmpich-dev) ;;
    --with-data)  packages+=(dataset-fashion-mnist bible-kjv) ;;  # bible-kjv: scripts/get-kjv.sh
    --with-slurm) packages+=(slurm-wlm munge libpmix-dev iproute2 util-linux) ;;  # iproute2, util-linux: launch/local-cluster
    --with-chromium) packages+=(chromium) ;;  # the optional plot render test
    --with-torch) packages+=(python3-torch python3-numpy python3-protobuf python3-sentencepiece) ;;
    --with-fuzz) packages+=(clang-14 libclang-rt-14-dev) ;;  # libFuzzer (scripts/fuzz.sh)
    --with-valgrind) packages+=(valgrind) ;;  # memcheck (scripts/test-valgrind.sh)
    --with-qemu) packages+=(qemu-user) ;;  # other CPUs emulated (tests/cli/isa_qemu.sh)
    *) echo "install-deps.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps.sh: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
