#!/usr/bin/env bash
# The sustained-drain figure of docs/DESIGN.md#targets: RUNS runs (default 10)
# of the consumer bench at RATE events/s (default 10 M/s, two writer threads) for SECONDS
# (default 60) into the default channel, each with a daemon of its own; prints each run's
# line and a summary: runs with 0 lost, and the daemon's CPU (% of one core) per run.
# Beside each run, scripts/host-stalls.py says whether the host stopped the guest (a
# sampler woken more than 200 ms late, the steal time): the writers then fall behind their
# schedule and catch up at full speed, a burst the channel must hold. UST_BENCH_SUBBUF
# (e.g. 4M) runs the channel with sub-buffers of that size instead of the default.
# UST_BENCH_FREEZE_MS=MS reproduces such a stall: half-way through each run the writers and
# the daemon are stopped (SIGSTOP) for MS milliseconds, then continued.
# Usage: scripts/bench-drain.sh [RUNS [SECONDS [RATE]]]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}; seconds=${2:-60}; rate=${3:-10000000}
cargo build --release -q -p ust-consumerd -p ust-cli -p benches --bins
# No daemon of the machine's: the bench starts its own in a directory of its own.
nod=$(mktemp -d); trap 'rm -rf "$nod"' EXIT
freeze=${UST_BENCH_FREEZE_MS:-0}
echo "## drain: $runs runs of ${seconds} s at $rate events/s${UST_BENCH_SUBBUF:+, sub-buffers of $UST_BENCH_SUBBUF}${UST_BENCH_FREEZE_MS:+, a stall of $freeze ms half-way}, $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
lossless=0; cpus=()
for i in $(seq "$runs"); do
  python3 scripts/host-stalls.py "$nod/stalls" & sampler=$!
  if [ "$freeze" != 0 ]; then
    # Half-way through the writers' run: stop them and the bench's daemon (the newest
    # ust-consumerd: the bench starts its own just before) at once, as a host that
    # deschedules the guest does.
    (
      until pid=$(pgrep -x ust-bench-load); do sleep 0.05; done
      sleep "$(echo "$seconds / 2" | bc -l)"
      pids="$pid $(pgrep -n -x ust-consumerd)"
      kill -STOP $pids; sleep "$(echo "$freeze / 1000" | bc -l)"; kill -CONT $pids
    ) &
    freezer=$!
  fi
  line=$(UST_RUNDIR=$nod UST_BENCH_PROCS=0 UST_BENCH_SECONDS=$seconds UST_BENCH_RATE=$rate \
    cargo bench -q -p benches --bench consumer 2>&1 | grep '^consumer target' || true)
  kill -TERM "$sampler"; wait "$sampler" || true
  [ "$freeze" = 0 ] || wait "$freezer" || true
  echo "run $i: ${line:-no result} $(cat "$nod/stalls" 2>/dev/null)"
  d=$(sed -n 's/.* discarded=\([0-9]*\) .*/\1/p' <<<"$line")
  e=$(sed -n 's/.* emitted=\([0-9]*\) .*/\1/p' <<<"$line")
  r=$(sed -n 's/.* recorded=\([0-9]*\) .*/\1/p' <<<"$line")
  [ -n "$d" ] && [ "$d" = 0 ] && [ "$e" = "$r" ] && [ "$e" != 0 ] && lossless=$((lossless + 1))
  cpus+=("$(sed -n 's/.* daemon_cpu=\([0-9.]*%\).*/\1/p' <<<"$line")")
done
echo "lossless: $lossless of $runs runs; daemon CPU per run: ${cpus[*]}; load after $(cut -d' ' -f1-3 /proc/loadavg)"
