#!/usr/bin/env bash
# The enabled `{u64,i32}` event's on-CPU cost in windows of one long run, each followed by
# ust-bench-count's core probe (a loop that slows when another hardware thread shares the
# core), and how the two go together: on a shared host the event's cost moves with the
# host's load on the core, not per process (BENCHMARKS.md, "Where a target is missed";
# benches/results/2026-12-02.md, "TSC event: the host's share of the core"). Prints the windows, then a summary: the event's median in the windows where
# the probe ran at its fastest quarter and at its slowest, Pearson's r, and the event's
# median in the windows whose probe ran within 10 % of its fastest (the core to itself).
# Usage: scripts/bench-windows.sh [CLOCK [EVENTS [WINDOW]]]   (tsc, 100000000, 500000: windows
# of about 10 ms, each followed by a probe of about the same length)
set -euo pipefail
cd "$(dirname "$0")/.."
clock=${1:-tsc}; events=${2:-100000000}; window=${3:-500000}
target=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p benches --bins
# No daemon of the machine's: one at the default socket directory would send its enable
# masks over the bench's own (and make the constructor wait for it).
nod=$(mktemp -d); trap 'rm -rf "$nod"' EXIT; export UST_RUNDIR=$nod
echo "## windows: $events events of $window, clock $clock, CPU 0, $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(UST_CLOCK=$clock UST_BENCH_WINDOW=$window taskset -c 0 "$target/release/ust-bench-count" enabled "$events")
summary='
import re, statistics as st, sys
w = [tuple(float(v) for v in re.findall(r"=([\d.]+)", l)) for l in sys.stdin if l.startswith("window")]
print(" ".join(f"{e:.1f}/{p:.2f}" for e, p in w), "(ns per event / probe ns, per window)")
ev, pr = [e for e, _ in w], [p for _, p in w]
q1, q3 = sorted(pr)[len(pr) // 4], sorted(pr)[3 * len(pr) // 4]
fast = st.median([e for e, p in w if p <= q1])
slow = st.median([e for e, p in w if p >= q3])
r = st.correlation(ev, pr) if len(w) > 2 else float("nan")
print(f"{len(w)} windows: event {min(ev):.1f} / {st.median(ev):.1f} / {max(ev):.1f} ns (min / median / max); probe {min(pr):.3f} / {st.median(pr):.3f} / {max(pr):.3f} ns")
print(f"event median where the probe was fastest (<= {q1:.3f} ns): {fast:.1f} ns; slowest (>= {q3:.3f} ns): {slow:.1f} ns; Pearson r {r:.2f}")
near = [e for e, p in w if p <= 1.1 * min(pr)]
print(f"windows whose probe was within 10 % of its fastest: {len(near)}, event median {st.median(near):.1f} ns")
'
grep -v '^window' <<<"$out"
python3 -c "$summary" <<<"$out"
