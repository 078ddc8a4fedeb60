#!/usr/bin/env bash
# Which functions of a binary hold AVX-512 instructions, and whether every one of them is a
# dispatched kernel (a name with "avx512" in it: Note [kernels per instruction set] in
# src/kernels/isa.cpp). In a portable build nothing else may: any other function would run
# AVX-512 on a CPU without it.
# Usage: scripts/isa-objdump.sh [BINARY]   (default build/mpiddp); exit 1 when another holds some.
# An instruction counts as AVX-512 when it names a zmm register, a mask register (%k0-%k7),
# an xmm/ymm register 16-31, an embedded broadcast or rounding ({1toN}, {sae}), or is one of
# AVX-512's own mnemonics on narrower registers (vcvtps2qq, vpmaxsq, vpternlogd, ...).
set -euo pipefail
binary=${1:-build/mpiddp}
[ -x "$binary" ] || { echo "isa-objdump: no binary at $binary" >&2; exit 2; }
objdump -d --no-show-raw-insn -C "$binary" | awk '
  /^[0-9a-f]+ <.*>:$/ { name = $0; sub(/^[0-9a-f]+ </, "", name); sub(/>:$/, "", name); next }
  /%zmm|%k[0-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])|\{1to|sae\}|vcvt(t?ps2u?qq|t?pd2u?qq|u?qq2p[sd])|vpm(ax|in)[su]q|vpternlog|vpermt2|vpermi2|vpabsq|vpro[lr]|vpmov[qdw][bwd]|vinserti(32x8|64x[24])|vextracti(32x8|64x[24])|vextractf(32x8|64x[24])|vscalef|vrndscale|vfpclass|vgetexp|vgetmant|vpcmp[a-z]*[qdbw] +.*%k/ {
    count[name]++
  }
  END {
    bad = 0; kernels = 0
    for (f in count) {
      if (f ~ /avx512/) { kernels++; printf "  kernel   %6d  %s\n", count[f], f }
      else { bad++; printf "  OUTSIDE  %6d  %s\n", count[f], f }
    }
    printf "isa-objdump: %d dispatched AVX-512 kernel function(s), %d other function(s) with AVX-512 instructions\n", kernels, bad
    exit bad > 0 ? 1 : 0
  }' | sort -k3
