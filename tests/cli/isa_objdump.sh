#!/usr/bin/env bash
# The portable binary holds AVX-512 instructions only inside dispatched kernels
# (scripts/isa-objdump.sh, the command docs/isa.md gives), and does hold them there: the
# kernels for CPUs above the baseline are compiled on every host. A native build (its
# baseline is this CPU) skips (77).
source "$(dirname "$0")/lib.sh"
built_for=$("$MPIDDP" --version | sed -n 's/^built for: *\([^ ]*\).*/\1/p')
case "$built_for" in
  x86-64|x86-64-v2|x86-64-v3) ;;
  *) echo "skipped: this build is for $built_for, not a portable baseline"; exit 77 ;;
esac
status=0
bash "$SOURCE_DIR/scripts/isa-objdump.sh" "$MPIDDP" > "$WORK/objdump.txt" || status=$?
cat "$WORK/objdump.txt"
[ "$status" -eq 0 ] || fail "a function outside the dispatched kernels holds AVX-512 instructions"
for kernel in 'avx512::grid_product' 'add_to_grid_avx512' 'to_values_avx512' 'sum_typed_avx512'; do
  grep -q "kernel .*$kernel" "$WORK/objdump.txt" || fail "no AVX-512 code in $kernel: the variant was not compiled"
done
echo "isa objdump: AVX-512 instructions only in dispatched kernels of the $built_for binary"
