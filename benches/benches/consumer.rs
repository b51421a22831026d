//! Consumer throughput: `ust-consumerd` (started here in a temporary `$UST_RUNDIR`) drains
//! a session with the default channel while `ust-bench-load` emits `{u64, i32}` events
//! from two threads at a fixed total rate (default 10 M/s for 10 s, the sustained-drain target of
//! docs/DESIGN.md#targets;
//! `UST_BENCH_RATE`, `UST_BENCH_SECONDS` override; `UST_BENCH_QUICK=1` or `--quick`: 1 M/s
//! for 1 s; `UST_BENCH_SUBBUF=SIZE`: the channel's sub-buffers of SIZE, as `ust trace
//! --subbuf-size SIZE`). Prints events emitted, recorded and discarded, and the daemon's CPU use and
//! anonymous memory. Then the memory figure: `UST_BENCH_PROCS` (default 10) processes of
//! `ust-bench-load` traced at once (1 M events/s each, same duration), with the daemon's
//! `RssAnon` sampled every 20 ms (its peak is printed: the shared buffers it maps are file
//! pages, not anonymous memory, so they do not count, as the daemon-memory target of
//! docs/DESIGN.md#targets says).
//! Not a criterion bench: the figures are a rate, a loss count and a size, not a time per
//! iteration. Needs `cargo build --release -p ust-consumerd -p ust-cli` (skipped otherwise).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn env_f64(name: &str) -> Option<f64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

fn main() {
    let quick = benches::quick() || std::env::args().any(|a| a == "--quick");
    let rate = env_f64("UST_BENCH_RATE").unwrap_or(if quick { 1e6 } else { 10e6 });
    let seconds = env_f64("UST_BENCH_SECONDS").unwrap_or(if quick { 1.0 } else { 10.0 });
    let Some(d) = benches::BenchDaemon::start() else {
        eprintln!("consumer bench skipped: build the daemon first (cargo build --release -p ust-consumerd -p ust-cli)");
        return;
    };
    let out = d.tmp.path().join("trace");
    let load = env!("CARGO_BIN_EXE_ust-bench-load");
    let cpu0 = d.cpu_time();
    let t = Instant::now();
    let mut trace = d.cmd(&benches::bin_dir().join("ust"));
    trace.arg("trace").arg("--output").arg(&out);
    if let Some(size) = std::env::var("UST_BENCH_SUBBUF").ok().filter(|s| !s.is_empty()) {
        trace.args(["--subbuf-size", &size]);
    }
    let o = trace.args(["--event", "bench:*", "--", load, &rate.to_string(), &seconds.to_string(), "2"]).output().expect("run ust trace");
    let wall = t.elapsed().as_secs_f64();
    let cpu = (d.cpu_time() - cpu0).as_secs_f64();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        panic!("ust trace failed: {}\n{stdout}\n{stderr}", o.status);
    }
    let emitted: u64 = benches::field(&stdout, "emitted=").and_then(|s| s.parse().ok()).unwrap_or(0);
    let achieved = benches::field(&stdout, "rate=").unwrap_or("?");
    let behind = benches::field(&stdout, "behind_ms=").unwrap_or("?");
    let (_, recorded, discarded) = benches::trace_summary(&stderr).unwrap_or_default();
    println!(
        "consumer target_rate={rate:.0} achieved_rate={achieved} seconds={seconds} emitted={emitted} recorded={recorded} \
         discarded={discarded} writer_behind_ms={behind} daemon_cpu={:.1}% daemon_rss_anon_kib={}",
        100.0 * cpu / wall,
        d.rss_anon_kib()
    );
    if recorded + discarded != emitted {
        eprintln!("warning: recorded + discarded != emitted ({recorded} + {discarded} != {emitted})\n{stderr}");
    }
    many_processes(&d, seconds);
}

/// `UST_BENCH_PROCS` processes traced at once by one `ust trace` (a shell starts them);
/// prints how many were traced, their events, and the daemon's peak `RssAnon`.
/// `UST_BENCH_PROCS=0` skips it (`scripts/bench-drain.sh` measures the drain alone).
fn many_processes(d: &benches::BenchDaemon, seconds: f64) {
    let procs: u32 = std::env::var("UST_BENCH_PROCS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    if procs == 0 {
        return;
    }
    let load = env!("CARGO_BIN_EXE_ust-bench-load");
    let script = format!("for i in $(seq {procs}); do \"$0\" 1000000 {seconds} 1 >/dev/null & done; wait");
    let peak = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let o = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(d.rss_anon_kib(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let o = d
            .cmd(&benches::bin_dir().join("ust"))
            .arg("trace")
            .arg("--output")
            .arg(d.tmp.path().join("many"))
            .args(["--event", "bench:*", "--", "sh", "-c", &script, load])
            .output()
            .expect("run ust trace");
        done.store(true, Ordering::Relaxed);
        o
    });
    let stderr = String::from_utf8_lossy(&o.stderr);
    let (traced, recorded, discarded) = benches::trace_summary(&stderr).unwrap_or_default();
    println!("consumer processes={procs} traced={traced} recorded={recorded} discarded={discarded} daemon_peak_rss_anon_kib={}", peak.load(Ordering::Relaxed));
    if !o.status.success() || traced != u64::from(procs) {
        eprintln!("warning: expected {procs} traced processes: {}\n{stderr}", o.status);
    }
}
