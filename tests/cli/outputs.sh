#!/usr/bin/env bash
# Output files: written only where pointed, created atomically, a clear error when the
# directory is unwritable or the disk is full, and a previous log left intact on failure.
source "$(dirname "$0")/lib.sh"

# A missing directory: exit 8, the message names the file.
rc=0
run_np 2 train --quiet --log "$WORK/no/such/dir/run.jsonl" 2> "$WORK/err" || rc=$?
[ "$rc" -eq 8 ] || { cat "$WORK/err"; fail "missing directory: exit code $rc, expected 8"; }
grep -qF "cannot create the log file '$WORK/no/such/dir/.run.jsonl.tmp'" "$WORK/err" \
  || { cat "$WORK/err"; fail "missing directory: message"; }

# A previous log survives a run that fails before training starts (here a setup failure on
# rank 1), and no temporary file is left behind.
echo '{"kind":"previous"}' > "$WORK/run.jsonl"
rc=0
run_np 2 train --quiet --log "$WORK/run.jsonl" --set debug.fail_rank=1 --set debug.fail_step=0 \
  2> "$WORK/err" || rc=$?
[ "$rc" -eq 1 ] || { cat "$WORK/err"; fail "setup failure: exit code $rc"; }
[ "$(cat "$WORK/run.jsonl")" = '{"kind":"previous"}' ] || fail "the previous log was touched"
[ ! -e "$WORK/.run.jsonl.tmp" ] || fail "a temporary log was left behind"

# A successful run replaces it, and leaves no temporary file.
run_np 2 train --quiet --log "$WORK/run.jsonl"
grep -q '"kind":"end"' "$WORK/run.jsonl" || fail "the new log is incomplete"
[ ! -e "$WORK/.run.jsonl.tmp" ] || fail "a temporary log was left behind"

# A full disk: a 16 KiB tmpfs (needs root, which CI has). Rank 0 names the file, the job
# ends with exit 8, and every line written before is a complete record.
disk="$WORK/small"
mkdir -p "$disk"
if mount -t tmpfs -o size=16k tmpfs "$disk" 2> /dev/null; then
  # Lazy: a rank that is still exiting may hold a file open; the mount must not outlive us.
  trap 'umount -l "$disk"; rm -rf "$WORK"' EXIT
  rc=0
  run_np 2 train --quiet --set epochs=200 --log "$disk/full.jsonl" 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 8 ] || { cat "$WORK/err"; fail "full disk: exit code $rc, expected 8"; }
  grep -qF "rank 0: cannot write the log file '$disk/full.jsonl': No space left on device" \
    "$WORK/err" || { cat "$WORK/err"; fail "full disk: message"; }
  while IFS= read -r line; do
    [[ "$line" == "{"*"}" ]] || fail "full disk: a torn record before the last line: $line"
  done < <(head -n -1 "$disk/full.jsonl")
  # A read-only file system: the log cannot even be created, before training starts.
  # Under MPICH an aborted job's ranks can still be closing the log when mpiexec returns,
  # and a file open for writing makes the remount "busy": wait for them (at most 10 s).
  for _ in $(seq 100); do mount -o remount,ro "$disk" 2> /dev/null && break; sleep 0.1; done
  findmnt -no OPTIONS "$disk" | grep -q '^ro' || fail "read-only: cannot remount $disk read-only"
  rc=0
  run_np 2 train --quiet --log "$disk/ro.jsonl" 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 8 ] || { cat "$WORK/err"; fail "read-only: exit code $rc, expected 8"; }
  grep -qF "Read-only file system" "$WORK/err" || { cat "$WORK/err"; fail "read-only: message"; }
else
  echo "SKIPPED: full disk and read-only cases (cannot mount a small tmpfs; needs root)"
fi
# The launch script passes user arguments through unchanged: a log path with spaces, brackets
# and a star is one argument and names exactly that file (no word splitting, no globbing).
odd="$WORK/a dir/run [1] *.jsonl"
mkdir -p "$WORK/a dir"
touch "$WORK/a dir/run 1 decoy.jsonl"  # what a glob of the star would find
MPIRUN=$MPIEXEC "$SOURCE_DIR/launch/mpirun.sh" 2 default --quiet --log "$odd" 2> "$WORK/err" \
  || { cat "$WORK/err"; fail "launch/mpirun.sh with an odd log path"; }
grep -q '"kind":"end"' "$odd" || fail "launch/mpirun.sh: the log is not at '$odd'"
[ ! -s "$WORK/a dir/run 1 decoy.jsonl" ] || fail "launch/mpirun.sh: the path was globbed"

echo "cli outputs: unwritable directory and full disk are clear errors; previous logs intact"
