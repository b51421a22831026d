//! Issue 32's figures of a program under `ust trace`, as a user runs one (not a criterion
//! harness): `ust-consumerd` is started here in a temporary `$UST_RUNDIR`, and each figure
//! says how many events were recorded and discarded, so that none is met by discarding.
//!
//! - **The held-out kind of program**: `ust-bench-loop` (LTTng-UST's anchor's twin: one
//!   thread, `bench:ev {u64, i32}` in a plain loop, `UST_BENCH_LOOP_EVENTS` events, default
//!   2,000,000 as `scripts/bench-compare.sh`'s anchor) run `UST_BENCH_RUNS` times (default
//!   5) with no session (the disabled site, twenty times the events), then under `ust
//!   trace` with its default channel (16 x 512 KiB per CPU, as the anchor's 8 x 1 MiB) and
//!   `CLOCK_MONOTONIC`, then with `UST_CLOCK=tsc`. Prints each run's wall time per event and their median.
//! - **A burst into `ust trace`'s default channel**: `ust-bench-load` with two threads
//!   emitting 10,000,000 events (`UST_BENCH_BURST_EVENTS`) at full speed, and how many the
//!   channel discarded; then the same into 16 x 2 MiB sub-buffers per CPU (`--subbuf-size
//!   2M`, the README's size for a burst).
//! - **The drain's ceiling with the disk out of the way**: one writer thread, then two, at
//!   full speed for `UST_BENCH_CEILING_EVENTS` events (default 100,000,000) in all, the trace
//!   written to tmpfs (`/dev/shm`): the events recorded per second of the writers' run, the
//!   events discarded (none: the drain kept up with the writers, and the ceiling is above
//!   their rate) and the daemon's CPU (% of one core).
//!
//! `UST_BENCH_QUICK=1` or `--quick`: one run of each, a tenth of the events. Needs
//! `cargo build --release -p ust-consumerd -p ust-cli` (skipped otherwise).

use std::path::Path;
use std::time::Instant;

use benches::BenchDaemon;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// The value of `key=` in a line of `key=value` words.
fn field(text: &str, key: &str) -> Option<f64> {
    text.split_whitespace().find_map(|w| w.strip_prefix(key)).and_then(|v| v.parse().ok())
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
    println!("program kind=disabled events={n_off} runs={runs} ns_per_event={} median={:.2}", list(&ns), median(&ns));

    for clock in ["monotonic", "tsc"] {
        let (mut ns, mut recorded, mut discarded) = (Vec::new(), 0, 0);
        for _ in 0..runs {
            let t = trace(&d, &out, &[("UST_CLOCK", clock)], &[], looper, &[&n_arg, "1"]);
            ns.push(field(&t.stdout, "ns_per_event_per_thread=").unwrap_or_else(|| panic!("ust-bench-loop said: {}", t.stdout)));
            recorded += t.recorded;
            discarded += t.discarded;
        }
        println!(
            "program kind=enabled clock={clock} events={n} runs={runs} ns_per_event={} median={:.1} recorded={recorded} of {} discarded={discarded}",
            list(&ns),
            median(&ns),
            n * runs
        );
    }

    // A burst: two threads at full speed (a rate no thread reaches, for as long as the
    // events take); `ust-bench-load` emits RATE x SECONDS events in all.
    let burst = env_u64("UST_BENCH_BURST_EVENTS").unwrap_or(10_000_000 / div);
    let secs = (burst as f64 / 1e9).to_string();
    // The default channel, then the one the README's sizing advice gives for a burst.
    for (channel, opts) in [("default", &[][..]), ("16x2MiB", &["--subbuf-size", "2M"][..])] {
        let t = trace(&d, &out, &[], opts, load, &["1000000000", &secs, "2"]);
        let emitted = field(&t.stdout, "emitted=").unwrap_or(0.0) as u64;
        println!(
            "burst events={emitted} threads=2 channel={channel} seconds={} recorded={} discarded={} discarded_pct={:.2}",
            field(&t.stdout, "seconds=").unwrap_or(f64::NAN),
            t.recorded,
            t.discarded,
            100.0 * t.discarded as f64 / emitted.max(1) as f64
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
    let out = shm.path().join("trace");
    let secs = (events as f64 / 1e9).to_string();
    for writers in ["1", "2"] {
        let cpu0 = d.cpu_time();
        let t0 = Instant::now();
        let t = trace(d, &out, &[], &[], load, &["1000000000", &secs, writers]);
        let wall = t0.elapsed().as_secs_f64();
        let cpu = (d.cpu_time() - cpu0).as_secs_f64();
        let run = field(&t.stdout, "seconds=").unwrap_or(f64::NAN);
        println!(
            "drain-ceiling writers={writers} output=tmpfs emitted={} seconds={run:.2} recorded={} discarded={} recorded_per_s={:.0} daemon_cpu={:.1}%",
            field(&t.stdout, "emitted=").unwrap_or(0.0) as u64,
            t.recorded,
            t.discarded,
            t.recorded as f64 / run,
            100.0 * cpu / wall
        );
    }
}

fn list(v: &[f64]) -> String {
    v.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(",")
}
