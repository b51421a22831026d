#!/usr/bin/env bash
# The sustained-drain figure of docs/DESIGN.md#targets: RUNS runs (default 10)
# of the consumer bench at RATE events/s (default 10 M/s, two writer threads) for SECONDS
# (default 60) into the default channel, each with a daemon of its own; prints each run's
# line and a summary: runs with 0 lost, and the daemon's CPU (% of one core) per run.
#
# Beside each run, scripts/host-stalls.py records what the host took from the guest (its
# steal time, a sampler's late wake-ups, the free memory the guest reported to the host):
# when the host stops the guest's CPUs the writers fall behind their schedule and catch up
# at full speed, and a run may lose events the drain alone would not.
#
# UST_BENCH_SUBBUF=SIZE (e.g. 4M): the channel's sub-buffers of SIZE instead of the default.
# UST_BENCH_PAUSE=S: wait S seconds before each run (the previous run's trace is deleted
#   just before; the guest reports the freed memory to its host in the seconds after).
# UST_BENCH_FREEZE_MS=MS: a stall made on purpose: half-way through each run the writers and
#   the bench's daemon are stopped (SIGSTOP) for MS milliseconds, then continued. The guest's
#   kernel, its disk and writeback go on meanwhile, which a host's stall does not allow.
# Usage: scripts/bench-drain.sh [RUNS [SECONDS [RATE]]]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}; seconds=${2:-60}; rate=${3:-10000000}
subbuf=${UST_BENCH_SUBBUF:-}; pause=${UST_BENCH_PAUSE:-0}; freeze=${UST_BENCH_FREEZE_MS:-0}
cargo build --release -q -p ust-consumerd -p ust-cli -p benches --bins
# No daemon of the machine's: the bench starts its own in a temporary directory under
# $nod/tmp (TMPDIR), which tells its processes from any other on the machine.
nod=$(mktemp -d); mkdir "$nod/tmp"
sampler=""; freezer=""
# stop PID: ends a background job of this script (the sampler, the freezer), if any.
stop() {
  [ -z "$1" ] || { kill -TERM "$1" 2>/dev/null; wait "$1"; } || true
}
cleanup() {
  stop "$sampler"; stop "$freezer"
  rm -rf "$nod"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# The processes of this run's bench whose environment has UST_RUNDIR under $nod/tmp and
# whose name is $1.
bench_pids() {
  local p
  for p in $(pgrep -x "$1"); do
    tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -q "^UST_RUNDIR=$nod/tmp/" && echo "$p"
  done
  return 0
}

# freeze: half-way through the writers' run, stop them and the bench's daemon at once for
# $freeze ms (continued on any exit of this function's shell); writes what it stopped.
freeze() {
  pids=""
  local deadline=$((SECONDS + 120))
  trap 'exit 0' TERM
  until [ -n "$(bench_pids ust-bench-load)" ]; do
    [ $SECONDS -lt $deadline ] || exit 0
    sleep 0.05
  done
  sleep "$(echo "$seconds / 2" | bc -l)" & wait $! # (a TERM is taken at once)
  pids="$(bench_pids ust-bench-load) $(bench_pids ust-consumerd)"
  trap 'kill -CONT $pids 2>/dev/null' EXIT
  kill -STOP $pids
  sleep "$(echo "$freeze / 1000" | bc -l)"
  kill -CONT $pids
  echo "froze=$(echo $pids | tr ' ' ,) freeze_ms=$freeze" >"$nod/froze"
}

echo "## drain: $runs runs of ${seconds} s at $rate events/s${subbuf:+, sub-buffers of $subbuf}$([ "$pause" = 0 ] || echo ", $pause s apart")$([ "$freeze" = 0 ] || echo ", a stall of $freeze ms made half-way"), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
lossless=0; cpus=()
for i in $(seq "$runs"); do
  [ "$pause" = 0 ] || sleep "$pause"
  rm -f "$nod/stalls" "$nod/froze"
  python3 scripts/host-stalls.py "$nod/stalls" & sampler=$!
  if [ "$freeze" != 0 ]; then freeze & freezer=$!; fi
  line=$(TMPDIR=$nod/tmp UST_RUNDIR=$nod UST_BENCH_PROCS=0 UST_BENCH_SECONDS=$seconds \
    UST_BENCH_RATE=$rate UST_BENCH_SUBBUF=$subbuf \
    cargo bench -q -p benches --bench consumer 2>&1 | grep '^consumer target' || true)
  stop "$sampler"; sampler=""
  stop "$freezer"; freezer=""
  made=""
  [ "$freeze" = 0 ] || made=$(cat "$nod/froze" 2>/dev/null || echo "freeze=not-made")
  echo "run $i: ${line:-no result} $(cat "$nod/stalls" 2>/dev/null || echo "host_stalls=unknown")${made:+ $made}"
  d=$(sed -n 's/.* discarded=\([0-9]*\) .*/\1/p' <<<"$line")
  e=$(sed -n 's/.* emitted=\([0-9]*\) .*/\1/p' <<<"$line")
  r=$(sed -n 's/.* recorded=\([0-9]*\) .*/\1/p' <<<"$line")
  [ -n "$d" ] && [ "$d" = 0 ] && [ "$e" = "$r" ] && [ "$e" != 0 ] && lossless=$((lossless + 1))
  cpus+=("$(sed -n 's/.* daemon_cpu=\([0-9.]*%\).*/\1/p' <<<"$line")")
done
echo "lossless: $lossless of $runs runs; daemon CPU per run: ${cpus[*]}; load after $(cut -d' ' -f1-3 /proc/loadavg)"
