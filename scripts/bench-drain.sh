#!/usr/bin/env bash
# The sustained-drain figure of docs/DESIGN.md#targets: RUNS runs (default 10)
# of the consumer bench at RATE events/s (default 10 M/s, two writer threads) for SECONDS
# (default 60) into the default channel, each with a daemon of its own; prints each run's
# line and a summary: runs with 0 lost, and the daemon's CPU (% of one core) per run.
# Usage: scripts/bench-drain.sh [RUNS [SECONDS [RATE]]]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}; seconds=${2:-60}; rate=${3:-10000000}
cargo build --release -q -p ust-consumerd -p ust-cli -p benches --bins
# No daemon of the machine's: the bench starts its own in a directory of its own.
nod=$(mktemp -d); trap 'rm -rf "$nod"' EXIT
echo "## drain: $runs runs of ${seconds} s at $rate events/s, $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
lossless=0; cpus=()
for i in $(seq "$runs"); do
  line=$(UST_RUNDIR=$nod UST_BENCH_PROCS=0 UST_BENCH_SECONDS=$seconds UST_BENCH_RATE=$rate \
    cargo bench -q -p benches --bench consumer 2>&1 | grep '^consumer target' || true)
  echo "run $i: ${line:-no result}"
  d=$(sed -n 's/.* discarded=\([0-9]*\) .*/\1/p' <<<"$line")
  e=$(sed -n 's/.* emitted=\([0-9]*\) .*/\1/p' <<<"$line")
  r=$(sed -n 's/.* recorded=\([0-9]*\) .*/\1/p' <<<"$line")
  [ -n "$d" ] && [ "$d" = 0 ] && [ "$e" = "$r" ] && [ "$e" != 0 ] && lossless=$((lossless + 1))
  cpus+=("$(sed -n 's/.* daemon_cpu=\([0-9.]*%\).*/\1/p' <<<"$line")")
done
echo "lossless: $lossless of $runs runs; daemon CPU per run: ${cpus[*]}; load after $(cut -d' ' -f1-3 /proc/loadavg)"
