//! The held-out kind of program of issue 32, the twin of LTTng-UST's anchor
//! (`benches/anchors/lttng-ust/bench.c`): `ust-bench-loop [EVENTS_PER_THREAD] [THREADS]`
//! starts THREADS threads (default 1, at most 64) one after the other, as the anchor
//! does, each running
//! `tracepoint!(bench, ev, id: u64, val: i32)` EVENTS_PER_THREAD times (default
//! 10,000,000) in a plain loop, and prints the wall time per event per thread:
//!
//! `ust-loop threads=T events=N*T ns_per_event_per_thread=X`
//!
//! No criterion, no pinning, no drain between batches: what a user's program sees under
//! `ust trace` (enabled) or with no session (disabled). `benches/benches/traced_program.rs`
//! runs it; the daemon's drain runs beside it, as lttng-consumerd's does beside the anchor.

use std::time::Instant;

fn main() {
    let mut a = std::env::args().skip(1);
    let n: u64 = a.next().map_or(10_000_000, |s| s.parse().expect("EVENTS_PER_THREAD: a number"));
    let threads: u64 = a.next().map_or(1, |s| s.parse().expect("THREADS: a number"));
    if n == 0 || !(1..=64).contains(&threads) {
        eprintln!("usage: ust-bench-loop [EVENTS_PER_THREAD >= 1] [THREADS (1..64)]");
        std::process::exit(2);
    }
    let t0 = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..n {
                    ust::tracepoint!(bench, ev, id: u64 = i, val: i32 = t as i32);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
    let dt = t0.elapsed();
    println!("ust-loop threads={threads} events={} ns_per_event_per_thread={:.3}", n * threads, dt.as_nanos() as f64 / n as f64);
}
