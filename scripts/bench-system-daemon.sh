#!/usr/bin/env bash
# Registration with a second ("root's") daemon as well: process lifetime
# (BENCHMARKS.md). Needs the release binaries (cargo build --release --workspace --bins).
# Process lifetime of threeevents (release), 100 sequential runs: own daemon only, then
# own + a second ("root's") daemon, each with a started per-UID session.
set -euo pipefail
cd "$(dirname "$0")/.."
B=$PWD/target/release
T=$(mktemp -d)
start() { # dir
  UST_RUNDIR=$1/run HOME=$1 $B/ust-consumerd --foreground 2>$1/log & echo $! > $1/dpid
  for i in $(seq 100); do [ -S $1/run/ctl ] && break; sleep 0.05; done
  UST_RUNDIR=$1/run HOME=$1 $B/ust create s --buffers-uid --output $1/out >/dev/null
  UST_RUNDIR=$1/run HOME=$1 $B/ust enable-event -a >/dev/null
  UST_RUNDIR=$1/run HOME=$1 $B/ust add-context -t vpid >/dev/null
  UST_RUNDIR=$1/run HOME=$1 $B/ust start >/dev/null
}
cpu() { awk '{print $14+$15}' /proc/$(cat $1/dpid)/stat; }
mkdir -p $T/own $T/sys
start $T/own; start $T/sys
run() { # label, extra env
  local t0=$(date +%s%N)
  for i in $(seq 100); do env UST_RUNDIR=$T/own/run HOME=$T/own "$@" $B/threeevents >/dev/null; done
  local t1=$(date +%s%N)
  echo "$((($t1-$t0)/100000)) us per process"
}
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
c0=$(cpu $T/sys)
echo -n "own daemon only: "; run UST_SYSTEM_RUNDIR=$T/none
echo -n "own + root's daemon: "; run UST_SYSTEM_RUNDIR=$T/sys/run
echo "second daemon CPU: $(( ($(cpu $T/sys)-c0)*10 )) ms for 100 registrations"
echo -n "own daemon only: "; run UST_SYSTEM_RUNDIR=$T/none
echo -n "own + root's daemon: "; run UST_SYSTEM_RUNDIR=$T/sys/run
for d in own sys; do UST_RUNDIR=$T/$d/run HOME=$T/$d $B/ust stop >/dev/null; done
for d in own sys; do echo "$d: $(babeltrace2 $T/$d/out 2>&1 | grep -c " short:ev:") events"; done
for d in own sys; do kill $(cat $T/$d/dpid); done
rm -rf $T
