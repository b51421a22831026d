//! Issue 32's figures of a program under `ust trace`, as a user runs one (not a criterion
//! harness): `ust-consumerd` is started here in a temporary `$UST_RUNDIR`, and each figure
//! says how many events were recorded and discarded, so that none is met by discarding.
//!
//! - **The held-out kind of program**: `ust-bench-loop` (LTTng-UST's anchor's twin: one
//!   thread, `bench:ev {u64, i32}` in a plain loop, `UST_BENCH_LOOP_EVENTS` events, default
//!   2,000,000 as `scripts/bench-compare.sh`'s anchor) run `UST_BENCH_RUNS` times (default
//!   5) with no session (the disabled site, twenty times the events), then under `ust
//!   trace` with its default channel (16 x 512 KiB per CPU, as the anchor's 8 x 1 MiB) and
//!   `CLOCK_MONOTONIC`, then with `UST_CLOCK=tsc`. Prints each run's wall time per event
//!   and their median.
//! - **A burst into `ust trace`'s default channel**: `ust-bench-load` with two threads
//!   emitting 10,000,000 events (`UST_BENCH_BURST_EVENTS`) at full speed, and how many the
//!   channel discarded; then the same into 16 x 2 MiB sub-buffers per CPU (`--subbuf-size
//!   2M`).
//! - **The drain's ceiling with the disk out of the way**: one writer thread, then two, at
//!   full speed for `UST_BENCH_CEILING_EVENTS` events (default 100,000,000) in all, the trace
//!   written to tmpfs (`/dev/shm`): the events recorded per second of the writers' run, the
//!   events discarded (none: the drain kept up with the writers, and the ceiling is above
//!   their rate) and the daemon's CPU per second of the writers' run (% of one core, its
//!   drain after the writers ended included). Skipped when `/dev/shm` cannot hold the trace.
//!
//! A run whose events recorded and discarded do not add up to those emitted is marked
//! `accounting=mismatch`; a trace whose output stopped early fails the bench.
//!
//! `UST_BENCH_QUICK=1` or `--quick`: one run of each, a tenth of the events. Needs
//! `cargo build --release -p ust-consumerd -p ust-cli` (skipped otherwise).

use std::path::Path;

use benches::BenchDaemon;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// The number after `key` (`"name="`) in a line of `name=value` words.
fn field(text: &str, key: &str) -> Option<f64> {
    benches::field(text, key)?.parse().ok()
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// What one `ust trace` run gave: the traced program's standard output and the summary.
struct Traced {
    stdout: String,
    recorded: u64,
    discarded: u64,
}

impl Traced {
    /// `""` when the events recorded and discarded add up to `emitted`, else a word that
    /// says they do not (a figure then says nothing of what was kept), with the counts on
    /// standard error.
    fn accounted(&self, emitted: u64) -> &'static str {
        if self.recorded + self.discarded == emitted {
            return "";
        }
        eprintln!("warning: recorded + discarded != emitted ({} + {} != {emitted})", self.recorded, self.discarded);
        " accounting=mismatch"
    }
}

/// `ust trace -o OUT --event bench:* OPTS -- PROGRAM ARGS` with `env`; panics when it
/// fails or says nothing of what it recorded.
fn trace(d: &BenchDaemon, out: &Path, env: &[(&str, &str)], opts: &[&str], program: &str, args: &[&str]) -> Traced {
    let _ = std::fs::remove_dir_all(out);
    let o = d
        .cmd(&benches::bin_dir().join("ust"))
        .envs(env.iter().copied())
        .arg("trace")
        .arg("--output")
        .arg(out)
        .args(["--event", "bench:*"])
        .args(opts)
        .args(["--", program])
        .args(args)
        .output()
        .expect("run ust trace");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "ust trace {program} {args:?}: {}\n{stdout}\n{stderr}", o.status);
    // The output stopped early (a full disk): the counts are not the run's.
    assert!(!stderr.contains("the trace is incomplete"), "ust trace {program} {args:?}: {stderr}");
    let (_, recorded, discarded) = benches::trace_summary(&stderr).unwrap_or_else(|| panic!("no summary from ust trace:\n{stderr}"));
    let _ = std::fs::remove_dir_all(out);
    Traced { stdout, recorded, discarded }
}

fn main() {
    let quick = benches::quick() || std::env::args().any(|a| a == "--quick");
    let div = if quick { 10 } else { 1 };
    let n = env_u64("UST_BENCH_LOOP_EVENTS").unwrap_or(2_000_000 / div);
    let runs = env_u64("UST_BENCH_RUNS").unwrap_or(if quick { 1 } else { 5 });
    let Some(d) = BenchDaemon::start() else {
        eprintln!("traced_program bench skipped: build the daemon first (cargo build --release -p ust-consumerd -p ust-cli)");
        return;
    };
    let looper = env!("CARGO_BIN_EXE_ust-bench-loop");
    let load = env!("CARGO_BIN_EXE_ust-bench-load");
    let out = d.tmp.path().join("trace");
    let n_arg = n.to_string();

    // No session: every site disabled (the daemon runs, nothing is enabled). Twenty times
    // the events: 2 M disabled sites take about a millisecond, the scheduler's noise.
    let n_off = n * 20;
    let mut ns = Vec::new();
    for _ in 0..runs {
        let o = d.cmd(Path::new(looper)).args([n_off.to_string().as_str(), "1"]).output().expect("run ust-bench-loop");
        let s = String::from_utf8_lossy(&o.stdout);
        ns.push(field(&s, "ns_per_event_per_thread=").unwrap_or_else(|| panic!("ust-bench-loop said: {s}")));
    }
    println!("program kind=disabled events={n_off} runs={runs} ns_per_event={} median={:.3}", list(&ns, 3), median(&ns));

    for clock in ["monotonic", "tsc"] {
        let mut ns = Vec::new();
        let mut all = Traced { stdout: String::new(), recorded: 0, discarded: 0 };
        for _ in 0..runs {
            let t = trace(&d, &out, &[("UST_CLOCK", clock)], &[], looper, &[&n_arg, "1"]);
            ns.push(field(&t.stdout, "ns_per_event_per_thread=").unwrap_or_else(|| panic!("ust-bench-loop said: {}", t.stdout)));
            all.recorded += t.recorded;
            all.discarded += t.discarded;
        }
        println!(
            "program kind=enabled clock={clock} events={n} runs={runs} ns_per_event={} median={:.1} recorded={} of {} discarded={}{}",
            list(&ns, 1),
            median(&ns),
            all.recorded,
            n * runs,
            all.discarded,
            all.accounted(n * runs)
        );
    }

    // A burst: two threads at full speed (a rate no thread reaches, for as long as the
    // events take); `ust-bench-load` emits RATE x SECONDS events in all.
    let burst = env_u64("UST_BENCH_BURST_EVENTS").unwrap_or(10_000_000 / div);
    let secs = (burst as f64 / 1e9).to_string();
    // The default channel, then a bigger one (the README's advice for bursts).
    for (channel, opts) in [("default", &[][..]), ("16x2MiB", &["--subbuf-size", "2M"][..])] {
        let t = trace(&d, &out, &[], opts, load, &["1000000000", &secs, "2"]);
        let emitted = field(&t.stdout, "emitted=").unwrap_or(0.0) as u64;
        println!(
            "burst events={emitted} threads=2 channel={channel} seconds={} recorded={} discarded={} discarded_pct={:.2}{}",
            field(&t.stdout, "seconds=").unwrap_or(f64::NAN),
            t.recorded,
            t.discarded,
            100.0 * t.discarded as f64 / emitted.max(1) as f64,
            t.accounted(emitted)
        );
    }

    ceiling(&d, load, env_u64("UST_BENCH_CEILING_EVENTS").unwrap_or(100_000_000 / div));
}

/// The drain's ceiling: writers at full speed into the default channel, the trace on tmpfs.
fn ceiling(d: &BenchDaemon, load: &str, events: u64) {
    let Ok(shm) = tempfile::Builder::new().prefix("ust-ceiling").tempdir_in("/dev/shm") else {
        println!("drain-ceiling skipped: no writable /dev/shm");
        return;
    };
    // 16 bytes per `bench:load` record, and a quarter more for the packets' room.
    let need = events.saturating_mul(20);
    let free = rustix::fs::statvfs(shm.path()).map_or(0, |v| v.f_bavail.saturating_mul(v.f_frsize));
    if free < need {
        println!("drain-ceiling skipped: /dev/shm has {} MiB free, {events} events need {} MiB", free >> 20, need >> 20);
        return;
    }
    let out = shm.path().join("trace");
    let secs = (events as f64 / 1e9).to_string();
    for writers in ["1", "2"] {
        let cpu0 = d.cpu_time();
        let t = trace(d, &out, &[], &[], load, &["1000000000", &secs, writers]);
        let cpu = (d.cpu_time() - cpu0).as_secs_f64();
        // The writers' run, as they timed it (2 decimals: a quick run's rate is rough).
        let run = field(&t.stdout, "seconds=").filter(|s| *s > 0.0).unwrap_or(f64::NAN);
        let emitted = field(&t.stdout, "emitted=").unwrap_or(0.0) as u64;
        println!(
            "drain-ceiling writers={writers} output=tmpfs emitted={emitted} seconds={run:.2} recorded={} discarded={} recorded_per_s={:.0} daemon_cpu_per_run_s={:.1}%{}",
            t.recorded,
            t.discarded,
            t.recorded as f64 / run,
            100.0 * cpu / run,
            t.accounted(emitted)
        );
    }
}

/// `v` as `a,b,c`, each with `decimals` digits after the point.
fn list(v: &[f64], decimals: usize) -> String {
    v.iter().map(|x| format!("{x:.decimals$}")).collect::<Vec<_>>().join(",")
}
