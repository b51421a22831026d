//! `killme [THREADS] [N]`: THREADS threads (default 4) each emit N events (0, the default:
//! without end) of `killprov:ev { seq, tid, check }` as fast as they can, `seq` counting
//! from 0 in each thread and `check = seq * 0x9E3779B97F4A7C15 ^ tid` (wrapping), so a
//! test can tell a torn or misparsed event from one the program wrote. Prints `emitting`
//! once every thread runs and, with N > 0, `done` once all have finished; then sleeps until
//! it is killed. The crash tests (system-tests/tests/crash.rs) SIGKILL it.

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The value of `check` for `(seq, tid)`.
fn check(seq: u64, tid: u32) -> u64 {
    seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(tid)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let running = Arc::new(AtomicU32::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let running = running.clone();
            std::thread::spawn(move || {
                running.fetch_add(1, Ordering::SeqCst);
                let mut i = 0u64;
                while n == 0 || i < n {
                    ust::tracepoint!(killprov, ev, seq: u64 = i, tid: u32 = t, check: u64 = check(i, t));
                    i += 1;
                }
            })
        })
        .collect();
    while running.load(Ordering::SeqCst) < threads {
        std::thread::yield_now();
    }
    println!("emitting");
    let _ = std::io::stdout().flush();
    for h in handles {
        h.join().unwrap();
    }
    println!("done");
    let _ = std::io::stdout().flush();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}
