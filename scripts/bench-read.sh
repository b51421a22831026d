#!/usr/bin/env bash
# Reading traces: `ust export --format parquet` and `ust report` beside babeltrace2
# printing the same trace (`babeltrace2 DIR > /dev/null`), and the memory of a Parquet
# export of a 1 GB trace.
#
# Usage: scripts/bench-read.sh [--callgrind] [--runs N] [--no-big] [--out DIR] [TRACE_DIR[:PID]...]
#        UST=/path/to/other/ust scripts/bench-read.sh ...   (another build of ust, e.g. the
#        one before a change, measured beside the same babeltrace2 in the same sitting)
#
# Default traces: many-threads (report on pid 2673), ros2 and bug446190 of
# $UST_FIELD_TRACES (/work/shared/field-traces), and a trace of at least 1 GiB recorded with
# ust itself (testprogs' burst, made once in target/bench-read/big; --no-big skips it).
# For each trace and tool (the floor, ctf-reader's decoding and merge alone; the export; the report): the best elapsed time of N runs (3), its CPU time (user+sys) and
# maximum resident set (/usr/bin/time), and the ratios to babeltrace2's elapsed and CPU
# times. Wall-clock figures need a quiet machine: --callgrind prints instruction counts
# instead (valgrind --tool=callgrind, one run each, repeatable under load; slow: minutes for
# many-threads, and the 1 GB trace is left out).
#
# Where the Parquet files go (--out DIR: a new directory in DIR): by default one in /dev/shm
# when that is a tmpfs, so that the export is measured as babeltrace2 is, without the disk (babeltrace2
# prints to /dev/null); --out target/bench-read/parquet measures it on the disk. On an ext4
# without a journal, as this machine's root, creating a file skips every inode of its group
# freed in the last minutes (`recently_deleted`, reading each one's inode table block): each
# run replaces the files of the run before, and 181 files then took 20-50 ms to create where
# a directory of an untouched group took 3.5 ms (2026-12-05).
#
# The targets (issue 33): each ust figure at most 0.1x babeltrace2's, and the Parquet export
# of the 1 GB trace under 200 MB resident.
set -euo pipefail
cd "$(dirname "$0")/.."

callgrind=0
runs=3
out=
big=1
traces=()
while [ $# -gt 0 ]; do
  case "$1" in
    --callgrind) callgrind=1 ;;
    --runs) runs="$2"; shift ;;
    --no-big) big=0 ;;
    --out) out="$2"; shift ;;
    *) traces+=("$1") ;;
  esac
  shift
done
field="${UST_FIELD_TRACES:-/work/shared/field-traces}"
if [ ${#traces[@]} -eq 0 ]; then
  traces=("$field/many-threads:2673" "$field/ros2" "$field/bug446190")
fi

cargo build -q --release -p ust-cli -p ust-consumerd -p testprogs >&2
cargo build -q --release -p ctf-reader --example ctf_bench >&2
floor_bin="$PWD/target/release/examples/ctf_bench"
ust="${UST:-$PWD/target/release/ust}"
work="$PWD/target/bench-read"
mkdir -p "$work"

# A trace of at least 1 GiB: burst's events (two u32/u64 fields) in runs of 50 M until the
# directory holds 1 GiB (a run loses what the daemon cannot drain in time; that only makes
# more runs).
if [ "$big" = 1 ] && [ "$callgrind" = 0 ]; then
  if [ ! -f "$work/big/.done" ]; then
    rm -rf "$work/big" "$work/run"
    mkdir -p "$work/big" "$work/run" "$work/home"
    UST_RUNDIR="$work/run" HOME="$work/home" target/release/ust-consumerd >"$work/daemon.log" 2>&1 &
    daemon=$!
    trap 'kill $daemon 2>/dev/null || true' EXIT
    i=0
    while [ "$(du -sb "$work/big" | cut -f1)" -lt $((1 << 30)) ]; do
      UST_RUNDIR="$work/run" HOME="$work/home" "$ust" trace -o "$work/big/r$i" -- target/release/burst 50000000 2 >&2
      i=$((i + 1))
      [ $i -lt 20 ] || { echo "bench-read.sh: 20 runs and still under 1 GiB" >&2; exit 1; }
    done
    kill $daemon; wait $daemon 2>/dev/null || true
    trap - EXIT
    touch "$work/big/.done"
  fi
  # User-space traces only: the report keeps counts, not the events, as the export.
  traces+=("$work/big")
fi

# best_of CMD...: "elapsed_s cpu_s maxrss_kb" of the fastest of $runs runs.
best_of() {
  local best=""
  for _ in $(seq "$runs"); do
    local r
    /usr/bin/time -o "$work/time" -f "%e %U %S %M" "$@" >/dev/null 2>&1
    r=$(tail -1 "$work/time")
    local e u s m
    read -r e u s m <<<"$r"
    local line
    line="$e $(echo "$u + $s" | bc) $m"
    if [ -z "$best" ] || [ "$(echo "$e < ${best%% *}" | bc)" = 1 ]; then best="$line"; fi
  done
  echo "$best"
}

# instructions CMD...: the instructions callgrind counts for CMD.
instructions() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null | sed -n 's/.*Collected : //p'
}

ratio() { echo "scale=3; $1 / $2" | bc; }

# The files go to a directory of the script's own under --out DIR (removed at the end).
if [ -z "$out" ]; then
  if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then out=/dev/shm; else out="$work"; fi
fi
out="$(mktemp -d "$out/ust-bench-read.XXXXXX")"
trap 'rm -rf "$out"' EXIT
echo "bench-read.sh: the Parquet files go to $out ($(stat -f -c %T "$out"))" >&2
if [ "$callgrind" = 1 ]; then
  printf '%-14s %-22s %16s %16s %8s\n' TRACE TOOL INSTRUCTIONS BABELTRACE2 RATIO
else
  printf '%-14s %-22s %9s %9s %10s %15s %15s\n' TRACE TOOL ELAPSED_S CPU_S MAXRSS_KB RATIO_ELAPSED RATIO_CPU
fi
for spec in "${traces[@]}"; do
  dir="${spec%%:*}"
  pid=""
  # "floor": ctf-reader alone decoding every stream on its own thread and merging them
  # by time, with no value built (`ctf_bench --parallel`, metadata included): what the
  # export and the report cost at the least, with the reader as it is.
  tools="floor export report"
  # A tree of traces (the 1 GB one: a trace per run) has no floor: ctf_bench reads one trace.
  [ -f "$dir/metadata" ] || tools="export report"
  [ "$spec" != "$dir" ] && pid="${spec#*:}"
  name=$(basename "$dir")
  report=("$ust" report "$dir" --wakeups)
  [ -n "$pid" ] && report+=(--pid "$pid")
  export_cmd=("$ust" export "$dir" --format parquet -o "$out")
  if [ "$callgrind" = 1 ]; then
    ref=$(instructions babeltrace2 "$dir")
    printf '%-14s %-22s %16s %16s %8s\n' "$name" "babeltrace2 (reference)" "$ref" "$ref" 1
    for tool in $tools; do
      rm -rf "$out"
      case $tool in
        floor) n=$(instructions "$floor_bin" --parallel "$dir") ;;
        export) n=$(instructions "${export_cmd[@]}") ;;
        *) n=$(instructions "${report[@]}") ;;
      esac
      printf '%-14s %-22s %16s %16s %8s\n' "$name" "ust $tool" "$n" "$ref" "$(ratio "$n" "$ref")"
    done
    continue
  fi
  read -r be bc bm <<<"$(best_of babeltrace2 "$dir")"
  printf '%-14s %-22s %9s %9s %10s %15s %15s\n' "$name" "babeltrace2 (reference)" "$be" "$bc" "$bm" 1 1
  for tool in $tools; do
    rm -rf "$out"
    case $tool in
      floor) r=$(best_of "$floor_bin" --parallel "$dir") ;;
      export) r=$(best_of "${export_cmd[@]}") ;;
      *) r=$(best_of "${report[@]}") ;;
    esac
    read -r e c m <<<"$r"
    printf '%-14s %-22s %9s %9s %10s %15s %15s\n' "$name" "ust $tool" "$e" "$c" "$m" "$(ratio "$e" "$be")" "$(ratio "$c" "$bc")"
  done
done
