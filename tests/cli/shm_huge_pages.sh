#!/usr/bin/env bash
# The node's shared windows on 2 MiB pages where the file system under them allows it
# (Note [shared memory on 4 KiB pages] in src/distributed/mpi_shared_memory_sum.cpp): a tmpfs
# mounted here with huge=advise, under Open MPI's windows (osc_sm_backing_directory), gives
# the windows huge pages only because mpiddp asks for them (madvise); the same run on a tmpfs
# with huge=never gets none, and both train to the same bits. `mpiddp bench` reports the
# shared memory on huge pages as shm_huge_mb.
# Skips (77) without root (mount) or under another MPI than Open MPI (the backing directory
# is its MCA parameter).
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { echo "not root: cannot mount a tmpfs; skipping"; exit 77; }
[[ "$("$MPIEXEC" --version 2>&1)" =~ Open\ MPI|OpenRTE ]] ||
  { echo "not Open MPI: osc_sm_backing_directory is its parameter; skipping"; exit 77; }

trap 'for m in "$WORK"/shm-*; do umount "$m" 2> /dev/null || true; done; rm -rf "$WORK"' EXIT

# mlp's model (3.3 M parameters: 13 MB of gradients, windows of several huge pages) on a
# short run, sharded, so that the parameters live in the window too.
cat > "$WORK/bench.json" << 'EOF'
{
  "seed": 3,
  "model": {"inputs": 784, "layers": [
    {"type": "linear", "out": 1024}, {"type": "relu"},
    {"type": "linear", "out": 1024}, {"type": "relu"},
    {"type": "linear", "out": 10}]},
  "loss": "cross_entropy",
  "data": {"train": {"source": "synthetic_classification", "samples": 512, "features": 784, "classes": 10}},
  "batch": {"global": 128},
  "optimizer": {"type": "sgd", "lr": 0.01, "momentum": 0.9},
  "reduce": {"algorithm": "shm", "shard_optimizer": true},
  "epochs": 1
}
EOF

for huge in advise never; do
  mkdir -p "$WORK/shm-$huge"
  mount -t tmpfs -o "size=256m,huge=$huge" tmpfs "$WORK/shm-$huge" ||
    { echo "cannot mount a tmpfs with huge=$huge; skipping"; exit 77; }
done
# bench_on HUGE: the bench line of np=2 with the windows on the tmpfs mounted huge=HUGE.
bench_on() { OMPI_MCA_osc_sm_backing_directory="$WORK/shm-$1" run_np 2 bench "$WORK/bench.json" | tail -n 1; }
json_field() { sed -nE "s/.*\"$1\":([-0-9.eE+]+).*/\1/p" <<< "$2"; }

advise=$(bench_on advise)
never=$(bench_on never)
huge_advise=$(json_field shm_huge_mb "$advise")
huge_never=$(json_field shm_huge_mb "$never")
[ -n "$huge_advise" ] && [ -n "$huge_never" ] || fail "no shm_huge_mb in the bench lines: $advise / $never"
# The windows hold 13 MB of gradients and 13 MB of parameters; only their 2 MiB-aligned
# stretches can be huge pages (14 MB of them here with Open MPI 4.1).
awk -v mb="$huge_advise" 'BEGIN { exit !(mb >= 8) }' ||
  fail "huge=advise: $huge_advise MB of shared memory on huge pages, expected 8 MB or more of the windows' 26 MB"
awk -v mb="$huge_never" 'BEGIN { exit !(mb == 0) }' ||
  fail "huge=never: $huge_never MB on huge pages, expected none"
[ "$(json_field final_loss "$advise")" = "$(json_field final_loss "$never")" ] ||
  fail "the page size changed the numbers: final_loss $(json_field final_loss "$advise") against $(json_field final_loss "$never")"
echo "shm huge pages: $huge_advise MB of the windows on 2 MiB pages under huge=advise, none under" \
     "huge=never; the same final loss $(json_field final_loss "$advise")"
