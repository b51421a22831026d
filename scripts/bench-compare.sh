#!/usr/bin/env bash
# Runs the project's benches and the reference measurements of benches/anchors/ in one
# sitting, and prints every figure with its ratio to the reference as a markdown table
# (paste it into BENCHMARKS.md). Medians; the machines are shared, so quote the ratios.
#
# Usage: scripts/bench-compare.sh [--quick | --anchors-only]
#   --quick            short criterion runs and 1 M/s x 1 s of consumer load (smoke test)
#   --anchors-only     run the references only (the table's ust column stays empty)
#   ANCHOR_EVENTS=N    events per thread for the LTTng-UST anchor (default 2000000;
#                      babeltrace2 reads 3N back, which is the slow part)
#   SKIP_LTTNG=1       do not run the LTTng-UST anchor (it needs root: it installs
#                      lttng-tools, liblttng-ust-dev and babeltrace2 with apt-get when
#                      missing, and starts lttng-sessiond when none runs)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0; only_anchors=0
case "${1:-}" in
  --quick) quick=1 ;;
  --anchors-only) only_anchors=1 ;;
  "") ;;
  *) echo "usage: $0 [--quick | --anchors-only]" >&2; exit 2 ;;
esac
anchors=benches/anchors
n=${ANCHOR_EVENTS:-2000000}
target=${CARGO_TARGET_DIR:-target}
log=$(mktemp -d); trap 'rm -rf "$log"' EXIT

echo "## Run of $(date -u '+%Y-%m-%d %H:%M UTC')" >&2
if [ $only_anchors = 0 ]; then
  cargo build --release -q -p ust-consumerd -p ust-cli -p benches --bins
  cargo bench -q -p benches --no-run 2>/dev/null
fi

# --- references -------------------------------------------------------------------------
load0=$(cut -d' ' -f1-3 /proc/loadavg)
bash "$anchors/floor/run.sh" | tee "$log/floor"
if [ "${SKIP_LTTNG:-0}" != 1 ]; then
  bash "$anchors/lttng-ust/run.sh" "$n" | tee "$log/lttng" || true
fi
# The tracing anchor is its own cargo project (excluded from the workspace), built into
# its own directory of the project's target dir.
tracing_anchor() {
  CARGO_TARGET_DIR="$target/anchors" cargo run -q --release --manifest-path "$anchors/tracing-rs/Cargo.toml" -- "$@"
}
tracing_anchor 2000000 | tee "$log/tracing"
tracing_anchor 100000000 off | tee -a "$log/tracing"
# The timeline layers a Rust user would pick instead of ust's, on the same event.
for what in "" span; do
  tracing_anchor 2000000 chrome $what | tee -a "$log/tracing"
  tracing_anchor 2000000 perfetto $what | tee -a "$log/tracing"
  tracing_anchor 2000000 fastrace $what | tee -a "$log/tracing"
done

# --- the project --------------------------------------------------------------------------
if [ $only_anchors = 0 ]; then
  # No daemon for the in-process benches: one found at the default socket directory (root's
  # /run/ust) would send its enable masks and level hint over the benches' own (the
  # tracing-layer figures were then those of a disabled callsite). The consumer bench starts
  # its own daemon in a directory of its own.
  mkdir -p "$log/no-daemon"; export UST_RUNDIR="$log/no-daemon"
  qenv=(); [ $quick = 1 ] && qenv=(UST_BENCH_QUICK=1)
  env "${qenv[@]}" cargo bench -q -p benches --bench emit --bench ringbuffer --bench tracing_layer -- --noplot 2>/dev/null | tee "$log/crit"
  env "${qenv[@]}" cargo bench -q -p benches --bench consumer | tee "$log/consumer"
  # Issue 32's program under `ust trace`: the held-out kind (a plain tracepoint! loop, the
  # LTTng-UST anchor's twin) with no session, monotonic and TSC; a burst into the default
  # channel; the drain's ceiling with the trace on tmpfs.
  env "${qenv[@]}" cargo bench -q -p benches --bench traced_program | tee "$log/program" || true
  # On-CPU time per event (CLOCK_THREAD_CPUTIME_ID), far less inflated by load than wall time.
  # Each line says which writers the buffers claimed: per-CPU (rseq) by default where glibc
  # registered rseq, the compare-and-swap ones with UST_RSEQ=0 (same sitting, same binary).
  # Then issue 32's `tracing` and `log` paths beside their floors: the registry with a
  # no-op layer (`*-noop`), a layer that takes the values and records nothing (`*-visit`),
  # and the log bridge's six fields as a `tracepoint!` (`log-native`).
  {
    for k in enabled ring; do
      for rseq in 1 0; do
        UST_RSEQ=$rseq "$target/release/ust-bench-count" "$k" 5000000
        UST_RSEQ=$rseq UST_CLOCK=tsc "$target/release/ust-bench-count" "$k" 5000000
      done
    done
    for k in tracing-event tracing-event-sub tracing-event-visit tracing-event-noop log log-native \
      tracing-span tracing-span-sub tracing-span-visit tracing-span-noop; do
      "$target/release/ust-bench-count" "$k" 2000000
    done
    for k in tracing-span tracing-span-sub; do UST_CLOCK=tsc "$target/release/ust-bench-count" "$k" 2000000; done
  } | tee "$log/count"
  # The same event per 10 ms window beside the core probe (scripts/bench-windows.sh): its
  # cost in the windows whose probe ran within 10 % of the run's fastest, the core then
  # the thread's own if any window had it (the probe's fastest is printed: 1.09-1.12 ns
  # here with the core unshared; benches/results/2026-12-02.md, "TSC event: the host's
  # share of the core").
  if [ $quick = 0 ]; then
    for c in tsc monotonic; do scripts/bench-windows.sh "$c" | grep -v '/.*per window' | sed "s/^/$c: /"; done | tee "$log/windows"
  fi
fi
load1=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the table ------------------------------------------------------------------------------
python3 - "$log" "$load0" "$load1" <<'PY'
import re, sys, os
log, load0, load1 = sys.argv[1:4]
def read(name):
    p = os.path.join(log, name)
    return open(p).read() if os.path.exists(p) else ""
def num(pat, text):
    m = re.search(pat, text)
    return float(m.group(1)) if m else None
units = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6}
crit = {}
name = None
for line in read("crit").splitlines():
    m = re.match(r"^(\S.*?)\s+time:\s+\[\S+ \S+ (\S+) (\S+) ", line)
    if m:
        crit[m.group(1).strip()] = float(m.group(2)) * units[m.group(3)]
        continue
    m2 = re.match(r"^\s+time:\s+\[\S+ \S+ (\S+) (\S+) ", line)
    if m2 and name:
        crit[name] = float(m2.group(1)) * units[m2.group(2)]
    elif line.strip() and not line.startswith(" ") and "time:" not in line:
        name = line.strip()
floor, lt, tr = read("floor"), read("lttng"), read("tracing")
prog = read("program")
def prog_median(kind):
    return num(r"(?m)^program " + kind + r" .* median=([\d.]+)", prog) if prog else None
win = read("windows")
def own_core(clock):
    return num(clock + r": windows whose probe was within 10 % of its fastest: \d+, event median ([\d.]+) ns", win)
clock = num(r"clock_gettime_ns=([\d.]+)", floor)
rdtsc = num(r"rdtsc_ns=([\d.]+)", floor)
lt_off = num(r"lttng-ust disabled threads=1 events=\d+ ns_per_event_per_thread=([\d.]+)", lt)
m = re.findall(r"^lttng-ust threads=(\d) events=\d+ ns_per_event_per_thread=([\d.]+)", lt, re.M)
lt_by = {int(t): float(v) for t, v in m}
lt1, lt2 = lt_by.get(1), lt_by.get(2)
tr_on = num(r"non_blocking ns_per_event=([\d.]+)", tr)
tr_off = num(r"disabled ns_per_event=([\d.]+)", tr)
tr_chrome = num(r"tracing-chrome ns_per_event=([\d.]+)", tr)
tr_perfetto = num(r"tracing-perfetto ns_per_event=([\d.]+)", tr)
tr_chrome_span = num(r"tracing-chrome span ns_per_event=([\d.]+)", tr)
tr_perfetto_span = num(r"tracing-perfetto span ns_per_event=([\d.]+)", tr)
tr_fastrace = num(r"fastrace ns_per_event=([\d.]+)", tr)
tr_fastrace_span = num(r"fastrace span ns_per_event=([\d.]+)", tr)
c_empty = num(r"empty_loop_ns=([\d.]+)", floor)
c_nop5 = num(r"nop5_ns=([\d.]+)", floor)
c_ltb = num(r"load_test_branch_ns=([\d.]+)", floor)
def f(x, d=1):
    return "–" if x is None else f"{x:.{d}f}"
def r(a, b):
    # No ratio to a reference at or below zero (a difference of two floors within noise).
    return "–" if a is None or b is None or b <= 0 else f"{a / b:.2f}x"
def minus(a, b):
    return None if a is None or b is None else a - b
g = crit.get
dis, empty, nop = g("disabled"), g("empty iteration"), g("static key NOP (asm goto, disabled)")
trip = g("empty asm iteration")
span_name = 'info_span!("work", id = u64) entered and closed'
ust_layer_span = g("tracing+ust layer: " + span_name)
ust_sub_span = g("tracing+ust subscriber: " + span_name)
ust_layer_span_tsc = g("tracing+ust layer: " + span_name + ", TSC")
ust_sub_span_tsc = g("tracing+ust subscriber: " + span_name + ", TSC")
noop_span = g("tracing+no-op layer: " + span_name)
ev_layer = 'tracing+ust layer: info!(id = u64, val = i32, "ev")'
ev_sub = 'tracing+ust subscriber: info!(id = u64, val = i32, "ev")'
e1, e2 = g("enabled u64_i32 monotonic"), g("enabled u64_i32 monotonic 2 threads")
t1, t2 = g("enabled u64_i32 tsc"), g("enabled u64_i32 tsc 2 threads")
rows = [
    ("disabled tracepoint", dis, "LTTng-UST disabled", lt_off, "<= 0.5 ns"),
    # The floor under it, in criterion and in C (benches/anchors/floor). Criterion's empty
    # iteration is unrolled 8x by LLVM; the empty asm iteration is one loop trip, as the
    # disabled site's loop has.
    ("disabled tracepoint minus the empty iteration", minus(dis, empty), "C: load+test+branch minus empty loop", minus(c_ltb, c_empty), "<= 0.5 ns"),
    ("  same, minus one loop trip (empty asm iteration)", minus(dis, trip), "C: load+test+branch minus empty loop", minus(c_ltb, c_empty), ""),
    ("static key NOP (asm goto, disabled)", nop, "ust disabled tracepoint", dis, ""),
    ("  same, minus one loop trip", minus(nop, trip), "C: NOP5 minus empty loop", minus(c_nop5, c_empty), ""),
    ("  (criterion's empty iteration)", empty, "C: empty loop", c_empty, ""),
    ("  (one loop trip: empty asm iteration)", trip, "C: empty loop", c_empty, ""),
    ("held-out program under ust trace: {u64,i32} loop, monotonic", prog_median("kind=enabled clock=monotonic"), "LTTng-UST anchor under lttng-sessiond, 1 thread", lt1, "<= 0.33x"),
    ("  same, TSC (UST_CLOCK=tsc)", prog_median("kind=enabled clock=tsc"), "floor: rdtsc", rdtsc, "<= 18 ns"),
    ("  same, no session (disabled; 40 M events, the anchor 2 M)", prog_median("kind=disabled"), "LTTng-UST anchor, no session", lt_off, "<= 0.5 ns"),
    ("enabled {u64,i32}, monotonic, 1 thread", e1, "LTTng-UST enabled, 1 thread", lt1, "<= 0.33x"),
    ("  same, minus one clock_gettime", None if e1 is None or clock is None else e1 - clock, "floor: clock_gettime", clock, "<= 8 ns"),
    ("  same, windows whose core probe ran within 10 % of its fastest, minus one clock_gettime", minus(own_core("monotonic"), clock), "floor: clock_gettime", clock, "<= 8 ns"),
    ("enabled {u64,i32}, TSC, 1 thread", t1, "floor: rdtsc", rdtsc, "<= 18 ns"),
    ("  same, windows whose core probe ran within 10 % of its fastest", own_core("tsc"), "floor: rdtsc", rdtsc, "<= 18 ns"),
    ("  TSC clock read alone (rdtscp, ordered, to ns)", g("clock read tsc"), "floor: rdtsc", rdtsc, ""),
    ("  same, minus the TSC clock read", None if t1 is None or g("clock read tsc") is None else t1 - g("clock read tsc"), "floor: rdtsc", rdtsc, ""),
    ("enabled, monotonic, 2 threads (per thread)", e2, "ust 1 thread", e1, "<= 1.1x"),
    ("enabled, TSC, 2 threads (per thread)", t2, "ust TSC 1 thread", t1, "<= 1.1x"),
    ("  (LTTng-UST 2 threads / 1 thread)", lt2, "LTTng-UST 1 thread", lt1, "ref 1.2x"),
    ("32-byte string field", g("string32"), "LTTng-UST enabled {u64,i32}", lt1, "<= 60 ns"),
    ("32-byte sequence field", g("seq32"), "LTTng-UST enabled {u64,i32}", lt1, ""),
    ("tracef! two integers", g("tracef two ints"), "tracing fmt + non-blocking file", tr_on, "<= 250 ns"),
    ("ring buffer reserve+commit, constant clock", g("ringbuffer reserve+commit constant clock"), "floor: CAS", num(r"cas_ns=([\d.]+)", floor), ""),
    ("ring buffer reserve+commit, monotonic", g("ringbuffer reserve+commit monotonic"), "floor: clock_gettime", clock, ""),
    ("ring buffer reserve+commit, TSC", g("ringbuffer reserve+commit tsc"), "floor: rdtsc", rdtsc, ""),
    ("(tracing, no subscriber)", tr_off, "LTTng-UST disabled", lt_off, ""),
    # `tracing` and `log` into ust, each against ust's own `{u64,i32}` event (same clock,
    # same sitting) or what `tracing` charges any layer (registry + a no-op layer).
    ("tracing info!(id, val, \"ev\") recorded by ust's layer", g(ev_layer), "ust's own {u64,i32} event", e1, "<= 1.5x"),
    ("tracing info!(id, val, \"ev\") recorded by ust's subscriber", g(ev_sub), "ust's own {u64,i32} event", e1, "<= 1.5x"),
    ("log::info!(\"ev\") recorded by ust's log bridge", g('log+ust bridge: info!("ev")'), "ust's own {u64,i32} event", e1, "<= 1.5x"),
    ("log::info!(\"ev {} {}\", u64, i32) recorded by ust's log bridge", g('log+ust bridge: info!("ev {} {}", u64, i32)'), "tracef! two integers", g("tracef two ints"), ""),
    ("tracing span made, entered, exited, closed, ust's layer", ust_layer_span, "registry + a no-op layer", noop_span, "<= 1.5x"),
    ("tracing span made, entered, exited, closed, ust's subscriber", ust_sub_span, "registry + a no-op layer", noop_span, "<= 1.5x"),
    ("  same, TSC, ust's layer", ust_layer_span_tsc, "registry + a no-op layer", noop_span, "<= 1.5x"),
    ("  same, TSC, ust's subscriber", ust_sub_span_tsc, "registry + a no-op layer", noop_span, "<= 1.5x"),
    ("tracing span, ust's layer", ust_layer_span, "fastrace local span, 1 property", tr_fastrace_span, "<= 0.5x"),
    ("tracing span, ust's subscriber", ust_sub_span, "fastrace local span, 1 property", tr_fastrace_span, "<= 0.5x"),
    ("  same, TSC (fastrace's clock), ust's layer", ust_layer_span_tsc, "fastrace local span, 1 property", tr_fastrace_span, "<= 0.5x"),
    ("  same, TSC (fastrace's clock), ust's subscriber", ust_sub_span_tsc, "fastrace local span, 1 property", tr_fastrace_span, "<= 0.5x"),
    ("tracing info!(id, val, \"ev\") recorded by ust's layer", g(ev_layer), "tracing-chrome layer", tr_chrome, ""),
    ("  same", g(ev_layer), "tracing-perfetto layer", tr_perfetto, ""),
    ("  same", g(ev_layer), "tracing fmt + non-blocking file", tr_on, ""),
    ("  (ust layer, callsite no session enables)", g("tracing+ust layer: disabled callsite"), "tracing, no subscriber", tr_off, ""),
    ("tracing span made, entered, exited, closed, ust's layer", ust_layer_span, "tracing-chrome layer", tr_chrome_span, ""),
    ("  same", ust_layer_span, "tracing-perfetto layer", tr_perfetto_span, ""),
    ("enabled {u64,i32}, monotonic, 1 thread", e1, "fastrace event, 2 properties", tr_fastrace, "< 1x"),
    ("tracing span, registry + a no-op layer", noop_span, "fastrace local span, 1 property", tr_fastrace_span, ""),
    ("ust span: entry + exit tracepoints", g("ust span: entry + exit tracepoints monotonic"), "fastrace local span, 1 property", tr_fastrace_span, "< 1x"),
    ("  same, TSC", g("ust span: entry + exit tracepoints tsc"), "fastrace local span, 1 property", tr_fastrace_span, "< 1x"),
]
print(f"load average before/after: {load0} / {load1}; {os.cpu_count()} CPUs\n")
print("| figure | ust (ns, median) | reference | ref (ns) | ratio | target |")
print("|---|---|---|---|---|---|")
for fig, v, ref, rv, tgt in rows:
    print(f"| {fig} | {f(v, 2 if v is not None and v < 10 else 1)} | {ref} | {f(rv, 2 if rv is not None and rv < 10 else 1)} | {r(v, rv)} | {tgt} |")
rec = [l for l in read("crit").splitlines() if l.startswith("recorded: ")]
fr = re.findall(r"^(fastrace(?: span)?) ns_per_event=[\d.]+ recorded=(\d+)", tr, re.M)
if rec or fr:
    print("\nevents each recording bench wrote (iterations, events recorded, discarded):\n")
    for line in rec:
        print(f"    {line[len('recorded: '):]}")
    for what, n in fr:
        print(f"    anchor {what}: 2000000 iterations, {n} recorded by its reporter")
c = [l for l in read("consumer").splitlines() if l.startswith("consumer ")]
for line in c:
    print(f"\n`{line}`")
p = [l for l in prog.splitlines() if l.startswith(("program ", "burst ", "drain-ceiling "))]
if p:
    print("\nprogram under `ust trace` (benches/benches/traced_program.rs; ns per event per run, their median, what was recorded):\n")
    for line in p:
        print(f"    {line}")
lc = re.search(r"events read back by babeltrace2: (\d+) of (\d+)", lt)
if lc:
    print(f"\nLTTng-UST: {lc.group(1)} of {lc.group(2)} events read back")
if win.strip():
    print("\nper-window cost beside the core probe (scripts/bench-windows.sh):\n")
    for line in win.strip().splitlines():
        print(f"    {line}")
cnt = read("count").strip()
if cnt:
    print("\non-CPU time per event (ust-bench-count):\n")
    for line in cnt.splitlines():
        print(f"    {line}")
PY
