#!/usr/bin/env bash
# Tier 1's system-call view (ptrace) against strace -f on a syscall-heavy command: a
# one-byte `dd` of 200,000 blocks (400,000 read/write calls), untraced, under `strace -f -o
# /dev/null`, under `ust trace --kernel` (tier 1: perf_event_open and ptrace) and under
# `ust trace --kernel --no-ptrace`, two rounds. Run it as an ordinary user with no root's
# ust-consumerd reachable (set UST_SYSTEM_RUNDIR to an empty directory), with a release
# `ust`:
#
#   UST_SYSTEM_RUNDIR=/tmp/none scripts/bench-tier1-ptrace.sh target/release/ust
#
# Prints bash's `time` of each (wall, user and system CPU of the command and its children,
# `ust trace` included) and how many kernel events each trace holds. The outputs go to
# $TMPDIR (default /tmp).
set -u
UST=${1:?usage: bench-tier1-ptrace.sh UST_BINARY}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/bench-tier1-XXXXXX")
CMD="dd if=/dev/zero of=/dev/null bs=1 count=200000 status=none"
TIMEFORMAT='%R s wall, %U s user, %S s sys'
for round in 1 2; do
  echo "== round $round, load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo -n "untraced:                       "; { time $CMD ; } 2>&1
  echo -n "strace -f -o /dev/null:         "; { time strace -f -o /dev/null $CMD ; } 2>&1
  rm -rf "$OUT/on" "$OUT/off"
  echo -n "ust trace --kernel:             "; { time "$UST" trace --kernel -o "$OUT/on" -- $CMD 2>"$OUT/on.err" ; } 2>&1
  echo -n "ust trace --kernel --no-ptrace: "; { time "$UST" trace --kernel --no-ptrace -o "$OUT/off" -- $CMD 2>"$OUT/off.err" ; } 2>&1
  grep -h "kernel events recorded" "$OUT/on.err" "$OUT/off.err"
done
rm -rf "$OUT"
