# Sourced by bench/compare.sh and bench/precision.sh: the PyTorch peer as those scripts run it,
# and the results file's lines. Expects $here (bench/) and $out (the results file).
python="${TORCH_PYTHON:-/usr/bin/python3}"
# The peer's best settings (the table was measured with them), for the peer only:
# glibc's heap on huge pages would round mpiddp's small allocations up to 2 MiB pages of
# resident memory, and mpiddp sets its allocator up itself (Note [allocate once, keep it mapped]).
# The peer runs on the OpenBLAS kernel its users get on this CPU: this workplace's
# OPENBLAS_CORETYPE=Haswell (and L2 size) would hand it AVX2 kernels on an AVX-512 machine.
# Its JSON line records the kernel (blas_core) and its product's error against float64.
# The peer checks its float32 product against float64 first (torch_peer.py): when the
# library's own kernel fails it (exit 3), the peer runs again on the environment's settings,
# which its JSON line then shows in openblas_coretype.
torch_peer() {
  local status=0
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=passive GLIBC_TUNABLES=glibc.malloc.hugetlb=1 \
    "$python" "$here/torch_peer.py" "$@" || status=$?
  [ $status -eq 3 ] || return $status
  echo "bench: the peer falls back to OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-}" >&2
  OMP_WAIT_POLICY=passive GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "$python" "$here/torch_peer.py" "$@"
}

record() {  # record LABEL JSON: appends the line with its label and the 1-minute load
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  printf '%s\n' "$2" | sed -E "s/^\{/{\"label\":\"$1\",\"load1\":$load,/" >> "$out"
}
