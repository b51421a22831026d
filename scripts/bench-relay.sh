#!/usr/bin/env bash
# Sustained streaming rate to an lttng-relayd on loopback beside the local-disk rate: the
# release `ust-bench-load` emits `bench:load {u64, i32}` from 2 threads at RATE events/s
# in all for SECONDS, traced by `ust trace` once into a local directory and once with
# `--set-url net://127.0.0.1:C:D` to a relayd started here on free ports. Prints, for
# each: events emitted, discarded (recorded = emitted - discarded), the trace's size and
# MB/s (trace bytes / SECONDS).
#
# Usage: scripts/bench-relay.sh [RATE] [SECONDS]      (default 10000000 10)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-10000000}
secs=${2:-10}
target=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p ust-consumerd -p ust-cli -p benches --bins
bin=$target/release
tmp=$(mktemp -d)
relayd_pid=
cleanup() {
  [ -n "$relayd_pid" ] && kill "$relayd_pid" 2>/dev/null || true
  [ -f "$tmp/run/pid" ] && kill "$(cat "$tmp/run/pid")" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
export UST_RUNDIR=$tmp/run HOME=$tmp/home LTTNG_HOME=$tmp/lttng
mkdir -p "$HOME" "$LTTNG_HOME"
ports=$(python3 -c 'import socket
ss=[socket.socket() for _ in range(3)]
[s.bind(("127.0.0.1",0)) for s in ss]
print(" ".join(str(s.getsockname()[1]) for s in ss))')
set -- $ports
lttng-relayd -o "$tmp/relayd" -C "tcp://127.0.0.1:$1" -D "tcp://127.0.0.1:$2" -L "tcp://127.0.0.1:$3" 2>"$tmp/relayd.log" &
relayd_pid=$!
url="net://127.0.0.1:$1:$2"
for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && break; sleep 0.05; done

run() { # $1 = label, rest = output options
  local label=$1; shift
  local out
  out=$("$bin/ust" trace "$@" --event 'bench:*' -- "$bin/ust-bench-load" "$rate" "$secs" 2 2>"$tmp/err")
  local emitted discarded
  emitted=$(echo "$out" | tr ' ' '\n' | sed -n 's/^emitted=//p')
  discarded=$(grep -o '[0-9]* event[s]* discarded\|[0-9]* discarded' "$tmp/err" | head -1 | grep -o '^[0-9]*')
  echo "$label: $(echo "$out" | tr ' ' '\n' | grep -E '^(rate|behind_ms)=' | tr '\n' ' ')emitted=$emitted discarded=$discarded"
}
run local --output "$tmp/local"
local_bytes=$(du -sb "$tmp/local" | cut -f1)
run relayd --set-url "$url"
relay_bytes=$(du -sb "$tmp/relayd" | cut -f1)
python3 - "$local_bytes" "$relay_bytes" "$secs" <<'EOF'
import sys
l, r, s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
print(f"local trace {l/1e6:.1f} MB ({l/1e6/s:.1f} MB/s); relayd trace {r/1e6:.1f} MB ({r/1e6/s:.1f} MB/s)")
EOF
